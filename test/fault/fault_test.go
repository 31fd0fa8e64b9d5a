//go:build fault

// Package fault runs the fault table (cases/*.txt, docs/RELIABILITY.md): each
// case damages inputs or interrupts a command, runs one command line and
// checks its exit status, its stderr line, that the files it names kept
// their checksums and that nothing was left behind.
//
//	make fault-test                         (builds bin/, runs every case)
//	go test -tags fault ./test/fault/ -bin /old/bin -run 'TestFaults/index-'
//
// A case file is a txtar archive: the comment holds "key: value" lines, the
// files after it are written into the case's working directory.
//
//	# one line saying what the case does    (the first # line is its title)
//	setup: bash line run first, must succeed (repeatable)
//	serve: mempo-serve flags                 (started before run; $ADDR, $SERVE_PID)
//	run: the bash line under test
//	exit: its expected status
//	stderr: a regexp one stderr line must match (repeatable; "!" first: no line may)
//	stdout: a regexp one stdout line must match
//	keep: a path (file or directory) whose checksums must not change (repeatable)
//	absent: a glob that must match nothing afterwards (repeatable)
//	after: bash line run after, must succeed (repeatable)
//	timeout: seconds run may take (default 60)
//	needs: bash line; the case is skipped when it fails (e.g. root for a mount)
//	cleanup: bash line run at the end whatever happened (repeatable)
//
// $FIX is the shared fixture (a short demo run: world index, checkpoints,
// rollouts, a HotpotQA index), read-only; $CASES is the cases directory;
// the commands under test and faultprobe are on $PATH.
package fault

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
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
	"syscall"
	"testing"
	"time"
)

var (
	binFlag = flag.String("bin", "", "directory with the five commands (default: built from this tree)")
	fixFlag = flag.String("fixture", "", "the fixture directory, built there when missing and kept (default: a temporary one)")
)

type faultCase struct {
	name, title, run, serve    string
	setup, after, keep, absent []string
	needs, cleanup             []string
	stderr, notStderr, stdout  []*regexp.Regexp
	exit                       int
	timeout                    time.Duration
	files                      map[string][]byte
}

func parseCase(path string) (*faultCase, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &faultCase{name: strings.TrimSuffix(filepath.Base(path), ".txt"), exit: -1, timeout: 60 * time.Second, files: map[string][]byte{}}
	lines := strings.SplitAfter(string(raw), "\n")
	i := 0
	for ; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\n")
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			break
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			if c.title == "" {
				c.title = strings.TrimSpace(strings.TrimPrefix(l, "#"))
			}
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want key: value", path, i+1)
		}
		v = strings.TrimSpace(v)
		re := func() (*regexp.Regexp, error) { return regexp.Compile(strings.TrimPrefix(v, "!")) }
		switch k {
		case "setup":
			c.setup = append(c.setup, v)
		case "after":
			c.after = append(c.after, v)
		case "needs":
			c.needs = append(c.needs, v)
		case "cleanup":
			c.cleanup = append(c.cleanup, v)
		case "keep":
			c.keep = append(c.keep, v)
		case "absent":
			c.absent = append(c.absent, v)
		case "run":
			c.run = v
		case "serve":
			c.serve = v
		case "exit":
			if c.exit, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("%s:%d: exit: %v", path, i+1, err)
			}
		case "timeout":
			s, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: timeout: %v", path, i+1, err)
			}
			c.timeout = time.Duration(s) * time.Second
		case "stderr", "stdout":
			r, err := re()
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
			}
			switch {
			case k == "stdout":
				c.stdout = append(c.stdout, r)
			case strings.HasPrefix(v, "!"):
				c.notStderr = append(c.notStderr, r)
			default:
				c.stderr = append(c.stderr, r)
			}
		default:
			return nil, fmt.Errorf("%s:%d: unknown key %q", path, i+1, k)
		}
	}
	// txtar files: "-- name --" then the contents up to the next marker.
	name := ""
	var buf bytes.Buffer
	flush := func() {
		if name != "" {
			c.files[name] = append([]byte(nil), buf.Bytes()...)
		}
		buf.Reset()
	}
	for ; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\n")
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") && len(l) > 6 {
			flush()
			name = strings.TrimSpace(l[3 : len(l)-3])
			continue
		}
		buf.WriteString(lines[i])
	}
	flush()
	if c.run == "" || c.exit < 0 {
		return nil, fmt.Errorf("%s: a case needs run: and exit:", path)
	}
	return c, nil
}

