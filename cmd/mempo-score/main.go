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
	cli.Main(newApp())
}

func newApp() *ucli.App {
	app := cli.App("mempo-score", "EM/F1 tables and plots from rollouts and update metrics",
		"mempo-score --rollouts mempo.parquet --rollouts grpo.parquet --metrics mempo-metrics.parquet --metrics grpo-metrics.parquet \\\n"+
			"    --out scores.parquet --report report/")
	app.Flags = scoreFlags
	app.Action = scoreAction
	app.DisableSliceFlagSeparator = true // file names may contain commas
	app.Commands = subcommands
	return app
}
