package main

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/world"
)

func init() { subcommands = append(subcommands, worldCommand) }

var worldCommand = &ucli.Command{
	Name:  "world",
	Usage: "generate the demo world: corpus, k-objective tasks, a tokenizer built from its text and a tiny Qwen2 config",
	Description: "Example:\n   mempo-rollout world --seed 1 --out data/world\n\n" +
		"Writes corpus.jsonl (facts and distractor passages, wiki-18 layout), train-sft.jsonl (tasks for the expert's\n" +
		"demonstrations), train-rl-k2.jsonl (RL prompts), test-k{1,2,4,8}.jsonl (tasks on held-out people),\n" +
		"tokenizer.json + tokenizer_config.json (byte-level BPE; protocol tags and ChatML tokens are single ids),\n" +
		"model-config.json (for mempo-update init --config) and world.json (what was generated). The same seed\n" +
		"and sizes always give the same files. --fact-seed N writes a fact-shuffled variant of that world (same names,\n" +
		"tokenizer and model config; new facts, corpus and tasks): SFT on several variants cannot be learned by\n" +
		"remembering facts.",
	Flags: []ucli.Flag{
		&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "world seed"},
		&ucli.Uint64Flag{Name: "fact-seed", Usage: "write a fact-shuffled variant of the seed's world: the same names, held-out people, tokenizer and model config, every fact drawn again (0: the world itself)"},
		&ucli.StringFlag{Name: "out", Required: true, Usage: "directory to write"},
		&ucli.IntFlag{Name: "people", Value: world.DefaultConfig(0).People, Usage: "people in the world"},
		&ucli.IntFlag{Name: "sft-tasks", Value: world.DefaultSizes().SFTTasks, Usage: "training tasks for the expert's demonstrations"},
		&ucli.IntSliceFlag{Name: "sft-k", Value: ucli.NewIntSlice(world.DefaultSizes().SFTK...), Usage: "objective counts of the SFT tasks, in turn"},
		&ucli.IntFlag{Name: "rl-tasks", Value: world.DefaultSizes().RLTasks, Usage: "training tasks for RL"},
		&ucli.IntFlag{Name: "rl-k", Value: world.DefaultSizes().RLK, Usage: "objectives of the RL tasks"},
		&ucli.IntFlag{Name: "test-tasks", Value: world.DefaultSizes().TestTasks, Usage: "test tasks per k"},
		&ucli.IntSliceFlag{Name: "test-k", Value: ucli.NewIntSlice(world.DefaultSizes().TestK...), Usage: "objective counts of the test sets"},
		&ucli.IntFlag{Name: "max-turns", Value: 16, Usage: "turn limit the tasks must fit (lookups ≤ max-turns − 1)"},
		&ucli.IntFlag{Name: "hidden", Value: world.DefaultSizes().Hidden, Usage: "model hidden size"},
		&ucli.IntFlag{Name: "intermediate", Value: world.DefaultSizes().Intermediate, Usage: "model MLP size"},
		&ucli.IntFlag{Name: "layers", Value: world.DefaultSizes().Layers, Usage: "model layers"},
		&ucli.IntFlag{Name: "heads", Value: world.DefaultSizes().Heads, Usage: "attention heads"},
		&ucli.IntFlag{Name: "kv-heads", Value: world.DefaultSizes().KVHeads, Usage: "key/value heads"},
	},
	Action: func(c *ucli.Context) error {
		cfg := world.DefaultConfig(c.Uint64("seed"))
		cfg.People = c.Int("people")
		cfg.MaxTurns = c.Int("max-turns")
		cfg.FactSeed = c.Uint64("fact-seed")
		s := world.DefaultSizes()
		s.SFTTasks, s.SFTK = c.Int("sft-tasks"), c.IntSlice("sft-k")
		s.RLTasks, s.RLK = c.Int("rl-tasks"), c.Int("rl-k")
		s.TestTasks, s.TestK = c.Int("test-tasks"), c.IntSlice("test-k")
		s.Hidden, s.Intermediate, s.Layers = c.Int("hidden"), c.Int("intermediate"), c.Int("layers")
		s.Heads, s.KVHeads = c.Int("heads"), c.Int("kv-heads")
		if len(s.SFTK) == 0 || s.SFTTasks < 0 || s.RLTasks < 0 || s.TestTasks < 0 {
			return fmt.Errorf("task counts must not be negative and --sft-k must name at least one k")
		}
		m, err := world.Write(c.String("out"), cfg, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "world seed %d%s → %s: %d passages, %d people (%d held out for test), tokenizer %d ids\n",
			cfg.Seed, variantNote(cfg.FactSeed), c.String("out"), m.Passages, m.People, m.Test, m.Vocab)
		return nil
	},
}

func variantNote(factSeed uint64) string {
	if factSeed == 0 {
		return ""
	}
	return fmt.Sprintf(" (facts %d)", factSeed)
}
