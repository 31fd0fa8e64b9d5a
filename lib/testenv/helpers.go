package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

// ReadJSONL reads a JSONL file into one map per line, failing the test on a
// line that is not a JSON object.
func ReadJSONL(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v in %q", path, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// RunApp runs args (without the program name) through an app named name
// that has only the given subcommands, in process: the error comes back
// instead of an exit, for tests of one subcommand.
func RunApp(name string, cmds []*ucli.Command, args ...string) error {
	app := cli.App(name, "test", name)
	app.Commands = cmds
	return app.Run(append([]string{name}, args...))
}
