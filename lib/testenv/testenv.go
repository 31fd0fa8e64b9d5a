// Package testenv finds what the tests of every package share: the
// repository root and the real QA data in ../shared/data beside it. A test
// that needs the shared data skips, saying where it looked, when it is absent.
//
// It also runs the commands' tests as the commands themselves: CommandMain,
// Command and RunCommand run the test binary as the command, and RunCases
// runs a command's file-in/file-out cases, testdata/cases/*.txtar (command
// line, input files, wanted exit status, stderr and stdout; the format is
// documented in cases.go), so a case is added without writing Go;
// RunCaseDir runs the fault table's cases (test/fault) with the same runner.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot walks up from the test's working directory to the one holding
// go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// SharedData is ../shared/data beside the repository root, or a skip when it
// is not there (a fresh clone without the project's shared folder).
func SharedData(t testing.TB) string {
	t.Helper()
	d := filepath.Join(RepoRoot(t), "..", "shared", "data")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("real QA data not present at %s (README.md, set-up): %v", d, err)
	}
	return d
}
