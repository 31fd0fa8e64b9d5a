package main

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/update"
)

var gradCommand = &ucli.Command{
	Name:  "grad",
	Usage: "write the gradient of one shard of one optimizer step's mini-batch (for apply on another machine)",
	Description: "Example:\n   mempo-update grad --model ckpt/ --ref sft/ --rollouts r.parquet --shard 0/4 --out g0.safetensors\n" +
		"   (… shards 1/4, 2/4, 3/4 elsewhere …)\n" +
		"   mempo-update apply --model ckpt/ --grads g0.safetensors,g1.safetensors,g2.safetensors,g3.safetensors --out ckpt-next/\n\n" +
		"Every shard reads ALL rollouts: advantages need whole groups and the loss denominators the whole mini-batch;\n" +
		"only the shard's trajectories are run through the model. With --epochs/--mini-batch giving several steps, step\n" +
		"k (--plan-step) runs on the checkpoint apply wrote for step k−1. apply's result is bit-identical to\n" +
		"`mempo-update --grad-shards n` with the same knobs (same float operations in the same order).",
	Flags: concatFlags([]ucli.Flag{
		&ucli.StringFlag{Name: "model", Usage: "policy checkpoint directory"},
		&ucli.StringFlag{Name: "ref", Usage: "frozen reference checkpoint for the KL term"},
		&ucli.StringSliceFlag{Name: "rollouts", Usage: "rollouts file(s): all of them, in every shard"},
		&ucli.StringFlag{Name: "out", Usage: "gradient file to write (safetensors)"},
		&ucli.StringFlag{Name: "shard", Usage: "i/n: this shard's index and the shard count"},
		&ucli.IntFlag{Name: "plan-step", Usage: "optimizer step of the plan (epochs × mini-batches) to compute"},
		&ucli.StringFlag{Name: "optimizer", Usage: "optimizer state of --model (default: its optimizer.safetensors when present)"},
	}, flags.RL(), []ucli.Flag{miniBatchFlag}, planFlags(), flags.Optim(update.DefaultConfig().Schedule.PeakLR)),
	Action: runGrad,
}

func init() { subcommands = append(subcommands, gradCommand) }

func runGrad(c *ucli.Context) error {
	if err := required(c, "model", "rollouts", "out", "shard"); err != nil {
		return err
	}
	si, sn, err := flags.ParseShard("shard", c.String("shard"))
	if err != nil {
		return err
	}
	// Only the loss knobs matter here; the optimizer flags are accepted so
	// that grad and the one-process update take the same command line, but
	// they are apply's.
	cfg, acfg, err := knobs(c, true)
	if err != nil {
		return err
	}
	if cfg.TargetKL != 0 {
		return fmt.Errorf("--target-kl: grad computes one shard of one step, and the early stop needs the whole mini-batch; it is the one-process update's (apply's rows carry each step's approx_kl)")
	}
	m, err := loadModel(c.String("model"), "model", c.Bool("recompute"), c.String("device"))
	if err != nil {
		return err
	}
	rolls, where, err := loadRollouts(c.StringSlice("rollouts"))
	if err != nil {
		return err
	}
	b, err := prepare(rolls, where, update.PrepareOptions{Vocab: m.VocabSize(), RL: true, Adv: acfg})
	if err != nil {
		return err
	}
	plan := update.Plan{NTraj: len(b.Trajs), MiniBatch: c.Int("mini-batch"), Epochs: c.Int("epochs"), Seed: c.Int64("seed")}
	if err := plan.Validate(); err != nil {
		return err
	}
	k := c.Int("plan-step")
	if k < 0 || k >= plan.Steps() {
		return fmt.Errorf("--plan-step %d: the plan has steps 0..%d", k, plan.Steps()-1)
	}
	_, rs, err := startState(c.String("optimizer"), c.String("model"), m)
	if err != nil {
		return err
	}
	var global int64
	if rs != nil {
		global = rs.GlobalStep
	}
	fp := fingerprint("grad", b.Hash, cfg.Loss, cfg.MicroTokens, cfg.EntropyMetric, acfg, plan, sn, global-int64(k))
	if k > 0 && (rs == nil || rs.Fingerprint != fp || rs.PlanStep != k) {
		return fmt.Errorf("--model %s: is not the checkpoint apply wrote after step %d of this plan (same rollouts and knobs)", c.String("model"), k-1)
	}
	epoch, mb := plan.At(k)
	shard := update.Shard(mb, si, sn)
	t, err := update.NewTrainer(m, b, cfg)
	if err != nil {
		return err
	}
	if cfg.Loss.KLCoef != 0 {
		if !c.IsSet("ref") {
			return fmt.Errorf("%w (needed when --kl-coef is not 0)", cli.MissingFlags("--ref"))
		}
		ref, err := loadModel(c.String("ref"), "ref", false, c.String("device"))
		if err != nil {
			return err
		}
		if err := sameShapes(m.Config(), ref, "--ref "+c.String("ref")); err != nil {
			return err
		}
		if err := update.RefLogProbs(ref, b, shard, cfg.MicroTokens); err != nil {
			return err
		}
	}
	res, err := t.ShardGrad(mb, shard)
	if err != nil {
		return err
	}
	gm := update.GradMeta{Shard: si, Shards: sn, PlanStep: k, PlanSteps: plan.Steps(), Epoch: epoch, GlobalStep: global, Fingerprint: fp}
	if err := update.WriteGrads(c.String("out"), res, gm, m); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: shard %d/%d of step %d, %d trajectories, %d tokens, loss %.6g\n",
		c.String("out"), si, sn, k, res.Trajs, res.Metrics.Tokens, res.Metrics.Loss)
	return nil
}
