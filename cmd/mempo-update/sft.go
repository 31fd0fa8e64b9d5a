package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/update"
)

var sftCommand = &ucli.Command{
	Name:  "sft",
	Usage: "cold-start SFT: token-mean cross-entropy on the output ids of each step of demonstration trajectories, given the step's stored context",
	Description: "Example:\n   mempo-update sft --model base/ --data demos.parquet --out sft/ --epochs 1 --lr 1e-5 --batch-size 64\n\n" +
		"--data uses the rollouts schema (docs/formats.md); log-probs and rewards are ignored. Context ids (prompt,\n" +
		"previous step, <information>) never carry loss. Resuming, --out layout and --metrics are as for the update.",
	Flags: concatFlags([]ucli.Flag{
		&ucli.StringFlag{Name: "model", Usage: "starting checkpoint directory"},
		&ucli.StringSliceFlag{Name: "data", Usage: "demonstration trajectories, Parquet or JSONL (rollouts schema)"},
		&ucli.StringFlag{Name: "out", Usage: "checkpoint directory to write"},
		&ucli.StringFlag{Name: "metrics", Usage: "also write the metrics rows here (.parquet or .jsonl)"},
		&ucli.StringFlag{Name: "optimizer", Usage: "optimizer state to resume (default: --model's optimizer.safetensors when present)"},
		&ucli.IntFlag{Name: "batch-size", Usage: "demonstration trajectories per optimizer step (0 = all)"},
		&ucli.StringFlag{Name: "golden", Usage: "write logits of the written checkpoint on a few sequences here"},
		&ucli.IntFlag{Name: "stop-after", Usage: "stop after this many optimizer steps with a resumable checkpoint"},
		checkpointEveryFlag, forceFlag,
	}, flags.Optim(update.DefaultSFTPeakLR), planFlags(), flags.LeanState()),
	Action: runSFT,
}

func init() { subcommands = append(subcommands, sftCommand) }

func runSFT(c *ucli.Context) error {
	if err := required(c, "model", "data", "out"); err != nil {
		return err
	}
	cfg, _, err := knobs(c, false)
	if err != nil {
		return err
	}
	cfg.Loss.KLCoef = 0
	if cfg.Lean, err = leanKnob(c); err != nil {
		return err
	}
	if err := checkMemory(c, c.String("model"), cfg, c.String("device")); err != nil {
		return err
	}
	j := &job{c: c, sft: true, cfg: cfg, shards: 1, modelD: c.String("model"), out: c.String("out")}
	m, err := loadModel(j.modelD, "model", c.Bool("recompute"), c.String("device"))
	if err != nil {
		return err
	}
	rolls, where, err := loadRollouts(c.StringSlice("data"))
	if err != nil {
		return err
	}
	if j.batch, err = prepare(rolls, where, update.PrepareOptions{Vocab: m.VocabSize()}); err != nil {
		return err
	}
	j.plan = update.Plan{NTraj: len(j.batch.Trajs), MiniBatch: c.Int("batch-size"), Epochs: c.Int("epochs"), Seed: c.Int64("seed")}
	return j.run(m, "sft")
}
