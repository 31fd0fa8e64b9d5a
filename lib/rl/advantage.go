package rl

import (
	"errors"
	"fmt"
	"math"
)

// StdMode selects the standard deviation used by the group z-scores.
type StdMode int

const (
	// StdUnbiased divides the sum of squared deviations by N−1, as
	// torch.std does in verl's GRPO advantage (reference-impls §4.1). It is
	// the default: the paper writes "std" without saying which, and its
	// training framework (verl, through MEM1/Search-R1) uses torch.std.
	StdUnbiased StdMode = iota
	// StdPopulation divides by N.
	StdPopulation
)

// MemPool selects the pool over which memory rewards are z-scored.
type MemPool int

const (
	// PoolTask z-scores R^M over every memory block of every rollout of the
	// task (mempo-paper §2.3, the default).
	PoolTask MemPool = iota
	// PoolStep z-scores R^M over the memory blocks of the same step index
	// across the rollouts of the task.
	PoolStep
)

// MemBaseline selects what the memory reward of a step subtracts from
// P(gold | q, mem_t).
type MemBaseline int

const (
	// BaselineHistory subtracts P(gold | q, s_<t), the probability under
	// the whole history before the step (mempo-paper §2.2, the default):
	// the rollout's stored R^M.
	BaselineHistory MemBaseline = iota
	// BaselinePrevMemory subtracts P(gold | q, mem_t−1), the probability
	// under the memory the step replaces; the first memory keeps the
	// paper's term, whose history is the prompt alone. R^M_t is then what
	// a memory adds to the one before it, a trajectory's terms sum to
	// P(gold | q, last memory) − P(gold | q), and a memory written again
	// unchanged scores exactly 0, whatever level the scorer gives it
	// (docs/DEMO.md, "The memory reward as a gain").
	BaselinePrevMemory
)

// NonFinitePolicy says what to do with a NaN or ±Inf reward.
type NonFinitePolicy int

const (
	// NonFiniteError refuses the batch with an error naming the trajectory
	// (the default: a non-finite reward is a bug upstream).
	NonFiniteError NonFinitePolicy = iota
	// NonFiniteZero replaces the reward by 0 and counts it in
	// Advantages.Replaced.
	NonFiniteZero
)

// AdvConfig holds the advantage knobs. Use DefaultAdvConfig and change
// fields; the zero value turns std normalization and the memory advantage
// off.
type AdvConfig struct {
	Eps       float64         // added to the std in the denominator (1e-6)
	NormStd   bool            // divide by std (GRPO); false = mean-centering only (Dr.GRPO)
	Std       StdMode         // unbiased (N−1, verl) or population std
	MemPool   MemPool         // pool for the A^M z-score
	MemAdv    bool            // add α·A^M to the <mem> tokens; false = plain GRPO ablation
	Alpha     float64         // weight α of A^M on <mem> tokens (1)
	NonFinite NonFinitePolicy // NaN/Inf rewards: error or replace by 0

	// MemStdFloor is the least std the A^M z-score divides by (0: none, the
	// paper's z-score). In a pool whose R^M are nearly equal the z-score
	// stretches differences of a few 1e-3 to unit size; with a floor f they
	// stay (R^M − mean)/f, so only a spread as large as f counts in full.
	MemStdFloor float64

	// MemSkipRepeats: a step whose whole output repeats the step before's
	// (the same memory and action again; in the demo's world a found fact
	// left out of the memory and searched for again) gets no memory
	// advantage, its R^M left out of the pool, so that a scorer that ranks
	// such a memory high cannot reward repeating it (nor one that ranks it
	// low penalize it: an ablation, docs/DEMO.md). The steps' outputs are
	// not part of TrajReward: lib/update's Prepare marks those R^M undefined.
	MemSkipRepeats bool

	// MemSkipAnswer: the memory written in an answer step (read by no later
	// step: the answer ends the trajectory) gets no memory advantage, its
	// R^M left out of the pool. In the demo at k = 8 the cold start's long
	// memories are copied with errors, the final one scores lowest of a
	// trajectory's, and the step pool gives every answer step a negative A^M
	// (docs/DEMO.md, "MemPO at k = 8"). Marked like MemSkipRepeats, by
	// lib/update's StepMemRewards.
	MemSkipAnswer bool

	// MemBaseline: what R^M subtracts (the history, the paper's; or the
	// previous memory). The steps' probabilities are not part of
	// TrajReward: lib/update's StepMemRewards applies it.
	MemBaseline MemBaseline

	// MemPerObjective: in each pool, every objective's R^M (TrajReward.RMObj:
	// P(gold_j | q, mem_t) less its baseline) is z-scored on its own, with
	// MemStdFloor, and A^M is the mean of the objectives' z. The pooled R^M
	// of a k-objective task is a mean over k objectives, so a memory that
	// drops one found fact moves it by about 1/k of that fact's
	// probability, inside the noise of the others (docs/DEMO.md, "Which
	// pairs R^M could rank at all, and in which form", and "A^M per
	// objective"); per objective the drop stands against the pool's spread
	// on that objective alone. The mean of the objectives' z is z-scored over the
	// pool again, so that A^M has the pooled form's scale. Needs rollouts
	// scored per objective (an ablation, off by default).
	MemPerObjective bool
}

