// Package update is MemPO's learning stage on top of lib/rl (advantages,
// clipped loss, KL, aggregation), lib/model (log-probs and backward) and
// lib/optim (AdamW, clipping, schedules).
//
// One optimizer step, as docs/ARCHITECTURE.md and mempo-paper §9 describe it:
//
//  1. Prepare turns rollouts into step samples: each step of each trajectory
//     is one sequence context ⊕ output, where the context is exactly the
//     token ids the rollout stored for that step. Observation tokens live in
//     the next step's context, so they never carry loss. Advantages are
//     computed over ALL rollouts (whole groups), then spread over the output
//     tokens (A^T + α·A^M on the <mem> span).
//  2. A Plan orders the trajectories into mini-batches (seeded shuffle per
//     epoch); a mini-batch may be split into gradient shards.
//  3. For each shard, the policy's log-probs are recomputed under each
//     step's context, rl.Loss turns them into per-token coefficients with
//     denominators counted over the whole mini-batch, and model.Backward
//     propagates Σ coef·logp. Shard gradients are summed in shard order.
//  4. The optimizer step clips the global norm and runs AdamW on the fp32
//     master weights (the model's own parameters).
//
// Because a shard's gradient depends only on the mini-batch (through the
// denominators and the advantages) and its own trajectories, a run that
// computes the shards in separate processes (mempo-update grad) and sums
// them (mempo-update apply) performs the same float operations in the same
// order as a single process with the same shard count: the result is
// bit-identical on the CPU. A different shard count changes only the order
// of the float32 gradient sums (measured in the cmd test: parameters within
// 2e-6 after four AdamW steps that moved them by up to 4e-3).
//
// Files (SaveCheckpoint, WriteGrads):
//
//   - DIR/ holds the HF model directory (float32 weights, config,
//     generation config, tokenizer files copied from the starting model);
//   - DIR/optimizer.safetensors: "<param>.exp_avg" and "<param>.exp_avg_sq"
//     (float32, the parameter's shape), metadata "<param>.step" and
//     "format" = "mempo-adamw-v1" (lib/optim's flat export) plus the run
//     state: mempo.global_step (the schedule's step), mempo.seed,
//     mempo.plan_step / mempo.plan_steps (progress through this run's
//     epochs × mini-batches), mempo.fingerprint (rollouts, knobs and
//     starting step: a rerun continues only its own run), mempo.schedule and
//     mempo.adamw (JSON). The shuffle is a pure function of the seed and the
//     epoch, so there is no RNG state to save.
//   - DIR/update_metrics.jsonl: the records.Update rows of the run so far.
//   - gradient files: one float32 tensor per parameter under the model's
//     names and shapes, metadata "format" = "mempo-grad-v1", readable
//     "shard" (i/n), "tokens", "trajectories", "loss", and "mempo.grad" (JSON
//     GradMeta: plan step, global step, fingerprint and the metric sums).
package update

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
)

// Sample is one step of one trajectory: the sequence context ⊕ output.
type Sample struct {
	Traj, Step int
	IDs        []int     // context ids then output ids
	Ctx        int       // number of context ids (≥ 1)
	Old        []float32 // rollout log-probs of the output ids (nil for SFT data without them)
	Adv        []float32 // token advantages of the output ids (nil for SFT)
	Ref        []float32 // reference log-probs of the output ids (filled by RefLogProbs)
}

// Out is the number of output (loss) tokens of the sample.
func (s *Sample) Out() int { return len(s.IDs) - s.Ctx }

// Traj is one trajectory: its step samples in order.
type Traj struct {
	ID      string // "task_id/group/sample", for messages
	Samples []int  // indices into Batch.Samples
	Tokens  int    // output tokens over all steps
	Peak    int64  // the rollout's peak tokens
}

// Batch is a set of rollouts ready for training.
type Batch struct {
	Trajs   []Traj
	Samples []Sample
	Adv     *rl.Advantages // nil for SFT
	Tokens  int            // output tokens of all samples
	Hash    uint64         // fingerprint of the ids, log-probs and rewards (for resume and shard checks)
}

// InputError names the rollout (0-based index into the slice given to
// Prepare) and the field that make the batch unusable.
type InputError struct {
	Traj  int
	Field string
	Err   error
}

