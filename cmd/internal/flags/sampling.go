package flags

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/model"
)

// TokenBudget is the Sampling group's bound on the tokens one generation
// draws. The two commands bound different things under different names, so
// each passes its own.
type TokenBudget struct {
	Name, Usage string
	// Default is the flag's value when not given; 0 makes the flag
	// required.
	Default int
	// Min is the least value accepted (0 or 1).
	Min int
}

// StepTokens is mempo-rollout's budget: one step of a trajectory,
// agent.Config's MaxStepTokens, with agent.DefaultConfig's default.
var StepTokens = TokenBudget{Name: "max-step-tokens", Usage: "generation budget of one step", Default: agent.DefaultConfig().MaxStepTokens, Min: 1}

// RowTokens is generate's budget: one generated row, always given.
var RowTokens = TokenBudget{Name: "max-tokens", Usage: "most tokens to generate per row"}

func (b TokenBudget) flag() ucli.Flag {
	return &ucli.IntFlag{Name: b.Name, Value: b.Default, Required: b.Default == 0, Usage: b.Usage}
}

// parse reads and checks the budget.
func (b TokenBudget) parse(c *ucli.Context) (int, error) {
	n := c.Int(b.Name)
	switch {
	case n >= b.Min:
		return n, nil
	case b.Min == 1:
		return n, fmt.Errorf("--%s: must be at least 1", b.Name)
	}
	return n, fmt.Errorf("--%s: must not be negative", b.Name)
}

// Sampling is the group of how many tokens are drawn and how (the budget,
// --temperature, --top-p, --top-k, --seed), shared by mempo-rollout and its
// generate subcommand, with model.DefaultSampling's defaults. budget is the
// command's token budget (StepTokens or RowTokens); seedUsage says what the
// seed seeds in that command.
func Sampling(budget TokenBudget, seedUsage string) []ucli.Flag {
	d := model.DefaultSampling()
	return []ucli.Flag{
		budget.flag(),
		&ucli.Float64Flag{Name: "temperature", Value: d.Temperature, Usage: "sampling temperature; 0 is greedy"},
		&ucli.Float64Flag{Name: "top-p", Value: d.TopP, Usage: "nucleus sampling mass (1: off)"},
		&ucli.IntFlag{Name: "top-k", Value: d.TopK, Usage: "keep the k most likely tokens (0: off)"},
		&ucli.Uint64Flag{Name: "seed", Value: 0, Usage: seedUsage},
	}
}

// ParseSampling reads and checks the Sampling group: the token budget, and
// the sampling parameters (the seed is read with c.Uint64("seed")).
func ParseSampling(c *ucli.Context, budget TokenBudget) (int, model.SampleParams, error) {
	n, err := budget.parse(c)
	if err != nil {
		return n, model.SampleParams{}, err
	}
	p, err := parseParams(c)
	return n, p, err
}

func parseParams(c *ucli.Context) (model.SampleParams, error) {
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