// DefaultAdvConfig returns the defaults docs/ARCHITECTURE.md lists: ε = 1e-6, std
// normalization on with the unbiased std, memory advantage on with α = 1,
// pooled per task, non-finite rewards are an error.
func DefaultAdvConfig() AdvConfig {
	return AdvConfig{Eps: 1e-6, NormStd: true, Std: StdUnbiased, MemPool: PoolTask, MemAdv: true, Alpha: 1}
}

// TrajReward is what the advantage stage needs of one trajectory.
type TrajReward struct {
	ID   string    // names the trajectory in errors (e.g. "task7/3")
	Task string    // group key: one group per task (all G rollouts share it)
	RT   float64   // trajectory reward R^T
	RM   []float64 // memory reward R^M of each step; NaN = undefined (no gold, no <mem>)
	// RMObj holds each step's R^M per objective (AdvConfig.MemPerObjective
	// reads it: every step with a defined RM needs one, all of a pool the
	// same length); nil otherwise.
	RMObj [][]float64
}

// AdvStats summarises an advantage computation for the run log.
type AdvStats struct {
	TaskMean, TaskStd float64 // A^T over trajectories (population std)
	MemMean, MemStd   float64 // A^M over the defined memory blocks
	RewardTaskMean    float64 // mean R^T (after replacement)
	RewardMemMean     float64 // mean R^M over the defined memory blocks
	MemBlocks         int     // memory blocks with a defined R^M
}

// Advantages is the result of ComputeAdvantages, in input order.
type Advantages struct {
	Task     []float64   // A^T per trajectory
	Mem      [][]float64 // A^M per trajectory and step; 0 where R^M is undefined
	Replaced int         // rewards replaced by 0 under NonFiniteZero
	Stats    AdvStats
}