func (e *InputError) Error() string {
	return fmt.Sprintf("trajectory %d: field %q: %v", e.Traj, e.Field, e.Err)
}
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(i int, field, format string, args ...any) error {
	return &InputError{Traj: i, Field: field, Err: fmt.Errorf(format, args...)}
}

// ErrEmpty is returned for a batch without any output token to train on.
var ErrEmpty = errors.New("no output tokens to train on")

// PrepareOptions says what Prepare needs of the rollouts.
type PrepareOptions struct {
	Vocab int // ids must lie in [0, Vocab)
	// RL: require the rollout log-probs and compute advantages with Adv.
	// Off (SFT): log-probs and rewards are ignored.
	RL  bool
	Adv rl.AdvConfig
}

// StepMemRewards returns the memory reward of each step of r that the
// advantage stage pools, NaN where it is undefined: the stored R^M (the
// paper's, against the history), or under cfg.MemBaseline ==
// rl.BaselinePrevMemory P(gold | q, mem_t) − P(gold | q, mem_t−1) with the
// stored R^M for the first step (whose history is the prompt alone), and,
// under cfg.MemSkipRepeats, NaN for a step that repeats the step before,
// under cfg.MemSkipAnswer, NaN for an answer step.
// mempo-update and scripts/memdrops both read it.
func StepMemRewards(r *records.Rollout, cfg rl.AdvConfig) []float64 {
	rm := make([]float64, len(r.Steps))
	for t := range r.Steps {
		st := &r.Steps[t]
		rm[t] = math.NaN()
		switch {
		case st.RMem == nil || cfg.MemSkipRepeats && r.Repeats(t) || cfg.MemSkipAnswer && st.Action == agent.ActionAnswer.String():
		case cfg.MemBaseline == rl.BaselineHistory || t == 0:
			rm[t] = *st.RMem
		case st.PGoldMem != nil && r.Steps[t-1].PGoldMem != nil:
			rm[t] = *st.PGoldMem - *r.Steps[t-1].PGoldMem
		}
	}
	return rm
}

// StepMemRewardsPerObjective is StepMemRewards objective by objective
// (rl.AdvConfig.MemPerObjective): for each step whose pooled R^M is defined,
// P(gold_j | q, mem_t) less the same baseline, from the rows' p_gold_*_obj;
// nil where the pooled R^M is undefined or the step was not scored per
// objective (the advantage stage then names the trajectory).
func StepMemRewardsPerObjective(r *records.Rollout, cfg rl.AdvConfig, rm []float64) [][]float64 {
	out := make([][]float64, len(r.Steps))
	diff := func(a, b []float64) []float64 {
		if len(a) == 0 || len(a) != len(b) {
			return nil
		}
		d := make([]float64, len(a))
		for j := range a {
			d[j] = a[j] - b[j]
		}
		return d
	}
	for t := range r.Steps {
		st := &r.Steps[t]
		switch {
		case math.IsNaN(rm[t]):
		case cfg.MemBaseline == rl.BaselineHistory || t == 0:
			out[t] = diff(st.PGoldMemObj, st.PGoldHistObj)
		default:
			out[t] = diff(st.PGoldMemObj, r.Steps[t-1].PGoldMemObj)
		}
	}
	return out
}

// TrajRewardOf is what the advantage stage reads of rollout r: its id
// (task/group/sample), its group key (one group per task and group index),
// R^T and the memory rewards StepMemRewards pools under cfg (and, under
// cfg.MemPerObjective, StepMemRewardsPerObjective's). Prepare and
// scripts/memdrops both build their advantages from it.
func TrajRewardOf(r *records.Rollout, cfg rl.AdvConfig) rl.TrajReward {
	tr := rl.TrajReward{
		ID:   fmt.Sprintf("%s/%d/%d", r.TaskID, r.Group, r.Sample),
		Task: fmt.Sprintf("%s\x00%d", r.TaskID, r.Group),
		RT:   r.RewardTask,
		RM:   StepMemRewards(r, cfg),
	}
	if cfg.MemPerObjective {
		tr.RMObj = StepMemRewardsPerObjective(r, cfg, tr.RM)
	}
	return tr
}

