package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/tokenizer"
)

// stdout runs f and returns what it printed.
func stdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatal(ferr)
	}
	return out
}

type valueCase struct {
	mem    string
	p1, p2 float64
}

// writeScored writes, for each case, a scored row of the gold "[1] ropes;
// [2] bells" after "<mem>MEM</mem><answer>" in the world tokenizer: each
// objective's value ids at the case's probability, every other id at 0.5.
func writeScored(t *testing.T, cases []valueCase) (path, tokPath string) {
	t.Helper()
	tokPath = filepath.Join("..", "..", "data", "world", "tokenizer.json")
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	gold := "[1] ropes; [2] bells"
	goldIDs := tk.Encode(gold)
	ag, err := demoAgent(tk, "1", agent.ScoreInTurn)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := ag.GoldEnds(gold, goldIDs, 2)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "lp.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, c := range cases {
		ctx := tk.Encode("<mem>" + c.mem + "</mem><answer>")
		ids := append(append([]int(nil), ctx...), goldIDs...)
		lps := make([]*float64, len(ids))
		for i := 1; i < len(ids); i++ {
			v := math.Log(0.5)
			lps[i] = &v
		}
		// The value of objective j is the gold's ids after [j] up to ends[j].
		for j, p := range []float64{c.p1, c.p2} {
			from := 0
			if j > 0 {
				from = ends[j-1]
			}
			span := goldIDs[from:ends[j]]
			m := slices.Index(span, tk.Encode(fmt.Sprintf("[%d]", j+1))[0])
			if m < 0 {
				t.Fatalf("no marker in objective %d's ids", j+1)
			}
			for i := from + m + 1; i < ends[j]; i++ {
				v := math.Log(p)
				lps[len(ctx)+i] = &v
			}
		}
		if err := enc.Encode(row{IDs: ids, N: len(goldIDs), Ctx: "turn", K: 2, Ends: ends, Logprobs: lps, Kind: "other"}); err != nil {
			t.Fatal(err)
		}
	}
	return path, tokPath
}

// copy: hand-built scored rows, each objective's value given a known
// probability; the table must put each in its column (memory holds it /
// another value under [j] / no [j]) with that mean.
func TestCopy(t *testing.T) {
	path, tokPath := writeScored(t, []valueCase{
		{"[1] ropes", 0.9, 0.1},            // 1 in, 2 absent
		{"[1] ropes; [2] bells", 0.7, 0.6}, // both in
		{"[1] maps; [2] bells", 0.2, 0.8},  // 1 another value, 2 in
		{"[1] ropes product", 0.05, 0.3},   // "[1] ropes" followed by more than the value: another value
	})
	out := stdout(t, func() error { return copied(path, tokPath) })
	want := []string{
		"| turn | 2 | 1 | 0.800 | 2 | 0.125 | 2 | — | 0 |",
		"| turn | 2 | 2 | 0.700 | 2 | — | 0 | 0.200 | 2 |",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("want the line %q in\n%s", w, out)
		}
	}
}

// summary with a tokenizer: the answers-alone column is the mean over rows
// of the mean over objectives of each value's probability (here every value
// is one id or more at one probability): (0.9 + 0.1) / 2 and (0.7 + 0.6) / 2,
// mean 0.575; without a tokenizer the column is empty.
func TestSummaryAnswersAlone(t *testing.T) {
	path, tokPath := writeScored(t, []valueCase{{"[1] ropes", 0.9, 0.1}, {"[1] ropes; [2] bells", 0.7, 0.6}})
	out := stdout(t, func() error { return summary(path, tokPath) })
	if !strings.Contains(out, "| turn | 2 | other | 2 | ") || !strings.Contains(out, " | 0.5750 | — |") {
		t.Errorf("want the k = 2 row with 0.5750 answers alone in\n%s", out)
	}
	out = stdout(t, func() error { return summary(path, "") })
	if !strings.Contains(out, " | — | — |\n") {
		t.Errorf("without a tokenizer, want no answers-alone value in\n%s", out)
	}
}
