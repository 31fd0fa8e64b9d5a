package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// CommandMain is the TestMain of a command's tests: it lets the test binary
// act as the command itself, so the tests run the real command (flag
// parsing, exit status, stderr) without a separate build. With the
// environment variable env set to "1" it runs main with os.Args[0] = name
// and exits 0 (main exits itself on an error); otherwise it runs the tests,
// then the after functions (removing shared fixtures).
func CommandMain(m *testing.M, name, env string, main func(), after ...func()) {
	if os.Getenv(env) == "1" {
		os.Args = append([]string{name}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// Command is the test binary run as the command (see CommandMain) with args.
func Command(env string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env+"=1")
	return cmd
}

// RunCommand runs the command (see Command) and returns its exit status and
// its stdout and stderr together.
func RunCommand(t testing.TB, env string, args ...string) (int, string) {
	t.Helper()
	cmd := Command(env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}
