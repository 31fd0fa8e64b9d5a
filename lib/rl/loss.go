package rl

import (
	"fmt"
	"math"
	"strings"
)

// AggMode is how per-token losses are averaged into one number (Eq. 10,
// verl's agg_loss). In the verl modes a "seq" is one step sample: one
// (context, generated output) pair, i.e. one row of verl's batch when each
// step is trained as its own sample (mempo-paper §3.5 option 1).
type AggMode int

const (
	// AggTrajectory is the paper's Eq. 10: the mean over the generated
	// tokens of each trajectory, across all its steps, then the mean over
	// trajectories. Weight of a token of trajectory i: 1/(n_i·G).
	AggTrajectory AggMode = iota
	// AggTokenMean is the mean over all generated tokens of the batch
	// (verl's default). Weight: 1/N_tok.
	AggTokenMean
	// AggSeqMeanTokenSum sums the tokens of each step, then averages over
	// steps. Weight: 1/S.
	AggSeqMeanTokenSum
	// AggSeqMeanTokenMean averages the tokens of each step, then averages
	// over steps. Weight of a token of step s: 1/(m_s·S).
	AggSeqMeanTokenMean
)

// ParseAggMode accepts "trajectory", "token-mean", "seq-mean-token-sum" and
// "seq-mean-token-mean".
func ParseAggMode(s string) (AggMode, error) {
	switch strings.ToLower(s) {
	case "trajectory":
		return AggTrajectory, nil
	case "token-mean":
		return AggTokenMean, nil
	case "seq-mean-token-sum":
		return AggSeqMeanTokenSum, nil
	case "seq-mean-token-mean":
		return AggSeqMeanTokenMean, nil
	}
	return 0, fmt.Errorf("rl: unknown loss aggregation %q (want trajectory, token-mean, seq-mean-token-sum or seq-mean-token-mean)", s)
}

func (m AggMode) String() string {
	switch m {
	case AggTrajectory:
		return "trajectory"
	case AggTokenMean:
		return "token-mean"
	case AggSeqMeanTokenSum:
		return "seq-mean-token-sum"
	case AggSeqMeanTokenMean:
		return "seq-mean-token-mean"
	}
	return fmt.Sprintf("AggMode(%d)", int(m))
}

// LossConfig holds the loss knobs. Use DefaultLossConfig and change fields.
type LossConfig struct {
	ClipLow, ClipHigh float64 // ratio clip: [1−ClipLow, 1+ClipHigh] (0.2, 0.2)
	ClipC             float64 // dual clip bound for A < 0 (3); 0 = off, else must be > 1
	KL                KLType  // estimator of KL(π‖π_ref) (k3 / low_var_kl)
	KLCoef            float64 // β (0.001); 0 = no KL term and RefLogp may be nil
	EntropyCoef       float64 // entropy bonus coefficient (0); see Loss
	Agg               AggMode // aggregation (trajectory, Eq. 10)
}

// DefaultLossConfig returns ε = 0.2, dual clip c = 3, k3 KL with β = 0.001,
// no entropy bonus, and the paper's trajectory aggregation.
func DefaultLossConfig() LossConfig {
	return LossConfig{ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3, KL: KLLowVar, KLCoef: 0.001, Agg: AggTrajectory}
}

// Validate checks the knobs.
func (c LossConfig) Validate() error {
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !fin(c.ClipLow) || !fin(c.ClipHigh) || c.ClipLow < 0 || c.ClipHigh < 0 || c.ClipLow >= 1 {
		return fmt.Errorf("rl: clip range must satisfy 0 ≤ low < 1 and high ≥ 0, got low %v high %v", c.ClipLow, c.ClipHigh)
	}
	if !fin(c.ClipC) || (c.ClipC != 0 && c.ClipC <= 1) {
		return fmt.Errorf("rl: dual clip c must be 0 (off) or > 1, got %v", c.ClipC)
	}
	if !fin(c.KLCoef) || !fin(c.EntropyCoef) {
		return fmt.Errorf("rl: KL and entropy coefficients must be finite")
	}
	if c.KL < KLLowVar || c.KL > KLK2 {
		return fmt.Errorf("rl: unknown KL estimator %d", int(c.KL))
	}
	if c.Agg < AggTrajectory || c.Agg > AggSeqMeanTokenMean {
		return fmt.Errorf("rl: unknown aggregation %d", int(c.Agg))
	}
	return nil
}

