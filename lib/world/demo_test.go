package world_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestShortDemo runs scripts/demo/run.sh in its SHORT mode (every stage of
// `make demo`, on a handful of tasks) through freshly built commands, then
// reads back every file the stages wrote and checks that it is well formed:
// rows parse and validate, stored contexts are exactly the protocol's,
// checkpoints open, scores and plots are there, the summary has its tables.
// It says nothing about learning; `make demo-check` does.
func TestShortDemo(t *testing.T) {
	testenv.NeedScript(t, "scripts/demo/run.sh", "the demo builds four commands and trains for a few seconds")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/",
		"./cmd/mempo-index", "./cmd/mempo-rollout", "./cmd/mempo-update", "./cmd/mempo-score")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built the commands in %.1fs", time.Since(start).Seconds())
	out := filepath.Join(tmp, "demo")
	start = time.Now()
	cmd := exec.CommandContext(ctx, "bash", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "BIN="+bin, "OUT="+out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/demo/run.sh: %v\n%s", err, log)
	}
	t.Logf("short demo ran in %.1fs", time.Since(start).Seconds())

	tk, err := tokenizer.Load(filepath.Join(root, "data", "world", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok := rollout.Tok{T: tk}
	agentFor := func(keep string) *agent.Agent {
		cfg := agent.DefaultConfig()
		k, err := agent.ParseKeep(keep)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keep = k
		a, err := agent.New(cfg, tok)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// readRollouts reads a rollouts file (a path under out, or absolute) and
	// checks every row's contexts against the protocol under the row's own
	// keep setting.
	readRollouts := func(name string, wantRows int) []records.Rollout {
		t.Helper()
		if !filepath.IsAbs(name) {
			name = filepath.Join(out, name)
		}
		rows, err := records.ReadFile[records.Rollout](name)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != wantRows {
			t.Fatalf("%s: %d rows, want %d", name, len(rows), wantRows)
		}
		for i := range rows {
			r := &rows[i]
			if len(r.Steps) == 0 {
				t.Fatalf("%s row %d: no steps", name, i+1)
			}
			if err := agentFor(r.Keep).CheckRecord(r.Questions, rollout.StepRecords(r)); err != nil {
				t.Fatalf("%s row %d (keep %s): %v", name, i+1, r.Keep, err)
			}
		}
		return rows
	}

	// Expert demonstrations: protocol-perfect and right, half of them from
	// the world and half from its fact-shuffled variant 1 (SHORT sets
	// VARIANTS=2), read against the variant's own index.
	for _, name := range []string{"demos.parquet", "demos-react.parquet", "demos-v1.parquet", "demos-react-v1.parquet"} {
		for _, r := range readRollouts(name, 4) {
			if v1 := strings.Contains(r.TaskID, "v1/"); v1 != strings.Contains(name, "-v1") {
				t.Fatalf("%s: task %s", name, r.TaskID)
			}
			if r.RewardTask != 1 || !r.FormatOK {
				t.Fatalf("%s: demonstration of %s has reward %g, format %v", name, r.TaskID, r.RewardTask, r.FormatOK)
			}
			if want := map[bool]string{false: "1", true: "all"}[strings.Contains(name, "react")]; r.Keep != want {
				t.Fatalf("%s: keep %q, want %q", name, r.Keep, want)
			}
		}
	}
	// Checkpoints: complete Hugging Face directories.
	for _, dir := range []string{"init", "sft", "sft-react", "mempo/iter1", "grpo/iter1", "mempo/final"} {
		ck, err := checkpoint.Open(filepath.Join(out, dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		ck.Close()
		for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
			if _, err := os.Stat(filepath.Join(out, dir, f)); err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
		}
	}
	// RL rollouts: G samples per task, log-probs for the update, memory
	// reward terms only where MemPO asked for them.
	memScored, memCurve := false, false // a rollout step with R^M; an update row with mean R^M
	for _, v := range []string{"mempo", "grpo"} {
		rows := readRollouts(v+"/rollouts-1.parquet", 2*2)
		for _, r := range rows {
			for _, st := range r.Steps {
				if len(st.Logprobs) != len(st.OutputIDs) {
					t.Fatalf("%s rollouts: %d log-probs for %d output ids", v, len(st.Logprobs), len(st.OutputIDs))
				}
				if v == "grpo" && st.RMem != nil {
					t.Fatalf("grpo rollouts carry a memory reward")
				}
				if v == "mempo" && st.MemStart >= 0 && st.RMem == nil {
					t.Fatalf("mempo rollouts: a step with <mem> has no memory reward")
				}
				if st.RMem != nil {
					memScored = true
				}
			}
		}
		ms, err := records.ReadFile[records.Update](filepath.Join(out, v, v+"-train.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("%s: no update metrics", v)
		}
		for _, m := range ms {
			if m.RewardMemMean != nil {
				memCurve = true
			}
		}
	}
	for _, name := range []string{"sft-metrics.jsonl", "sft-react-metrics.jsonl"} {
		if ms, err := records.ReadFile[records.Update](filepath.Join(out, name)); err != nil || len(ms) == 0 {
			t.Fatalf("%s: %d rows, %v", name, len(ms), err)
		}
	}
	// Evaluation rollouts and scores.
	for _, run := range []string{"sft", "mempo", "grpo", "react"} {
		rows := readRollouts("eval/"+run+"-k2.parquet", 2)
		wantKeep := "1"
		if run == "react" {
			wantKeep = "all"
		}
		if rows[0].Keep != wantKeep || rows[0].Temperature != 0 {
			t.Fatalf("eval %s: keep %q temperature %g", run, rows[0].Keep, rows[0].Temperature)
		}
	}
	scores, err := records.ReadFile[records.Score](filepath.Join(out, "scores.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range scores {
		seen[s.Run+"/"+s.Metric] = true
	}
	for _, e := range []string{"expert", "expert-react"} {
		for _, r := range readRollouts("eval/"+e+"-k2.parquet", 2) {
			if r.RewardTask != 1 {
				t.Fatalf("eval/%s-k2: the expert failed %s", e, r.TaskID)
			}
		}
	}
	for _, run := range []string{"sft", "mempo", "grpo", "react", "expert", "expert-react"} {
		for _, m := range []string{"all_correct", "f1", "peak_tokens"} {
			if !seen[run+"/"+m] {
				t.Fatalf("scores.jsonl has no %s of run %s", m, run)
			}
		}
	}
	plots := []string{"report/f1_vs_k.png", "report/peak_tokens_vs_k.png", "report/train/reward.png", "report/index.html", "report/train/index.html"}
	// The memory-reward curve has points only where an update saw a <mem>
	// block (the short run's barely trained policy may write none): then it
	// must be drawn, and otherwise it is not drawn at all (never a flat 0).
	if memScored != memCurve {
		t.Fatalf("rollouts with a memory reward: %v, update rows with one: %v", memScored, memCurve)
	}
	if _, err := os.Stat(filepath.Join(out, "report/train/memory_reward.png")); (err == nil) != memCurve {
		t.Fatalf("memory_reward.png written: %v, R^M computed: %v", err == nil, memCurve)
	}
	if memCurve {
		plots = append(plots, "report/train/memory_reward.png")
	}
	for _, f := range plots {
		if strings.HasSuffix(f, ".html") {
			if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || !strings.Contains(string(b), "<img src=") {
				t.Fatalf("%s: no figures listed (%v)", f, err)
			}
			continue
		}
		testenv.CheckPNG(t, filepath.Join(out, f))
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | ", "SFT (before RL)", "MemPO-RL (after)", "Loops", "keep all / keep 1 (expert)"} {
		if !strings.Contains(string(sum), want) {
			t.Fatalf("summary.md lacks %q:\n%s", want, sum)
		}
	}
	if !strings.Contains(string(log), "demo finished in") {
		t.Fatalf("the script did not report its end:\n%s", log)
	}

	// FROM_SFT reuses the cold start: no demonstrations, no SFT, the same
	// sft/ weights, and the rest of the loop. Its evaluation asks for more
	// test tasks than the world's file holds (32): they are drawn for the
	// same world, the world's own first. Its RL runs with another RL_SEED.
	out2 := filepath.Join(tmp, "rl-only")
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "BIN="+bin, "OUT="+out2, "FROM_SFT="+out, "SHORT_EVAL_TASKS=34", "RL_SEED=2")
	if log, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("FROM_SFT run: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "stages 3–5 skipped") || strings.Contains(string(log), "== expert demonstrations") {
		t.Fatalf("FROM_SFT run did not skip the cold start:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(out2, "demos.parquet")); err == nil {
		t.Fatal("FROM_SFT run wrote demonstrations")
	}
	for _, f := range []string{"sft/model.safetensors", "summary.md", "mempo/final/config.json"} {
		if _, err := os.Stat(filepath.Join(out2, f)); err != nil {
			t.Fatalf("FROM_SFT run: %v", err)
		}
	}
	test2, err := os.ReadFile(filepath.Join(root, "data", "world", "test-k2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	evalTasks, err := os.ReadFile(filepath.Join(out2, "eval", "test-k2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(evalTasks), "\n"); n != 34 || !strings.HasPrefix(string(evalTasks), string(test2)) {
		t.Fatalf("SHORT_EVAL_TASKS=34: %d evaluation tasks, the world's 32 first: %v", n, strings.HasPrefix(string(evalTasks), string(test2)))
	}
	a, _ := os.ReadFile(filepath.Join(out, "sft", "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(out2, "sft", "model.safetensors"))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("FROM_SFT run's sft/ differs from the run it names")
	}
	// EVAL_ONLY evaluates that run's checkpoints again, on 36 tasks now,
	// the models EVAL_MODELS names only: no training, the weights untouched,
	// the first 34 trajectories those of the first evaluation (greedy), and
	// the scores of those models and the expert's.
	before, err := records.ReadFile[records.Rollout](filepath.Join(out2, "eval", "mempo-k2.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	finalBefore, _ := os.ReadFile(filepath.Join(out2, "mempo", "final", "model.safetensors"))
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "BIN="+bin, "OUT="+out2, "EVAL_ONLY=1", "SHORT_EVAL_TASKS=36", "EVAL_MODELS=mempo grpo")
	if log, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("EVAL_ONLY run: %v\n%s", err, log)
	}
	if strings.Contains(string(log), "iteration") || strings.Contains(string(log), "eval sft") || !strings.Contains(string(log), "eval grpo k=2") {
		t.Fatalf("EVAL_ONLY=1 EVAL_MODELS=\"mempo grpo\" trained or evaluated another model:\n%s", log)
	}
	if finalAfter, _ := os.ReadFile(filepath.Join(out2, "mempo", "final", "model.safetensors")); len(finalBefore) == 0 || string(finalAfter) != string(finalBefore) {
		t.Fatal("EVAL_ONLY run changed mempo/final")
	}
	after := readRollouts(filepath.Join(out2, "eval", "mempo-k2.parquet"), 36)
	// The ids, not the log-probs: another batch is other sums' last bits.
	ids := func(r *records.Rollout) string {
		var b strings.Builder
		for _, st := range r.Steps {
			fmt.Fprint(&b, records.IDs(st.ContextIDs), records.IDs(st.OutputIDs), "|")
		}
		return b.String()
	}
	for i := range before {
		if after[i].TaskID != before[i].TaskID || ids(&after[i]) != ids(&before[i]) {
			t.Fatalf("EVAL_ONLY: trajectory %d (%s) differs from the first evaluation's (%s)", i+1, after[i].TaskID, before[i].TaskID)
		}
	}
	scores2, err := records.ReadFile[records.Score](filepath.Join(out2, "scores.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	runs2 := map[string]bool{}
	for _, s := range scores2 {
		runs2[s.Run] = true
	}
	if !runs2["mempo"] || !runs2["grpo"] || !runs2["expert"] || runs2["sft"] || runs2["react"] {
		t.Fatalf("EVAL_ONLY scores: runs %v, want mempo, grpo and the experts", runs2)
	}
	// Without RL_K the RL tasks are the world's train-rl-k2.jsonl, in order.
	rl2, err := os.ReadFile(filepath.Join(root, "data", "world", "train-rl-k2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out2, "mempo", "tasks-1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.SplitAfter(string(rl2), "\n"); string(got) != lines[0]+lines[1] {
		t.Fatalf("RL tasks without RL_K: not the first two of train-rl-k2.jsonl:\n%s", got)
	}
	// RL_K mixes objective counts in each iteration's tasks, task by task,
	// the k the world has no file for drawn for the same world.
	out3 := filepath.Join(tmp, "rl-k")
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "BIN="+bin, "OUT="+out3, "FROM_SFT="+out, "RL_K=2 8")
	if log, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("RL_K run: %v\n%s", err, log)
	}
	// RL_SEED picks the RL rollouts' sampling seeds: the RL_K run (RL_SEED
	// unset, so SEED's) samples its first task with the first run's seed,
	// the FROM_SFT run (RL_SEED=2) with another.
	firstSeed := func(dir string) int64 {
		t.Helper()
		rows, err := records.ReadFile[records.Rollout](filepath.Join(dir, "mempo", "rollouts-1.parquet"))
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s's first rollouts: %v (%d rows)", dir, err, len(rows))
		}
		return rows[0].Seed
	}
	if s1, s2, s3 := firstSeed(out), firstSeed(out2), firstSeed(out3); s1 != s3 || s1 == s2 {
		t.Fatalf("RL_SEED: first sampling seeds %d (default), %d (RL_SEED=2), %d (default again)", s1, s2, s3)
	}
	world2, err := tasks.ReadTasks(filepath.Join(root, "data", "world", "train-rl-k2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"mempo", "grpo"} {
		ts, err := tasks.ReadTasks(filepath.Join(out3, v, "tasks-1.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 2 || ts[0].K != 2 || ts[1].K != 8 || len(ts[1].Questions) != 8 {
			t.Fatalf("RL_K=\"2 8\": %s's tasks of iteration 1 are not k = 2, then 8: %+v", v, ts)
		}
		if ts[0].TaskID != world2[0].TaskID {
			t.Fatalf("RL_K=\"2 8\": the k = 2 task %s is not train-rl-k2.jsonl's first", ts[0].TaskID)
		}
	}
	// PRESET=reader (its SCORE_READER set to 1 epoch, 40 demonstrations so
	// that answer rows are drawn): after SFT a reader is trained on one
	// answer row per SFT task, and exactly the RL rollouts that score R^M
	// pass it as their --score-model (ITERS=1 in SHORT: MemPO's one rollout;
	// GRPO's, with GRPO_RM=0, scores none); the preset's other knobs reach
	// the commands. bash -x shows the commands as they ran.
	out4 := filepath.Join(tmp, "reader")
	cmd = exec.CommandContext(ctx, "bash", "-x", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "SHORT_SFT_DEMOS=40", "BIN="+bin, "OUT="+out4, "PRESET=reader", "SCORE_READER=1", "GRPO_RM=0")
	if log, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("SCORE_READER run: %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(out4, "reader", "config.json")); err != nil {
		t.Fatalf("SCORE_READER: no reader checkpoint: %v", err)
	}
	lines := func(dir, glob string) int {
		fs, _ := filepath.Glob(filepath.Join(dir, glob))
		n := 0
		for _, f := range fs {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n += strings.Count(string(b), "\n")
		}
		return n
	}
	if rows, ts := lines(out4, "reader-rows*.jsonl"), lines(out4, "sft-tasks*.jsonl"); rows != ts || rows == 0 {
		t.Fatalf("SCORE_READER: %d reader rows for %d SFT tasks", rows, ts)
	}
	// readerRollouts checks that every rollout command in log scoring R^M
	// with the reader of run dir scores it per objective, as the preset
	// says, and returns how many there are.
	readerRollouts := func(preset string, log []byte, dir string) int {
		n := 0
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "mempo-rollout --model") && strings.Contains(line, "--score-model "+filepath.Join(dir, "reader")) {
				n++
				if !strings.Contains(line, "--score-per-objective") {
					t.Fatalf("PRESET=%s: MemPO's rollout without --score-per-objective: %s", preset, line)
				}
			}
		}
		return n
	}
	if n := readerRollouts("reader", log, out4); n != 1 {
		t.Fatalf("SCORE_READER: %d rollout commands with --score-model, want one (MemPO's)", n)
	}
	for _, want := range []string{"--drop-rate 0.35", "--answer-rate 0.25", "--rl-k 4", "--answer-rate 1 --answer-memory subset"} {
		if !strings.Contains(string(log), want) {
			t.Fatalf("PRESET=reader: no command with %s", want)
		}
	}
	// NEW_READER=1 from that run under PRESET=gpu, whose defaults are
	// READER_MEMORY=both, SCORE_READER=1, per-objective R^M and MemPO's
	// updates under --mem-pool step --mem-skip-answer --alpha 0.5: its SFT model is
	// copied, not its reader; a new reader is trained on one subset row and
	// one step row per SFT task of that run, and MemPO scores R^M with it.
	out5 := filepath.Join(tmp, "reader-both")
	cmd = exec.CommandContext(ctx, "bash", "-x", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHORT=1", "SHORT_SFT_DEMOS=40", "BIN="+bin, "OUT="+out5, "FROM_SFT="+out4,
		"NEW_READER=1", "PRESET=gpu", "GRPO_RM=0")
	if log, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("NEW_READER=1 PRESET=gpu run: %v\n%s", err, log)
	}
	updates := 0
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "mempo-update") && strings.Contains(line, filepath.Join(out5, "mempo")) {
			updates++
			if !strings.Contains(line, "--mem-pool step --mem-skip-answer --alpha 0.5") {
				t.Fatalf("PRESET=gpu: MemPO's update without --mem-pool step --mem-skip-answer --alpha 0.5: %s", line)
			}
		}
		if strings.Contains(line, "mempo-update") && strings.Contains(line, filepath.Join(out5, "grpo")) &&
			(strings.Contains(line, "--mem-skip-answer") || strings.Contains(line, "--alpha")) {
			t.Fatalf("PRESET=gpu: GRPO's update with MemPO's flags: %s", line)
		}
	}
	if updates != 1 {
		t.Fatalf("PRESET=gpu: %d MemPO updates in the log, want one (SHORT's one iteration)", updates)
	}
	if n := readerRollouts("gpu", log, out5); n != 1 {
		t.Fatalf("PRESET=gpu: %d rollout commands with --score-model, want one (MemPO's)", n)
	}
	ts := lines(out4, "sft-tasks*.jsonl")
	subset, step := lines(out5, "reader-rows*.jsonl"), lines(out5, "reader-step-rows*.jsonl")
	if subset != ts || step != ts || lines(out5, "sft-tasks*.jsonl") != 0 {
		t.Fatalf("READER_MEMORY=both: %d subset and %d step rows for FROM_SFT's %d SFT tasks (want one of each per task)", subset, step, ts)
	}
	for _, want := range []string{"--answer-memory subset", "--answer-memory step", fmt.Sprintf("+ %d answer rows", 2*ts),
		"--score-model " + filepath.Join(out5, "reader")} {
		if !strings.Contains(string(log), want) {
			t.Fatalf("PRESET=gpu (READER_MEMORY=both): no %q in the log", want)
		}
	}
	a, errA := os.ReadFile(filepath.Join(out4, "reader", "model.safetensors"))
	b, errB := os.ReadFile(filepath.Join(out5, "reader", "model.safetensors"))
	if errA != nil || errB != nil || bytes.Equal(a, b) {
		t.Fatalf("NEW_READER=1: the reader was not trained anew (%v, %v, same bytes %v)", errA, errB, bytes.Equal(a, b))
	}
	// make demo-check's comparisons (scripts/demo/check.sh, REUSE=1) over
	// the first run and the RL_K one as two seeds: the pooled and per-seed
	// tables, the training rows pooled over the RL tasks' k, one verdict a
	// comparison, and a failing status exactly when one fails (these
	// barely trained models fail most).
	check := filepath.Join(tmp, "check")
	if err := os.MkdirAll(check, 0o755); err != nil {
		t.Fatal(err)
	}
	for s, dir := range map[string]string{"seed1": out, "seed2": out3} {
		if err := os.Symlink(dir, filepath.Join(check, s)); err != nil {
			t.Fatal(err)
		}
	}
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/check.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "REUSE=1", "SEEDS=1 2", "EVAL_K=2", "BIN="+bin, "OUT="+check)
	log, err = cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("scripts/demo/check.sh: %v\n%s", err, log)
	}
	var verdicts, failed int
	for _, line := range strings.Split(string(log), "\n") {
		switch {
		case strings.HasPrefix(line, "ok    "):
			verdicts++
		case strings.HasPrefix(line, "FAIL  "):
			verdicts++
			failed++
		}
	}
	if verdicts != 8 || (failed > 0) != (err != nil) {
		t.Fatalf("check.sh: %d verdicts (want 8), %d failing, exit error %v:\n%s", verdicts, failed, err, log)
	}
	pooled, rerr := os.ReadFile(filepath.Join(check, "pooled.md"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, want := range []string{"## Pooled over seeds 1 2", "Seed 1 (F1", "Seed 2 (F1", "| iteration | MemPO P(gold"} {
		if !strings.Contains(string(pooled), want) {
			t.Fatalf("pooled.md lacks %q:\n%s", want, pooled)
		}
	}
	var row string
	for _, line := range strings.Split(string(pooled), "\n") {
		if strings.HasPrefix(line, "| 1 | ") {
			row = line
		}
	}
	if row == "" || strings.Count(row, "|") != 8 {
		t.Fatalf("pooled.md: no training row for iteration 1 with its six values:\n%s", pooled)
	}
	if f := strings.Fields(strings.NewReplacer("|", " ").Replace(row)); f[5] == "nan" || f[6] == "nan" {
		t.Fatalf("pooled.md: MemPO's or GRPO's turns missing at iteration 1: %q", row)
	}
	// RL_RUNS=2: each seed's second RL run (here the FROM_SFT run of seed
	// 1, which took another RL_SEED from the same cold start, stands in for
	// both seeds) joins MemPO's and GRPO's pooled rows, not SFT's and
	// ReAct's, and gets its own per-seed table.
	check2 := filepath.Join(tmp, "check-runs")
	if err := os.MkdirAll(check2, 0o755); err != nil {
		t.Fatal(err)
	}
	for s, dir := range map[string]string{"seed1": out, "seed2": out3, "seed1-rl2": out2, "seed2-rl2": out2} {
		if err := os.Symlink(dir, filepath.Join(check2, s)); err != nil {
			t.Fatal(err)
		}
	}
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/check.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "REUSE=1", "SEEDS=1 2", "RL_RUNS=2", "EVAL_K=2", "BIN="+bin, "OUT="+check2)
	log, err = cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("scripts/demo/check.sh RL_RUNS=2: %v\n%s", err, log)
	}
	pooled, rerr = os.ReadFile(filepath.Join(check2, "pooled.md"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, want := range []string{"## Pooled over seeds 1 2, 2 RL runs each", "Seed 1, every RL run", "| k | run 1 | run 2 |",
		"| k | MemPO ahead | mean [95% over runs] | min | max |", " of 4 | "} {
		if !strings.Contains(string(pooled), want) {
			t.Fatalf("RL_RUNS=2: pooled.md lacks %q:\n%s", want, pooled)
		}
	}
	pooledScores, rerr := os.ReadFile(filepath.Join(check2, "pooled-scores.jsonl"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	// Tasks pooled at k = 2: SFT 2 + 2 (the first runs), MemPO 2 + 36 + 2 + 36
	// (the FROM_SFT run evaluated again on 36).
	for run, n := range map[string]string{"sft": `"n":4}`, "mempo": `"n":76}`} {
		found := false
		for _, line := range strings.Split(string(pooledScores), "\n") {
			if strings.Contains(line, `"run":"`+run+`"`) && strings.Contains(line, `"metric":"f1"`) && strings.Contains(line, `"k":2,`) {
				found = strings.HasSuffix(line, n)
				if !found {
					t.Fatalf("RL_RUNS=2: %s's pooled k = 2 row, want %s: %s", run, n, line)
				}
			}
		}
		if !found {
			t.Fatalf("RL_RUNS=2: no pooled k = 2 F1 row for %s", run)
		}
	}
	// A preset that does not exist is one clear line and exit status 2.
	cmd = exec.CommandContext(ctx, "bash", "scripts/demo/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "BIN="+bin, "OUT="+filepath.Join(tmp, "bad"), "PRESET=huge")
	log, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(log), "PRESET=huge: want small, reader, full or gpu") {
		t.Fatalf("PRESET=huge: %v\n%s", err, log)
	}
}
