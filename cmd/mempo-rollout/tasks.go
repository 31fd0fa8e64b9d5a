package main

import (
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/tasks"
)

func init() {
	subcommands = append(subcommands, &ucli.Command{
		Name:  "tasks",
		Usage: "build k-objective tasks from single-question QA files",
		Description: "Example:\n   mempo-rollout tasks --from flashrag --k 2 --out tasks.parquet ../shared/data/nq/test-1000.jsonl\n   (flags come before the files)\n\n" +
			"k consecutive questions of one data source, each ending in \"?\", joined with \"; \"; golds kept in order;\n" +
			"a shorter tail is dropped. Search-R1 rows and multi-objective (MEM1) rows are accepted too.",
		ArgsUsage: "FILE...",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "from", Value: "auto", Usage: "input layout: auto, flashrag, hotpotqa, musique, 2wiki, searchr1"},
			&ucli.StringFlag{Name: "source", Usage: "data source name for rows without data_source (default: the file's directory name)"},
			&ucli.IntFlag{Name: "k", Value: 1, Usage: "questions per task"},
			&ucli.StringFlag{Name: "out", Required: true, Usage: "tasks file (.parquet or .jsonl, - for stdout)"},
			&ucli.BoolFlag{Name: "allow-empty", Usage: "write a tasks file even when no task could be built (otherwise an error)"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("no input files: give one or more QA files")
			}
			var all []tasks.Question
			var direct []tasks.Task
			for _, path := range c.Args().Slice() {
				qs, d, err := tasks.ReadFile(path, c.String("from"), c.String("source"))
				if err != nil {
					return err
				}
				all = append(all, qs...)
				direct = append(direct, d...)
			}
			built, err := tasks.Build(all, c.Int("k"))
			if err != nil {
				return err
			}
			out := append(direct, built...)
			if len(out) == 0 && !c.Bool("allow-empty") {
				return fmt.Errorf("no tasks: %d questions in %s make no task of k=%d (a shorter tail is dropped); --out %s left as it was (--allow-empty writes an empty file)",
					len(all), strings.Join(c.Args().Slice(), ", "), c.Int("k"), c.String("out"))
			}
			if err := tasks.Write(c.String("out"), out); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%d tasks from %d questions (k=%d) → %s\n", len(out), len(all), c.Int("k"), c.String("out"))
			return nil
		},
	})
}
