package conventions

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/testenv"
)

var commands = []string{"mempo-index", "mempo-serve", "mempo-rollout", "mempo-update", "mempo-score"}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build compiles the five commands once for the tests of this file.
func build(t *testing.T) (bin, root string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the five commands")
	}
	root = testenv.RepoRoot(t)
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "mempo-conventions-"); buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + string(os.PathSeparator)}
		for _, c := range commands {
			args = append(args, "./cmd/"+c)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir, root
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// run runs a command with stdin empty in a scratch directory, for at most
// 30 s, and returns its exit status and combined output.
func run(t *testing.T, dir, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q: still running after 30 s", filepath.Base(bin), args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// subcommands lists the names in a --help page's COMMANDS section.
func subcommands(help string) []string {
	var subs []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(l, "COMMANDS:"):
			in = true
		case in && strings.HasPrefix(l, "   ") && !strings.HasPrefix(l, "    "):
			subs = append(subs, strings.Fields(l)[0])
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, " "):
			in = false
		}
	}
	return subs
}

var (
	// A flag line of --help: the names, an optional placeholder (value, an
	// upper-case word, or value [ --name value ] for repeatable flags), two
	// or more spaces, the description.
	flagLine = regexp.MustCompile(`^   (--[a-z0-9-]+)((?:, -{1,2}[a-z0-9-]+)*)(.*?)  +(\S.*)$`)
	goodHole = regexp.MustCompile(`^( (value|[A-Z][A-Z0-9_=]*)( \[ --[a-z0-9-]+ (value|[A-Z][A-Z0-9_=]*) \])?)?$`)
	defaults = regexp.MustCompile(` \(default: .*\)$`)
	// The one wording for a missing required flag.
	missingOK = regexp.MustCompile(`^mempo-[a-z]+: missing required flags? --[a-z0-9-]+(, --[a-z0-9-]+)*( \(.*\))?$`)
)

// TestHelpAndRequiredFlags goes through every command and subcommand: --help
// exits 0; every flag's placeholder is "value" or an upper-case word (a
// back-quoted phrase in a description turns into a garbled placeholder);
// no two flags of one command share a description; no flag is offered whose
// only legal value is its default (--entropy-coef); and run bare, a command
// that needs a flag says so in the one wording.
func TestHelpAndRequiredFlags(t *testing.T) {
	bin, _ := build(t)
	scratch := t.TempDir()
	checked, required := 0, 0
	for _, c := range commands {
		exe := filepath.Join(bin, c)
		code, help := run(t, scratch, exe, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", c, code, help)
		}
		paths := [][]string{nil}
		for _, s := range subcommands(help) {
			if s != "help" {
				paths = append(paths, []string{s})
			}
		}
		for _, p := range paths {
			name := strings.Join(append([]string{c}, p...), " ")
			code, help := run(t, scratch, exe, append(p, "--help")...)
			if code != 0 {
				t.Errorf("%s --help: exit %d\n%s", name, code, help)
				continue
			}
			seen := map[string]string{}
			for _, l := range strings.Split(help, "\n") {
				m := flagLine.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				checked++
				flag, hole, usage := m[1], m[3], defaults.ReplaceAllString(m[4], "")
				if !goodHole.MatchString(hole) {
					t.Errorf("%s: %s shows the placeholder %q (a back-quoted phrase in its description?)", name, flag, strings.TrimSpace(hole))
				}
				if prev, dup := seen[usage]; dup && flag != "--help" {
					t.Errorf("%s: %s and %s have the same description %q", name, prev, flag, usage)
				}
				seen[usage] = flag
				if flag == "--entropy-coef" {
					t.Errorf("%s offers --entropy-coef, whose only legal value is 0", name)
				}
			}
			if p != nil && p[0] == "env" {
				continue
			}
			_, out := run(t, scratch, exe, p...)
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.Contains(strings.ToLower(l), "required") {
					required++
					if !missingOK.MatchString(l) {
						t.Errorf("%s run bare: %q; want \"%s: missing required flag --NAME\"", name, l, c)
					}
				}
			}
		}
	}
	if checked < 100 || required < 8 {
		t.Errorf("checked %d flag lines and %d missing-flag messages: the help layout changed?", checked, required)
	}
	t.Logf("%d flag lines, %d missing-flag messages checked", checked, required)
}

// TestFlagsAfterFiles: every command that takes file arguments reads flags
// given after them too.
func TestFlagsAfterFiles(t *testing.T) {
	bin, root := build(t)
	dir := t.TempDir()
	shared := testenv.SharedData(t)
	cases := []struct {
		name string
		args []string
		out  string
	}{
		{"mempo-score", []string{filepath.Join(root, "testdata", "score", "rollouts-go.jsonl"), "--out", "s.jsonl", "--bootstrap", "10"}, "s.jsonl"},
		{"mempo-rollout", []string{"tasks", filepath.Join(shared, "nq", "test-1000.jsonl"), "--k", "2", "--out", "t.jsonl"}, "t.jsonl"},
		{"mempo-index", []string{"corpus", filepath.Join(shared, "hotpotqa", "dev-with-paragraphs-a.jsonl"), "--from", "hotpotqa", "--out", "c.jsonl"}, "c.jsonl"},
	}
	for _, c := range cases {
		code, out := run(t, dir, filepath.Join(bin, c.name), c.args...)
		if code != 0 {
			t.Errorf("%s %q: exit %d\n%s", c.name, c.args, code, out)
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, c.out)); err != nil || fi.Size() == 0 {
			t.Errorf("%s %q: %s not written (%v)", c.name, c.args, c.out, err)
		}
	}
	// inspect takes a directory argument and a flag after it.
	code, out := run(t, dir, filepath.Join(bin, "mempo-update"), "init", "--config", "tiny", "--tokenizer",
		filepath.Join(root, "testdata", "qwen3", "tokenizer.json"), "--out", "m")
	if code != 0 {
		t.Skipf("mempo-update init (for inspect): %s", out)
	}
	if code, out := run(t, dir, filepath.Join(bin, "mempo-update"), "inspect", "m", "--json"); code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("mempo-update inspect m --json: exit %d\n%s", code, out)
	}
}
