package main

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/importer"
	"github.com/mempo/mempo/lib/records"
)

func init() { subcommands = append(subcommands, importCommand) }

var importCommand = &ucli.Command{
	Name:  "import",
	Usage: "turn text trajectories (JSONL) into rollouts rows for mempo-update sft",
	Description: "Example:\n   mempo-rollout import --tokenizer /models/MemPO_Qwen2.5-SFT --out demos.parquet trajectories.jsonl\n\n" +
		"One trajectory a line: {questions, golds, steps: [{mem, think, search, passages} … {mem, think, answer}]}, or\n" +
		"{questions, golds, messages: [OpenAI-style turns: assistant steps, tool/user observations]} (docs/formats.md,\n" +
		"\"Imported trajectories\"). Every step is tokenized with --tokenizer and the contexts are built by the agent\n" +
		"exactly as mempo-rollout builds them under the same protocol flags (give both the same values), observations\n" +
		"rendered from the step's passages. A bad line is one error naming the line and the field.",
	ArgsUsage: "FILE...",
	Flags: append([]ucli.Flag{
		&ucli.StringFlag{Name: "tokenizer", Required: true, Usage: "the target model's tokenizer.json or its directory"},
		&ucli.StringFlag{Name: "out", Required: true, Usage: "rows (.parquet or .jsonl, rollouts schema)"},
	}, flags.Agent()...),
	Action: func(c *ucli.Context) error {
		if c.NArg() == 0 {
			return fmt.Errorf("no input files: give one or more trajectories files (JSONL)")
		}
		ag, tok, err := protocolAgent(c, false)
		if err != nil {
			return err
		}
		im := &importer.Importer{Agent: ag, Tok: tok}
		var rows []records.Rollout
		for _, path := range c.Args().Slice() {
			rs, err := im.ReadFile(path)
			if err != nil {
				return err
			}
			for i := range rs {
				rs[i].Group = int64(len(rows) + i)
			}
			rows = append(rows, rs...)
		}
		if len(rows) == 0 {
			return fmt.Errorf("no trajectories in %v", c.Args().Slice())
		}
		if err := records.WriteFile(c.String("out"), rows); err != nil {
			return err
		}
		steps, correct := 0, 0
		for _, r := range rows {
			steps += len(r.Steps)
			if r.RewardTask == 1 {
				correct++
			}
		}
		fmt.Fprintf(c.App.ErrWriter, "%d trajectories (%d all correct), %.1f steps each, keep %s → %s\n",
			len(rows), correct, float64(steps)/float64(len(rows)), ag.Config().Keep, c.String("out"))
		return nil
	},
}
