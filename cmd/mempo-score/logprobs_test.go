package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/testenv"
)

func runApp(args ...string) error {
	return testenv.RunApp("mempo-score", []*ucli.Command{logprobsCommand}, args...)
}

const fixture = "../../testdata/models/qwen2-untied-gqa4"

func TestLogprobsMatchTransformers(t *testing.T) {
	g, err := safetensors.Open(filepath.Join(fixture, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var b strings.Builder
	var want [][]float32
	for _, k := range []string{"0", "1"} {
		ids, _, _ := g.Int64("ids." + k)
		lp, _, _ := g.Float32("logprobs." + k)
		want = append(want, lp)
		j, _ := json.Marshal(map[string]any{"ids": ids, "keep": "row" + k})
		b.Write(j)
		b.WriteString("\n")
	}
	os.WriteFile(in, []byte(b.String()), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	// --batch-tokens 10 puts the two rows (17 and 9 tokens) in separate batches.
	for _, bt := range []string{"4096", "10"} {
		if err := runApp("logprobs", "--model", fixture, "--in", in, "--out", out, "--batch-tokens", bt); err != nil {
			t.Fatal(err)
		}
		rows := testenv.ReadJSONL(t, out)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		for i, row := range rows {
			if row["keep"] != "row"+string(rune('0'+i)) {
				t.Errorf("row %d lost its other fields: %v", i, row)
			}
			lps := row["logprobs"].([]any)
			if lps[0] != nil || len(lps) != len(want[i]) {
				t.Fatalf("row %d: logprobs %v", i, lps)
			}
			for j := 1; j < len(lps); j++ {
				if d := math.Abs(lps[j].(float64) - float64(want[i][j])); d > 1e-4*math.Max(1, math.Abs(float64(want[i][j]))) {
					t.Errorf("row %d position %d: %g, transformers %g", i, j, lps[j], want[i][j])
				}
			}
		}
	}
}

func TestLogprobsErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	os.WriteFile(out, []byte("old\n"), 0o644)
	os.WriteFile(in, []byte("{\"ids\": [1, 2]}\n{\"ids\": [3, 320]}\n"), 0o644)
	err := runApp("logprobs", "--model", fixture, "--in", in, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), `"ids"`) || !strings.Contains(err.Error(), "320") {
		t.Errorf("out-of-vocabulary id: err = %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "old\n" {
		t.Errorf("a failed run changed the output: %q", b)
	}
	os.WriteFile(in, []byte("{\"text\": \"hello\"}\n"), 0o644)
	if err := runApp("logprobs", "--model", fixture, "--in", in, "--out", out); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("text without a tokenizer: err = %v", err)
	}
	os.WriteFile(in, []byte("{\"ids\": [1]}\n"), 0o644)
	if err := runApp("logprobs", "--model", fixture, "--in", in, "--out", out, "--device", "cuda"); err == nil || !strings.Contains(err.Error(), "cuda") {
		t.Errorf("--device cuda without CUDA: err = %v", err)
	}
}

// Text rows go through the model directory's tokenizer.json.
func TestLogprobsText(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "model")
	testenv.TinyTextModel(t, mdir)
	in := filepath.Join(dir, "in.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte(`{"text": "Paris; France"}`+"\n"), 0o644)
	if err := runApp("logprobs", "--model", mdir, "--in", in, "--out", out); err != nil {
		t.Fatal(err)
	}
	rows := testenv.ReadJSONL(t, out)
	ids := rows[0]["ids"].([]any)
	// wordlevel-golden.jsonl: "Paris; France" -> [0, 0, 344]
	if len(ids) != 3 || ids[2].(float64) != 344 || len(rows[0]["logprobs"].([]any)) != 3 {
		t.Errorf("text row: %v", rows[0])
	}
}
