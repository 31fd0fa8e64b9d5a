package fileio

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A .NAME.building-* directory no process holds (its builder was killed) is
// removed by the next TempDirBeside of NAME; one still held is left alone,
// and so are other names.
func TestTempDirBesideRemovesStale(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "index")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// A builder killed with kill -9: a child process makes and locks a
	// directory the way TempDirBeside does, then dies.
	dead := filepath.Join(parent, ".index.building-dead")
	if err := os.MkdirAll(filepath.Join(dead, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("flock", "--exclusive", dead, "true")
	if err := cmd.Run(); err != nil {
		t.Skipf("flock(1) not usable here: %v", err)
	}
	oldDir := filepath.Join(parent, "index.old-.index.building-dead2")
	keep := []string{filepath.Join(parent, "index.old-backup"), filepath.Join(parent, ".other.building-1")}
	for _, d := range append([]string{oldDir}, keep...) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	live, err := TempDirBeside(out) // held by this process
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveTempDir(live)
	if !strings.HasPrefix(filepath.Base(live), ".index.building-") {
		t.Fatalf("temp dir %s", live)
	}
	for _, gone := range []string{dead, oldDir} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", gone, err)
		}
	}
	second, err := TempDirBeside(out)
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveTempDir(second)
	for _, d := range append([]string{live}, keep...) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed while it should stay: %v", d, err)
		}
	}
	// Once swapped in, the lock is released.
	if err := ReplaceDir(second, out); err != nil {
		t.Fatal(err)
	}
	if _, held := building.Load(second); held {
		t.Error("ReplaceDir kept the lock of the directory it moved")
	}
}