// sums maps every file under the kept paths to its SHA-256.
func sums(dir string, paths []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range paths {
		root := filepath.Join(dir, p)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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

func bash(ctx context.Context, dir string, env []string, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\n"+line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

var (
	binDir, fixDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(setupAndRun(m))
}

func setupAndRun(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "mempo-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	root, _ := filepath.Abs("../..")
	binDir = *binFlag
	probeDir := filepath.Join(tmp, "probe")
	build := exec.Command("go", "build", "-o", probeDir+"/", "./test/fault/faultprobe")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building faultprobe:", err)
		return 1
	}
	if binDir == "" {
		binDir = filepath.Join(tmp, "bin")
		build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/...")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the commands:", err)
			return 1
		}
	}
	binDir, _ = filepath.Abs(binDir)
	os.Setenv("PATH", binDir+":"+probeDir+":"+os.Getenv("PATH"))
	fixDir = *fixFlag
	if fixDir == "" {
		fixDir = filepath.Join(tmp, "fixture")
	}
	if _, err := os.Stat(filepath.Join(fixDir, "hotpot-index", "index.json")); err != nil {
		cmd := exec.Command("bash", filepath.Join(root, "test/fault/fixture.sh"), fixDir)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "BIN="+binDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "fixture: %v\n%s", err, out)
			return 1
		}
	}
	fixDir, _ = filepath.Abs(fixDir)
	return m.Run()
}

func TestFaults(t *testing.T) {
	paths, _ := filepath.Glob("cases/*.txt")
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatal("no cases")
	}
	casesDir, _ := filepath.Abs("cases")
	for _, p := range paths {
		c, err := parseCase(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(c.name, func(t *testing.T) { runCase(t, c, casesDir) })
	}
}

func runCase(t *testing.T, c *faultCase, casesDir string) {
	work := t.TempDir()
	for name, data := range c.files {
		p := filepath.Join(work, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "FIX="+fixDir, "CASES="+casesDir, "WORK="+work)
	ctx := context.Background()
	for _, s := range c.needs {
		if out, err := bash(ctx, work, env, s).CombinedOutput(); err != nil {
			t.Skipf("needs %q: %v %s", s, err, out)
		}
	}
	defer func() {
		for _, s := range c.cleanup {
			bash(ctx, work, env, s).Run()
		}
	}()
	for _, s := range c.setup {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := bash(sctx, work, env, s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("setup %q: %v\n%s", s, err, out)
		}
	}
	if c.serve != "" {
		srv, addr, pid, logs := startServe(t, work, env, c.serve)
		defer srv()
		env = append(env, "ADDR="+addr, "SERVE_PID="+strconv.Itoa(pid))
		defer func() {
			if t.Failed() {
				t.Logf("mempo-serve stderr:\n%s", logs())
			}
		}()
	}
	before, err := sums(work, c.keep)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := bash(rctx, work, env, c.run)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
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
	t.Logf("run %.1fs: exit %d", time.Since(start).Seconds(), code)
	if out := strings.TrimSpace(stdout.String()); out != "" && len(out) < 2000 {
		t.Logf("stdout: %s", out)
	}
	report := func() string {
		return fmt.Sprintf("\n$ %s\nstdout:\n%s\nstderr:\n%s", c.run, tail(stdout.String()), tail(stderr.String()))
	}
	if code == -2 {
		t.Fatalf("still running after %v (want exit %d)%s", c.timeout, c.exit, report())
	}
	if code != c.exit {
		t.Errorf("exit %d, want %d%s", code, c.exit, report())
	}
	for _, re := range c.stderr {
		if !matchLine(re, stderr.String()) {
			t.Errorf("no stderr line matches %q%s", re, report())
		}
	}
	for _, re := range c.notStderr {
		if matchLine(re, stderr.String()) {
			t.Errorf("a stderr line matches %q%s", re, report())
		}
	}
	for _, re := range c.stdout {
		if !matchLine(re, stdout.String()) {
			t.Errorf("no stdout line matches %q%s", re, report())
		}
	}
	after, err := sums(work, c.keep)
	if err != nil {
		t.Errorf("kept paths: %v", err)
	}
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed (or went away): the command damaged an existing output", strings.TrimPrefix(p, work+"/"))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared inside a kept path", strings.TrimPrefix(p, work+"/"))
		}
	}
	for _, g := range c.absent {
		if m, _ := filepath.Glob(filepath.Join(work, g)); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
	for _, s := range c.after {
		cmd := bash(ctx, work, env, s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("after %q: %v\n%s", s, err, out)
		}
	}
}

func matchLine(re *regexp.Regexp, text string) bool {
	for _, l := range strings.Split(text, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

var servingLine = regexp.MustCompile(`on http://(\S+) `)

// startServe starts mempo-serve and waits for its "serving … on http://ADDR"
// line; the returned function stops it.
func startServe(t *testing.T, work string, env []string, args string) (stop func(), addr string, pid int, logs func() string) {
	cmd := bash(context.Background(), work, env, "exec "+args)
	pr, pw := io.Pipe()
	var buf safeBuffer
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
		t.Fatalf("mempo-serve exited before serving:\n%s", buf.String())
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("mempo-serve not serving after 30s:\n%s", buf.String())
	}
	return func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}, addr, cmd.Process.Pid, buf.String
}
