// Command mempo-update takes GRPO/MemPO and SFT optimizer steps on rollouts and
// writes the next checkpoint.
package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// subcommands are registered by the init functions of the files beside this
// one, one file per subcommand.
var subcommands []*ucli.Command

func main() {
	app := cli.App("mempo-update", "GRPO with memory credit assignment, SFT, checkpoints and gradient shards",
		"mempo-update --model ckpt/ --ref sft/ --rollouts rollouts.parquet --out ckpt-next/")
	app.Action = cli.NotBuiltYet("mempo-update will read rollouts and a checkpoint and write the next checkpoint with optimizer state and metrics rows")
	app.Commands = subcommands
	cli.Main(app)
}
