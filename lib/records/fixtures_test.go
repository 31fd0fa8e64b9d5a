package records

import (
	"os"
	"path/filepath"
	"testing"
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
		{Step: 1, Epoch: 0, Policy: "ckpt-000001", Loss: 0.031, PGLoss: 0.03, PGClipfrac: 0.01, KL: 0.001, Entropy: 1.2, GradNorm: 0.8, LR: 1e-6,
			AdvTaskMean: 0, AdvTaskStd: 0.97, AdvMemMean: 0, AdvMemStd: 0.99, RewardTaskMean: 0.25, RewardMemMean: 0.01, PeakTokensMean: 1200,
			Tokens: 40000, Trajectories: 64, WallS: 31.5, LogprobDriftMean: 0.002, LogprobDriftMax: 0.09},
		{Step: 2, Epoch: 0, Policy: "ckpt-000002", Loss: 0.029, RewardTaskMean: 0.31, RewardMemMean: 0.02, PeakTokensMean: 1150, Tokens: 41000, Trajectories: 64, WallS: 30.9},
	}
}

// TestWriteFixtures regenerates the Go-written fixtures that
// scripts/check_parquet.py reads with pyarrow. Run with MEMPO_WRITE_FIXTURES=1.
func TestWriteFixtures(t *testing.T) {
	if os.Getenv("MEMPO_WRITE_FIXTURES") == "" {
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
