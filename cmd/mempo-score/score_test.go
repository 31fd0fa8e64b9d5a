package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/records"
)

func scoreTestdata(name string) string { return filepath.Join("..", "..", "testdata", "score", name) }

func runScore(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	err := app.Run(append([]string{"mempo-score"}, args...))
	return out.String(), err
}

func TestScoreCommand(t *testing.T) {
	dir := t.TempDir()
	scores := filepath.Join(dir, "scores.jsonl")
	// Two runs side by side: one by flag, one as a trailing file; a label with a comma.
	out, err := runScore(t, "--rollouts", scoreTestdata("hand.jsonl"), "--label", "hand, v1", "--label", "go",
		"--out", scores, "--bootstrap", "200", "--seed", "3", scoreTestdata("rollouts-go.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### demo", "| hand, v1 | 50.00 | 61.11 | 21 | 20 |", "### hotpotqa", "| go | 100.00 | 100.00 | 12 | 8 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	rows, err := records.ReadFile[records.Score](scores)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || rows[0].Run != "hand, v1" || rows[0].Metric != "em" || rows[0].Value != 50 || rows[0].N != 3 {
		t.Errorf("first score row %+v", rows[0])
	}
	// Same seed, same intervals.
	out2, err := runScore(t, "--rollouts", scoreTestdata("hand.jsonl"), "--label", "hand, v1", "--label", "go",
		"--out", scores, "--bootstrap", "200", "--seed", "3", scoreTestdata("rollouts-go.parquet"))
	if err != nil || out2 != out {
		t.Errorf("rerun differs: %v", err)
	}
}

func TestScoreCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", filepath.Join(dir, "s.parquet")}, "missing required flag --rollouts"},
		{[]string{"--rollouts", scoreTestdata("hand.jsonl")}, "missing required flag --out"},
		{[]string{"--rollouts", scoreTestdata("hand.jsonl"), "--out", filepath.Join(dir, "s.csv")}, "unknown file format"},
		{[]string{"--rollouts", scoreTestdata("hand.jsonl"), "--label", "a", "--label", "b", "--out", filepath.Join(dir, "s.parquet")}, "2 --label values for 1 rollouts files"},
		{[]string{"--rollouts", scoreTestdata("bad-row.parquet"), "--out", filepath.Join(dir, "s.parquet")}, `bad-row.parquet: row 3: field "golds"`},
		{[]string{"--rollouts", scoreTestdata("bad-row.jsonl"), "--out", filepath.Join(dir, "s.parquet")}, `bad-row.jsonl: row 3: field "golds"`},
		{[]string{"--rollouts", filepath.Join(dir, "missing.parquet"), "--out", filepath.Join(dir, "s.parquet")}, "missing.parquet: no such file"},
	} {
		_, err := runScore(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s.parquet")); !os.IsNotExist(err) {
		t.Error("a failed run left a scores file")
	}
}
