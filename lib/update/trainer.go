package update

import (
	"fmt"
	"math"
	"time"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
)

// Config holds the knobs of the learning step besides the advantages (which
// Prepare takes) and the plan.
type Config struct {
	Loss        rl.LossConfig
	AdamW       optim.AdamWConfig
	Schedule    optim.Schedule
	MaxGradNorm float64 // clip the global gradient norm to this (1.0); ≤ 0 measures only
	MicroTokens int     // most tokens per forward/backward call (memory bound); 0 = 8192
	// EntropyMetric computes the policy entropy of every output token from
	// the full logits (one more forward per micro-batch, and T×V floats per
	// sequence: cheap for small vocabularies only). lib/model has no
	// entropy gradient, so an entropy bonus (Loss.EntropyCoef ≠ 0) is
	// refused by Validate.
	EntropyMetric bool
	// Lean keeps AdamW's moments in 8 bits (optim.AdamW8) and, on the GPU
	// in bf16 mode, the weights as bf16 + 16-bit remainders (lean.go).
	Lean bool
	// TargetKL turns on PPO's early stop (stable-baselines3's target_kl):
	// before each optimizer step, the approximate KL of the current policy
	// to the rollout policy on the step's mini-batch (rl.Metrics.ApproxKL,
	// k3) is compared with KLStopFactor·TargetKL; past it, Step takes no
	// step and reports Stopped, and the caller skips the rest of the plan
	// (every remaining mini-batch and epoch). 0 = off.
	TargetKL float64
}

// KLStopFactor is how far past TargetKL a mini-batch's approximate KL may
// go before the update stops (stable-baselines3's 1.5).
const KLStopFactor = 1.5

// DefaultConfig returns the defaults docs/ARCHITECTURE.md lists: rl.DefaultLossConfig (ε 0.2,
// dual clip 3, k3 KL with β = 0.001, trajectory aggregation), AdamW with
// lr 1e-6 constant and weight decay 0.01, grad clip 1.0.
func DefaultConfig() Config {
	return Config{
		Loss:        rl.DefaultLossConfig(),
		AdamW:       optim.DefaultAdamW(),
		Schedule:    optim.Schedule{Kind: optim.Constant, PeakLR: 1e-6},
		MaxGradNorm: 1,
		MicroTokens: 8192,
	}
}

// Validate checks the knobs.
func (c Config) Validate() error {
	if err := c.Loss.Validate(); err != nil {
		return err
	}
	if c.Loss.EntropyCoef != 0 {
		return fmt.Errorf("update: entropy bonus %v: lib/model has no entropy gradient yet; use 0 (the entropy can still be reported as a metric)", c.Loss.EntropyCoef)
	}
	if _, err := optim.NewAdamW(c.AdamW); err != nil {
		return err
	}
	if err := c.Schedule.Validate(); err != nil {
		return err
	}
	if math.IsNaN(c.MaxGradNorm) || math.IsInf(c.MaxGradNorm, 0) {
		return fmt.Errorf("update: max grad norm must be finite, got %v", c.MaxGradNorm)
	}
	if c.MicroTokens < 0 {
		return fmt.Errorf("update: micro-batch tokens %d < 0", c.MicroTokens)
	}
	if !(c.TargetKL >= 0) || math.IsInf(c.TargetKL, 1) {
		return fmt.Errorf("update: target KL must be finite and ≥ 0 (0 = off), got %v", c.TargetKL)
	}
	return nil
}

// klStop reports whether the early stop refuses a mini-batch whose summed
// metrics are met (always false when TargetKL is 0).
func (c Config) klStop(met rl.Metrics) bool {
	return c.TargetKL > 0 && met.ApproxKL > KLStopFactor*c.TargetKL
}

func (c Config) micro() int {
	if c.MicroTokens <= 0 {
		return 8192
	}
	return c.MicroTokens
}

