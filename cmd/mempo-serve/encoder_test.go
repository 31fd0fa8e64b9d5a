package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/safetensors"
)

const encoderModel = "../../testdata/encoder/model"

// An index built with mempo-index --encoder, served by mempo-serve
// --encoder: text queries get the same top-10 as a brute-force inner
// product search over transformers' embeddings (the fixture's numpy
// top-10) and over the index's own embeddings.
func TestServeEncoder(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/encoder/texts.json")
	if err != nil {
		t.Fatal(err)
	}
	var tx struct{ Passages, Queries []string }
	json.Unmarshal(data, &tx)
	var buf bytes.Buffer
	for i, p := range tx.Passages {
		b, _ := json.Marshal(map[string]string{"id": fmt.Sprint(i), "contents": strings.TrimPrefix(p, "passage: ")})
		buf.Write(append(b, '\n'))
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpus, buf.Bytes(), 0o644)
	ix := filepath.Join(dir, "ix")
	// What mempo-index --encoder does (embed the corpus beside the index,
	// then build with a Flat dense part), on the CPU here and in mempo-serve
	// below: the check is an exact top-10, and a GPU would embed in fp16,
	// where near ties may swap.
	enc, err := encoder.Load(encoderModel, encoder.Options{Family: "e5", MaxLength: 64, Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := retrieval.EmbedCorpus(context.Background(), enc, corpus, ix+".embeddings.npy", retrieval.EmbedOptions{Model: encoderModel}); err != nil {
		t.Fatal(err)
	}
	if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: corpus, Out: ix,
		Analyzer: retrieval.DefaultAnalyzer, Embeddings: ix + ".embeddings.npy", EmbeddingsColumn: "embedding", Faiss: "Flat"}); err != nil {
		t.Fatal(err)
	}

	// Brute force over the embeddings written above, queries embedded in
	// process.
	var queries []string
	for _, q := range tx.Queries {
		queries = append(queries, strings.TrimPrefix(q, "query: "))
	}
	qv, err := enc.EmbedQueries(queries)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(ix + ".embeddings.npy")
	r, err := faiss.NewNPYReader(f)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := r.ReadAll()
	f.Close()
	_, brute, err := faiss.BruteForceIP(slices.Concat(qv...), base, 64, 10)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := safetensors.Open("../../testdata/encoder/golden.safetensors")
	numpyTop, _, err := g.Int64("top10")
	g.Close()
	if err != nil || !slices.Equal(brute, numpyTop) {
		t.Fatalf("brute force over our embeddings differs from numpy's top-10 over transformers' (%v)", err)
	}

	_, _, addr, lines := startServing(t, "--index", ix, "--encoder", encoderModel, "--encoder-family", "e5", "--max-length", "64", "--device", "cpu",
		"--addr", "127.0.0.1:0")
	if addr == "" || !strings.Contains(strings.Join(lines, "\n"), `query prefix "query: "`) {
		t.Fatalf("startup: %q", lines)
	}
	body, _ := json.Marshal(map[string]any{"queries": queries, "topk": 10, "return_scores": true})
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res struct {
		Result [][]struct {
			Document struct{ ID string }
			Score    float64
		}
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Result) != len(queries) {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	for q, hits := range res.Result {
		var ids []int64
		for _, h := range hits {
			var id int64
			fmt.Sscan(h.Document.ID, &id)
			ids = append(ids, id)
		}
		if want := numpyTop[q*10 : (q+1)*10]; !slices.Equal(ids, want) {
			t.Errorf("query %d: %v, brute force %v", q, ids, want)
		}
	}
}

func TestServeEncoderMismatch(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "ix")
	// The FAISS fixture index has 32 dimensions; the encoder embeds in 64.
	if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: "../../testdata/retrieval/faiss/corpus.jsonl",
		Out: ix, Analyzer: retrieval.DefaultAnalyzer, FaissRead: "../../testdata/retrieval/faiss/hnsw32.index"}); err != nil {
		t.Fatal(err)
	}
	out, err := command("--index", ix, "--encoder", encoderModel, "--addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "embeds in 64 dimensions, the dense index of "+ix+" has 32") ||
		strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("%v: %s", err, out)
	}
}

// Without a GPU, --gpu-search fails with one line that says why.
func TestServeGPUSearchWithoutGPU(t *testing.T) {
	if ok, _ := cuda.Available(); ok {
		t.Skip("a GPU is present: this test is for machines without one")
	}
	dir := t.TempDir()
	ix := filepath.Join(dir, "ix")
	if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: "../../testdata/retrieval/faiss/corpus.jsonl",
		Out: ix, Analyzer: retrieval.DefaultAnalyzer, FaissRead: "../../testdata/retrieval/faiss/hnsw32.index"}); err != nil {
		t.Fatal(err)
	}
	out, err := command("--index", ix, "--gpu-search", "x.npy", "--addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--gpu-search: no CUDA: ") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("%v: %s", err, out)
	}
}
