package retrieval

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
)

// GPU flat search over the encoder fixture's index gives FAISS's top-10
// wherever FAISS's scores are not within fp16 rounding of a neighbour's.
// Skips without a GPU (it has not been run on one).
func TestGPUFlatSearchMatchesFAISS(t *testing.T) {
	if ok, why := cuda.Available(); !ok {
		t.Skipf("no CUDA: %s", why)
	}
	dir := t.TempDir()
	corpus, queries := encoderCorpus(t, dir)
	enc := loadE5(t)
	ctx := context.Background()
	emb := filepath.Join(dir, "emb.npy")
	if _, err := EmbedCorpus(ctx, enc, corpus, emb, EmbedOptions{}); err != nil {
		t.Fatal(err)
	}
	ixDir := filepath.Join(dir, "ix")
	if _, err := Build(ctx, BuildOptions{Corpus: corpus, Out: ixDir, Analyzer: DefaultAnalyzer, Embeddings: emb}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ixDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	qv, err := enc.Queries().Encode(ctx, queries)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ix.SearchDense(qv, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ix.VectorSearch, err = LoadGPUFlat(emb, ix.Manifest.Docs, enc.Dim()); err != nil {
		t.Fatal(err)
	}
	got, err := ix.SearchDense(qv, 10)
	if err != nil {
		t.Fatal(err)
	}
	for q := range want {
		for j, w := range want[q] {
			near := (j > 0 && want[q][j-1].Score-w.Score < 2e-3) || (j+1 < len(want[q]) && w.Score-want[q][j+1].Score < 2e-3)
			if !near && got[q][j].Row != w.Row {
				t.Errorf("query %d rank %d: GPU row %d, FAISS %d", q, j, got[q][j].Row, w.Row)
			}
			if d := got[q][j].Score - w.Score; d > 2e-3 || d < -2e-3 {
				t.Errorf("query %d rank %d: GPU score %g, FAISS %g", q, j, got[q][j].Score, w.Score)
			}
		}
	}
}
