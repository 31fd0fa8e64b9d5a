package train

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
)

// TestTrainingDoc runs every fenced sh block of docs/TRAINING.md, in order,
// as one bash script in the repository root: the paths of its first block
// point at small stand-ins (a 500-passage corpus, a FAISS Flat index of it
// written by mempo-index --encoder, the tiny BERT encoder fixture, a random
// tiny Qwen2 as "the SFT checkpoint", the prompt-only Search-R1 fixture as the
// training questions) and the loop's sizes are made small through the
// environment; the commands themselves are the page's.
func TestTrainingDoc(t *testing.T) {
	testenv.NeedScript(t, "docs/TRAINING.md's commands", "builds the commands and runs one training iteration through a served dense index", "curl", "make")
	root := testenv.RepoRoot(t)
	shared := testenv.SharedData(t)
	tokPath := qwenTokenizer(t, root)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "TRAINING.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 6 {
		t.Fatalf("docs/TRAINING.md has %d sh blocks, want at least 6", len(blocks))
	}
	var script strings.Builder
	// The trap must not fail once the page's own kill has stopped the
	// server: under set -e a failing last command of "a && kill" in an EXIT
	// trap makes the shell's status 1 (it raced with the server's exit).
	script.WriteString("set -euo pipefail\ntrap 'if [ -n \"${SERVE_PID:-}\" ]; then kill \"$SERVE_PID\" 2>/dev/null || true; fi' EXIT\n")
	for _, b := range blocks {
		script.WriteString(b[1])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	// The stand-ins, made with freshly built commands.
	bin := filepath.Join(tmp, "bin")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("go", "build", "-o", bin+"/", "./cmd/mempo-index", "./cmd/mempo-update")
	corpus := filepath.Join(root, "testdata", "retrieval", "faiss", "corpus.jsonl")
	encoder := filepath.Join(root, "testdata", "encoder", "model")
	run(filepath.Join(bin, "mempo-index"), "--corpus", corpus, "--encoder", encoder, "--out", filepath.Join(tmp, "e5-src"))
	sft := filepath.Join(tmp, "MemPO_Qwen2.5-SFT")
	run(filepath.Join(bin, "mempo-update"), "init", "--config", "tiny", "--tokenizer", tokPath, "--out", sft, "--seed", "5")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	work := filepath.Join(tmp, "work")
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(),
		"WORK="+work, "CORPUS="+corpus, "E5_INDEX="+filepath.Join(tmp, "e5-src", "dense.faiss"), "E5="+encoder,
		"SFT="+sft, "TRAIN_QA="+filepath.Join(root, "testdata", "tasks", "searchr1-train.parquet"), "QA="+shared,
		"PORT="+strconv.Itoa(port),
		"ITERS=1", "G=2", "TASKS_PER_ITER=2", "MAX_TURNS=2", "MAX_STEP_TOKENS=8", "EVAL_TASKS=1", "DEVICE=cpu")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/TRAINING.md's commands: %v\n%s", err, out)
	}
	t.Logf("docs/TRAINING.md's commands ran in %.1fs", time.Since(start).Seconds())

	// What the page says was made.
	for _, dir := range []string{"bm25", "e5"} {
		if _, err := os.Stat(filepath.Join(work, dir, "index.json")); err != nil {
			t.Fatalf("%s index: %v", dir, err)
		}
	}
	if !strings.Contains(string(out), `"contents"`) {
		t.Fatalf("the served dense index answered no passages:\n%s", out)
	}
	ck, err := checkpoint.Open(filepath.Join(work, "run", "final"))
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
	// The start links the checkpoint's files rather than copying them.
	if fi, err := os.Lstat(filepath.Join(work, "run", "iter-0", "ckpt", "model.safetensors")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("iter-0/ckpt/model.safetensors is not a link to MODEL's: %v", err)
	}
	// The paper preset with MODEL: K = 2 tasks, rollouts through the served
	// dense retriever (every search answered with passage ids).
	rows, err := records.ReadFile[records.Rollout](filepath.Join(work, "run", "iter-1", "rollouts.parquet"))
	if err != nil || len(rows) != 4 || rows[0].K != 2 {
		t.Fatalf("iter-1 rollouts: %d rows, %v", len(rows), err)
	}
	// SAVE_EVERY=1: the update wrote a resumable checkpoint after its first
	// of two steps and was run again to finish.
	if ulog, err := os.ReadFile(filepath.Join(work, "run", "iter-1", "update.log")); err != nil ||
		!strings.Contains(string(ulog), "after step 1 of 2; rerun the same command to continue") || !strings.Contains(string(ulog), "resuming at step 1 of 2") {
		t.Fatalf("iter-1/update.log (SAVE_EVERY=1): %v\n%s", err, ulog)
	}
	ents, _ := os.ReadDir(filepath.Join(work, "run", "iter-1", "eval"))
	if len(ents) != 9 {
		t.Fatalf("iter-1/eval holds %d files, want the 9 evaluation sets", len(ents))
	}
	if table, err := os.ReadFile(filepath.Join(work, "run", "report", "scores.md")); err != nil || !strings.Contains(string(table), "| iter-1 |") {
		t.Fatalf("report/scores.md: %v\n%s", err, table)
	}
	// The server was stopped by the page's kill.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Fatal("mempo-serve is still listening after the page's kill")
	}
}
