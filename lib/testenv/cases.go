package testenv

// Command cases as data. RunCases runs every testdata/cases/*.txtar file of
// a command's package as one subtest: the test binary is run as the command
// (see CommandMain) in a fresh directory holding the case's files, and its
// exit status, stderr and stdout are checked. Adding a case needs no Go.
//
// A case is a txtar archive (the format of golang.org/x/tools/txtar): a
// comment, then files, each after a line "-- NAME --". The comment holds one
// directive a line; blank lines and lines starting with "#" are notes.
//
//	args ARG...        the command line after the command's name, split on
//	                   spaces; 'single' or "double" quotes keep spaces in an
//	                   argument. $WORK is the case's directory (also the
//	                   working directory) and $REPO the repository root.
//	env KEY=VALUE      set in the command's environment (repeatable).
//	exit N             the exit status wanted (default 0).
//	stderr TEXT        stderr contains TEXT; stderr /RE/ matches the regular
//	                   expression RE (repeatable).
//	!stderr TEXT       stderr does not contain TEXT (or /RE/).
//	stdout TEXT        the same for stdout; !stdout too.
//	stderr-lines N     stderr is exactly N lines (a failure's "one clear
//	                   line" is stderr-lines 1).
//	absent NAME        after the run NAME does not exist under $WORK (the
//	                   command wrote nothing there).
//	unchanged NAME     after the run the case's file NAME is byte for byte
//	                   what the archive holds (nothing already written was
//	                   damaged).
//
// Files are written under $WORK before the run ($WORK and $REPO are expanded
// in their text too), except the file named "stdout", which is not written:
// stdout must equal it exactly.
//
// For example, testdata/cases/bad-line.txtar:
//
//	# a malformed corpus line is named by file and line
//	args --corpus corpus.jsonl --out ix
//	exit 1
//	stderr-lines 1
//	stderr /corpus\.jsonl:2: /
//	absent ix
//	-- corpus.jsonl --
//	{"id":"0","contents":"a"}
//	{"id":
//
// The command's test file registers the runner once:
//
//	func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Archive is a parsed txtar file: its comment and its files in order.
type Archive struct {
	Comment string
	Files   []ArchiveFile
}

// ArchiveFile is one file of an Archive.
type ArchiveFile struct {
	Name string
	Data []byte
}

// ParseArchive parses the txtar format: a file starts at a line
// "-- NAME --" and runs to the next such line or the end; the text before
// the first is the comment.
func ParseArchive(data []byte) Archive {
	var a Archive
	var cur *ArchiveFile
	var buf bytes.Buffer
	flush := func() {
		if cur == nil {
			a.Comment = buf.String()
		} else {
			cur.Data = append([]byte(nil), buf.Bytes()...)
			a.Files = append(a.Files, *cur)
		}
		buf.Reset()
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		t := strings.TrimRight(string(line), "\r\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			cur = &ArchiveFile{Name: strings.TrimSpace(t[3 : len(t)-3])}
			continue
		}
		buf.Write(line)
	}
	flush()
	return a
}

// splitArgs splits a command line on spaces, keeping quoted spaces.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote", quote)
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// RunCases runs testdata/cases/*.txtar (see the format above) with the test
// binary as the command, env being the variable its CommandMain watches.
// It fails when there is no case.
func RunCases(t *testing.T, env string) {
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testenv: no testdata/cases/*.txtar (%v)", err)
	}
	repo := RepoRoot(t)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			runCase(t, env, repo, ParseArchive(raw))
		})
	}
}

// check is one stdout or stderr directive.
type check struct {
	stream string // "stdout" or "stderr"
	negate bool
	text   string
	re     *regexp.Regexp
}

func (c check) holds(s string) bool {
	ok := strings.Contains(s, c.text)
	if c.re != nil {
		ok = c.re.MatchString(s)
	}
	return ok != c.negate
}

func runCase(t *testing.T, env, repo string, a Archive) {
	work := t.TempDir()
	expand := func(s string) string {
		return strings.NewReplacer("$WORK", work, "$REPO", repo).Replace(s)
	}
	var (
		args, envs, absent, unchanged []string
		exit, lines                   = 0, -1
		checks                        []check
		stdout                        *string
	)
	for n, line := range strings.Split(a.Comment, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		bad := func(err error) { t.Fatalf("case line %d %q: %v", n+1, line, err) }
		switch verb {
		case "args":
			a, err := splitArgs(expand(rest))
			if err != nil {
				bad(err)
			}
			args = a
		case "env":
			envs = append(envs, expand(rest))
		case "exit", "stderr-lines":
			v, err := strconv.Atoi(rest)
			if err != nil {
				bad(err)
			}
			if verb == "exit" {
				exit = v
			} else {
				lines = v
			}
		case "stderr", "!stderr", "stdout", "!stdout":
			c := check{stream: strings.TrimPrefix(verb, "!"), negate: verb[0] == '!', text: expand(rest)}
			if len(rest) > 1 && rest[0] == '/' && rest[len(rest)-1] == '/' {
				re, err := regexp.Compile(expand(rest[1 : len(rest)-1]))
				if err != nil {
					bad(err)
				}
				c.re = re
			}
			checks = append(checks, c)
		case "absent":
			absent = append(absent, rest)
		case "unchanged":
			unchanged = append(unchanged, rest)
		default:
			bad(errors.New("unknown directive"))
		}
	}
	want := map[string][]byte{}
	for _, f := range a.Files {
		data := []byte(expand(string(f.Data)))
		if f.Name == "stdout" {
			s := string(data)
			stdout = &s
			continue
		}
		want[f.Name] = data
		p := filepath.Join(work, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cmd := Command(env, args...)
	cmd.Dir = work
	cmd.Env = append(cmd.Env, envs...)
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	gotOut, gotErr := outBuf.String(), errBuf.String()
	if code != exit {
		t.Errorf("exit %d, want %d", code, exit)
	}
	if lines >= 0 {
		if n := strings.Count(gotErr, "\n") + btoi(gotErr != "" && !strings.HasSuffix(gotErr, "\n")); n != lines {
			t.Errorf("stderr has %d lines, want %d", n, lines)
		}
	}
	for _, c := range checks {
		s := gotErr
		if c.stream == "stdout" {
			s = gotOut
		}
		if !c.holds(s) {
			what := fmt.Sprintf("%q", c.text)
			if c.re != nil {
				what = "/" + c.re.String() + "/"
			}
			t.Errorf("%s: want%s %s", c.stream, map[bool]string{true: " no", false: ""}[c.negate], what)
		}
	}
	if stdout != nil && gotOut != *stdout {
		t.Errorf("stdout differs from the case's stdout file:\n%s\nwant:\n%s", gotOut, *stdout)
	}
	for _, name := range absent {
		if _, err := os.Stat(filepath.Join(work, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the run (%v)", name, err)
		}
	}
	for _, name := range unchanged {
		data, err := os.ReadFile(filepath.Join(work, name))
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("unchanged %s: the case has no such file", name)
		case err != nil:
			t.Errorf("unchanged %s: %v", name, err)
		case !bytes.Equal(data, w):
			t.Errorf("%s changed by the run", name)
		}
	}
	if t.Failed() {
		t.Logf("args %q\nstderr:\n%s\nstdout:\n%s", args, gotErr, gotOut)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
