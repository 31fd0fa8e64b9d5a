package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

// report on hand-written trajectories of one two-hop task (gold of
// objective 1 "ropes"), three samples: one absorbs the passage's answer,
// one keeps the pending entry three times (a loop on a search from memory),
// one files a wrong product. Means and the pool comparison worked by hand.
func TestReport(t *testing.T) {
	tk, err := tokenizer.Load(filepath.Join(testenv.RepoRoot(t), "data", "world", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	step := func(mem, rest string, p, rm float64) records.Step {
		m, r := tk.Encode("<mem>"+mem+"</mem>"), tk.Encode(rest)
		out := make([]int32, 0, len(m)+len(r))
		for _, x := range append(m, r...) {
			out = append(out, int32(x))
		}
		return records.Step{OutputIDs: out, MemStart: 0, MemEnd: int32(len(m)), PGoldMem: f(p), RMem: f(rm)}
	}
	first := func() records.Step {
		return step("nothing found yet", "<think>look up 1</think><search>(1) Pifu employer</search>", 0.1, 0)
	}
	hop := func() records.Step {
		return step("[1] Tekvex product", "<think>look up 1 from memory</think><search>[1] Tekvex product</search>", 0.2, 0.1)
	}
	answer := func(mem string, p, rm float64) records.Step {
		return step(mem, "<think>all 1 answers are known</think><answer>[1] x</answer>", p, rm)
	}
	task := func(steps ...records.Step) records.Rollout {
		return records.Rollout{TaskID: "t", K: 1, Golds: [][]string{{"ropes"}}, Steps: steps}
	}
	rows := []records.Rollout{
		task(first(), hop(), answer("[1] ropes", 0.9, 0.5)),
		task(first(), hop(), hop(), hop()), // pending at step 2 (P 0.2), then a loop
		task(first(), hop(), answer("[1] bells", 0.3, 0.2)),
	}
	path := filepath.Join(t.TempDir(), "r.jsonl")
	if err := records.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := report(&b, tk, path); err != nil {
		t.Fatal(err)
	}
	// Sample 2's steps 2 and 3 both follow a search from memory with the
	// memory unchanged: two pending memories (P 0.2, R^M 0.1), one in the
	// pool of step 2 with the absorbed one (0.9 > 0.2).
	want := path + ": 3 trajectories, 1 loop (1 on a search from memory); after a search from memory: " +
		"absorbed 1 (P(gold|mem) 0.900, R^M +0.500), other 1 (P(gold|mem) 0.300, R^M +0.200), " +
		"pending 2 (P(gold|mem) 0.200, R^M +0.100); absorbed above pending in 1 of 1 pairs of one step pool\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
