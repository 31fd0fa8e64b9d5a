// Command mempo-update takes GRPO/MemPO and SFT optimizer steps on rollouts and
// writes the next checkpoint.
package main

import "github.com/mempo/mempo/lib/cli"

func main() {
	app := cli.App("mempo-update", "GRPO with memory credit assignment, SFT, checkpoints and gradient shards",
		"mempo-update --model ckpt/ --ref sft/ --rollouts rollouts.parquet --out ckpt-next/")
	app.Action = cli.NotBuiltYet("mempo-update will read rollouts and a checkpoint and write the next checkpoint with optimizer state and metrics rows")
	cli.Main(app)
}