// micros cuts a list of sample indices into runs of at most maxTok tokens
// (a longer sample gets a run of its own) that never mix trajectories. The
// packing changes the float rounding of the forward (BLAS picks kernels by
// shape), so it is made canonical: a trajectory's log-probs are the same
// whichever shard or mini-batch holds it, the policy and the reference are
// scored alike (KL of identical models is exactly 0), and grad shards
// reproduce the one-process update bit for bit.
func micros(b *Batch, samples []int, maxTok int) [][]int {
	var out [][]int
	var cur []int
	tok := 0
	for _, s := range samples {
		n := len(b.Samples[s].IDs)
		if len(cur) > 0 && (tok+n > maxTok || b.Samples[cur[0]].Traj != b.Samples[s].Traj) {
			out = append(out, cur)
			cur, tok = nil, 0
		}
		cur = append(cur, s)
		tok += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func seqsOf(b *Batch, idx []int) [][]int {
	seqs := make([][]int, len(idx))
	for k, s := range idx {
		seqs[k] = b.Samples[s].IDs
	}
	return seqs
}

// samplesOf lists the samples of the given trajectories, in order.
func samplesOf(b *Batch, trajs []int) []int {
	var out []int
	for _, i := range trajs {
		out = append(out, b.Trajs[i].Samples...)
	}
	return out
}

// outputLogProbs recomputes the log-probs of the output tokens of the
// samples under m, micro-batch by micro-batch; with entropy it also returns
// each output token's predictive entropy.
// onMicro, when not nil, is told after each micro-batch.
func outputLogProbs(m *model.Model, b *Batch, samples []int, maxTok int, entropy bool, onMicro func(done, total int)) (map[int][]float32, map[int][]float32, error) {
	lp := make(map[int][]float32, len(samples))
	var ent map[int][]float32
	if entropy {
		ent = make(map[int][]float32, len(samples))
	}
	mbs := micros(b, samples, maxTok)
	for n, mb := range mbs {
		if onMicro != nil {
			onMicro(n, len(mbs))
		}
		seqs := seqsOf(b, mb)
		from := make([]int, len(mb))
		for k, s := range mb {
			from[k] = b.Samples[s].Ctx
		}
		all, err := m.LogProbsFrom(seqs, from)
		if err != nil {
			return nil, nil, err
		}
		for k, s := range mb {
			lp[s] = all[k][b.Samples[s].Ctx:]
		}
		if entropy {
			logits, err := m.Logits(seqs)
			if err != nil {
				return nil, nil, err
			}
			V := m.VocabSize()
			for k, s := range mb {
				sm := &b.Samples[s]
				h := make([]float32, sm.Out())
				for p := sm.Ctx; p < len(sm.IDs); p++ {
					h[p-sm.Ctx] = float32(rowEntropy(logits[k][(p-1)*V : p*V]))
				}
				ent[s] = h
			}
		}
	}
	return lp, ent, nil
}

// rowEntropy is −Σ p log p of softmax(logits), in float64.
func rowEntropy(logits []float32) float64 {
	mx := math.Inf(-1)
	for _, x := range logits {
		mx = math.Max(mx, float64(x))
	}
	var z, s float64
	for _, x := range logits {
		e := math.Exp(float64(x) - mx)
		z += e
		s += e * (float64(x) - mx)
	}
	return math.Log(z) - s/z
}

// RefLogProbs fills Sample.Ref of the samples of the given trajectories
// (nil = all) with the log-probs of ref under the same contexts. Each
// trajectory is scored on its own (its steps packed together, never with
// another trajectory's): packing changes the float rounding, and a grad
// shard that scores only its trajectories must get the very values the
// one-process update gets.
func RefLogProbs(ref *model.Model, b *Batch, trajs []int, maxTok int) error {
	if trajs == nil {
		trajs = make([]int, len(b.Trajs))
		for i := range trajs {
			trajs[i] = i
		}
	}
	if maxTok <= 0 {
		maxTok = 8192
	}
	for _, i := range trajs {
		lp, _, err := outputLogProbs(ref, b, b.Trajs[i].Samples, maxTok, false, nil)
		if err != nil {
			return err
		}
		for s, v := range lp {
			b.Samples[s].Ref = v
		}
	}
	return nil
}

// ShardResult is the gradient of one shard of a mini-batch and the sums its
// metrics need; shards combine with Add.
type ShardResult struct {
	Grads    map[string][]float32 // nil when the gradient stayed on the device (onDevice)
	onDevice bool
	Metrics  rl.Metrics
	Trajs    int     // trajectories of the shard
	PeakSum  float64 // Σ peak tokens of the shard's trajectories
	DriftSum float64 // Σ |recomputed − rollout| log-prob over loss tokens
	DriftMax float64
	Shards   int // shards combined
}

// Add adds o's gradient (float32, element by element) and sums into r.
// Adding shards 0, 1, …, n−1 in order is what the single-process update does.
func (r *ShardResult) Add(o *ShardResult) error {
	if len(r.Grads) != len(o.Grads) {
		return fmt.Errorf("update: gradient shards hold %d and %d tensors", len(r.Grads), len(o.Grads))
	}
	for name, g := range r.Grads {
		h, ok := o.Grads[name]
		if !ok || len(h) != len(g) {
			return fmt.Errorf("update: gradient shards differ on tensor %s", name)
		}
		for i := range g {
			g[i] += h[i]
		}
	}
	r.addSums(o)
	return nil
}

// addSums adds o's metrics and counts (not its gradient) into r.
func (r *ShardResult) addSums(o *ShardResult) {
	r.Metrics.Merge(o.Metrics)
	r.Trajs += o.Trajs
	r.PeakSum += o.PeakSum
	r.DriftSum += o.DriftSum
	r.DriftMax = math.Max(r.DriftMax, o.DriftMax)
	r.Shards += o.Shards
}

// Trainer runs optimizer steps of one batch on one model.
type Trainer struct {
	Model *model.Model
	Opt   *optim.AdamW
	Cfg   Config
	Batch *Batch
	// SFT trains the cross-entropy of the output tokens instead of the
	// MemPO loss (Step and Grad dispatch on it).
	SFT bool

	// OnMicro, when set, is called as micro-batches of a step start:
	// phase "forward" (log-probs) or "backward", done of total finished.
	OnMicro func(phase string, done, total int)

	dev *deviceOpt // the optimizer on the GPU (UseDeviceOptimizer), or nil

	// Opt8 is the optimizer when Cfg.Lean (Opt is then unused); dev8 its
	// device version; pending8 a loaded state whose remainders have not yet
	// been joined into the weights (lean.go).
	Opt8     *optim.AdamW8
	dev8     *deviceOpt8
	pending8 *optim.State8
}

// onMicro is OnMicro bound to a phase, or nil.
func (t *Trainer) onMicro(phase string) func(done, total int) {
	if t.OnMicro == nil {
		return nil
	}
	return func(done, total int) { t.OnMicro(phase, done, total) }
}

// UseDeviceOptimizer moves the optimizer to the GPU, starting from Opt's
// state: Step then keeps gradients, weights and moments on the device
// (single-process steps; Grad and Apply of host gradients, which
// `grad --shard` and `apply` use, stay on the host). The model must be on
// the CUDA backend.
func (t *Trainer) UseDeviceOptimizer() error {
	if t.Cfg.Lean {
		st := t.Opt8.State()
		if t.pending8 != nil {
			st = *t.pending8
		}
		d, err := newDeviceOpt8(t.Model, t.Cfg.AdamW, st)
		if err != nil {
			return err
		}
		t.dev8, t.pending8 = d, nil
		return nil
	}
	d, err := newDeviceOpt(t.Model, t.Cfg.AdamW, t.Opt.State())
	if err != nil {
		return err
	}
	t.dev = d
	return nil
}

// OptimizerState is the optimizer's state (copied from the device when the
// optimizer runs there).
func (t *Trainer) OptimizerState() optim.State {
	if t.dev != nil {
		return t.dev.state()
	}
	return t.Opt.State()
}

// StepCount is the number of optimizer steps taken (optim.AdamW.StepCount).
func (t *Trainer) StepCount() int64 {
	switch {
	case t.dev8 != nil:
		return t.dev8.stepCount()
	case t.pending8 != nil:
		var n int64
		for _, s := range t.pending8.Steps {
			n = max(n, s)
		}
		return n
	case t.Opt8 != nil:
		return t.Opt8.StepCount()
	}
	if t.dev != nil {
		return t.dev.stepCount()
	}
	return t.Opt.StepCount()
}

// Grad computes one shard's gradient with the trainer's loss (MemPO or SFT).
func (t *Trainer) Grad(mbTrajs, shard []int) (*ShardResult, error) {
	return t.grad(mbTrajs, shard, false)
}

// grad is Grad; onDevice leaves the gradient in the model's tensors for
// the device optimizer instead of copying it out.
func (t *Trainer) grad(mbTrajs, shard []int, onDevice bool) (*ShardResult, error) {
	if err := t.ensureMaster(); err != nil {
		return nil, err
	}
	if t.SFT {
		return t.sftShardGrad(mbTrajs, shard, onDevice)
	}
	return t.shardGrad(mbTrajs, shard, onDevice)
}

// NewTrainer checks the configuration and returns a trainer with a fresh
// optimizer (replace Opt's state with LoadState to resume).
func NewTrainer(m *model.Model, b *Batch, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opt, err := optim.NewAdamW(cfg.AdamW)
	if err != nil {
		return nil, err
	}
	t := &Trainer{Model: m, Opt: opt, Cfg: cfg, Batch: b}
	if cfg.Lean {
		if t.Opt8, err = optim.NewAdamW8(cfg.AdamW); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// denoms counts the aggregation denominators over a whole mini-batch: only
// token counts enter them, so no forward is needed and every shard gets
// the same values.
func (t *Trainer) denoms(trajs []int) rl.Denoms {
	in := make([]rl.TrajInput, len(trajs))
	for k, i := range trajs {
		for _, s := range t.Batch.Trajs[i].Samples {
			in[k].Steps = append(in[k].Steps, rl.StepInput{Logp: t.Batch.Samples[s].Old})
		}
	}
	return rl.CountDenoms(in)
}

// loss recomputes the log-probs of the shard's samples and runs rl.Loss
// with the mini-batch's denominators.
func (t *Trainer) loss(mbTrajs, shard []int) (*rl.LossOutput, map[int][]float32, []int, error) {
	b := t.Batch
	den := t.denoms(mbTrajs)
	samples := samplesOf(b, shard)
	lp, ent, err := outputLogProbs(t.Model, b, samples, t.Cfg.micro(), t.Cfg.EntropyMetric, t.onMicro("forward"))
	if err != nil {
		return nil, nil, nil, err
	}
	in := make([]rl.TrajInput, len(shard))
	for k, i := range shard {
		in[k].ID = b.Trajs[i].ID
		for _, s := range b.Trajs[i].Samples {
			sm := &b.Samples[s]
			st := rl.StepInput{Logp: lp[s], OldLogp: sm.Old, Adv: sm.Adv, Entropy: ent[s]}
			if t.Cfg.Loss.KLCoef != 0 {
				st.RefLogp = sm.Ref
			}
			in[k].Steps = append(in[k].Steps, st)
		}
	}
	out, err := t.Cfg.Loss.Loss(in, &den)
	if err != nil {
		return nil, nil, nil, err
	}
	return out, lp, samples, nil
}

// Evaluate returns the loss metrics of a set of trajectories under the
// current model, without gradients.
func (t *Trainer) Evaluate(trajs []int) (rl.Metrics, error) {
	if err := t.ensureMaster(); err != nil {
		return rl.Metrics{}, err
	}
	out, _, _, err := t.loss(trajs, trajs)
	if err != nil {
		return rl.Metrics{}, err
	}
	return out.Metrics, nil
}

// ShardGrad computes the gradient of the mini-batch loss restricted to the
// shard's trajectories (a subset of mbTrajs): log-probs recomputed under
// each step's context, per-token coefficients from rl.Loss with the
// mini-batch's denominators, then model.Backward of Σ coef·logp.
func (t *Trainer) ShardGrad(mbTrajs, shard []int) (*ShardResult, error) {
	return t.shardGrad(mbTrajs, shard, false)
}

func (t *Trainer) shardGrad(mbTrajs, shard []int, onDevice bool) (*ShardResult, error) {
	b := t.Batch
	out, lp, samples, err := t.loss(mbTrajs, shard)
	if err != nil {
		return nil, err
	}
	res := &ShardResult{Metrics: out.Metrics, Trajs: len(shard), Shards: 1}
	if b.Adv != nil {
		// Over ALL rollouts, as the advantages are: the same in every shard.
		res.Metrics.SetAdvantageStats(b.Adv.Stats)
	}
	coef := make(map[int][]float32, len(samples))
	for k, i := range shard {
		res.PeakSum += float64(b.Trajs[i].Peak)
		for j, s := range b.Trajs[i].Samples {
			coef[s] = out.Coef[k][j]
			sm := &b.Samples[s]
			for q, v := range lp[s] {
				d := math.Abs(float64(v) - float64(sm.Old[q]))
				res.DriftSum += d
				res.DriftMax = math.Max(res.DriftMax, d)
			}
		}
	}
	m := t.Model
	m.ZeroGrads()
	mbs := micros(b, samples, t.Cfg.micro())
	for n, mb := range mbs {
		if t.OnMicro != nil {
			t.OnMicro("backward", n, len(mbs))
		}
		seqs := seqsOf(b, mb)
		// An adapter's dropout masks: a function of the step and the
		// micro-batch's first sample, so shards and resumed runs draw the
		// same ones.
		m.DropoutSeed = uint64(t.StepCount())<<32 ^ uint64(mb[0])
		w := make([][]float32, len(mb))
		for k, s := range mb {
			sm := &b.Samples[s]
			w[k] = make([]float32, len(sm.IDs))
			// Backward's loss is −Σ w·logp; ours is Σ coef·logp.
			for q, c := range coef[s] {
				w[k][sm.Ctx+q] = -c
			}
		}
		if _, _, err := m.Backward(seqs, w); err != nil {
			return nil, err
		}
	}
	res.takeGrads(m, onDevice)
	return res, nil
}

// takeGrads copies the model's accumulated gradient into r and clears it,
// or, onDevice, leaves it in the model for the device optimizer.
func (r *ShardResult) takeGrads(m *model.Model, onDevice bool) {
	if onDevice {
		r.onDevice = true
		return
	}
	r.Grads = m.Grads()
	m.ZeroGrads()
}

// StepResult is one optimizer step's outcome.
type StepResult struct {
	Row      records.Update
	GradNorm float64
	// Stopped: the mini-batch's approximate KL to the rollout policy,
	// ApproxKL, exceeded KLStopFactor·Cfg.TargetKL, so no step was taken
	// (the model and the optimizer are as before; Row is empty).
	Stopped  bool
	ApproxKL float64
}

// stopped is the result of a mini-batch the early stop refused. Its
// gradient was computed (the forward that measured the KL is part of it)
// and is dropped, on the device too.
func (t *Trainer) stopped(g *ShardResult) *StepResult {
	t.Model.ZeroGrads()
	return &StepResult{Stopped: true, ApproxKL: g.Metrics.ApproxKL}
}

// Apply clips the summed gradient, takes the AdamW step on the model's
// parameters (the fp32 master weights) at the schedule's rate for the
// optimizer's step count, and fills the metrics row. A non-finite gradient
// norm is an error and leaves the model and the optimizer untouched.
func (t *Trainer) Apply(g *ShardResult) (*StepResult, error) {
	if g.onDevice {
		return t.applyOnDevice(g)
	}
	if t.dev != nil || t.dev8 != nil {
		return nil, fmt.Errorf("update: a host gradient given to the device optimizer")
	}
	m := t.Model
	names := m.TrainableNames() // the adapter's factors when the base is frozen
	params := make([]optim.Param, len(names))
	for i, name := range names {
		gr, ok := g.Grads[name]
		if !ok {
			return nil, fmt.Errorf("update: gradient has no tensor %s", name)
		}
		params[i] = optim.Param{Name: name, Data: m.Param(name), Grad: gr}
	}
	if len(g.Grads) != len(names) {
		return nil, fmt.Errorf("update: gradient holds %d tensors, the model %d", len(g.Grads), len(names))
	}
	norm, err := optim.ClipGradNorm(params, t.Cfg.MaxGradNorm)
	if err != nil {
		return nil, fmt.Errorf("update: %v: step skipped, nothing written", err)
	}
	lr := t.Cfg.Schedule.LR(t.StepCount())
	step := t.Opt.Step
	if t.Opt8 != nil {
		step = t.Opt8.Step
	}
	if err := step(params, lr); err != nil {
		return nil, err
	}
	for _, p := range params {
		if err := m.SetParam(p.Name, p.Data); err != nil {
			return nil, err
		}
	}
	return t.result(g, norm, lr), nil
}

// applyOnDevice is Apply for a gradient left on the device.
func (t *Trainer) applyOnDevice(g *ShardResult) (*StepResult, error) {
	if t.dev == nil && t.dev8 == nil {
		return nil, fmt.Errorf("update: a device gradient without the device optimizer")
	}
	lr := t.Cfg.Schedule.LR(t.StepCount())
	apply := t.dev.apply
	if t.dev8 != nil {
		apply = t.dev8.apply
	}
	norm, err := apply(t.Model, t.Cfg.MaxGradNorm, lr)
	t.Model.ZeroGrads()
	if err != nil {
		return nil, fmt.Errorf("update: %v: step skipped, nothing written", err)
	}
	return t.result(g, norm, lr), nil
}

// result is the step's metrics row.
func (t *Trainer) result(g *ShardResult, norm, lr float64) *StepResult {
	met := g.Metrics // the advantage statistics came with the shards
	row := records.Update{
		Step: t.StepCount(), Loss: met.Loss, PGLoss: met.PGLoss, PGClipfrac: met.PGClipFrac,
		PGClipfracLower: met.PGClipFracLower, PPOKL: met.PPOKL, ApproxKL: met.ApproxKL, GradNorm: norm, LR: lr,
		AdvTaskMean: met.AdvTaskMean, AdvTaskStd: met.AdvTaskStd, RewardTaskMean: met.RewardTaskMean,
		Tokens: int64(met.Tokens), Trajectories: int64(g.Trajs), LogprobDriftMax: g.DriftMax,
	}
	// What this run did not compute stays null rather than a misleading 0.
	if t.Cfg.Loss.KLCoef != 0 {
		row.KL = &met.KL
	}
	if t.Cfg.EntropyMetric {
		row.Entropy = &met.Entropy
	}
	if met.MemBlocks > 0 {
		row.AdvMemMean, row.AdvMemStd, row.RewardMemMean = &met.AdvMemMean, &met.AdvMemStd, &met.RewardMemMean
	}
	if cu, ok := t.Model.Backend().(*model.CUDA); ok {
		row.PeakGPUBytes = cu.PeakBytes()
	}
	if g.Trajs > 0 {
		row.PeakTokensMean = g.PeakSum / float64(g.Trajs)
	}
	if met.Tokens > 0 {
		row.LogprobDriftMean = g.DriftSum / float64(met.Tokens)
	}
	return &StepResult{Row: row, GradNorm: norm}
}

// Step runs optimizer step k of the plan: the gradient of its mini-batch as
// `shards` shards summed in order, then Apply. The row's Epoch and WallS are
// filled; Policy is the caller's. With Cfg.TargetKL set, a mini-batch too
// far from the rollout policy is not applied: the result is Stopped.
func (t *Trainer) Step(p Plan, k, shards int) (*StepResult, error) {
	if shards < 1 {
		shards = 1
	}
	start := time.Now()
	epoch, trajs := p.At(k)
	var sum *ShardResult
	for i := 0; i < shards; i++ {
		// One shard with the device optimizer: the gradient stays put.
		r, err := t.grad(trajs, Shard(trajs, i, shards), (t.dev != nil || t.dev8 != nil) && shards == 1)
		if err != nil {
			return nil, err
		}
		if sum == nil {
			sum = r
		} else if err := sum.Add(r); err != nil {
			return nil, err
		}
	}
	if t.Cfg.klStop(sum.Metrics) {
		return t.stopped(sum), nil
	}
	res, err := t.Apply(sum)
	if err != nil {
		return nil, err
	}
	res.Row.Epoch = int32(epoch)
	res.Row.WallS = time.Since(start).Seconds()
	return res, nil
}
