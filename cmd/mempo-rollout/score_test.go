package main

import (
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/rollout"
)

// The R^M flags reach the agent's config and the run's settings, each
// setting only when it differs from the default (so that journals written
// before the flag existed still resume).
func TestScoreFlags(t *testing.T) {
	run := func(args ...string) (agent.Config, rollout.Settings, error) {
		var cfg agent.Config
		set := rollout.Settings{}
		app := &ucli.App{Flags: scoreFlags, Action: func(c *ucli.Context) error {
			cfg = agent.DefaultConfig()
			if err := parseScore(c, &cfg); err != nil {
				return err
			}
			scoreSettings(c, cfg, set)
			return nil
		}}
		err := app.Run(append([]string{"x"}, args...))
		return cfg, set, err
	}
	cfg, set, err := run()
	if err != nil || cfg.ScoreLayout != agent.ScoreInTurn || len(set) != 0 {
		t.Fatalf("defaults: layout %v, settings %v, %v", cfg.ScoreLayout, set, err)
	}
	cfg, set, err = run("--score-layout", "next-step", "--score-gold-numbered", "--score-lead-in", "<answer>")
	if err != nil || cfg.ScoreLayout != agent.ScoreNextStep || !cfg.ScoreGoldNumbered || cfg.ScoreLeadIn != "<answer>" {
		t.Fatalf("next-step: %+v, %v", cfg, err)
	}
	if set["score_layout"] != "next-step" || set["score_gold_numbered"] != "true" || set["score_lead_in"] != `"<answer>"` {
		t.Fatalf("next-step settings %v", set)
	}
	if _, _, err := run("--score-layout", "after"); err == nil || !strings.HasPrefix(err.Error(), "--score-layout: ") {
		t.Fatalf("bad layout: %v", err)
	}
}
