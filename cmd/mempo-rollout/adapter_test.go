package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mempo/mempo/lib/peft"
	"github.com/mempo/mempo/lib/peft/pefttest"
	"github.com/mempo/mempo/lib/testenv"
)

// TestGenerateAdapterEqualsMerged: `generate --adapter` samples what the
// merged model samples (same ids, log-probs within float rounding), and
// something else than the base.
func TestGenerateAdapterEqualsMerged(t *testing.T) {
	dir := t.TempDir()
	adDir, merged := pefttest.AdapterAndMerged(t, fixture, dir, peft.Config{R: 2, Alpha: 4, Targets: peft.AllTargets}, 1, 0.5)
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"ids": [3, 17, 5, 9]}`+"\n"), 0o644)
	gen := func(name string, args ...string) map[string]any {
		out := filepath.Join(dir, name+".jsonl")
		if err := runGen(append([]string{"--in", in, "--out", out, "--max-tokens", "12", "--ignore-eos", "--seed", "4", "--device", "cpu"}, args...)...); err != nil {
			t.Fatal(err)
		}
		return testenv.ReadJSONL(t, out)[0]
	}
	a := gen("adapter", "--model", fixture, "--adapter", adDir)
	b := gen("merged", "--model", merged)
	c := gen("base", "--model", fixture)
	if !slices.Equal(ints(a["output_ids"]), ints(b["output_ids"])) {
		t.Errorf("--adapter sampled %v, the merged model %v", a["output_ids"], b["output_ids"])
	}
	la, lb := a["output_logprobs"].([]any), b["output_logprobs"].([]any)
	for i := range la {
		if d := math.Abs(la[i].(float64) - lb[i].(float64)); d > 1e-5 {
			t.Errorf("token %d: log-prob %v with --adapter, %v merged", i, la[i], lb[i])
		}
	}
	if slices.Equal(ints(a["output_ids"]), ints(c["output_ids"])) {
		t.Error("--adapter sampled what the base samples: the adapter was not applied")
	}
}
