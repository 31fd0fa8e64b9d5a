package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/envconfig"
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

// MEMPO_CPUPROFILE: a gzip'd pprof profile where it names a file; one line
// and no profile where the file cannot be made.
func TestStartProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv(envconfig.CPUProfile.Name, path)
	var errs strings.Builder
	stop := startProfile("mempo-x", &errs)
	x := 0
	for i := 0; i < 1e6; i++ {
		x += i * i
	}
	_ = x
	stop()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b || errs.Len() != 0 {
		t.Fatalf("profile: %d bytes, err %v, stderr %q", len(b), err, errs.String())
	}
	t.Setenv(envconfig.CPUProfile.Name, filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	errs.Reset()
	startProfile("mempo-x", &errs)()
	if got := errs.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "mempo-x: MEMPO_CPUPROFILE: no CPU profile: ") {
		t.Fatalf("unwritable profile: stderr %q", got)
	}
}
