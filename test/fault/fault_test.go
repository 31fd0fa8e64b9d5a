//go:build fault

// Package fault runs the fault table (cases/*.txtar, docs/RELIABILITY.md):
// each case damages inputs or interrupts a command, runs one command line
// and checks its exit status, its stderr line, that the files it names kept
// their checksums and that nothing was left behind.
//
//	make fault-test                         (builds bin/, runs every case)
//	go test -tags fault ./test/fault/ -bin /old/bin -run 'TestFaults/index-'
//
// The cases are run by lib/testenv's case runner (RunCaseDir; the format is
// documented in lib/testenv/cases.go), the one that runs the commands' own
// cases: setup, serve, run, exit, stderr, unchanged, absent, after, needs,
// cleanup, timeout. $FIX is the shared fixture (a short demo run: world
// index, checkpoints, rollouts, a HotpotQA index), read-only; $CASES is the
// cases directory; the commands under test and faultprobe are on $PATH.
package fault

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/testenv"
)

var (
	binFlag = flag.String("bin", "", "directory with the five commands (default: built from this tree)")
	fixFlag = flag.String("fixture", "", "the fixture directory, built there when missing and kept (default: a temporary one)")
)

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
	testenv.RunCaseDir(t, testenv.CaseOptions{Dir: "cases", Vars: map[string]string{"FIX": fixDir}})
}
