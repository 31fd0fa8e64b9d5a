package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tokenizer"
)

// protocolAgent is the set-up expert and import share: the Agent flags over
// --tokenizer, so that their rows have the contexts mempo-rollout builds
// under the same flags. score also reads scoreFlags (the expert's
// --answer-rows are R^M's scoring sequences).
func protocolAgent(c *ucli.Context, score bool) (*agent.Agent, rollout.Tok, error) {
	cfg, err := flags.ParseAgent(c)
	if err != nil {
		return nil, rollout.Tok{}, err
	}
	if score {
		if err := parseScore(c, &cfg); err != nil {
			return nil, rollout.Tok{}, err
		}
	}
	tk, err := tokenizer.Load(c.String("tokenizer"))
	if err != nil {
		return nil, rollout.Tok{}, err
	}
	tok := rollout.Tok{T: tk}
	ag, err := agent.New(cfg, tok)
	return ag, tok, err
}
