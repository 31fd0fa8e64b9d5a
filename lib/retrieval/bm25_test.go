package retrieval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/fileio"
)

func writeCorpus(t testing.TB, path string, docs []string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := fileio.NewJSONLWriter(f)
	for i, d := range docs {
		w.Write(Passage{ID: fmt.Sprintf("d%d", i), Contents: d})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// naiveBM25 scores every document directly from the formula.
func naiveBM25(an Analyzer, p BM25Params, docs []string, query string) []ScoredDoc {
	toks := make([][]string, len(docs))
	df := map[string]int{}
	total := 0
	for i, d := range docs {
		toks[i] = an.Analyze(d, nil)
		total += len(toks[i])
		seen := map[string]bool{}
		for _, t := range toks[i] {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	avgdl := float64(total) / float64(len(docs))
	var out []ScoredDoc
	for i := range docs {
		tf := map[string]int{}
		for _, t := range toks[i] {
			tf[t]++
		}
		s := 0.0
		for _, q := range an.Analyze(query, nil) {
			if tf[q] == 0 {
				continue
			}
			n := float64(len(docs))
			idf := math.Log(1 + (n-float64(df[q])+0.5)/(float64(df[q])+0.5))
			f := float64(tf[q])
			s += idf * f * (p.K1 + 1) / (f + p.K1*(1-p.B+p.B*float64(len(toks[i]))/avgdl))
		}
		if s > 0 {
			out = append(out, ScoredDoc{Row: int64(i), Score: float32(s)})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Score != out[b].Score {
			return out[a].Score > out[b].Score
		}
		return out[a].Row < out[b].Row
	})
	return out
}

// The on-disk index, built with a tiny run buffer so that postings are spilled
// to many runs and merged, scores exactly as the formula computed directly.
func TestBM25MatchesFormulaAcrossRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon running runs runner the of and")
	docs := make([]string, 3000)
	for i := range docs {
		n := 3 + rng.IntN(40)
		ws := make([]string, n)
		for j := range ws {
			ws[j] = words[rng.IntN(len(words))]
			if rng.IntN(10) == 0 {
				ws[j] = fmt.Sprintf("w%d", rng.IntN(500))
			}
		}
		docs[i] = fmt.Sprintf("\"Doc %d\"\n%s", i, strings.Join(ws, " "))
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	writeCorpus(t, corpus, docs)
	params := BM25Params{K1: 1.2, B: 0.75}
	m, err := Build(context.Background(), BuildOptions{Corpus: corpus, Out: filepath.Join(dir, "ix"),
		Analyzer: DefaultAnalyzer, BM25: params, RunBytes: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if m.BM25Stats.Runs < 10 {
		t.Fatalf("only %d runs; the test means to exercise the merge", m.BM25Stats.Runs)
	}
	ix, err := Open(filepath.Join(dir, "ix"))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, q := range []string{"gamma", "running delta w17", "the of", "kappa kappa mu", "w3 w499 zeta", "nothing-here"} {
		want := naiveBM25(DefaultAnalyzer, params, docs, q)
		got := ix.BM25.Search(q, 10)
		if len(want) > 10 {
			want = want[:10]
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d hits, want %d", q, len(got), len(want))
		}
		for i := range got {
			if math.Abs(float64(got[i].Score-want[i].Score)) > 1e-4*float64(want[i].Score) {
				t.Fatalf("%q rank %d: row %d score %g, formula gives row %d score %g", q, i, got[i].Row, got[i].Score, want[i].Row, want[i].Score)
			}
			if got[i].Row != want[i].Row && math.Abs(float64(got[i].Score-want[i].Score)) > 1e-6 {
				t.Fatalf("%q rank %d: row %d, formula gives row %d", q, i, got[i].Row, want[i].Row)
			}
		}
	}
	hits, err := ix.SearchBM25([]string{"gamma"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	h := hits[0][0]
	if h.Contents != docs[h.Row] || h.ID != fmt.Sprintf("d%d", h.Row) || h.Title != fmt.Sprintf("Doc %d", h.Row) {
		t.Fatalf("hit %+v does not match its corpus row", h)
	}
}
