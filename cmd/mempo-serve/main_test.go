package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/testenv"
)

// TestMain lets the test binary act as mempo-serve (testenv.CommandMain).
func TestMain(m *testing.M) { testenv.CommandMain(m, "mempo-serve", envconfig.ServeAsMain.Name, main) }

func command(args ...string) *exec.Cmd { return testenv.Command(envconfig.ServeAsMain.Name, args...) }

var addrRe = regexp.MustCompile(`on http://(\S+)`)

// startServing starts the command and reads its stderr up to the line that
// announces the address (addr is "" when it exits first); the process is
// killed when the test ends.
func startServing(t *testing.T, args ...string) (cmd *exec.Cmd, stderr io.Reader, addr string, lines []string) {
	t.Helper()
	cmd = command(args...)
	stderr, _ = cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
			return cmd, stderr, m[1], lines
		}
	}
	return cmd, stderr, "", lines
}

// The command serves an index it is given, answers /retrieve, and exits 0 on
// SIGTERM.
func TestServeAndSIGTERM(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "ix")
	if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: "../../testdata/retrieval/faiss/corpus.jsonl",
		Out: ix, Analyzer: retrieval.DefaultAnalyzer, FaissRead: "../../testdata/retrieval/faiss/hnsw32.index"}); err != nil {
		t.Fatal(err)
	}
	cmd, stderr, addr, lines := startServing(t, "--index", ix, "--addr", "127.0.0.1:0", "--topk", "2", "--faiss-param", "efSearch=64")
	if addr == "" {
		t.Fatalf("no address announced: %q", lines)
	}
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", strings.NewReader(`{"queries":["synthetic passage number 77"],"return_scores":true}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Result [][]struct {
			Document struct{ ID, Contents string }
			Score    float64
		}
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Result) != 1 || len(r.Result[0]) != 2 || r.Result[0][0].Document.ID != "77" {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr %s", err, rest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after SIGTERM")
	}
	if !bytes.Contains(rest, []byte("stopped")) {
		t.Fatalf("stderr after SIGTERM: %s", rest)
	}
}

// The file-in/file-out cases of testdata/cases: a missing or bad index or
// method is one stderr line and exit 1.
func TestCases(t *testing.T) { testenv.RunCases(t, envconfig.ServeAsMain.Name) }