// Prepare validates the rollouts and builds the batch. Steps with no output
// ids are skipped (nothing to learn); a step with output ids needs at least
// one context id, because the first output token must be predicted from
// something.
func Prepare(rolls []records.Rollout, opt PrepareOptions) (*Batch, error) {
	if len(rolls) == 0 {
		return nil, fmt.Errorf("no rollouts: %w", ErrEmpty)
	}
	b := &Batch{Trajs: make([]Traj, len(rolls))}
	h := fnv.New64a()
	var buf [8]byte
	put := func(x uint64) {
		for k := range buf {
			buf[k] = byte(x >> (8 * k))
		}
		h.Write(buf[:])
	}
	rewards := make([]rl.TrajReward, len(rolls))
	for i := range rolls {
		r := &rolls[i]
		rewards[i] = TrajRewardOf(r, opt.Adv)
		id := rewards[i].ID
		tr := &b.Trajs[i]
		tr.ID, tr.Peak = id, r.PeakTokens
		h.Write([]byte(id))
		put(math.Float64bits(r.RewardTask))
		for t := range r.Steps {
			st := &r.Steps[t]
			field := func(f string) string { return fmt.Sprintf("steps[%d].%s", t, f) }
			if st.RMem != nil {
				put(math.Float64bits(*st.RMem))
			}
			if opt.Adv.MemBaseline != rl.BaselineHistory && st.PGoldMem != nil {
				put(math.Float64bits(*st.PGoldMem))
			}
			if opt.Adv.MemPerObjective {
				for _, ps := range [][]float64{st.PGoldMemObj, st.PGoldHistObj} {
					for _, p := range ps {
						put(math.Float64bits(p))
					}
				}
			}
			for k, id := range st.ContextIDs {
				if id < 0 || int(id) >= opt.Vocab {
					return nil, inputErr(i, field("context_ids"), "id %d at position %d is outside the model's vocabulary [0, %d)", id, k, opt.Vocab)
				}
			}
			for k, id := range st.OutputIDs {
				if id < 0 || int(id) >= opt.Vocab {
					return nil, inputErr(i, field("output_ids"), "id %d at position %d is outside the model's vocabulary [0, %d)", id, k, opt.Vocab)
				}
			}
			n := len(st.OutputIDs)
			if n == 0 {
				continue
			}
			if len(st.ContextIDs) == 0 {
				return nil, inputErr(i, field("context_ids"), "is empty but the step has %d output ids", n)
			}
			s := Sample{Traj: i, Step: t, Ctx: len(st.ContextIDs)}
			s.IDs = make([]int, 0, len(st.ContextIDs)+n)
			for _, id := range st.ContextIDs {
				s.IDs = append(s.IDs, int(id))
				put(uint64(id))
			}
			put(^uint64(0))
			for _, id := range st.OutputIDs {
				s.IDs = append(s.IDs, int(id))
				put(uint64(id))
			}
			if opt.RL {
				if len(st.Logprobs) != n {
					return nil, inputErr(i, field("logprobs"), "has %d values for %d output ids (the update needs the rollout's sampling log-probs)", len(st.Logprobs), n)
				}
				for k, lp := range st.Logprobs {
					if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) || lp > 0 {
						return nil, inputErr(i, field("logprobs"), "value %v at position %d is not a finite log-probability", lp, k)
					}
					put(uint64(math.Float32bits(lp)))
				}
				s.Old = append([]float32(nil), st.Logprobs...)
			}
			tr.Samples = append(tr.Samples, len(b.Samples))
			tr.Tokens += n
			b.Tokens += n
			b.Samples = append(b.Samples, s)
		}
	}
	if b.Tokens == 0 {
		return nil, fmt.Errorf("%d rollouts: %w", len(rolls), ErrEmpty)
	}
	b.Hash = h.Sum64()
	if !opt.RL {
		return b, nil
	}
	adv, err := opt.Adv.ComputeAdvantages(rewards)
	if err != nil {
		return nil, err
	}
	b.Adv = adv
	for k := range b.Samples {
		s := &b.Samples[k]
		st := &rolls[s.Traj].Steps[s.Step]
		ms, me := int(st.MemStart), int(st.MemEnd)
		a, err := opt.Adv.TokenAdvantages(nil, s.Out(), ms, me, adv.Task[s.Traj], adv.Mem[s.Traj][s.Step])
		if err != nil {
			return nil, inputErr(s.Traj, fmt.Sprintf("steps[%d].mem_end", s.Step), "%v", err)
		}
		s.Adv = a
	}
	return b, nil
}
