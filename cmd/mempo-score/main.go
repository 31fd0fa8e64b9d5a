// Command mempo-score turns rollouts and update metrics into evaluation tables
// and plots.
package main

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// subcommands are registered by the init functions of the files beside this
// one, one file per subcommand.
var subcommands []*ucli.Command

func main() {
	app := cli.App("mempo-score", "EM/F1 tables and plots from rollouts and update metrics",
		"mempo-score --rollouts rollouts.parquet --out scores.parquet --report report/")
	app.Action = cli.NotBuiltYet("mempo-score will compute EM, F1, token and memory metrics with confidence intervals and write scores.parquet, a markdown table and plots")
	app.Commands = subcommands
	cli.Main(app)
}
