package testenv

import (
	"os/exec"
	"testing"
)

// NeedScript skips a test that runs a shell script end to end: under -short
// (costly says what the run does, for the skip's reason) or when one of the
// tools it needs (bash at least) is not installed.
func NeedScript(t testing.TB, script, costly string, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + costly)
	}
	for _, tool := range append([]string{"bash"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is needed to run %s", tool, script)
		}
	}
}
