package flags

// The RL (loss and advantage) and Optim (AdamW and schedule) groups of
// mempo-update. Every default is read from the library that owns the
// setting (rl.DefaultLossConfig, rl.DefaultAdvConfig, optim.DefaultAdamW,
// update.DefaultConfig), so a default changed there is the flag's default.

import (
	"fmt"
	"math"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/update"
)

// nameOf is the key of v in names (the text form of a library constant).
func nameOf[T comparable](names map[string]T, v T) string {
	for k, x := range names {
		if x == v {
			return k
		}
	}
	panic(fmt.Sprintf("flags: no name for %v", v))
}

// RL is the loss and advantage group.
func RL() []ucli.Flag {
	loss, adv := rl.DefaultLossConfig(), rl.DefaultAdvConfig()
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "alpha", Value: adv.Alpha, Usage: "weight α of the memory advantage A^M on <mem> tokens"},
		&ucli.BoolFlag{Name: "no-std-norm", Value: !adv.NormStd, Usage: "center rewards without dividing by the group std (Dr.GRPO)"},
		&ucli.StringFlag{Name: "std", Value: nameOf(rl.StdModes, adv.Std), Usage: "std of the z-scores: unbiased (N−1, verl) or population"},
		&ucli.BoolFlag{Name: "no-mem-adv", Value: !adv.MemAdv, Usage: "plain GRPO: no A^M on <mem> tokens (ablation)"},
		&ucli.Float64Flag{Name: "mem-std-floor", Value: adv.MemStdFloor, Usage: "least std the A^M z-score divides by (0: none; a flat pool's small R^M differences are not stretched to unit size)"},
		&ucli.BoolFlag{Name: "mem-skip-repeats", Usage: "a step whose whole output repeats the step before's (the same memory and action again) gets no memory advantage, its R^M left out of the A^M pool (ablation: a scorer that ranks a dropped fact's memory high cannot reward repeating it, nor one that ranks it low penalize it; docs/DEMO.md found it a trade, not a fix)"},
		&ucli.BoolFlag{Name: "mem-skip-answer", Usage: "the memory written with the answer (read by no later step) gets no memory advantage, its R^M left out of the A^M pool (docs/DEMO.md: at k = 8 the step pool gave every answer step a negative A^M)"},
		&ucli.StringFlag{Name: "mem-baseline", Value: nameOf(rl.MemBaselines, adv.MemBaseline), Usage: "what R^M subtracts from P(gold | q, mem_t): history (P(gold | q, s_<t), the paper's) or previous (P(gold | q, mem_t−1): what the memory adds to the one before; a memory written again unchanged scores 0)"},
		&ucli.BoolFlag{Name: "mem-per-objective", Usage: "A^M is the mean over a task's objectives of each objective's own z-score over the pool (its R^M from P(gold_j | q, mem_t)), not the z-score of the mean over objectives: a dropped fact of one objective of eight then stands against that objective's spread alone (ablation; needs rollouts from mempo-rollout --score-per-objective)"},
		&ucli.StringFlag{Name: "mem-pool", Value: nameOf(rl.MemPools, adv.MemPool), Usage: "pool of the A^M z-score: task (all memory blocks of the task) or step (same step index)"},
		&ucli.Float64Flag{Name: "clip-low", Value: loss.ClipLow, Usage: "ratio clip below 1"},
		&ucli.Float64Flag{Name: "clip-high", Value: loss.ClipHigh, Usage: "ratio clip above 1"},
		&ucli.Float64Flag{Name: "dual-clip", Value: loss.ClipC, Usage: "dual clip bound c for negative advantages (0 = off)"},
		&ucli.StringFlag{Name: "kl", Value: loss.KL.String(), Usage: "KL estimator: k1, k2 or k3 (low_var_kl)"},
		&ucli.Float64Flag{Name: "kl-coef", Value: loss.KLCoef, Usage: "β of the KL term (0 = no KL, --ref not needed)"},
		&ucli.StringFlag{Name: "agg", Value: loss.Agg.String(), Usage: "loss aggregation: trajectory (paper Eq. 10), token-mean, seq-mean-token-sum or seq-mean-token-mean"},
		&ucli.BoolFlag{Name: "entropy-metric", Usage: "report the policy entropy (one more forward with full logits: small vocabularies only)"},
		&ucli.Float64Flag{Name: "target-kl", Value: update.DefaultConfig().TargetKL, Usage: "early stop: before each optimizer step, the approximate KL (k3) of the policy to the rollout policy on the step's mini-batch (the approx_kl column); past 1.5 × this, that step and every later one of the update are skipped (0 = off)"},
	}
}

