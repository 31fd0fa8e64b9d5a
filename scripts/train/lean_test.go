package train

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/testenv"
)

// TestTrainLeanUpdates runs the loop two iterations each way the update can
// fit a large model on one GPU, on the tiny model: LORA_RANK (the iterations
// chain adapters over the frozen start, the rollouts and the evaluation
// sample from the adapted policy) and OPTIM_STATE=8bit with OPTIMIZER_DIR
// (bf16 checkpoints, the state outside them, only the last iteration's
// kept), and checks that the knobs that cannot go together are refused.
func TestTrainLeanUpdates(t *testing.T) {
	testenv.NeedScript(t, "scripts/train/run.sh", "builds four commands and runs four training iterations")
	root := testenv.RepoRoot(t)
	shared := testenv.SharedData(t)
	tokPath := qwenTokenizer(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := commands(t)
	base := []string{"BIN=" + bin, "SHARED=" + shared, "TOKENIZER=" + tokPath,
		"TRAIN=" + filepath.Join(root, "testdata", "tasks", "searchr1-train.parquet"),
		"ITERS=2", "G=2", "TASKS_PER_ITER=2", "MAX_STEP_TOKENS=12", "EVAL_TASKS=1", "EVAL_K=1", "EVAL_EVERY=0", "SEED=3"}
	run := func(out string, extra ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", "scripts/train/run.sh")
		cmd.Dir = root
		cmd.Env = append(append(append(os.Environ(), base...), "OUT="+out), extra...)
		start := time.Now()
		msg, err := cmd.CombinedOutput()
		t.Logf("run.sh %v: %.1fs", extra, time.Since(start).Seconds())
		return string(msg), err
	}
	policies := func(path string) map[string]bool {
		rows, err := records.ReadFile[records.Rollout](path)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, r := range rows {
			ids[r.Policy] = true
		}
		return ids
	}
	lastStep := func(dir string) int64 {
		ms, err := records.ReadFile[records.Update](filepath.Join(dir, "metrics.jsonl"))
		if err != nil || len(ms) == 0 {
			t.Fatalf("%s/metrics.jsonl: %v (%d rows)", dir, err, len(ms))
		}
		return ms[len(ms)-1].Step
	}

	lora := filepath.Join(tmp, "lora")
	if msg, err := run(lora, "LORA_RANK=4", "LORA_ALPHA=8"); err != nil {
		t.Fatalf("LORA_RANK=4: %v\n%s", err, msg)
	}
	for _, it := range []string{"iter-1", "iter-2"} {
		ck := filepath.Join(lora, it, "ckpt")
		if _, err := os.Stat(filepath.Join(ck, "adapter_config.json")); err != nil {
			t.Fatalf("%s is not an adapter: %v", ck, err)
		}
		if _, err := os.Stat(filepath.Join(ck, "model.safetensors")); err == nil {
			t.Fatalf("%s holds a whole model; a LoRA iteration writes the adapter only", ck)
		}
	}
	if s := lastStep(filepath.Join(lora, "iter-2")); s != 4 {
		t.Fatalf("iteration 2's adapter is at global step %d, want 4 (it continues iteration 1's)", s)
	}
	// Iteration 1 samples from the start, iteration 2 from iteration 1's
	// adapter, the final evaluation from iteration 2's: three policies.
	p1 := policies(filepath.Join(lora, "iter-1", "rollouts.parquet"))
	p2 := policies(filepath.Join(lora, "iter-2", "rollouts.parquet"))
	pe := policies(filepath.Join(lora, "iter-2", "eval", "hotpotqa-k1.parquet"))
	if len(p1) != 1 || len(p2) != 1 || len(pe) != 1 {
		t.Fatalf("want one policy a file: %v %v %v", p1, p2, pe)
	}
	for id := range p2 {
		if p1[id] || pe[id] {
			t.Fatalf("iteration 2's rollouts were sampled by %s, as were iteration 1's %v or the final evaluation's %v", id, p1, pe)
		}
	}

	full := filepath.Join(tmp, "8bit")
	state := filepath.Join(tmp, "state")
	if msg, err := run(full, "OPTIM_STATE=8bit", "OPTIMIZER_DIR="+state, "RECOMPUTE=1", "MICRO_TOKENS=512",
		"INDEX="+filepath.Join(lora, "data", "index"), "EVAL="+filepath.Join(lora, "data", "eval", "hotpotqa-k1.parquet")); err != nil {
		t.Fatalf("OPTIM_STATE=8bit: %v\n%s", err, msg)
	}
	f, err := safetensors.Open(filepath.Join(full, "iter-2", "ckpt", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range f.Names() {
		if info, _ := f.Info(name); info.DType != safetensors.BF16 {
			t.Fatalf("iteration 2's %s is %s; the 8-bit state keeps bf16 weights", name, info.DType)
		}
	}
	f.Close()
	if s := lastStep(filepath.Join(full, "iter-2")); s != 4 {
		t.Fatalf("iteration 2 is at global step %d, want 4 (it resumes iteration 1's state)", s)
	}
	kept, _ := filepath.Glob(filepath.Join(state, "*", "*.safetensors"))
	if len(kept) != 1 || !strings.Contains(kept[0], string(filepath.Separator)+"iter-2"+string(filepath.Separator)) {
		t.Fatalf("OPTIMIZER_DIR holds %v; want iteration 2's state only", kept)
	}

	for _, bad := range [][]string{{"LORA_RANK=4", "OPTIM_STATE=8bit"}, {"OPTIM_STATE=4bit"}, {"LORA_RANK=2", "REF=" + lora}, {"OPTIMIZER_DIR=" + state}} {
		msg, err := run(filepath.Join(tmp, "bad"), bad...)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Count(strings.TrimSpace(msg), "\n") > 0 {
			t.Fatalf("%v: want one line and a non-zero exit, got %v:\n%s", bad, err, msg)
		}
		t.Logf("%v: %s", bad, strings.TrimSpace(msg))
	}
}
