package testenv

import (
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/tbevent"
)

// EventFile reads the one TensorBoard event file a command wrote to dir
// (its --tb directory) and says which file it was; none or several fail the
// test.
func EventFile(t testing.TB, dir string) ([]tbevent.Event, string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v", files)
	}
	evs, err := tbevent.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return evs, files[0]
}
