package main

import (
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/peft"
	"github.com/mempo/mempo/lib/safetensors"
)

// LoRA updates (--lora-rank, or --adapter to continue an adapter) and
// `merge`. With an adapter, --model is the frozen base, --out is a peft
// adapter directory (adapter_config.json, adapter_model.safetensors) with
// the optimizer file and the metrics beside it, and the KL reference is the
// base itself with the adapter off.

// loraRun is a LoRA job's extra state.
type loraRun struct {
	adapter string // --adapter: the adapter trained from, or ""
	cfg     peft.Config
	device  string
}

// loraSetup reads the LoRA flags: nil when the update is full-parameter.
func loraSetup(c *ucli.Context) (*loraRun, error) {
	dir := c.String("adapter")
	rank := c.Int("lora-rank")
	if dir == "" && rank == 0 {
		for _, f := range []string{"lora-alpha", "lora-dropout", "lora-targets"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s needs --lora-rank (or --adapter)", f)
			}
		}
		return nil, nil
	}
	lr := &loraRun{adapter: dir, device: c.String("device")}
	if dir != "" {
		a, err := peft.Read(dir)
		if err != nil {
			return nil, fmt.Errorf("--adapter: %w", err)
		}
		lr.cfg = a.Config
		// Flags given with --adapter must agree with the adapter's config.
		if c.IsSet("lora-rank") && rank != a.Config.R {
			return nil, fmt.Errorf("--lora-rank %d: --adapter %s has rank %d", rank, dir, a.Config.R)
		}
		if c.IsSet("lora-alpha") && c.Float64("lora-alpha") != a.Config.Alpha {
			return nil, fmt.Errorf("--lora-alpha %v: --adapter %s has lora_alpha %v", c.Float64("lora-alpha"), dir, a.Config.Alpha)
		}
		if c.IsSet("lora-targets") {
			ts, err := peft.ParseTargets(c.String("lora-targets"))
			if err != nil {
				return nil, err
			}
			if fmt.Sprint(ts) != fmt.Sprint(a.Config.Targets) {
				return nil, fmt.Errorf("--lora-targets %s: --adapter %s targets %v", c.String("lora-targets"), dir, a.Config.Targets)
			}
		}
		if c.IsSet("lora-dropout") {
			lr.cfg.Dropout = c.Float64("lora-dropout")
		}
		return lr, lr.cfg.Validate()
	}
	if rank < 0 {
		return nil, fmt.Errorf("--lora-rank %d: must be ≥ 1", rank)
	}
	ts, err := peft.ParseTargets(c.String("lora-targets"))
	if err != nil {
		return nil, fmt.Errorf("--lora-targets: %w", err)
	}
	lr.cfg = peft.Config{R: rank, Alpha: c.Float64("lora-alpha"), Dropout: c.Float64("lora-dropout"), Targets: ts}
	if !c.IsSet("lora-alpha") {
		lr.cfg.Alpha = float64(2 * rank)
	}
	if err := lr.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--lora-*: %v", err)
	}
	return lr, nil
}

// loadAdapted loads base frozen on the device (bf16 weights only on
// cuda-bf16) and applies the adapter in dir.
func loadAdapted(base, dir, device string) (*model.Model, error) {
	be, err := model.NewBackend(device)
	if err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	return model.LoadAdapted(base, dir, be)
}

// model builds the policy: the frozen base with the adapter to continue, or
// a fresh one (peft's initialization, seeded by --seed).
func (lr *loraRun) model(base string, recompute bool, seed int64) (*model.Model, error) {
	var m *model.Model
	var err error
	if lr.adapter != "" {
		m, err = loadAdapted(base, lr.adapter, lr.device)
	} else {
		var be model.Backend
		if be, err = model.NewBackend(lr.device); err != nil {
			return nil, fmt.Errorf("--device: %w", err)
		}
		if m, err = model.LoadFrozen(base, be); err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
		err = m.AttachLoRA(lr.cfg, uint64(seed))
	}
	if err != nil {
		return nil, err
	}
	if lr.adapter != "" {
		// The continued adapter keeps its factors; a --lora-dropout given
		// now applies from here on.
		if err := m.SetAdapterDropout(lr.cfg.Dropout); err != nil {
			return nil, err
		}
	}
	m.FreezeBase()
	m.Recompute = recompute
	return m, nil
}

// reload puts the factors of the adapter in dir into m (a partial --out of
// the same run being continued).
func (lr *loraRun) reload(dir string, m *model.Model) error {
	a, err := peft.Read(dir)
	if err != nil {
		return err
	}
	for _, name := range m.TrainableNames() {
		v, ok := a.Tensors[name]
		if !ok {
			return fmt.Errorf("%s: no tensor %s", dir, name)
		}
		if err := m.SetParam(name, v); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

var mergeCommand = &ucli.Command{
	Name:  "merge",
	Usage: "fold a peft LoRA adapter into its base and write a full Hugging Face checkpoint",
	Description: "Example:\n   mempo-update merge --model base/ --adapter lora-step1/ --out merged/\n\n" +
		"Every targeted weight becomes W + (lora_alpha/r)·B·A, as peft's merge_and_unload computes it (in float32);\n" +
		"the tokenizer files of --model are copied.",
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "model", Usage: "base model directory", Required: true},
		&ucli.StringFlag{Name: "adapter", Usage: "peft adapter directory", Required: true},
		&ucli.StringFlag{Name: "out", Usage: "model directory to write", Required: true},
		&ucli.StringFlag{Name: "dtype", Usage: "weight dtype: f32 or bf16 (default: the base's dtype)"},
	},
	Action: runMerge,
}

func init() { subcommands = append(subcommands, mergeCommand) }

func runMerge(c *ucli.Context) error {
	base := c.String("model")
	ck, err := checkpoint.Open(base)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	tensors, err := ck.LoadAll()
	if err != nil {
		ck.Close()
		return fmt.Errorf("--model: %w", err)
	}
	dtype := safetensors.F32
	if ck.DType("model.embed_tokens.weight") == safetensors.BF16 {
		dtype = safetensors.BF16
	}
	ck.Close()
	switch c.String("dtype") {
	case "":
	case "f32":
		dtype = safetensors.F32
	case "bf16":
		dtype = safetensors.BF16
	default:
		return fmt.Errorf("--dtype %q: want f32 or bf16", c.String("dtype"))
	}
	a, err := peft.Read(c.String("adapter"))
	if err != nil {
		return fmt.Errorf("--adapter: %w", err)
	}
	shapes := map[string][]int{}
	for _, s := range ck.Config.Tensors() {
		shapes[s.Name] = s.Shape
	}
	if err := a.Merge(tensors, ck.Config.NumLayers, shapes); err != nil {
		return fmt.Errorf("--adapter %s: %w", c.String("adapter"), err)
	}
	opts := checkpoint.SaveOptions{DType: dtype}
	if _, err := os.Stat(base + "/tokenizer.json"); err == nil {
		opts.TokenizerDir = base
	}
	if err := checkpoint.Save(c.String("out"), ck.Config, tensors, opts); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %s merged with %s (r = %d, %d modules a layer)\n", c.String("out"), base, c.String("adapter"), a.Config.R, len(a.Config.Targets))
	return nil
}
