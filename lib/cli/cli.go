// Package cli holds the conventions every mempo command shares: urfave/cli apps
// with an example in --help, one clear error line with exit status 1, and
// progress lines that appear only when stderr is a terminal. The file
// conventions (atomic outputs, JSONL, input errors) are in lib/fileio.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/envconfig"
)

// Exit statuses shared by all commands.
const (
	ExitBadInput    = 1 // bad input, bad flags, failed I/O
	ExitNotBuiltYet = 2 // a command or subcommand that does not exist yet
)

// App builds a urfave/cli app with the project's help layout: the usage line,
// then an example block that shows a working invocation.
func App(name, usage, example string) *ucli.App {
	app := &ucli.App{
		Name:                   name,
		Usage:                  usage,
		Description:            "Example:\n   " + strings.ReplaceAll(strings.TrimSpace(example), "\n", "\n   "),
		UseShortOptionHandling: true,
		HideHelpCommand:        true,
		Version:                Version,
		ExitErrHandler:         func(*ucli.Context, error) {}, // Main reports errors itself
	}
	return app
}

// Version is stamped by the Makefile with -ldflags; "dev" otherwise.
var Version = "dev"

// Main runs app on os.Args and exits: status 0 on success, otherwise one line
// "name: message" on stderr and the status carried by the error (1 by default).
// Every command gets the env subcommand, which lists the MEMPO_* variables.
func Main(app *ucli.App) {
	app.Commands = append(app.Commands, EnvCommand())
	stop := startProfile(app.Name, os.Stderr)
	code := run(app, os.Args, os.Stderr)
	stop()
	os.Exit(code)
}

// startProfile starts the Go CPU profile MEMPO_CPUPROFILE names, if any, and
// returns what stops it; a profile that cannot start is one line on stderr,
// and the command runs without it.
func startProfile(name string, stderr io.Writer) (stop func()) {
	path := envconfig.CPUProfile.Get()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: no CPU profile: %v\n", name, envconfig.CPUProfile.Name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", name, envconfig.CPUProfile.Name, err)
		}
	}
}

// EnvCommand is the env subcommand every command has: the MEMPO_*
// environment variables, their values here and what each does.
func EnvCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "env",
		Usage: "list the MEMPO_* environment variables, their values here and what each does",
		Action: func(c *ucli.Context) error {
			_, err := io.WriteString(c.App.Writer, envconfig.Table())
			return err
		},
	}
}

func run(app *ucli.App, args []string, stderr io.Writer) int {
	guardOutputs(app)
	err := canonicalErr(app.Run(FlagsAnywhere(app, args)))
	if err == nil {
		return 0
	}
	code := ExitBadInput
	var ec ucli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	msg := strings.TrimSpace(err.Error())
	if msg != "" {
		if i := strings.IndexByte(msg, '\n'); i >= 0 && code != ExitNotBuiltYet {
			msg = msg[:i]
		}
		fmt.Fprintf(stderr, "%s: %s\n", app.Name, msg)
	}
	return code
}

// NotBuiltYet is the action of a command that is planned but not written: it
// says what the command will do and exits with status 2. It never fakes output.
func NotBuiltYet(what string) ucli.ActionFunc {
	return func(*ucli.Context) error {
		return ucli.Exit("not built yet: "+what, ExitNotBuiltYet)
	}
}
