package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
)

// asMain makes the test binary act as mempo-score (testenv.CommandMain).
var asMain = envconfig.ScoreAsMain.Name

func TestMain(m *testing.M) { testenv.CommandMain(m, "mempo-score", asMain, main) }

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

// The file-in/file-out cases of testdata/cases: bad flags and bad rollouts
// rows are one stderr line naming the file, row and field, and no scores
// file is written.
func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }
