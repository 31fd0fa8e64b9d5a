package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/peft"
	"github.com/mempo/mempo/lib/peft/pefttest"
	"github.com/mempo/mempo/lib/testenv"
)

// TestLogprobsAdapterEqualsMerged: `logprobs --adapter` (the adapter applied
// unmerged over the frozen base) gives the log-probs of the merged model
// (peft.Merge written as a full checkpoint), and not those of the base.
func TestLogprobsAdapterEqualsMerged(t *testing.T) {
	dir := t.TempDir()
	adDir, merged := pefttest.AdapterAndMerged(t, fixture, dir, peft.Config{R: 3, Alpha: 5, Targets: []string{"k_proj", "o_proj", "up_proj"}}, 1, 0.3)
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"ids": [3, 17, 5, 9, 22, 1, 40, 7]}`+"\n"+`{"ids": [8, 8, 2, 31]}`+"\n"), 0o644)
	run := func(name string, args ...string) [][]float64 {
		out := filepath.Join(dir, name+".jsonl")
		if err := runApp(append([]string{"logprobs", "--in", in, "--out", out, "--device", "cpu"}, args...)...); err != nil {
			t.Fatal(err)
		}
		var lps [][]float64
		for _, row := range testenv.ReadJSONL(t, out) {
			var lp []float64
			for _, v := range row["logprobs"].([]any)[1:] {
				lp = append(lp, v.(float64))
			}
			lps = append(lps, lp)
		}
		return lps
	}
	withAdapter := run("adapter", "--model", fixture, "--adapter", adDir)
	mergedLP := run("merged", "--model", merged)
	baseLP := run("base", "--model", fixture)
	var dm, db float64
	for i := range withAdapter {
		for j := range withAdapter[i] {
			dm = math.Max(dm, math.Abs(withAdapter[i][j]-mergedLP[i][j]))
			db = math.Max(db, math.Abs(withAdapter[i][j]-baseLP[i][j]))
		}
	}
	if dm > 1e-5 {
		t.Errorf("--adapter log-probs differ from the merged model's by %g", dm)
	}
	if db < 1e-3 {
		t.Errorf("--adapter log-probs differ from the base's by only %g: the adapter was not applied", db)
	}
}
