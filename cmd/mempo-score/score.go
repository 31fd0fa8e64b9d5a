package main

import (
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/qa"
	"github.com/mempo/mempo/lib/report"
)

var scoreFlags = []ucli.Flag{
	&ucli.StringSliceFlag{Name: "rollouts", Usage: "rollouts file (.parquet or .jsonl, - for stdin); repeat for several runs; files after the flags count too"},
	&ucli.StringSliceFlag{Name: "label", Usage: "run label of each rollouts file, in order (default: the file name stem); shards of one run may share a label"},
	&ucli.StringSliceFlag{Name: "metrics", Usage: "update metrics file of a run (.parquet or .jsonl); with one per rollouts file they take its label, otherwise their own stem"},
	&ucli.StringFlag{Name: "out", Usage: "scores file, long form (.parquet or .jsonl)"},
	&ucli.StringFlag{Name: "report", Usage: "directory for table.md, PNG plots (F1 and peak tokens against k; with --metrics reward, memory reward and peak tokens over updates) and index.md/index.html listing them"},
	&ucli.StringFlag{Name: "metric-style", Value: "search-r1", Usage: "EM/sub-EM/F1 as `STYLE`'s scripts compute them: search-r1 (qa_em.py; F1 as SQuAD v1.1) or hotpotqa (hotpot_evaluate_v1.py: F1 0 when either side is yes/no/noanswer and they differ)"},
	&ucli.BoolFlag{Name: "sum-objectives", Usage: "report EM, F1 and sub-EM summed over the k objectives (MEM1's 0..k) instead of the mean ×100"},
	&ucli.IntFlag{Name: "bootstrap", Value: 1000, Usage: "bootstrap resamples for the 95% intervals"},
	&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "bootstrap seed"},
}

func scoreAction(c *ucli.Context) error {
	if c.Int("bootstrap") < 1 {
		return fmt.Errorf("--bootstrap must be at least 1")
	}
	style, err := qa.ParseStyle(c.String("metric-style"))
	if err != nil {
		return err
	}
	cfg := report.Config{
		Rollouts:  append(c.StringSlice("rollouts"), c.Args().Slice()...),
		Labels:    c.StringSlice("label"),
		Metrics:   c.StringSlice("metrics"),
		Out:       c.String("out"),
		ReportDir: c.String("report"),
		Options: report.Options{
			Style:         style,
			SumObjectives: c.Bool("sum-objectives"),
			Resamples:     c.Int("bootstrap"),
			Seed:          c.Uint64("seed"),
		},
	}
	table := c.App.Writer
	if cfg.Out == "-" { // scores go to stdout: keep the table off it
		table = os.Stderr
	}
	written, err := report.Run(cfg, table)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "scores → %s\n", cfg.Out)
	for _, p := range written {
		fmt.Fprintf(os.Stderr, "report → %s\n", p)
	}
	return nil
}
