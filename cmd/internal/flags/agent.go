package flags

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/agent"
)

// Agent is the protocol group shared by mempo-rollout and its expert
// subcommand, with agent.DefaultConfig's defaults: both must render the
// same contexts, so that SFT trains on what rollouts will show.
func Agent() []ucli.Flag {
	d := agent.DefaultConfig()
	return []ucli.Flag{
		&ucli.StringFlag{Name: "keep", Value: d.Keep.String(), Usage: "previous steps kept in the context: 1 (MemPO), K, or all (full history)"},
		&ucli.IntFlag{Name: "max-turns", Value: d.MaxTurns, Usage: "steps a trajectory may take"},
		&ucli.IntFlag{Name: "obs-tokens", Value: d.ObsMaxTokens, Usage: "cap on the ids of one observation, tags kept (0: none)"},
		&ucli.IntFlag{Name: "topk", Value: d.TopK, Usage: "passages per search"},
		&ucli.StringFlag{Name: "tool-tag", Value: d.ToolTag, Usage: "search action tag: search or tool_call"},
		&ucli.BoolFlag{Name: "hint", Value: d.TurnsHint, Usage: "show the turns left inside every observation (--hint=false: off)"},
		&ucli.BoolFlag{Name: "chat", Value: d.Chat, Usage: "ChatML turns (instruct checkpoints); --chat=false renders raw text (base checkpoints)"},
	}
}

// ParseAgent reads the Agent group into a config that starts from
// agent.DefaultConfig.
func ParseAgent(c *ucli.Context) (agent.Config, error) {
	cfg := agent.DefaultConfig()
	keep, err := agent.ParseKeep(c.String("keep"))
	if err != nil {
		return cfg, fmt.Errorf("--keep: %w", err)
	}
	cfg.Keep, cfg.MaxTurns, cfg.TopK, cfg.ToolTag = keep, c.Int("max-turns"), c.Int("topk"), c.String("tool-tag")
	cfg.ObsMaxTokens, cfg.TurnsHint, cfg.Chat = c.Int("obs-tokens"), c.Bool("hint"), c.Bool("chat")
	return cfg, nil
}
