// Command mempo-rollout runs the memory agent against a retriever and writes
// trajectories with their rewards.
package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// subcommands are registered by the init functions of the files beside this
// one, one file per subcommand.
var subcommands []*ucli.Command

func main() {
	app := cli.App("mempo-rollout", "run the MemPO search agent and write trajectories with rewards",
		"mempo-rollout --model ckpt/ --tasks tasks.parquet --index index/ --group 16 --out rollouts.parquet")
	app.Action = cli.NotBuiltYet("mempo-rollout will read tasks and a checkpoint, run G agent rollouts per task with <mem> context folding, and write rollouts.parquet")
	app.Commands = subcommands
	cli.Main(app)
}
