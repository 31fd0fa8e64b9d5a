package flags

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/model"
)

// Sampling is the group of how tokens are drawn (--temperature, --top-p,
// --top-k, --seed), shared by mempo-rollout and its generate subcommand,
// with model.DefaultSampling's defaults. seedUsage says what the seed seeds
// in that command. The token budget is not in the group: the two commands
// bound different things (one step of a trajectory, one generated row) under
// different flag names.
func Sampling(seedUsage string) []ucli.Flag {
	d := model.DefaultSampling()
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "temperature", Value: d.Temperature, Usage: "sampling temperature; 0 is greedy"},
		&ucli.Float64Flag{Name: "top-p", Value: d.TopP, Usage: "nucleus sampling mass (1: off)"},
		&ucli.IntFlag{Name: "top-k", Value: d.TopK, Usage: "keep the k most likely tokens (0: off)"},
		&ucli.Uint64Flag{Name: "seed", Value: 0, Usage: seedUsage},
	}
}

// ParseSampling reads and checks the Sampling group (the seed is read with
// c.Uint64("seed")).
func ParseSampling(c *ucli.Context) (model.SampleParams, error) {
	p := model.SampleParams{Temperature: c.Float64("temperature"), TopP: c.Float64("top-p"), TopK: c.Int("top-k")}
	switch {
	case p.Temperature < 0:
		return p, fmt.Errorf("--temperature: must not be negative")
	case p.TopP < 0 || p.TopP > 1:
		return p, fmt.Errorf("--top-p: must be in [0, 1]")
	case p.TopK < 0:
		return p, fmt.Errorf("--top-k: must not be negative")
	}
	return p, nil
}
