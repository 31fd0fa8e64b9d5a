package cli

import (
	"fmt"
	"regexp"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// FlagsAnywhere reorders a command line so that flags may follow file
// arguments, as in `mempo-score a.parquet --out s.parquet`: urfave/cli (like
// Go's flag package) stops at the first argument that is not a flag, so for
// the (sub)command the line selects, its flags and their values are moved
// before its other arguments. A bare "--" ends the flags: what follows stays
// in place, arguments all ("-" alone is an argument: stdin). Flags of the
// root command stay before the subcommand's name, where urfave reads them.
func FlagsAnywhere(app *ucli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	out := []string{args[0]}
	flags, cmds := app.Flags, app.Commands
	rest := args[1:]
	for {
		// Leading flags of this level, then maybe a subcommand name.
		i := 0
		for i < len(rest) && isFlag(rest[i]) {
			i += flagWidth(flags, rest, i)
		}
		i = min(i, len(rest))
		if i < len(rest) && rest[i] != "--" {
			if sub := findCommand(cmds, rest[i]); sub != nil {
				out = append(out, rest[:i+1]...)
				flags, cmds, rest = sub.Flags, sub.Subcommands, rest[i+1:]
				continue
			}
		}
		break
	}
	var fl, pos []string
	for i := 0; i < len(rest); {
		a := rest[i]
		switch {
		case a == "--":
			pos = append(pos, rest[i:]...)
			i = len(rest)
		case isFlag(a):
			w := min(flagWidth(flags, rest, i), len(rest)-i)
			fl = append(fl, rest[i:i+w]...)
			i += w
		default:
			pos = append(pos, a)
			i++
		}
	}
	return append(append(out, fl...), pos...)
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// flagWidth is how many arguments the flag at rest[i] takes up: 1 for a
// boolean flag, a help flag or --name=value, 2 for a flag with a value.
func flagWidth(flags []ucli.Flag, rest []string, i int) int {
	name := strings.TrimLeft(rest[i], "-")
	if strings.Contains(name, "=") || name == "h" || name == "help" || name == "v" || name == "version" {
		return 1
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				if _, ok := f.(*ucli.BoolFlag); ok {
					return 1
				}
				return 2
			}
		}
	}
	return 1 // unknown: urfave reports it
}

func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// Require is the one check for flags a command cannot run without; its
// message is the same in every command: "missing required flag --out" or
// "missing required flags --corpus, --out".
func Require(c *ucli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, "--"+n)
		} else if v, ok := c.Value(n).(string); ok && v == "" {
			missing = append(missing, "--"+n)
		}
	}
	return MissingFlags(missing...)
}

// MissingFlags is Require's error for flags already found missing (nil for
// none), for checks that depend on other flags ("--ref when --kl-coef is not
// 0": MissingFlags("--ref") wrapped with the reason).
func MissingFlags(flags ...string) error {
	switch len(flags) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("missing required flag %s", flags[0])
	}
	return fmt.Errorf("missing required flags %s", strings.Join(flags, ", "))
}

// urfaveRequired is urfave/cli's own message for flags declared Required.
var urfaveRequired = regexp.MustCompile(`^Required flags? "([^"]*)" not set$`)

// canonicalErr rewords urfave/cli's missing-flag error as MissingFlags.
func canonicalErr(err error) error {
	if err == nil {
		return nil
	}
	m := urfaveRequired.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	var flags []string
	for _, n := range strings.Split(m[1], ", ") {
		flags = append(flags, "--"+strings.TrimSpace(n))
	}
	return MissingFlags(flags...)
}
