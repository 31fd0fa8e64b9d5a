package testenv

// Command cases as data: one runner for the commands' cases
// (cmd/<cmd>/testdata/cases/*.txtar, RunCases, in every `go test`) and for
// the fault table (test/fault/cases/*.txtar, RunCaseDir, `make fault-test`).
// Each case file is one subtest: its files are written to a fresh
// directory, $WORK, the command runs there, and its exit status, stderr,
// stdout and files are checked. Adding a case needs no Go.
//
// A case is a txtar archive (the format of golang.org/x/tools/txtar): a
// comment, then files, each after a line "-- NAME --". The comment holds one
// directive a line; blank lines and lines starting with "#" are notes.
//
// The command under test, one of:
//
//	args ARG...        the test binary run as the command (CommandMain) with
//	                   this command line, split on spaces; 'single' or
//	                   "double" quotes keep spaces in an argument.
//	run LINE           a bash line (set -e), in its own process group, killed
//	                   at the timeout; the commands under test are on $PATH
//	                   (the fault table puts them there).
//
// Around it (bash lines, run in $WORK; each must succeed):
//
//	needs LINE         the case is skipped when LINE fails (e.g. root for a
//	                   mount).
//	setup LINE         run first, in order (repeatable); two minutes each.
//	serve LINE         started in the background before the command, which
//	                   waits for its stderr line "… on http://ADDR …" and
//	                   sees $ADDR and $SERVE_PID; killed at the end.
//	after LINE         run after the checks (repeatable).
//	cleanup LINE       run at the end whatever happened (repeatable).
//	env KEY=VALUE      set in the environment of all of them (repeatable).
//	timeout SECONDS    how long the command may take (default 60).
//
// What is checked:
//
//	exit N             the exit status wanted (default 0).
//	stderr TEXT        stderr contains TEXT; stderr /RE/: some stderr line
//	                   matches the regular expression RE (repeatable).
//	!stderr TEXT       stderr does not contain TEXT (or no line matches /RE/).
//	stdout TEXT        the same for stdout; !stdout too.
//	stderr-lines N     stderr is exactly N lines (a failure's "one clear
//	                   line" is stderr-lines 1).
//	absent GLOB        after the run nothing under $WORK matches GLOB (the
//	                   command left nothing there).
//	unchanged PATH     PATH under $WORK, a file or a directory tree, is byte
//	                   for byte what it was just before the command ran, and
//	                   nothing appeared inside it (nothing already written
//	                   was damaged).
//
// $WORK, $REPO (the repository root), $CASES (the cases' directory) and the
// runner's own variables (CaseOptions.Vars, e.g. the fault table's $FIX)
// are expanded in args, env, the checks' text and the files' contents, and
// set in the environment of the bash lines. The case's files are written
// under $WORK before anything runs, except the file named "stdout", which is
// not written: stdout must equal it exactly.
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
// A command's test file registers the runner once:
//
//	func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// CaseOptions says where a set of cases is and how its commands run.
type CaseOptions struct {
	// Dir holds the cases, *.txtar (default testdata/cases).
	Dir string
	// Env is the variable the test binary's CommandMain watches, for the
	// args directive; without it a case must use run.
	Env string
	// Vars are more $NAMEs for the cases (expanded, and set for bash lines).
	Vars map[string]string
}

// RunCases runs testdata/cases/*.txtar (see the format above) with the test
// binary as the command, env being the variable its CommandMain watches.
// It fails when there is no case.
func RunCases(t *testing.T, env string) { RunCaseDir(t, CaseOptions{Env: env}) }

