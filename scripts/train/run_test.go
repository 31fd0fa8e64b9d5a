// Package train holds the test of scripts/train/run.sh, the MemPO training
// loop on a user's checkpoint and data.
package train

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

// qwenTokenizer is the real Qwen tokenizer fixture, or a skip.
func qwenTokenizer(t *testing.T, root string) string {
	for _, p := range []string{os.Getenv("QWEN_TOKENIZER"), filepath.Join(root, "testdata", "qwen3", "tokenizer.json")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	t.Skip("the Qwen tokenizer fixture is absent (make fixtures-tokenizer)")
	return ""
}

// TestShortTrain runs scripts/train/run.sh's small preset at its smallest (2
// iterations of 2 tasks × 2 samples, 2 evaluation tasks a set) through freshly
// built commands on a Search-R1 parquet whose questions live only in the
// prompt; kills it once it has finished a stage and checks that the rerun
// resumes after that stage; then reads back every file the script promises.
// It says nothing about learning (the model is random).
func TestShortTrain(t *testing.T) {
	testenv.NeedScript(t, "scripts/train/run.sh", "builds four commands and runs two training iterations")
	root := testenv.RepoRoot(t)
	shared := testenv.SharedData(t)
	tokPath := qwenTokenizer(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := commands(t)
	out := filepath.Join(tmp, "train")
	env := append(os.Environ(), "BIN="+bin, "OUT="+out, "SHARED="+shared, "TOKENIZER="+tokPath,
		"TRAIN="+filepath.Join(root, "testdata", "tasks", "searchr1-train.parquet"),
		"ITERS=2", "G=2", "TASKS_PER_ITER=2", "MAX_STEP_TOKENS=12", "EVAL_TASKS=2", "EVAL_EVERY=2",
		`EVAL_K=1 2`, "KEEP_CHECKPOINTS=1", "SEED=3")
	script := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "scripts/train/run.sh")
		cmd.Dir, cmd.Env = root, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}

	// A first run, killed (the whole process group) as soon as iteration 1's
	// rollout is marked done.
	var log1 strings.Builder
	first := script()
	first.Stdout, first.Stderr = &log1, &log1
	start := time.Now()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	marker := filepath.Join(out, "iter-1", ".rollout.done")
	killed := false
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("the first run ended before iteration 1's rollout was marked (%v):\n%s", err, log1.String())
		case <-time.After(50 * time.Millisecond):
			if _, err := os.Stat(marker); err == nil {
				syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
				<-exited
				killed = true
				break wait
			}
		}
	}
	if !killed {
		t.Fatal("not killed")
	}
	doneAtKill := map[string]bool{}
	for _, m := range []string{"iter-1/.rollout.done", "iter-1/.update.done"} {
		_, err := os.Stat(filepath.Join(out, m))
		doneAtKill[m] = err == nil
	}
	t.Logf("killed after %.1fs; markers %v", time.Since(start).Seconds(), doneAtKill)

	second := script()
	log2, err := second.CombinedOutput()
	if err != nil {
		t.Fatalf("the resumed run: %v\n%s", err, log2)
	}
	t.Logf("both runs: %.1fs", time.Since(start).Seconds())
	// The rerun skips what was marked: the data, iteration 0 and iteration
	// 1's rollout; it does the first stage that was not marked.
	for _, skipped := range []string{"== index", "== training tasks", "== evaluation sets", "== start", "iteration 0: eval", "iteration 1/2: rollout"} {
		if strings.Contains(string(log2), skipped) {
			t.Fatalf("the resumed run did %q again:\n%s", skipped, log2)
		}
	}
	if !doneAtKill["iter-1/.update.done"] && !strings.Contains(string(log2), "iteration 1/2: update") {
		t.Fatalf("the resumed run did not redo iteration 1's update:\n%s", log2)
	}
	if !strings.Contains(string(log2), "iteration 2/2: rollout") || !strings.Contains(string(log2), "2 iterations finished") {
		t.Fatalf("the resumed run did not finish:\n%s", log2)
	}

	// Training tasks: 2-objective tasks of the fixture's two sources.
	train, err := tasks.ReadTasks(filepath.Join(out, "data", "train-tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(train) != 24 {
		t.Fatalf("%d training tasks, want 24 (48 questions at k = 2)", len(train))
	}
	for _, tk := range train {
		if tk.K != 2 || (tk.DataSource != "nq" && tk.DataSource != "hotpotqa") {
			t.Fatalf("training task %+v", tk)
		}
	}
	// Checkpoints: iter-0 (the start) and the last one; iter-1's was removed
	// by KEEP_CHECKPOINTS=1.
	for _, dir := range []string{"iter-0/ckpt", "iter-2/ckpt", "final"} {
		ck, err := checkpoint.Open(filepath.Join(out, dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		ck.Close()
	}
	if _, err := os.Stat(filepath.Join(out, "iter-1", "ckpt")); err == nil {
		t.Fatal("iter-1/ckpt is still there with KEEP_CHECKPOINTS=1")
	}
	if _, err := os.Stat(filepath.Join(out, "iter-2", "ckpt", "optimizer.safetensors")); err != nil {
		t.Fatalf("the last checkpoint has no optimizer state: %v", err)
	}

	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.MaxTurns, cfg.MaxStepTokens = 4, 12 // the small preset's turns, this test's step budget
	ag, err := agent.New(cfg, rollout.Tok{T: tk})
	if err != nil {
		t.Fatal(err)
	}
	readRollouts := func(path string, want int, sampled bool) []records.Rollout {
		t.Helper()
		rows, err := records.ReadFile[records.Rollout](path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != want {
			t.Fatalf("%s: %d rows, want %d", path, len(rows), want)
		}
		for i := range rows {
			r := &rows[i]
			if err := ag.CheckRecord(r.Questions, rollout.StepRecords(r)); err != nil {
				t.Fatalf("%s row %d: %v", path, i+1, err)
			}
			if sampled != (r.Temperature == 1) {
				t.Fatalf("%s row %d: temperature %g", path, i+1, r.Temperature)
			}
			for _, st := range r.Steps {
				if len(st.Logprobs) != len(st.OutputIDs) || len(st.OutputIDs) > 12 {
					t.Fatalf("%s row %d: %d log-probs, %d output ids", path, i+1, len(st.Logprobs), len(st.OutputIDs))
				}
			}
		}
		return rows
	}
	evalSets := []string{"hotpotqa-k1", "hotpotqa-k2", "musique-k1", "nq-k1", "nq-k2", "popqa-k1", "triviaqa-k1"}
	for i := 0; i <= 2; i++ {
		dir := filepath.Join(out, "iter-"+string(rune('0'+i)))
		if i > 0 {
			lines, err := os.ReadFile(filepath.Join(dir, "tasks.jsonl"))
			if err != nil || strings.Count(string(lines), "\n") != 2 {
				t.Fatalf("iter-%d/tasks.jsonl: %v\n%s", i, err, lines)
			}
			rows := readRollouts(filepath.Join(dir, "rollouts.parquet"), 2*2, true)
			for _, r := range rows {
				if r.K != 2 || r.Keep != "1" {
					t.Fatalf("iter-%d rollouts: k %d keep %q", i, r.K, r.Keep)
				}
			}
			ms, err := records.ReadFile[records.Update](filepath.Join(dir, "metrics.jsonl"))
			if err != nil || len(ms) == 0 {
				t.Fatalf("iter-%d/metrics.jsonl: %d rows, %v", i, len(ms), err)
			}
			for _, m := range []string{".rollout.done", ".update.done"} {
				if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// EVAL_EVERY=2: iterations 0 and 2 are evaluated, 1 is not.
		if _, err := os.Stat(filepath.Join(dir, ".eval.done")); (err == nil) != (i != 1) {
			t.Fatalf("iter-%d/.eval.done: %v (EVAL_EVERY=2)", i, err)
		}
		if i == 1 {
			continue
		}
		for _, name := range evalSets {
			readRollouts(filepath.Join(dir, "eval", name+".parquet"), 2, false)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(out, "data", "eval")); len(ents) != len(evalSets)+2 { // + src/, .done
		t.Fatalf("data/eval holds %d entries, want %d sets (EVAL_K=1 2)", len(ents), len(evalSets))
	}

	// The report: every metric of every evaluated iteration, with intervals.
	scores, err := records.ReadFile[records.Score](filepath.Join(out, "report", "scores.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range scores {
		seen[s.Run+"/"+s.DataSource+"/"+s.Metric] = true
		if s.CILow > s.Value || s.CIHigh < s.Value {
			t.Fatalf("score %+v outside its interval", s)
		}
	}
	for _, run := range []string{"iter-0", "iter-2"} {
		for _, src := range []string{"nq", "triviaqa", "popqa", "hotpotqa/hotpot_qa", "musique"} {
			for _, m := range []string{"em", "f1", "turns", "total_tokens", "peak_tokens"} {
				if !seen[run+"/"+src+"/"+m] {
					raw, _ := json.Marshal(scores[:min(len(scores), 3)])
					t.Fatalf("report/scores.jsonl has no %s of %s on %s (first rows %s)", m, run, src, raw)
				}
			}
		}
	}
	table, err := os.ReadFile(filepath.Join(out, "report", "scores.md"))
	if err != nil || !strings.Contains(string(table), "| iter-2 |") || !strings.Contains(string(table), "k=2 F1") {
		t.Fatalf("report/scores.md: %v\n%s", err, table)
	}
	plots := []string{"report/f1_vs_k.png", "report/peak_tokens_vs_k.png", "report/train/reward.png", "report/train/peak_tokens_updates.png"}
	// The memory-reward curve has points only where a step wrote a <mem>
	// block (a random model rarely does): then it must be there, and
	// otherwise it is not drawn at all (never a flat 0).
	ms, err := records.ReadFile[records.Update](filepath.Join(out, "report", "train", "train.jsonl"))
	if err != nil || len(ms) != 4 {
		t.Fatalf("report/train/train.jsonl: %d rows (want 2 steps × 2 iterations), %v", len(ms), err)
	}
	hasRM := false
	for _, m := range ms {
		hasRM = hasRM || m.RewardMemMean != nil
	}
	if _, err := os.Stat(filepath.Join(out, "report/train/memory_reward.png")); (err == nil) != hasRM {
		t.Fatalf("memory_reward.png written: %v, R^M computed: %v", err == nil, hasRM)
	}
	if hasRM {
		plots = append(plots, "report/train/memory_reward.png")
	}
	if idx, err := os.ReadFile(filepath.Join(out, "report", "index.html")); err != nil || !strings.Contains(string(idx), `href="train/index.html"`) {
		t.Fatalf("report/index.html does not link the training report: %v", err)
	}
	for _, f := range plots {
		testenv.CheckPNG(t, filepath.Join(out, f))
	}
	tim, err := os.ReadFile(filepath.Join(out, "timings.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1\trollout\t", "1\tupdate\t", "2\trollout\t", "2\tupdate\t", "0\teval\t", "2\teval\t"} {
		if !strings.Contains(string(tim), want) {
			t.Fatalf("timings.tsv lacks %q:\n%s", want, tim)
		}
	}

	// A preset that does not exist is one line and exit status 2.
	bad := exec.CommandContext(ctx, "bash", "scripts/train/run.sh")
	bad.Dir, bad.Env = root, append(env, "PRESET=huge")
	msg, err := bad.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(msg), "PRESET=huge: want paper or small") {
		t.Fatalf("PRESET=huge: %v\n%s", err, msg)
	}
}
