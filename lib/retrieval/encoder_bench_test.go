package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/tokenizer"
)

// BenchmarkRetrieveEncoder is /retrieve end to end with the encoder in the
// loop: 16 clients send one text query per request to a server whose
// encoder is base-sized (768 hidden, 12 layers, random weights, the
// fixture's WordPiece tokenizer, e5 prefixes) over a Flat index of
// MEMPO_BENCH_DENSE_N (default 100,000) random unit vectors of 768
// dimensions. It reports requests/s with encoding, and queries/s of the
// dense search alone on the same index.
//
//	go test -run '^$' -bench RetrieveEncoder -benchtime 64x ./lib/retrieval/
func BenchmarkRetrieveEncoder(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(envconfig.BenchDenseN.Get()); err == nil && v > 0 {
		n = v
	}
	const dim = 768
	dir := b.TempDir()
	var corpus bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&corpus, "{\"id\":\"%d\",\"contents\":\"\\\"Title %d\\\"\\npassage number %d\"}\n", i, i, i)
	}
	corpusPath := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpusPath, corpus.Bytes(), 0o644)
	vecs := unitVectors(n, dim, 1)
	npy := filepath.Join(dir, "emb.npy")
	f, _ := os.Create(npy)
	if err := faiss.WriteNPY(f, vecs, dim); err != nil {
		b.Fatal(err)
	}
	f.Close()
	ctx := context.Background()
	if _, err := Build(ctx, BuildOptions{Corpus: corpusPath, Out: filepath.Join(dir, "ix"), Analyzer: DefaultAnalyzer, Embeddings: npy}); err != nil {
		b.Fatal(err)
	}
	ix, err := Open(filepath.Join(dir, "ix"))
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	tok, err := tokenizer.Load(filepath.Join(encFixture, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	enc, err := encoder.Random(encoder.BaseConfig, tok, 1, encoder.Options{Family: "e5"})
	if err != nil {
		b.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(encFixture, "texts.json"))
	var tx encTexts
	json.Unmarshal(data, &tx)
	queries := tx.Queries

	// Dense search alone: 256 queries at a time, as the server batches.
	qv, err := enc.Queries().Encode(ctx, queries)
	if err != nil {
		b.Fatal(err)
	}
	var batch [][]float32
	for len(batch) < 256 {
		batch = append(batch, qv...)
	}
	batch = batch[:256]
	t0 := time.Now()
	if _, err := ix.SearchDense(batch, 3); err != nil {
		b.Fatal(err)
	}
	searchQPS := 256 / time.Since(t0).Seconds()

	s, hs := newTestServer(b, ix, ServerConfig{Method: MethodDense, Encoder: enc.Queries(), MaxBatch: 256})
	const clients = 16
	var next, fails int64
	var mu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"queries": [%q], "topk": 3, "return_scores": true}`, queries[i%int64(len(queries))])
				code, _, _ := post(b, hs.URL, body)
				if code != 200 {
					mu.Lock()
					fails++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	b.StopTimer()
	if fails > 0 {
		b.Fatalf("%d requests failed", fails)
	}
	batches := s.m.batches.Load()
	b.ReportMetric(float64(b.N)/secs, "req/s")
	b.ReportMetric(searchQPS, "search-q/s")
	b.Logf("%d vectors × %d: %d one-query requests from %d clients in %.1fs = %.1f req/s (%.1f requests per batch); dense search alone %.0f queries/s",
		n, dim, b.N, clients, secs, float64(b.N)/secs, float64(b.N)/float64(max(batches, 1)), searchQPS)
}