// RunCaseDir runs every *.txtar case of o.Dir as a subtest named after its
// file, in name order. It fails when there is no case.
func RunCaseDir(t *testing.T, o CaseOptions) {
	if o.Dir == "" {
		o.Dir = filepath.Join("testdata", "cases")
	}
	files, err := filepath.Glob(filepath.Join(o.Dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testenv: no %s/*.txtar (%v)", o.Dir, err)
	}
	sort.Strings(files)
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"REPO": RepoRoot(t), "CASES": dir}
	for k, v := range o.Vars {
		vars[k] = v
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseCase(ParseArchive(raw))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			c.run(t, o.Env, vars)
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
		ok = false
		for _, l := range strings.Split(s, "\n") {
			if c.re.MatchString(l) {
				ok = true
				break
			}
		}
	}
	return ok != c.negate
}

// caseSpec is a parsed case; its text is expanded when it runs.
type caseSpec struct {
	args, bash                   string // args or run
	hasArgs                      bool
	envs, absent, unchanged      []string
	needs, setup, after, cleanup []string
	serve                        string
	exit, lines                  int
	timeout                      time.Duration
	checks                       []rawCheck
	files                        []ArchiveFile
}

type rawCheck struct {
	verb, rest string
}

func parseCase(a Archive) (*caseSpec, error) {
	c := &caseSpec{lines: -1, timeout: 60 * time.Second, files: a.Files}
	for n, line := range strings.Split(a.Comment, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		bad := func(err error) error { return fmt.Errorf("case line %d %q: %v", n+1, line, err) }
		switch verb {
		case "args":
			c.args, c.hasArgs = rest, true
		case "run":
			c.bash = rest
		case "env":
			c.envs = append(c.envs, rest)
		case "needs":
			c.needs = append(c.needs, rest)
		case "setup":
			c.setup = append(c.setup, rest)
		case "after":
			c.after = append(c.after, rest)
		case "cleanup":
			c.cleanup = append(c.cleanup, rest)
		case "serve":
			c.serve = rest
		case "exit", "stderr-lines", "timeout":
			v, err := strconv.Atoi(rest)
			if err != nil {
				return nil, bad(err)
			}
			switch verb {
			case "exit":
				c.exit = v
			case "stderr-lines":
				c.lines = v
			default:
				c.timeout = time.Duration(v) * time.Second
			}
		case "stderr", "!stderr", "stdout", "!stdout":
			if len(rest) > 1 && rest[0] == '/' && rest[len(rest)-1] == '/' {
				if _, err := regexp.Compile(rest[1 : len(rest)-1]); err != nil {
					return nil, bad(err)
				}
			}
			c.checks = append(c.checks, rawCheck{verb, rest})
		case "absent":
			c.absent = append(c.absent, rest)
		case "unchanged":
			c.unchanged = append(c.unchanged, rest)
		default:
			return nil, bad(errors.New("unknown directive"))
		}
	}
	if c.hasArgs == (c.bash != "") {
		return nil, errors.New("a case has one command: args or run")
	}
	return c, nil
}

func (c *caseSpec) run(t *testing.T, asMain string, vars map[string]string) {
	work := t.TempDir()
	all := map[string]string{"WORK": work}
	for k, v := range vars {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	// Longest names first: $FIXTURE is not $FIX followed by TURE.
	sort.Slice(names, func(i, j int) bool {
		return len(names[i]) > len(names[j]) || len(names[i]) == len(names[j]) && names[i] < names[j]
	})
	var pairs, environ []string
	for _, k := range names {
		pairs = append(pairs, "$"+k, all[k])
		environ = append(environ, k+"="+all[k])
	}
	expand := strings.NewReplacer(pairs...).Replace

	var stdout *string
	for _, f := range c.files {
		data := []byte(expand(string(f.Data)))
		if f.Name == "stdout" {
			s := string(data)
			stdout = &s
			continue
		}
		p := filepath.Join(work, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), environ...)
	for _, e := range c.envs {
		env = append(env, expand(e))
	}
	ctx := context.Background()
	for _, s := range c.needs {
		if out, err := bashCmd(ctx, work, env, s).CombinedOutput(); err != nil {
			t.Skipf("needs %q: %v %s", s, err, out)
		}
	}
	defer func() {
		for _, s := range c.cleanup {
			bashCmd(ctx, work, env, s).Run()
		}
	}()
	for _, s := range c.setup {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := bashCmd(sctx, work, env, s).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("setup %q: %v\n%s", s, err, out)
		}
	}
	if c.serve != "" {
		stop, addr, pid, logs := startServe(t, work, env, c.serve)
		defer stop()
		env = append(env, "ADDR="+addr, "SERVE_PID="+strconv.Itoa(pid))
		defer func() {
			if t.Failed() {
				t.Logf("serve stderr:\n%s", logs())
			}
		}()
	}
	before, err := sums(work, c.unchanged)
	if err != nil {
		t.Fatalf("unchanged: %v", err)
	}

	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var cmd *exec.Cmd
	what := "$ " + c.bash
	if c.hasArgs {
		if asMain == "" {
			t.Fatal("args: these cases run no command binary (use run)")
		}
		args, err := splitArgs(expand(c.args))
		if err != nil {
			t.Fatalf("args: %v", err)
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.CommandContext(rctx, exe, args...)
		cmd.Dir, cmd.Env = work, append(env, asMain+"=1")
		what = fmt.Sprintf("args %q", args)
	} else {
		cmd = bashCmd(rctx, work, env, c.bash)
	}
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	start := time.Now()
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case rctx.Err() != nil:
		code = -2
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	gotOut, gotErr := outBuf.String(), errBuf.String()
	t.Logf("run %.1fs: exit %d", time.Since(start).Seconds(), code)
	if out := strings.TrimSpace(gotOut); out != "" && len(out) < 2000 {
		t.Logf("stdout: %s", out)
	}
	defer func() {
		if t.Failed() {
			t.Logf("%s\nstderr:\n%s\nstdout:\n%s", what, tail(gotErr), tail(gotOut))
		}
	}()
	if code == -2 {
		t.Fatalf("still running after %v (want exit %d)", c.timeout, c.exit)
	}
	if code != c.exit {
		t.Errorf("exit %d, want %d", code, c.exit)
	}
	if c.lines >= 0 {
		if n := strings.Count(gotErr, "\n") + btoi(gotErr != "" && !strings.HasSuffix(gotErr, "\n")); n != c.lines {
			t.Errorf("stderr has %d lines, want %d", n, c.lines)
		}
	}
	for _, rc := range c.checks {
		ck := check{stream: strings.TrimPrefix(rc.verb, "!"), negate: rc.verb[0] == '!', text: expand(rc.rest)}
		if r := rc.rest; len(r) > 1 && r[0] == '/' && r[len(r)-1] == '/' {
			ck.re = regexp.MustCompile(expand(r[1 : len(r)-1]))
		}
		s := gotErr
		if ck.stream == "stdout" {
			s = gotOut
		}
		if !ck.holds(s) {
			w := fmt.Sprintf("%q", ck.text)
			if ck.re != nil {
				w = "a line matching /" + ck.re.String() + "/"
			}
			t.Errorf("%s: want%s %s", ck.stream, map[bool]string{true: " no", false: ""}[ck.negate], w)
		}
	}
	if stdout != nil && gotOut != *stdout {
		t.Errorf("stdout differs from the case's stdout file:\n%s\nwant:\n%s", gotOut, *stdout)
	}
	after, err := sums(work, c.unchanged)
	if err != nil {
		t.Errorf("unchanged: %v", err)
	}
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed (or went away): the command damaged an existing output", strings.TrimPrefix(p, work+"/"))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared inside an unchanged path", strings.TrimPrefix(p, work+"/"))
		}
	}
	for _, g := range c.absent {
		if m, _ := filepath.Glob(filepath.Join(work, g)); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
	for _, s := range c.after {
		if out, err := bashCmd(ctx, work, env, s).CombinedOutput(); err != nil {
			t.Errorf("after %q: %v\n%s", s, err, out)
		}
	}
}

// bashCmd is a bash line in its own process group, the whole group killed
// when ctx ends.
func bashCmd(ctx context.Context, dir string, env []string, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\n"+line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// sums maps every file under the paths to its SHA-256 (directories to
// "dir").
func sums(dir string, paths []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(dir, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				out[path] = "dir"
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[path] = fmt.Sprintf("%x", sha256.Sum256(raw))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

var servingLine = regexp.MustCompile(`on http://(\S+) `)

// startServe starts a server's bash line and waits for its "… on
// http://ADDR …" stderr line; stop kills its process group.
func startServe(t *testing.T, work string, env []string, line string) (stop func(), addr string, pid int, logs func() string) {
	cmd := bashCmd(context.Background(), work, env, "exec "+line)
	pr, pw := io.Pipe()
	var buf syncBuffer
	cmd.Stderr = io.MultiWriter(pw, &buf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	waited := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(waited) }()
	select {
	case addr = <-found:
	case <-waited:
		t.Fatalf("serve exited before serving:\n%s", buf.String())
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("serve not serving after 30s:\n%s", buf.String())
	}
	return func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}, addr, cmd.Process.Pid, buf.String
}

// syncBuffer is a bytes.Buffer for writers on several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