// StepInput holds one step sample: per-token values of the tokens the policy
// generated at that step (never observation tokens). All non-nil slices have
// the same length.
type StepInput struct {
	Logp    []float32 // log-probs under the current policy, recomputed under the step's exact context
	OldLogp []float32 // log-probs under the rollout (old) policy
	RefLogp []float32 // log-probs under π_ref; may be nil when KLCoef == 0
	Adv     []float32 // token advantages (AdvConfig.TokenAdvantages)
	Entropy []float32 // per-token entropies from the model; may be nil when EntropyCoef == 0
	Mask    []bool    // tokens that carry loss; nil = all
}

// TrajInput is one trajectory: its steps in order.
type TrajInput struct {
	ID    string // names the trajectory in errors
	Steps []StepInput
	// Tokens is the trajectory's number of loss tokens over ALL its steps,
	// for a shard that holds only some of them (AggTrajectory divides by
	// it). 0 = count the steps given here.
	Tokens int
}

// Denoms are the global denominators of the aggregation. Compute them once
// over the whole batch with CountDenoms and pass the same value to every
// shard: each token's weight then depends only on the token's trajectory,
// its step and these counts, so the shards' per-token coefficients are
// identical to those of the unsplit batch, and the shards' gradients (and
// Loss, Metrics via Merge) sum to the unsplit batch's.
type Denoms struct {
	Tokens int // loss tokens in the batch (token-mean)
	Steps  int // step samples with ≥ 1 loss token (seq-mean-*)
	Trajs  int // trajectories with ≥ 1 loss token (trajectory)
}

// CountDenoms counts the loss tokens, non-empty steps and non-empty
// trajectories of a whole batch.
func CountDenoms(batch []TrajInput) Denoms {
	var d Denoms
	for _, tr := range batch {
		n := 0
		for _, st := range tr.Steps {
			m := stepTokens(st)
			n += m
			if m > 0 {
				d.Steps++
			}
		}
		d.Tokens += n
		if n > 0 {
			d.Trajs++
		}
	}
	return d
}

func stepTokens(st StepInput) int {
	if st.Mask == nil {
		return len(st.Logp)
	}
	n := 0
	for _, m := range st.Mask {
		if m {
			n++
		}
	}
	return n
}

// Metrics of a loss computation. Loss, PGLoss, KL and Entropy are aggregated
// with the batch weights, so the values of shards add up (Merge) to the
// unsplit batch's; the fractions are means over loss tokens and Merge
// recomputes them from the counts.
type Metrics struct {
	Loss    float64 // PGLoss + KLCoef·KL − EntropyCoef·Entropy
	PGLoss  float64 // aggregated clipped policy loss
	KL      float64 // aggregated KL estimate (verl's actor/kl_loss); 0 when KLCoef == 0
	Entropy float64 // aggregated entropy; 0 when no entropies were given

	PGClipFrac      float64 // fraction of loss tokens with L2 > L1
	PGClipFracLower float64 // fraction of loss tokens with A < 0 and the dual clip active
	PPOKL           float64 // mean of old_logp − logp over loss tokens
	// ApproxKL is the mean over loss tokens of the k3 estimate of
	// KL(π_old ‖ π) from the rollout's samples: r − 1 − log r with
	// r = π/π_old, i.e. KLToken's low_var_kl with the rollout policy as the
	// reference (the same clamps). It is stable-baselines3's approx_kl and
	// what Config.TargetKL in lib/update bounds.
	ApproxKL       float64
	MaxAbsLogRatio float64 // max |logp − old_logp| (clamped at 20): drift of the recomputed log-probs from the rollout's

	Tokens         int     // loss tokens
	ClipTokens     int     // tokens counted in PGClipFrac
	LowerTokens    int     // tokens counted in PGClipFracLower
	SumNegLogRatio float64 // Σ(old_logp − logp), clamped, for PPOKL
	SumApproxKL    float64 // Σ of the per-token k3 terms, for ApproxKL

	// Advantage side, filled by SetAdvantageStats.
	AdvTaskMean, AdvTaskStd float64
	AdvMemMean, AdvMemStd   float64
	RewardTaskMean          float64
	RewardMemMean           float64
	MemBlocks               int
}