// Optim is the optimizer group; lr is the command's peak learning rate
// (update.DefaultConfig's for the RL update, a larger one for SFT).
func Optim(lr float64) []ucli.Flag {
	d := update.DefaultConfig()
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "lr", Value: lr, Usage: "peak learning rate"},
		&ucli.StringFlag{Name: "schedule", Value: nameOf(optim.ScheduleKinds, d.Schedule.Kind), Usage: "learning-rate schedule: constant or cosine (linear warmup then cosine)"},
		&ucli.Int64Flag{Name: "warmup", Value: d.Schedule.WarmupSteps, Usage: "warmup steps (global optimizer steps)"},
		&ucli.Int64Flag{Name: "total-steps", Value: d.Schedule.TotalSteps, Usage: "cosine: global step at which the decay ends"},
		&ucli.Float64Flag{Name: "min-lr-ratio", Value: d.Schedule.MinRatio, Usage: "cosine: final rate as a fraction of --lr"},
		&ucli.Float64Flag{Name: "weight-decay", Value: d.AdamW.WeightDecay, Usage: "AdamW decoupled weight decay"},
		&ucli.Float64Flag{Name: "beta1", Value: d.AdamW.Beta1, Usage: "AdamW β1"},
		&ucli.Float64Flag{Name: "beta2", Value: d.AdamW.Beta2, Usage: "AdamW β2"},
		&ucli.Float64Flag{Name: "adam-eps", Value: d.AdamW.Eps, Usage: "AdamW ε"},
		&ucli.Float64Flag{Name: "grad-clip", Value: d.MaxGradNorm, Usage: "clip the global gradient norm (≤ 0: measure only)"},
	}
}

// Train parses the Optim group, and with withRL the RL group, into the
// update and advantage configs (not yet validated: the caller adds its plan
// knobs first).
func Train(c *ucli.Context, withRL bool) (update.Config, rl.AdvConfig, error) {
	cfg := update.DefaultConfig()
	acfg := rl.DefaultAdvConfig()
	var err error
	if withRL {
		acfg.Alpha, acfg.MemStdFloor = c.Float64("alpha"), c.Float64("mem-std-floor")
		acfg.NormStd = !c.Bool("no-std-norm")
		acfg.MemAdv = !c.Bool("no-mem-adv")
		acfg.MemSkipRepeats, acfg.MemSkipAnswer = c.Bool("mem-skip-repeats"), c.Bool("mem-skip-answer")
		acfg.MemPerObjective = c.Bool("mem-per-objective")
		if acfg.Std, err = rl.ParseStdMode(c.String("std")); err != nil {
			return cfg, acfg, err
		}
		if acfg.MemPool, err = rl.ParseMemPool(c.String("mem-pool")); err != nil {
			return cfg, acfg, err
		}
		if acfg.MemBaseline, err = rl.ParseMemBaseline(c.String("mem-baseline")); err != nil {
			return cfg, acfg, err
		}
		cfg.Loss.ClipLow, cfg.Loss.ClipHigh, cfg.Loss.ClipC = c.Float64("clip-low"), c.Float64("clip-high"), c.Float64("dual-clip")
		if cfg.Loss.KL, err = rl.ParseKLType(c.String("kl")); err != nil {
			return cfg, acfg, err
		}
		cfg.Loss.KLCoef = c.Float64("kl-coef")
		if cfg.Loss.Agg, err = rl.ParseAggMode(c.String("agg")); err != nil {
			return cfg, acfg, err
		}
		cfg.EntropyMetric = c.Bool("entropy-metric")
		if cfg.TargetKL = c.Float64("target-kl"); !(cfg.TargetKL >= 0) || math.IsInf(cfg.TargetKL, 1) {
			return cfg, acfg, fmt.Errorf("--target-kl must be a finite number ≥ 0 (0 = off), got %v", cfg.TargetKL)
		}
	}
	cfg.AdamW = optim.AdamWConfig{Beta1: c.Float64("beta1"), Beta2: c.Float64("beta2"), Eps: c.Float64("adam-eps"), WeightDecay: c.Float64("weight-decay")}
	cfg.Schedule = optim.Schedule{PeakLR: c.Float64("lr"), WarmupSteps: c.Int64("warmup"), TotalSteps: c.Int64("total-steps"), MinRatio: c.Float64("min-lr-ratio")}
	if cfg.Schedule.Kind, err = optim.ParseScheduleKind(c.String("schedule")); err != nil {
		return cfg, acfg, err
	}
	cfg.MaxGradNorm = c.Float64("grad-clip")
	return cfg, acfg, nil
}
