package retrieval

import (
	"context"
	"path/filepath"
	"testing"
)

// recallAt is the mean over questions of the fraction of gold supporting
// titles found among the titles of the top k passages.
func recallAt(t testing.TB, ix *Index, qs []hotpotQuestion, k int) float64 {
	t.Helper()
	total := 0.0
	for _, q := range qs {
		hits, err := ix.SearchBM25([]string{q.Question}, k)
		if err != nil {
			t.Fatal(err)
		}
		titles := map[string]bool{}
		for _, h := range hits[0] {
			titles[h.Title] = true
		}
		found := 0
		for _, g := range q.Gold {
			if titles[g] {
				found++
			}
		}
		total += float64(found) / float64(len(q.Gold))
	}
	return total / float64(len(qs))
}

// BM25 over the HotpotQA dev paragraphs finds the gold supporting paragraphs
// of its questions at least as often as measured when the floors were set
// (docs/BENCHMARKS.md has the analyzer comparison).
func TestHotpotRecall(t *testing.T) {
	dir, qs := hotpotIndex(t)
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Manifest.Docs < 10000 || len(qs) != 1100 {
		t.Fatalf("corpus of %d passages and %d questions; expected about 11k and 1100", ix.Manifest.Docs, len(qs))
	}
	r3, r10 := recallAt(t, ix, qs, 3), recallAt(t, ix, qs, 10)
	t.Logf("HotpotQA dev (%d passages, %d questions): recall@3 %.4f recall@10 %.4f", ix.Manifest.Docs, len(qs), r3, r10)
	const floor3, floor10 = 0.63, 0.83 // measured 0.6445 and 0.8464 (stopwords+Porter, k1 0.9, b 0.4)
	if r3 < floor3 || r10 < floor10 {
		t.Fatalf("recall@3 %.4f (floor %.2f), recall@10 %.4f (floor %.2f)", r3, floor3, r10, floor10)
	}
}

// TestAnalyzerRecall compares analyzer settings; run with -v to see the table.
func TestAnalyzerRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four indexes; skipped in -short")
	}
	sharedData(t, hotpotFiles[0])
	tmp := t.TempDir()
	corpus, qs := hotpotCorpus(t, tmp)
	for _, an := range []Analyzer{{}, {Stopwords: true}, {Stem: true}, {Stopwords: true, Stem: true}} {
		out := filepath.Join(tmp, "ix")
		if _, err := Build(context.Background(), BuildOptions{Corpus: corpus, Out: out, Analyzer: an}); err != nil {
			t.Fatal(err)
		}
		ix, err := Open(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stopwords=%v stem=%v: recall@3 %.4f recall@10 %.4f", an.Stopwords, an.Stem, recallAt(t, ix, qs, 3), recallAt(t, ix, qs, 10))
		ix.Close()
	}
}
