package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/testenv"
)

func runGen(args ...string) error {
	return testenv.RunApp("mempo-rollout", []*ucli.Command{generateCommand}, append([]string{"generate"}, args...)...)
}

func ints(v any) []int {
	var out []int
	for _, x := range v.([]any) {
		out = append(out, int(x.(float64)))
	}
	return out
}

const fixture = "../../testdata/models/qwen3-qknorm-nobias"

// Greedy decoding of the transformers fixture's prompt, in one batch with a
// longer prompt, reproduces transformers' 32 greedy tokens.
func TestGenerateGreedyMatchesTransformers(t *testing.T) {
	g, err := safetensors.Open(filepath.Join(fixture, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	prompt, _, _ := g.Int64("greedy.prompt")
	want, _, _ := g.Int64("greedy.output")
	other, _, _ := g.Int64("ids.0")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	a, _ := json.Marshal(map[string]any{"ids": other, "id": "a"})
	b, _ := json.Marshal(map[string]any{"ids": prompt, "id": "b"})
	os.WriteFile(in, []byte(string(a)+"\n"+string(b)+"\n"), 0o644)
	if err := runGen("--model", fixture, "--in", in, "--out", out, "--max-tokens", "32", "--temperature", "0", "--ignore-eos"); err != nil {
		t.Fatal(err)
	}
	rows := testenv.ReadJSONL(t, out)
	if len(rows) != 2 || rows[1]["id"] != "b" {
		t.Fatalf("rows: %v", rows)
	}
	got := ints(rows[1]["output_ids"])
	if len(got) != len(want) {
		t.Fatalf("%d tokens, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != int(want[i]) {
			t.Fatalf("greedy tokens %v, transformers %v", got, want)
		}
	}
	if n := len(rows[1]["output_logprobs"].([]any)); n != 32 || rows[1]["finish_reason"] != "length" {
		t.Errorf("output_logprobs has %d entries, finish %v", n, rows[1]["finish_reason"])
	}
	if _, ok := rows[1]["output_text"]; ok {
		t.Error("output_text without a tokenizer")
	}
}

func TestGenerateSeededAndErrors(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte("{\"ids\": [1, 2, 3]}\n{\"ids\": [9]}\n"), 0o644)
	run := func(extra ...string) []map[string]any {
		t.Helper()
		args := append([]string{"--model", fixture, "--in", in, "--out", out, "--max-tokens", "12", "--ignore-eos", "--top-p", "0.95", "--temperature", "3"}, extra...)
		if err := runGen(args...); err != nil {
			t.Fatal(err)
		}
		return testenv.ReadJSONL(t, out)
	}
	r1, r2, r3 := run("--seed", "5", "--n", "2"), run("--seed", "5", "--n", "2"), run("--seed", "6", "--n", "2")
	if len(r1) != 4 {
		t.Fatalf("%d rows for 2 inputs with --n 2", len(r1))
	}
	same := func(a, b []map[string]any) bool {
		for i := range a {
			if !slices.Equal(ints(a[i]["output_ids"]), ints(b[i]["output_ids"])) {
				return false
			}
		}
		return true
	}
	if !same(r1, r2) {
		t.Error("the same seed gave different samples")
	}
	if same(r1, r3) {
		t.Error("another seed gave the same samples")
	}
	// Row 2 alone draws the same tokens as in the batch: its seed is (seed, row).
	os.WriteFile(in, []byte("{\"ids\": [1, 2, 3]}\n"), 0o644)
	alone := run("--seed", "5", "--n", "2")
	if !slices.Equal(ints(alone[1]["output_ids"]), ints(r1[1]["output_ids"])) {
		t.Error("a row's samples depend on the rows after it")
	}

	// The KV cache: the prompt once, the new tokens for each of the 100
	// samples (3 + 100·100 positions reserved, 256 bytes each); the least
	// it runs in: a first slot of 64 a sample (3 + 100·64). Under 1 MiB it
	// cannot run; under 2 MiB (8,192 positions) it runs, rows growing and
	// preempted, and samples what it does without a bound.
	err := runGen("--model", fixture, "--in", in, "--out", out, "--max-tokens", "100", "--n", "100", "--memory-budget-mb", "1")
	if err == nil || !strings.Contains(err.Error(), "needs at least 6403 positions (each prompt once, 100 rows × 100 new tokens reserved: 10003)") {
		t.Errorf("a KV cache over --memory-budget-mb: err = %v", err)
	}
	free, bound := run("--seed", "5", "--n", "100", "--max-tokens", "100"), run("--seed", "5", "--n", "100", "--max-tokens", "100", "--memory-budget-mb", "2")
	if n := len(ints(bound[0]["output_ids"])); n != 100 {
		t.Fatalf("--max-tokens 100: %d tokens", n)
	}
	if len(free) != 100 || !same(free, bound) {
		t.Errorf("--memory-budget-mb 2: %d rows, samples other than without a bound", len(bound))
	}

	os.WriteFile(in, []byte("{\"ids\": [1]}\n{\"ids\": [400]}\n"), 0o644)
	err = runGen("--model", fixture, "--in", in, "--out", out, "--max-tokens", "2")
	if err == nil || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "400") {
		t.Errorf("out-of-vocabulary id: err = %v", err)
	}
	os.WriteFile(in, []byte("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"), 0o644)
	if err := runGen("--model", fixture, "--in", in, "--out", out, "--max-tokens", "2"); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("messages without a tokenizer: err = %v", err)
	}
	if err := runGen("--model", fixture, "--in", in, "--out", out, "--max-tokens", "2", "--device", "cuda"); err == nil || !strings.Contains(err.Error(), "cuda") {
		t.Errorf("--device cuda: err = %v", err)
	}
}

// Chat input through a model directory with a tokenizer: the ChatML prompt,
// decoded output text, and a stop string.
func TestGenerateChatAndStop(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "model")
	testenv.TinyTextModel(t, mdir)
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte(`{"messages": [{"role": "user", "content": "where was the statue built"}]}`+"\n"), 0o644)
	if err := runGen("--model", mdir, "--in", in, "--out", out, "--max-tokens", "8", "--temperature", "0", "--ignore-eos"); err != nil {
		t.Fatal(err)
	}
	rows := testenv.ReadJSONL(t, out)
	text, ok := rows[0]["output_text"].(string)
	if !ok || text == "" {
		t.Fatalf("no output_text: %v", rows[0])
	}
	// Stop at the first word of the greedy text: the row ends there.
	words := strings.Fields(text)
	if err := runGen("--model", mdir, "--in", in, "--out", out, "--max-tokens", "8", "--temperature", "0", "--ignore-eos", "--stop", words[0]); err != nil {
		t.Fatal(err)
	}
	rows = testenv.ReadJSONL(t, out)
	if rows[0]["finish_reason"] != "stop" || !strings.Contains(rows[0]["output_text"].(string), words[0]) {
		t.Errorf("stop %q: %v", words[0], rows[0])
	}
	if n := len(rows[0]["output_ids"].([]any)); n > len(strings.Fields(text)) && n != 1 {
		t.Errorf("stop %q: %d tokens", words[0], n)
	}
}