// ComputeAdvantages computes A^T (group z-score of R^T over the trajectories
// sharing a Task) and A^M (z-score of the defined R^M over the pool chosen by
// cfg.MemPool). A group or pool whose values are all equal, or that has a
// single member, gets 0 for all its members. NaN in RM means "undefined":
// the block is left out of its pool and gets A^M = 0. ±Inf in RM and any
// non-finite RT follow cfg.NonFinite.
func (cfg AdvConfig) ComputeAdvantages(trajs []TrajReward) (*Advantages, error) {
	if !(cfg.Eps >= 0) || math.IsInf(cfg.Eps, 0) {
		return nil, fmt.Errorf("rl: advantage eps must be finite and ≥ 0, got %v", cfg.Eps)
	}
	if math.IsNaN(cfg.Alpha) || math.IsInf(cfg.Alpha, 0) {
		return nil, fmt.Errorf("rl: advantage alpha must be finite, got %v", cfg.Alpha)
	}
	if !(cfg.MemStdFloor >= 0) || math.IsInf(cfg.MemStdFloor, 0) {
		return nil, fmt.Errorf("rl: memory std floor must be finite and ≥ 0, got %v", cfg.MemStdFloor)
	}
	out := &Advantages{Task: make([]float64, len(trajs)), Mem: make([][]float64, len(trajs))}
	rt := make([]float64, len(trajs))
	rm := make([][]float64, len(trajs))
	for i, tr := range trajs {
		r := tr.RT
		if math.IsNaN(r) || math.IsInf(r, 0) {
			if cfg.NonFinite != NonFiniteZero {
				return nil, fmt.Errorf("rl: trajectory %q (task %q): non-finite trajectory reward %v", tr.ID, tr.Task, r)
			}
			r = 0
			out.Replaced++
		}
		rt[i] = r
		rm[i] = make([]float64, len(tr.RM))
		out.Mem[i] = make([]float64, len(tr.RM))
		for t, m := range tr.RM {
			if math.IsInf(m, 0) {
				if cfg.NonFinite != NonFiniteZero {
					return nil, fmt.Errorf("rl: trajectory %q (task %q) step %d: non-finite memory reward %v", tr.ID, tr.Task, t, m)
				}
				m = 0
				out.Replaced++
			}
			rm[i][t] = m
		}
	}

	// A^T: one group per task, in order of first appearance (deterministic).
	groups := map[string][]int{}
	var order []string
	for i, tr := range trajs {
		if _, ok := groups[tr.Task]; !ok {
			order = append(order, tr.Task)
		}
		groups[tr.Task] = append(groups[tr.Task], i)
	}
	vals := make([]float64, 0, 16)
	for _, key := range order {
		idx := groups[key]
		vals = vals[:0]
		for _, i := range idx {
			vals = append(vals, rt[i])
		}
		z := zscore(vals, cfg, 0)
		for k, i := range idx {
			out.Task[i] = z[k]
		}
	}

	// A^M: pools keyed by task (and step index for PoolStep).
	type pkey struct {
		task string
		step int
	}
	pools := map[pkey][]stepRef{}
	var porder []pkey
	for i, tr := range trajs {
		for t := range rm[i] {
			if math.IsNaN(rm[i][t]) {
				continue
			}
			k := pkey{task: tr.Task}
			if cfg.MemPool == PoolStep {
				k.step = t
			}
			if _, ok := pools[k]; !ok {
				porder = append(porder, k)
			}
			pools[k] = append(pools[k], stepRef{i, t})
		}
	}
	for _, k := range porder {
		refs := pools[k]
		if cfg.MemPerObjective {
			if err := memPerObjective(trajs, refs, cfg, out.Mem); err != nil {
				return nil, err
			}
			continue
		}
		vals = vals[:0]
		for _, r := range refs {
			vals = append(vals, rm[r.i][r.t])
		}
		z := zscore(vals, cfg, cfg.MemStdFloor)
		for n, r := range refs {
			out.Mem[r.i][r.t] = z[n]
		}
	}

	// Stats for the log.
	out.Stats.RewardTaskMean, _ = meanStd(rt, StdPopulation)
	out.Stats.TaskMean, out.Stats.TaskStd = meanStd(out.Task, StdPopulation)
	var defR, defA []float64
	for i := range rm {
		for t, m := range rm[i] {
			if !math.IsNaN(m) {
				defR = append(defR, m)
				defA = append(defA, out.Mem[i][t])
			}
		}
	}
	out.Stats.MemBlocks = len(defR)
	out.Stats.RewardMemMean, _ = meanStd(defR, StdPopulation)
	out.Stats.MemMean, out.Stats.MemStd = meanStd(defA, StdPopulation)
	return out, nil
}

// stepRef is step t of trajectory i.
type stepRef struct{ i, t int }

