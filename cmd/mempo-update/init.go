package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/safetensors"
)

var initCommand = &ucli.Command{
	Name:  "init",
	Usage: "write a randomly initialized Hugging Face model directory with the tokenizer files copied in",
	Description: "Example:\n   mempo-update init --config qwen2.5-0.5b --tokenizer testdata/qwen3/tokenizer.json --out ckpt/ --seed 1\n\n" +
		"--config is a config.json file, a model directory, or a preset: " + strings.Join(checkpoint.Presets(), ", ") + ".\n" +
		"Weights are normal(0, initializer_range), biases zero, norms one, as transformers initializes them.",
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "config", Usage: "config.json, model directory or preset name", Required: true},
		&ucli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or a directory holding it (tokenizer_config.json etc. beside it are copied too)", Required: true},
		&ucli.StringFlag{Name: "out", Usage: "model directory to write", Required: true},
		&ucli.Int64Flag{Name: "seed", Usage: "random seed", Value: 0},
		&ucli.StringFlag{Name: "dtype", Usage: "weight dtype: f32 or bf16", Value: "f32"},
		&ucli.BoolFlag{Name: "force", Usage: "replace an existing non-empty --out directory"},
	},
	Action: runInit,
}

func init() { subcommands = append(subcommands, initCommand) }

// initResolveConfig reads --config: a file, a model directory, or a preset name.
func initResolveConfig(arg string) (*checkpoint.Config, error) {
	st, err := os.Stat(arg)
	switch {
	case err == nil && st.IsDir():
		return checkpoint.LoadConfig(arg)
	case err == nil:
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		cfg, err := checkpoint.ParseConfig(arg, data)
		if err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", arg, err)
		}
		return cfg, nil
	case errors.Is(err, os.ErrNotExist):
		cfg, perr := checkpoint.Preset(arg)
		if perr != nil {
			return nil, fmt.Errorf("--config %s: no such file, and %v", arg, perr)
		}
		return cfg, nil
	}
	return nil, err
}

func initParseDType(s string) (safetensors.DType, error) {
	switch strings.ToLower(s) {
	case "f32", "float32":
		return safetensors.F32, nil
	case "bf16", "bfloat16":
		return safetensors.BF16, nil
	}
	return "", fmt.Errorf("--dtype %q: want f32 or bf16", s)
}

func runInit(c *ucli.Context) error {
	dtype, err := initParseDType(c.String("dtype"))
	if err != nil {
		return err
	}
	out := c.String("out")
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 && !c.Bool("force") {
		return fmt.Errorf("%s: directory exists and is not empty (use --force to replace it)", out)
	} else if err == nil && len(entries) == 0 {
		// An empty directory is replaced quietly.
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		if st, serr := os.Stat(out); serr == nil && !st.IsDir() {
			return fmt.Errorf("%s: exists and is not a directory", out)
		}
		return err
	}
	cfg, err := initResolveConfig(c.String("config"))
	if err != nil {
		return err
	}
	tokPath, err := checkpoint.TokenizerPath(c.String("tokenizer"))
	if err != nil {
		return err
	}
	n, err := checkpoint.TokenizerVocabSize(tokPath)
	if err != nil {
		return err
	}
	if n > cfg.VocabSize {
		return fmt.Errorf("%s: tokenizer has %d token ids but the config's vocab_size is %d", tokPath, n, cfg.VocabSize)
	}
	weights := checkpoint.RandomInit(cfg, c.Int64("seed"))
	if err := checkpoint.Save(out, cfg, weights, checkpoint.SaveOptions{DType: dtype, TokenizerDir: c.String("tokenizer")}); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %s, %s parameters, %s, tokenizer %s (%d ids, vocab_size %d)\n",
		filepath.Clean(out), cfg.Architecture, checkpoint.HumanCount(cfg.ParamCount()), dtype, filepath.Base(tokPath), n, cfg.VocabSize)
	return nil
}
