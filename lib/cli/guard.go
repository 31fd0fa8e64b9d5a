package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/fileio"
)

// Flags that name what a command writes; every other path flag it reads.
// --metrics is an output of mempo-update and an input of mempo-score.
var outputFlags = map[string]bool{"out": true, "jsonl": true, "report": true, "golden": true, "tb": true, "embeddings-out": true, "metrics": true,
	"answer-rows": true}

// Flags that name a file or directory a command reads.
var inputFlags = map[string]bool{"model": true, "ref": true, "rollouts": true, "tasks": true, "index": true, "corpus": true,
	"embeddings": true, "faiss-read": true, "data": true, "in": true, "config": true, "tokenizer": true, "optimizer": true,
	"grads": true, "encoder": true, "gpu-search": true, "score-model": true}

// guardOutputs wraps the action of the app and of every command so that,
// before anything runs, an output that is an input (or a directory holding
// one) is refused: fileio.CheckOutputs over the path flags the user set and
// the positional arguments (inputs, except "--out X" given after them).
func guardOutputs(app *ucli.App) {
	metricsIn := app.Name == "mempo-score"
	wrap := func(a ucli.ActionFunc) ucli.ActionFunc {
		if a == nil {
			return nil
		}
		return func(c *ucli.Context) error {
			var ins, outs []fileio.Named
			add := func(name string, vals ...string) {
				for _, v := range vals {
					switch {
					case outputFlags[name] && !(name == "metrics" && metricsIn):
						outs = append(outs, fileio.Named{Flag: name, Path: v, Replaces: name == "out"})
					case inputFlags[name] || name == "metrics":
						ins = append(ins, fileio.Named{Flag: name, Path: v})
					}
				}
			}
			flags := app.Flags
			if c.Command != nil && len(c.Command.Flags) > 0 {
				flags = c.Command.Flags
			}
			for _, f := range flags {
				name := f.Names()[0]
				if !c.IsSet(name) {
					continue
				}
				switch f.(type) {
				case *ucli.StringFlag, *ucli.PathFlag:
					add(name, c.String(name))
				case *ucli.StringSliceFlag:
					add(name, c.StringSlice(name)...)
				}
			}
			args := c.Args().Slice()
			for i := 0; i < len(args); i++ {
				a := args[i]
				if !strings.HasPrefix(a, "--") {
					ins = append(ins, fileio.Named{Path: a})
					continue
				}
				name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !hasVal && i+1 < len(args) {
					i++
					val = args[i]
				}
				add(name, val)
			}
			if err := fileio.CheckOutputs(ins, outs); err != nil {
				return err
			}
			return a(c)
		}
	}
	var walk func(cs []*ucli.Command)
	walk = func(cs []*ucli.Command) {
		for _, cmd := range cs {
			cmd.Action = wrap(cmd.Action)
			walk(cmd.Subcommands)
		}
	}
	app.Action = wrap(app.Action)
	walk(app.Commands)
}
