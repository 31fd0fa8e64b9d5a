package flags

// The optimizer-state group of mempo-update and sft: the memory-lean 8-bit
// state (lib/optim's AdamW8, lib/update's lean.go) and where it is kept.

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/update"
)

// LeanState is the optimizer-state group.
func LeanState() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "optim-state", Value: "fp32", Usage: "optimizer state: fp32 (AdamW moments and master weights in fp32: 16 B a parameter on the GPU, + a bf16 copy in cuda-bf16) or 8bit (8-bit blockwise moments, and with --device cuda-bf16 bf16 weights + 16-bit master remainders, kept in host memory: 8 B a parameter on the GPU; bf16 checkpoint)"},
		&ucli.StringFlag{Name: "optimizer-dir", Usage: "8bit: write the optimizer state into this `DIR` (e.g. /dev/shm/run) instead of --out; --out's optimizer.safetensors then names it"},
		&ucli.IntFlag{Name: "optimizer-every", Value: 1, Usage: "8bit: keep the optimizer state only every N-th iteration (the others keep only the bf16 weights; the next run starts AdamW afresh from them)"},
	}
}

// Lean parses the group: whether the state is 8-bit, and where it goes.
func Lean(c *ucli.Context) (bool, update.StatePlace, int, error) {
	place := update.StatePlace{Dir: c.String("optimizer-dir")}
	every := c.Int("optimizer-every")
	switch c.String("optim-state") {
	case "fp32":
		if c.IsSet("optimizer-dir") || c.IsSet("optimizer-every") {
			return false, place, every, fmt.Errorf("--optimizer-dir and --optimizer-every need --optim-state 8bit")
		}
		return false, place, every, nil
	case "8bit":
		if every < 1 {
			return false, place, every, fmt.Errorf("--optimizer-every must be ≥ 1")
		}
		return true, place, every, nil
	}
	return false, place, every, fmt.Errorf("--optim-state %q: want fp32 or 8bit", c.String("optim-state"))
}
