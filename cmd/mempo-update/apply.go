package main

import (
	"fmt"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/update"
)

var applyCommand = &ucli.Command{
	Name:  "apply",
	Usage: "sum gradient shards written by grad (in shard order) and take the optimizer step",
	Description: "Example:\n   mempo-update apply --model ckpt/ --grads g0.safetensors --grads g1.safetensors --out ckpt-next/ --metrics m.jsonl\n\n" +
		"The shards must be 0..n−1 of the same step, rollouts and knobs, computed on --model. The optimizer flags\n" +
		"(--lr, --schedule, …) are apply's; the loss flags were grad's.",
	Flags: concatFlags([]ucli.Flag{
		&ucli.StringFlag{Name: "model", Usage: "the checkpoint the gradients were computed on"},
		&ucli.StringSliceFlag{Name: "grads", Usage: "gradient files, one per shard"},
		&ucli.StringFlag{Name: "out", Usage: "checkpoint directory to write"},
		forceFlag,
		&ucli.StringFlag{Name: "metrics", Usage: "also write the metrics rows of this plan so far here"},
		&ucli.StringFlag{Name: "optimizer", Usage: "optimizer state of --model (default: its optimizer.safetensors when present)"},
	}, flags.Optim(update.DefaultConfig().Schedule.PeakLR)),
	Action: runApply,
}

func init() { subcommands = append(subcommands, applyCommand) }

func runApply(c *ucli.Context) error {
	if err := required(c, "model", "grads", "out"); err != nil {
		return err
	}
	if err := fileio.CheckReplaceable("out", c.String("out"), c.Bool("force"), "config.json", "adapter_config.json"); err != nil {
		return err
	}
	cfg, _, err := knobs(c, false)
	if err != nil {
		return err
	}
	files := c.StringSlice("grads")
	shards := make([]*update.ShardResult, len(files))
	metas := make([]update.GradMeta, len(files))
	for _, f := range files {
		r, gm, err := update.ReadGrads(f)
		if err != nil {
			return err
		}
		if gm.Shards != len(files) {
			return fmt.Errorf("%s: shard %d of %d, but %d gradient files were given", f, gm.Shard, gm.Shards, len(files))
		}
		if gm.Shard < 0 || gm.Shard >= gm.Shards {
			return fmt.Errorf("%s: shard index %d outside 0..%d", f, gm.Shard, gm.Shards-1)
		}
		if shards[gm.Shard] != nil {
			return fmt.Errorf("%s: shard %d/%d given twice", f, gm.Shard, gm.Shards)
		}
		shards[gm.Shard], metas[gm.Shard] = r, gm
	}
	g0 := metas[0]
	for i, gm := range metas {
		if gm.Fingerprint != g0.Fingerprint || gm.PlanStep != g0.PlanStep || gm.GlobalStep != g0.GlobalStep {
			return fmt.Errorf("%s: shard %d is from another step or run (step %d, fingerprint %s) than shard 0 (step %d, fingerprint %s)",
				files[i], i, gm.PlanStep, gm.Fingerprint, g0.PlanStep, g0.Fingerprint)
		}
	}
	// apply runs no forward: the parameters and AdamW live on the host.
	m, err := loadModel(c.String("model"), "model", false, "cpu")
	if err != nil {
		return err
	}
	st, rs, err := startState(c.String("optimizer"), c.String("model"), m)
	if err != nil {
		return err
	}
	var global int64
	var rows []records.Update
	if rs != nil {
		global = rs.GlobalStep
		if rs.Fingerprint == g0.Fingerprint && g0.PlanStep > 0 {
			rows, _ = records.ReadFile[records.Update](filepath.Join(c.String("model"), update.MetricsFile))
		}
	}
	if global != g0.GlobalStep {
		return fmt.Errorf("--model %s: has taken %d optimizer steps, the gradients were computed on a model that had taken %d", c.String("model"), global, g0.GlobalStep)
	}
	for name, g := range shards[0].Grads {
		if len(m.Param(name)) != len(g) {
			return fmt.Errorf("%s: tensor %s has %d values, the model's %d (mismatched checkpoint)", files[0], name, len(g), len(m.Param(name)))
		}
	}
	sum := shards[0]
	for _, r := range shards[1:] {
		if err := sum.Add(r); err != nil {
			return err
		}
	}
	t, err := update.NewTrainer(m, nil, cfg)
	if err != nil {
		return err
	}
	if st != nil {
		if err := t.Opt.LoadState(*st); err != nil {
			return err
		}
	}
	res, err := t.Apply(sum)
	if err != nil {
		return err
	}
	out := c.String("out")
	res.Row.Epoch = int32(g0.Epoch)
	res.Row.Policy = fmt.Sprintf("%s@%d", filepath.Base(filepath.Clean(out)), res.Row.Step)
	rows = append(rows, res.Row)
	nrs := update.RunState{GlobalStep: t.Opt.StepCount(), PlanStep: g0.PlanStep + 1, PlanSteps: g0.PlanSteps,
		Fingerprint: g0.Fingerprint, Schedule: cfg.Schedule, AdamW: cfg.AdamW}
	if rs != nil {
		nrs.Seed = rs.Seed
	}
	if err := update.SaveCheckpoint(out, m, c.String("model"), t.Opt.State(), nrs, rows); err != nil {
		return err
	}
	if p := c.String("metrics"); p != "" {
		if err := records.WriteFile(p, rows); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %d shards, step %d of %d, global step %d, grad norm %.4g\n",
		out, len(files), g0.PlanStep+1, g0.PlanSteps, t.Opt.StepCount(), res.GradNorm)
	return nil
}
