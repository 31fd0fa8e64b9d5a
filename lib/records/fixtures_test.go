package records

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
)

// fixtureDir is testdata/score at the repository root.
func fixtureDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "score"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func fixtureUpdates() []Update {
	return []Update{
		{Step: 1, Epoch: 0, Policy: "ckpt-000001", Loss: 0.031, PGLoss: 0.03, PGClipfrac: 0.01, PGClipfracLower: 0.002, PPOKL: 0.0004,
			KL: Ptr(0.001), Entropy: Ptr(1.2), GradNorm: 0.8, LR: 1e-6,
			AdvTaskMean: 0, AdvTaskStd: 0.97, AdvMemMean: Ptr(0.0), AdvMemStd: Ptr(0.99), RewardTaskMean: 0.25, RewardMemMean: Ptr(0.01), PeakTokensMean: 1200,
			Tokens: 40000, Trajectories: 64, WallS: 31.5, LogprobDriftMean: 0.002, LogprobDriftMax: 0.09},
		{Step: 2, Epoch: 0, Policy: "ckpt-000002", Loss: 0.029, KL: Ptr(0.0012), RewardTaskMean: 0.31, PeakTokensMean: 1150, Tokens: 41000, Trajectories: 64, WallS: 30.9},
	}
}

// TestWriteFixtures regenerates the Go-written fixtures that
// scripts/check_parquet.py reads with pyarrow. Run with MEMPO_WRITE_FIXTURES=1.
func TestWriteFixtures(t *testing.T) {
	if envconfig.WriteFixtures.Get() == "" {
		t.Skip("set MEMPO_WRITE_FIXTURES=1 to rewrite testdata/score/*-go.parquet")
	}
	d := fixtureDir(t)
	for _, err := range []error{
		WriteFile(filepath.Join(d, "rollouts-go.parquet"), sampleRollouts()),
		WriteFile(filepath.Join(d, "rollouts-go.jsonl"), sampleRollouts()),
		WriteFile(filepath.Join(d, "metrics-go.parquet"), fixtureUpdates()),
		WriteFile(filepath.Join(d, "scores-go.parquet"), []Score{{Run: "mempo", DataSource: "hotpotqa", K: 2, Metric: "f1", Value: 56.47, CILow: 50.1, CIHigh: 61.2, N: 128}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadPyarrowFixtures reads files that pyarrow 25 wrote
// (scripts/check_parquet.py, run on the GPU machine) from the tables it read
// out of our own Parquet: the values must be exactly ours.
func TestReadPyarrowFixtures(t *testing.T) {
	d := fixtureDir(t)
	path := filepath.Join(d, "rollouts-pyarrow.parquet")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("pyarrow fixture not made yet (scripts/check_parquet.py): %v", err)
	}
	got, err := ReadFile[Rollout](path)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleRollouts()
	if len(got) != len(want) {
		t.Fatalf("%d rows", len(got))
	}
	for i := range want {
		if canon(t, got[i]) != canon(t, want[i]) {
			t.Errorf("row %d:\n got %s\nwant %s", i+1, canon(t, got[i]), canon(t, want[i]))
		}
	}
	ups, err := ReadFile[Update](filepath.Join(d, "metrics-pyarrow.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if canon(t, ups) != canon(t, fixtureUpdates()) {
		t.Errorf("metrics:\n got %s\nwant %s", canon(t, ups), canon(t, fixtureUpdates()))
	}
}

// TestWriteLargeCheck writes a few thousand random rollouts (several row
// groups' worth of pages, nulls scattered in nested steps) as Parquet and
// JSONL into $MEMPO_LARGE_CHECK_DIR, for scripts/check_parquet.py to compare
// value by value with pyarrow. Nothing is committed from it.
func TestWriteLargeCheck(t *testing.T) {
	dir := envconfig.LargeCheckDir.Get()
	if dir == "" {
		t.Skip("set MEMPO_LARGE_CHECK_DIR to write a large pyarrow cross-check set")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]Rollout, 2000)
	for i := range rows {
		k := 1 + rng.IntN(4)
		r := Rollout{TaskID: fmt.Sprintf("t%d", i), DataSource: []string{"nq", "hotpotqa", "popqa"}[i%3], K: int32(k),
			Group: int64(i / 16), Sample: int32(i % 16), Policy: "ckpt-7", Keep: "1", Seed: int64(i), FormatOK: rng.IntN(5) > 0}
		var ans []string
		for j := 0; j < k; j++ {
			r.Questions = append(r.Questions, fmt.Sprintf("question %d.%d ünïcode?", i, j))
			var g []string
			for a := 0; a <= rng.IntN(3); a++ {
				g = append(g, fmt.Sprintf("gold %d %d %d", i, j, a))
			}
			r.Golds = append(r.Golds, g)
			ans = append(ans, g[0])
		}
		r.Answer = strings.Join(ans, "; ")
		for s := 0; s < 1+rng.IntN(5); s++ {
			st := Step{Index: int32(s), MemStart: -1, MemEnd: -1, Action: "search", Query: fmt.Sprintf("q%d", s), DocIDs: []string{"1", "2", "3"}}
			for n := rng.IntN(300); n > 0; n-- {
				st.ContextIDs = append(st.ContextIDs, int32(rng.IntN(151000)))
			}
			for n := rng.IntN(120); n > 0; n-- {
				st.OutputIDs = append(st.OutputIDs, int32(rng.IntN(151000)))
				st.Logprobs = append(st.Logprobs, -float32(rng.ExpFloat64()))
			}
			if len(st.OutputIDs) > 4 && rng.IntN(3) > 0 {
				st.MemStart, st.MemEnd = 1, int32(len(st.OutputIDs)/2)
				st.PGoldMem, st.PGoldHist = Ptr(rng.Float64()), Ptr(rng.Float64())
				st.RMem = Ptr(*st.PGoldMem - *st.PGoldHist)
			}
			st.ContextTokens, st.OutputTokens = int32(len(st.ContextIDs)), int32(len(st.OutputIDs))
			r.Steps = append(r.Steps, st)
		}
		r.Finish()
		rows[i] = r
	}
	for _, name := range []string{"rollouts-go.parquet", "rollouts-go.jsonl"} {
		if err := WriteFile(filepath.Join(dir, name), rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "metrics-go.parquet"), fixtureUpdates()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile[Rollout](filepath.Join(dir, "rollouts-go.parquet"))
	if err != nil || len(back) != len(rows) || canon(t, back[1999]) != canon(t, rows[1999]) {
		t.Fatalf("read back: %v", err)
	}
}
