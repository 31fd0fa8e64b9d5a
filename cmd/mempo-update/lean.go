package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/update"
)

// The memory-lean full-parameter update's flags and steps (lib/update's
// lean.go and memory.go; docs/formats.md "8-bit optimizer state").

func leanKnob(c *ucli.Context) (bool, error) {
	lean, _, _, err := flags.Lean(c)
	return lean, err
}

// startLean is startState for a lean run (and the check that a state file
// is of the kind the run asked for).
func startLean(explicit, dir string, m *model.Model, lean bool) (*optim.State, *optim.State8, *update.RunState, error) {
	path := explicit
	if path == "" {
		p := filepath.Join(dir, update.OptimizerFile)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, nil, nil
			}
			return nil, nil, nil, err
		}
		path = p
	}
	meta, _, err := update.ReadOptimizerMeta(path)
	if err != nil {
		return nil, nil, nil, err
	}
	switch isLean := update.IsLeanOptimizer(meta); {
	case isLean && !lean:
		return nil, nil, nil, fmt.Errorf("%s: an 8-bit optimizer state (%s); resume it with --optim-state 8bit", path, optim.Format8)
	case !isLean && lean:
		return nil, nil, nil, fmt.Errorf("%s: an fp32 optimizer state; resume it with --optim-state fp32 (or start the 8-bit state afresh from a checkpoint without one)", path)
	case !isLean:
		st, rs, err := startState(path, dir, m)
		return st, nil, rs, err
	}
	st, rs, err := update.ReadOptimizer8(path)
	if err != nil {
		return nil, nil, nil, err
	}
	return nil, &st, &rs, nil
}

// checkMemory refuses, before anything is loaded, an update that the GPU
// cannot hold, naming the flags that would make it fit.
func checkMemory(c *ucli.Context, dir string, cfg update.Config, device string) error {
	if envconfig.SkipMemCheck.On() || !strings.HasPrefix(device, "cuda") && !(device == "" || device == "auto") {
		return nil
	}
	be, err := model.NewBackend(device)
	if err != nil {
		return fmt.Errorf("--device: %w", err)
	}
	cu, ok := be.(*model.CUDA)
	if !ok {
		return nil
	}
	mc, err := checkpoint.LoadConfig(dir)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	plan := update.EstimateMemory(mc, cfg.Lean, cu.BF16(), c.Bool("recompute"), cfg.MicroTokens)
	if err := plan.Fits(mc, cu.FreeBytes()); err != nil {
		return fmt.Errorf("--model %s: %w", dir, err)
	}
	return nil
}

// saveLean writes a lean run's checkpoint; iteration is the run state's
// count of finished updates, which --optimizer-every reads.
func (j *job) saveLean(t *update.Trainer, rs update.RunState, rows []records.Update, done bool) error {
	st, w, err := t.LeanCheckpoint()
	if err != nil {
		return err
	}
	_, place, every, err := flags.Lean(j.c)
	if err != nil {
		return err
	}
	// A partial run always keeps its state (it is continued, not redone).
	place.Drop = done && every > 1 && rs.Iteration%int64(every) != 0
	return update.SaveLeanCheckpoint(j.out, t.Model, w, j.modelD, st, rs, rows, place)
}

// printPeak prints the GPU memory high-water mark of the run.
func printPeak(c *ucli.Context, m *model.Model) {
	if cu, ok := m.Backend().(*model.CUDA); ok {
		_, total, _ := cu.Device().MemInfo()
		fmt.Fprintf(c.App.Writer, "peak GPU memory: %.2f GiB of %.2f GiB\n", float64(cu.PeakBytes())/(1<<30), float64(total)/(1<<30))
	}
}