// Merge adds a shard's metrics into m.
func (m *Metrics) Merge(o Metrics) {
	m.Loss += o.Loss
	m.PGLoss += o.PGLoss
	m.KL += o.KL
	m.Entropy += o.Entropy
	m.Tokens += o.Tokens
	m.ClipTokens += o.ClipTokens
	m.LowerTokens += o.LowerTokens
	m.SumNegLogRatio += o.SumNegLogRatio
	m.SumApproxKL += o.SumApproxKL
	m.MaxAbsLogRatio = math.Max(m.MaxAbsLogRatio, o.MaxAbsLogRatio)
	m.fractions()
}

func (m *Metrics) fractions() {
	if m.Tokens == 0 {
		m.PGClipFrac, m.PGClipFracLower, m.PPOKL, m.ApproxKL = 0, 0, 0, 0
		return
	}
	n := float64(m.Tokens)
	m.PGClipFrac = float64(m.ClipTokens) / n
	m.PGClipFracLower = float64(m.LowerTokens) / n
	m.PPOKL = m.SumNegLogRatio / n
	m.ApproxKL = m.SumApproxKL / n
}

// SetAdvantageStats copies the advantage summary into m.
func (m *Metrics) SetAdvantageStats(s AdvStats) {
	m.AdvTaskMean, m.AdvTaskStd = s.TaskMean, s.TaskStd
	m.AdvMemMean, m.AdvMemStd = s.MemMean, s.MemStd
	m.RewardTaskMean, m.RewardMemMean = s.RewardTaskMean, s.RewardMemMean
	m.MemBlocks = s.MemBlocks
}

// LossOutput is the result of Loss, indexed [trajectory][step][token] like
// the input.
type LossOutput struct {
	// Coef is ∂Loss/∂logp for every token: backpropagate Σ Coef·logp
	// through the model to get the gradient of Loss. 0 for masked tokens.
	Coef [][][]float32
	// Weight is each token's aggregation weight (0 when masked). The
	// entropy gradient is the model's job: ∂Loss/∂H_t = −EntropyCoef·Weight_t.
	Weight  [][][]float32
	Metrics Metrics
}

