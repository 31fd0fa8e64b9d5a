// Command mempo-update takes GRPO/MemPO and SFT optimizer steps on rollouts and
// writes the next checkpoint.
//
//	mempo-update --model DIR --ref DIR --rollouts FILE... --out DIR   one MemPO update (update.go)
//	mempo-update sft --model DIR --data FILE... --out DIR             cold-start SFT (sft.go)
//	mempo-update grad --shard i/n ... --out FILE                      one shard's gradient (grad.go)
//	mempo-update apply --model DIR --grads FILE... --out DIR          sum shards, optimizer step (apply.go)
//	mempo-update init | inspect                                       model directories (init.go, inspect.go)
//
// The training logic lives in lib/update; this package parses flags, reads
// and writes files and reports bad input in one line.
package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// subcommands are registered by the init functions of the files beside this
// one, one file per subcommand.
var subcommands []*ucli.Command

func newApp() *ucli.App {
	app := cli.App("mempo-update", "GRPO with memory credit assignment, SFT, checkpoints and gradient shards",
		"mempo-update --model ckpt/ --ref sft/ --rollouts rollouts.parquet --out ckpt-next/ --metrics update.jsonl")
	app.Flags = updateFlags
	app.Action = runUpdate
	app.Commands = subcommands
	return app
}

func main() { cli.Main(newApp()) }
