package train

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/testenv"
)

// The commands the loop's tests run, built once for the package (into a
// folder TestMain removes): each build of the four takes 10-20 s here.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(filepath.Dir(binDir))
	}
	os.Exit(code)
}

// commands builds mempo-index, -rollout, -update and -score (once) and
// returns their folder.
func commands(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "mempo-train-bin")
		if err != nil {
			buildErr = err
			return
		}
		binDir = filepath.Join(tmp, "bin")
		build := exec.Command("go", "build", "-o", binDir+"/",
			"./cmd/mempo-index", "./cmd/mempo-rollout", "./cmd/mempo-update", "./cmd/mempo-score")
		build.Dir = testenv.RepoRoot(t)
		buildOut, buildErr = build.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binDir
}