// Loss aggregates the per-token policy loss, KL and entropy terms of a batch
// (or a shard of one) and returns the per-token derivatives:
//
//	Loss = Σ_t w_t·(L^clip_t + β·KL_t) − c_H·Σ_t w_t·H_t
//
// with w_t the weight of cfg.Agg computed from d (nil = CountDenoms(batch),
// the whole batch). The entropy H_t depends on the full distribution, so
// its gradient is left to the model (LossOutput.Weight); it enters Loss and
// the metrics only.
func (cfg LossConfig) Loss(batch []TrajInput, d *Denoms) (*LossOutput, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var den Denoms
	if d != nil {
		den = *d
	} else {
		den = CountDenoms(batch)
	}
	useKL := cfg.KLCoef != 0
	out := &LossOutput{Coef: make([][][]float32, len(batch)), Weight: make([][][]float32, len(batch))}
	met := &out.Metrics
	for i, tr := range batch {
		name := tr.ID
		if name == "" {
			name = fmt.Sprint(i)
		}
		// Validate shapes and count the trajectory's tokens.
		local := 0
		for s, st := range tr.Steps {
			n := len(st.Logp)
			bad := len(st.OldLogp) != n || len(st.Adv) != n ||
				(st.Mask != nil && len(st.Mask) != n) ||
				(st.Entropy != nil && len(st.Entropy) != n) ||
				(st.RefLogp != nil && len(st.RefLogp) != n)
			if bad {
				return nil, fmt.Errorf("rl: trajectory %s step %d: per-token slices differ in length (logp %d, old %d, adv %d, ref %d, entropy %d, mask %d)",
					name, s, n, len(st.OldLogp), len(st.Adv), len(st.RefLogp), len(st.Entropy), len(st.Mask))
			}
			if useKL && st.RefLogp == nil && n > 0 {
				return nil, fmt.Errorf("rl: trajectory %s step %d: KL term on but no reference log-probs", name, s)
			}
			if cfg.EntropyCoef != 0 && st.Entropy == nil && n > 0 {
				return nil, fmt.Errorf("rl: trajectory %s step %d: entropy coefficient %v but no entropies", name, s, cfg.EntropyCoef)
			}
			local += stepTokens(st)
		}
		nTraj := local
		if tr.Tokens != 0 {
			if tr.Tokens < local {
				return nil, fmt.Errorf("rl: trajectory %s: Tokens = %d but its steps here hold %d loss tokens", name, tr.Tokens, local)
			}
			nTraj = tr.Tokens
		}
		out.Coef[i] = make([][]float32, len(tr.Steps))
		out.Weight[i] = make([][]float32, len(tr.Steps))
		for s, st := range tr.Steps {
			n := len(st.Logp)
			coef := make([]float32, n)
			wts := make([]float32, n)
			out.Coef[i][s], out.Weight[i][s] = coef, wts
			m := stepTokens(st)
			if m == 0 {
				continue
			}
			var w float64
			switch cfg.Agg {
			case AggTrajectory:
				if den.Trajs <= 0 {
					return nil, fmt.Errorf("rl: trajectory aggregation with Denoms.Trajs = %d", den.Trajs)
				}
				w = 1 / (float64(nTraj) * float64(den.Trajs))
			case AggTokenMean:
				if den.Tokens <= 0 {
					return nil, fmt.Errorf("rl: token-mean aggregation with Denoms.Tokens = %d", den.Tokens)
				}
				w = 1 / float64(den.Tokens)
			case AggSeqMeanTokenSum:
				if den.Steps <= 0 {
					return nil, fmt.Errorf("rl: seq-mean aggregation with Denoms.Steps = %d", den.Steps)
				}
				w = 1 / float64(den.Steps)
			case AggSeqMeanTokenMean:
				if den.Steps <= 0 {
					return nil, fmt.Errorf("rl: seq-mean aggregation with Denoms.Steps = %d", den.Steps)
				}
				w = 1 / (float64(m) * float64(den.Steps))
			}
			for k := 0; k < n; k++ {
				if st.Mask != nil && !st.Mask[k] {
					continue
				}
				lp, old, adv := float64(st.Logp[k]), float64(st.OldLogp[k]), float64(st.Adv[k])
				if !finite(lp) || !finite(old) || !finite(adv) {
					return nil, fmt.Errorf("rl: trajectory %s step %d token %d: non-finite input (logp %v, old %v, adv %v)", name, s, k, lp, old, adv)
				}
				pt := PPOToken(lp, old, adv, cfg.ClipLow, cfg.ClipHigh, cfg.ClipC)
				g := pt.Grad
				met.PGLoss += w * pt.Loss
				if useKL {
					ref := float64(st.RefLogp[k])
					if !finite(ref) {
						return nil, fmt.Errorf("rl: trajectory %s step %d token %d: non-finite reference log-prob %v", name, s, k, ref)
					}
					kl, kg := KLToken(cfg.KL, lp, ref)
					met.KL += w * kl
					g += cfg.KLCoef * kg
				}
				if st.Entropy != nil {
					met.Entropy += w * float64(st.Entropy[k])
				}
				coef[k] = float32(w * g)
				wts[k] = float32(w)
				met.Tokens++
				if pt.Clipped {
					met.ClipTokens++
				}
				if pt.ClippedLower {
					met.LowerTokens++
				}
				met.SumNegLogRatio += pt.NegLogRatio
				approx, _ := KLToken(KLLowVar, old, lp) // the rollout policy as the reference
				met.SumApproxKL += approx
				met.MaxAbsLogRatio = math.Max(met.MaxAbsLogRatio, math.Abs(pt.NegLogRatio))
			}
		}
	}
	met.Loss = met.PGLoss + cfg.KLCoef*met.KL - cfg.EntropyCoef*met.Entropy
	met.fractions()
	return out, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
