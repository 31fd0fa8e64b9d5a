package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/world"
)

func init() { subcommands = append(subcommands, expertCommand) }

var expertCommand = &ucli.Command{
	Name:  "expert",
	Usage: "write protocol-perfect demonstration trajectories of the world's tasks for the SFT cold start",
	Description: "Example:\n   mempo-rollout expert --tasks data/world/train-sft.jsonl --index index/ --tokenizer data/world/tokenizer.json --out demos.parquet\n\n" +
		"The scripted expert plays the role of the paper's GPT-4.1 trajectories: one search per lookup (two for a\n" +
		"two-hop question), a <mem> that lists every answer found so far, and a final <answer> with all k answers.\n" +
		"Contexts are built by the agent protocol and searches go to the real index, so rows are in the rollouts\n" +
		"schema with exact token ids (mempo-update sft reads them). The expert reads each answer from the retrieved\n" +
		"passages; a task whose fact is not retrieved gets no row (counted on stderr). Every row is checked against\n" +
		"the protocol (agent.CheckRecord) before it is written. The protocol flags are mempo-rollout's, with the same\n" +
		"defaults: give both commands the same values, so that SFT trains on the contexts rollouts will show.",
	Flags: append([]ucli.Flag{
		&ucli.StringSliceFlag{Name: "tasks", Required: true, Usage: "tasks file(s) of world questions"},
		&ucli.StringFlag{Name: "index", Required: true, Usage: "index directory of the world corpus (mempo-index)"},
		&ucli.StringFlag{Name: "tokenizer", Required: true, Usage: "tokenizer.json or a model directory"},
		&ucli.StringFlag{Name: "out", Required: true, Usage: "demonstrations (.parquet or .jsonl, rollouts schema)"},
		&ucli.Float64Flag{Name: "drop-rate", Usage: "lossy memory: probability that a step leaves the fact just found out of <mem> and repeats the lookup (0: the perfect expert)"},
		&ucli.Uint64Flag{Name: "drop-seed", Value: 1, Usage: "seed of the --drop-rate and --answer-rate draws"},
		&ucli.StringFlag{Name: "answer-rows", Usage: "also write answer-from-memory rows here (.parquet or .jsonl): for --answer-rate of the demonstrations, one row whose context is R^M's scoring sequence of one of its steps (the --score-* flags: prompt, that step's memory, lead-in) and whose output is the gold answer, to be mixed into the SFT data"},
		&ucli.Float64Flag{Name: "answer-rate", Value: 1, Usage: "with --answer-rows: the fraction of demonstrations that give a row, each from a step drawn uniformly"},
		&ucli.BoolFlag{Name: "mem-slots", Usage: "write the memory with one entry per objective from the first step on, \"[j] ?\" until objective j is found, so that answering from a memory is copying it in order"},
		&ucli.StringFlag{Name: "answer-memory", Value: "step", Usage: "with --answer-rows: the memory a row answers from: step (the memory of the drawn step) or subset (the final memory with each entry kept with probability 1/2, so that late objectives are in memory as often as early ones)"},
	}, slices.Concat(scoreFlags, flags.Agent())...),
	Action: runExpert,
}

func runExpert(c *ucli.Context) error {
	answerRate := 0.0
	if c.String("answer-rows") != "" {
		answerRate = c.Float64("answer-rate")
		if !(answerRate > 0 && answerRate <= 1) {
			return fmt.Errorf("--answer-rate %v: want a fraction in (0, 1]", answerRate)
		}
	} else {
		for _, f := range []string{"answer-rate", "answer-memory"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s: without --answer-rows there is nowhere to write the rows", f)
			}
		}
	}
	answerMemory, err := world.ParseAnswerMemory(c.String("answer-memory"))
	if err != nil {
		return fmt.Errorf("--answer-memory: %w", err)
	}
	ag, tok, err := protocolAgent(c, true)
	if err != nil {
		return err
	}
	srch, err := retrieval.NewLocal(c.String("index"))
	if err != nil {
		return err
	}
	defer srch.Close()
	rate := c.Float64("drop-rate")
	if !(rate >= 0 && rate < 1) {
		return fmt.Errorf("--drop-rate %v: want a probability in [0, 1)", rate)
	}
	ex := &world.Expert{Agent: ag, Tok: tok, Searcher: srch, DropRate: rate, DropSeed: c.Uint64("drop-seed"), AnswerRate: answerRate, AnswerMemory: answerMemory, Slots: c.Bool("mem-slots")}
	var all []tasks.Task
	for _, f := range c.StringSlice("tasks") {
		ts, err := tasks.ReadTasks(f)
		if err != nil {
			return err
		}
		all = append(all, ts...)
	}
	var rows, answers []records.Rollout
	missed := 0
	var peak, steps int64
	for i, t := range all {
		r, err := ex.Run(context.Background(), t, int64(i))
		if errors.Is(err, world.ErrNotFound) {
			missed++
			continue
		}
		if err != nil {
			return err
		}
		if err := ag.CheckRecord(r.Questions, rollout.StepRecords(&r)); err != nil {
			return fmt.Errorf("task %s: %w", t.TaskID, err)
		}
		peak += r.PeakTokens
		steps += int64(r.Turns)
		rows = append(rows, r)
		if ar, ok, err := ex.AnswerRow(r); err != nil {
			return err
		} else if ok {
			answers = append(answers, ar)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("no demonstrations: the facts of all %d tasks were not retrieved", len(all))
	}
	if err := records.WriteFile(c.String("out"), rows); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "%d demonstrations of %d tasks → %s (%d dropped: fact not retrieved); %.1f steps and %.0f peak tokens per trajectory, keep %s\n",
		len(rows), len(all), c.String("out"), missed, float64(steps)/float64(len(rows)), float64(peak)/float64(len(rows)), ag.Config().Keep)
	if f := c.String("answer-rows"); f != "" {
		if len(answers) == 0 {
			return fmt.Errorf("--answer-rows: no demonstration was drawn at --answer-rate %v", answerRate)
		}
		if err := records.WriteFile(f, answers); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "%d answer-from-memory rows (score layout %s) → %s\n", len(answers), ag.Config().ScoreLayout, f)
	}
	return nil
}
