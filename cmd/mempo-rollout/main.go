// Command mempo-rollout runs the memory agent against a retriever and writes
// trajectories with their rewards.
//
// The root command is the rollout stage (rollout.go, over lib/rollout): G
// trajectories per task, continuous-batched, every step stored with the exact
// context ids it saw, its sampled ids and their log-probs, and each
// trajectory's R^T, EM, F1, token counts and per-step memory reward. A run
// is journaled in OUT.partial/ (one file per finished task) and a rerun of a
// killed run resumes from it. The subcommands (tasks, generate, tokenize,
// world, expert, import, and env from lib/cli) live in the files beside
// this one.
package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// subcommands are registered by the init functions of the files beside this
// one, one file per subcommand.
var subcommands []*ucli.Command

func newApp() *ucli.App {
	app := cli.App("mempo-rollout", "run the MemPO search agent and write trajectories with rewards",
		"mempo-rollout --model ckpt/ --tasks tasks.parquet --index index/ --group 16 --out rollouts.parquet\n"+
			"mempo-rollout --model ckpt/ --tasks tasks.parquet --retriever http://127.0.0.1:8000 --group 16 --keep all --out react.parquet --jsonl react.jsonl")
	app.Flags = rolloutFlags
	app.Action = runRollout
	app.Commands = subcommands
	return app
}

func main() { cli.Main(newApp()) }
