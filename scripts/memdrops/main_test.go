package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/records"
)

// report on hand-built trajectories: a search repeating the previous one's
// query with the same memory is a drop (one with another memory is not),
// and each kind of step gets the mean of its memory terms and of the memory
// advantages the three configurations give it (z-scores worked by hand: the
// task pool's R^M {0.1, 0.3, 0.5, 0.7}, mean 0.4, unbiased std 0.2582; the
// gains {0.1, 0, 0.4, 0.2}, mean 0.175, std 0.1708; each step pool holds one
// R^M, so 0).
func TestReport(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	step := func(action, query string, mem []int32, rm, pg *float64) records.Step {
		out := append(append([]int32{7}, mem...), 8)
		return records.Step{Action: action, Query: query, OutputIDs: out, MemStart: 1, MemEnd: int32(1 + len(mem)), RMem: rm, PGoldMem: pg}
	}
	rows := []records.Rollout{
		{TaskID: "a", K: 1, Golds: [][]string{{"x"}}, RewardTask: 1, Steps: []records.Step{
			step("search", "q1", []int32{1}, f(0.1), f(0.2)),
			step("search", "q1", []int32{1}, f(0.3), f(0.2)), // drop: the same memory, the same P(gold | mem)
			step("search", "q1", []int32{2}, f(0.5), f(0.6)), // same query, memory changed: not a drop
			step("answer", "", []int32{2}, f(0.7), f(0.8)),
		}},
		{TaskID: "b", K: 1, Golds: [][]string{{"x"}}, Steps: []records.Step{
			step("search", "q", []int32{9}, nil, nil),
			step("answer", "", []int32{9}, nil, nil),
		}},
	}
	path := filepath.Join(t.TempDir(), "r.jsonl")
	got := reportOf(t, path, rows)
	want := path + ": 2 trajectories, mean R^T 0.500, drop rate 0.250 of 4 searches; " +
		"drops: 1 steps, R^M 0.3000, P(gold|mem) 0.2000, A^M -0.387 (step pool +0.000, gain -1.025); " +
		"other searches after the first: 1 steps, R^M 0.5000, P(gold|mem) 0.6000, A^M +0.387 (step pool +0.000, gain +1.317); " +
		"last steps: 2 steps, R^M 0.7000, P(gold|mem) 0.8000, A^M +1.162 (step pool +0.000, gain +0.146)\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	// With task b at k = 2 the same line, then one per k.
	rows[1].K, rows[1].Golds = 2, [][]string{{"x"}, {"y"}}
	got = reportOf(t, path, rows)
	want += "  k = 1: 1 trajectories, mean R^T 1.000, drop rate 0.333 of 3 searches; " +
		"drops: 1 steps, R^M 0.3000, P(gold|mem) 0.2000, A^M -0.387 (step pool +0.000, gain -1.025); " +
		"other searches after the first: 1 steps, R^M 0.5000, P(gold|mem) 0.6000, A^M +0.387 (step pool +0.000, gain +1.317); " +
		"last steps: 1 steps, R^M 0.7000, P(gold|mem) 0.8000, A^M +1.162 (step pool +0.000, gain +0.146)\n" +
		"  k = 2: 1 trajectories, mean R^T 0.000, drop rate 0.000 of 1 searches; " +
		"drops: 0 steps (no R^M); other searches after the first: 0 steps (no R^M); last steps: 1 steps (no R^M)\n"
	if got != want {
		t.Errorf("per k: got  %q\nwant %q", got, want)
	}
}

// Rollouts scored per objective get the per-objective column (each step
// pool here holds one memory: 0); the others do not (TestReport).
func TestReportPerObjective(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	st := func(action, query string, m int32, rm, pg float64) records.Step {
		return records.Step{Action: action, Query: query, OutputIDs: []int32{7, m, 8}, MemStart: 1, MemEnd: 2, RMem: f(rm), PGoldMem: f(pg),
			PGoldHist: f(pg - rm), PGoldMemObj: []float64{pg}, PGoldHistObj: []float64{pg - rm}}
	}
	rows := []records.Rollout{{TaskID: "a", K: 1, Golds: [][]string{{"x"}}, RewardTask: 1, Steps: []records.Step{
		st("search", "q1", 1, 0.1, 0.2), st("search", "q1", 1, 0.3, 0.5), st("search", "q2", 2, 0.5, 0.6), st("answer", "", 2, 0.7, 0.8),
	}}}
	got := reportOf(t, filepath.Join(t.TempDir(), "r.jsonl"), rows)
	if n := strings.Count(got, ", per objective +0.000)"); n != 3 {
		t.Errorf("%d per-objective columns in %q, want 3", n, got)
	}
}

// reportOf writes rows to path and returns report's lines for it.
func reportOf(t *testing.T, path string, rows []records.Rollout) string {
	t.Helper()
	if err := records.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := report(&b, path); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