// memPerObjective writes A^M of one pool's steps under
// AdvConfig.MemPerObjective: the mean over objectives of each objective's
// z-score over the pool, z-scored over the pool again.
func memPerObjective(trajs []TrajReward, refs []stepRef, cfg AdvConfig, mem [][]float64) error {
	k := -1
	for _, r := range refs {
		tr := trajs[r.i]
		if r.t >= len(tr.RMObj) || tr.RMObj[r.t] == nil {
			return fmt.Errorf("rl: trajectory %q step %d: no memory reward per objective (per-objective A^M needs rollouts scored per objective)", tr.ID, r.t)
		}
		n := len(tr.RMObj[r.t])
		if k < 0 {
			k = n
		}
		if n != k || n == 0 {
			return fmt.Errorf("rl: trajectory %q step %d: %d objectives' memory rewards where its pool has %d", tr.ID, r.t, n, k)
		}
		for j, v := range tr.RMObj[r.t] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("rl: trajectory %q step %d: non-finite memory reward %v of objective %d", tr.ID, r.t, v, j)
			}
		}
	}
	vals := make([]float64, len(refs))
	mean := make([]float64, len(refs))
	for j := 0; j < k; j++ {
		for n, r := range refs {
			vals[n] = trajs[r.i].RMObj[r.t][j]
		}
		for n, z := range zscore(vals, cfg, cfg.MemStdFloor) {
			mean[n] += z / float64(k)
		}
	}
	// The mean of k z-scores has a spread of about 1/√k where the
	// objectives vary apart: z-scored again, A^M keeps the pooled form's
	// scale, so that α means the same with and without the knob.
	for n, z := range zscore(mean, cfg, 0) {
		mem[refs[n].i][refs[n].t] = z
	}
	return nil
}

// meanStd returns the mean and std of v (0, 0 for an empty slice; std 0 for
// a single value).
func meanStd(v []float64, mode StdMode) (mean, std float64) {
	n := len(v)
	if n == 0 {
		return 0, 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	mean = s / float64(n)
	if n == 1 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range v {
		d := x - mean
		ss += d * d
	}
	den := float64(n)
	if mode == StdUnbiased {
		den = float64(n - 1)
	}
	return mean, math.Sqrt(ss / den)
}

// zscore returns (v−mean)/(max(std, floor)+eps), or v−mean when std
// normalization is off. All-equal values (including a single value) give exact zeros: the
// test is on the values themselves, because a mean of equal values can
// differ from them in the last bit and leave a tiny residue.
func zscore(v []float64, cfg AdvConfig, floor float64) []float64 {
	z := make([]float64, len(v))
	if len(v) <= 1 {
		return z
	}
	equal := true
	for _, x := range v[1:] {
		if x != v[0] {
			equal = false
			break
		}
	}
	if equal {
		return z
	}
	mean, std := meanStd(v, cfg.Std)
	if std == 0 {
		return z
	}
	for i, x := range v {
		if cfg.NormStd {
			z[i] = (x - mean) / (max(std, floor) + cfg.Eps)
		} else {
			z[i] = x - mean
		}
	}
	return z
}

// ErrMemSpan reports a <mem> span outside the generated tokens.
var ErrMemSpan = errors.New("rl: <mem> span out of range")

// TokenAdvantages writes the advantage of each of one step's n generated
// tokens into dst (grown as needed) and returns it: tokens in the <mem> span
// [memStart, memEnd) get aT + α·aM (Eq. 9; the <mem> and </mem> tag tokens
// are meant to be inside the span), every other generated token gets aT.
// memStart < 0 or memStart == memEnd means the step has no <mem> block. With
// cfg.MemAdv off every token gets aT. Observation tokens are not generated
// tokens and must not be passed.
func (cfg AdvConfig) TokenAdvantages(dst []float32, n, memStart, memEnd int, aT, aM float64) ([]float32, error) {
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	hasMem := memStart >= 0 && memStart != memEnd
	if hasMem && (memStart > memEnd || memEnd > n) {
		return nil, fmt.Errorf("%w: [%d, %d) with %d generated tokens", ErrMemSpan, memStart, memEnd, n)
	}
	for i := range dst {
		dst[i] = float32(aT)
	}
	if hasMem && cfg.MemAdv {
		v := float32(aT + cfg.Alpha*aM)
		for i := memStart; i < memEnd; i++ {
			dst[i] = v
		}
	}
	return dst, nil
}
