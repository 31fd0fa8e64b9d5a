package cli

import (
	"bytes"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/fileio"
)

func TestRunErrorIsOneLine(t *testing.T) {
	app := App("mempo-x", "test", "mempo-x --in a.jsonl")
	app.Action = func(*ucli.Context) error {
		return fileio.BadInput("a.jsonl", 7, "question", "must be a string\nsecond line")
	}
	var stderr bytes.Buffer
	if code := run(app, []string{"mempo-x"}, &stderr); code != ExitBadInput {
		t.Fatalf("exit %d, want %d", code, ExitBadInput)
	}
	want := "mempo-x: a.jsonl: row 7: field \"question\": must be a string\n"
	if stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}

func TestNotBuiltYetExits2(t *testing.T) {
	app := App("mempo-x", "test", "mempo-x")
	app.Action = NotBuiltYet("the thing")
	var stderr bytes.Buffer
	if code := run(app, []string{"mempo-x"}, &stderr); code != ExitNotBuiltYet {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "not built yet: the thing") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

func TestEnvCommand(t *testing.T) {
	app := App("mempo-x", "test", "mempo-x")
	app.Commands = append(app.Commands, EnvCommand())
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run([]string{"mempo-x", "env"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "MEMPO_CUDA_LIB_DIR") || !strings.Contains(out.String(), "MEMPO_HOST_OPTIMIZER") {
		t.Errorf("env:\n%s", out.String())
	}
}
