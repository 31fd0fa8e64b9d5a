package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/testenv"
)

// asMain makes the test binary act as mempo-index (testenv.CommandMain).
var asMain = envconfig.IndexAsMain.Name

func TestMain(m *testing.M) { testenv.CommandMain(m, "mempo-index", asMain, main) }

const fixture = "../../testdata/retrieval/faiss"

func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return testenv.RunCommand(t, asMain, args...)
}

// oneLine checks a failure: exit 1 and exactly one stderr line holding every
// wanted fragment.
func oneLine(t *testing.T, code int, stderr string, want ...string) {
	t.Helper()
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, stderr)
	}
	if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 {
		t.Fatalf("stderr is not one line: %q", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Fatalf("stderr %q lacks %q", stderr, w)
		}
	}
}

func write(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCorpusThenIndex(t *testing.T) {
	dir := t.TempDir()
	qa := write(t, filepath.Join(dir, "qa.jsonl"),
		`{"question":"q1","context":{"title":["Alpha","Beta"],"sentences":[["Alpha is a letter."," It comes first."],["Beta follows alpha."]]}}`+"\n"+
			`{"question":"q2","context":{"title":["Beta","Gamma"],"sentences":[["Beta follows alpha."],["Gamma is third."]]}}`+"\n")
	corpus := filepath.Join(dir, "corpus.jsonl")
	code, stderr := run(t, "corpus", "--from", "hotpotqa", qa, "--out", corpus)
	if code != 0 {
		t.Fatalf("corpus: %d %s", code, stderr)
	}
	raw, _ := os.ReadFile(corpus)
	want := `{"id":"0","contents":"\"Alpha\"\nAlpha is a letter. It comes first."}` + "\n" +
		`{"id":"1","contents":"\"Beta\"\nBeta follows alpha."}` + "\n" +
		`{"id":"2","contents":"\"Gamma\"\nGamma is third."}` + "\n"
	if string(raw) != want {
		t.Fatalf("corpus:\n%s\nwant:\n%s", raw, want)
	}
	out := filepath.Join(dir, "index")
	if code, stderr := run(t, "--corpus", corpus, "--out", out, "--k1", "1.2", "--b", "0.75", "--stem=false"); code != 0 {
		t.Fatalf("index: %d %s", code, stderr)
	}
	var m struct {
		Docs     int
		BM25     struct{ K1, B float64 }
		Analyzer struct{ Stopwords, Stem bool }
	}
	raw, _ = os.ReadFile(filepath.Join(out, "index.json"))
	if err := json.Unmarshal(raw, &m); err != nil || m.Docs != 3 || m.BM25.K1 != 1.2 || m.BM25.B != 0.75 || m.Analyzer.Stem || !m.Analyzer.Stopwords {
		t.Fatalf("index.json: %s", raw)
	}
}

// The file-in/file-out cases of testdata/cases (bad input: one line naming
// the file, row and field; nothing left behind).
func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }

// A failed rebuild leaves the existing index exactly as it was.
func TestFailedRebuildKeepsIndex(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "index")
	if code, stderr := run(t, "--corpus", filepath.Join(fixture, "corpus.jsonl"), "--out", out); code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	before := snapshot(t, out)
	bad := write(t, filepath.Join(dir, "bad.jsonl"), `{"id":"0","contents":"\"A\"\nfine"}`+"\n"+`not json`+"\n")
	code, stderr := run(t, "--corpus", bad, "--out", out)
	oneLine(t, code, stderr, bad, "row 2")
	// also a failure late in the build: embeddings that do not match the corpus
	code, stderr = run(t, "--corpus", bad[:0]+filepath.Join(fixture, "corpus.jsonl"), "--out", out, "--embeddings", filepath.Join(fixture, "queries.npy"))
	oneLine(t, code, stderr, "16 embeddings for 500 passages")
	if after := snapshot(t, out); after != before {
		t.Fatal("the existing index changed after failed rebuilds")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".building-") || strings.Contains(e.Name(), ".old-") {
			t.Fatalf("failed rebuild left %s behind", e.Name())
		}
	}
}

func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %x\n", e.Name(), len(raw), raw[:min(len(raw), 64)])
		if e.Name() == "index.json" {
			b.Write(raw)
		}
	}
	return b.String()
}

func TestParquetCorpusAndDense(t *testing.T) {
	dir := t.TempDir()
	type row struct {
		ID       string `parquet:"id"`
		Contents string `parquet:"contents"`
	}
	type emb struct {
		Embedding []float32 `parquet:"embedding,list"`
	}
	var rows []row
	var embs []emb
	for i := 0; i < 50; i++ {
		rows = append(rows, row{ID: fmt.Sprint(i), Contents: fmt.Sprintf("\"P%d\"\npassage %d", i, i)})
		v := make([]float32, 8)
		v[i%8] = 1
		embs = append(embs, emb{Embedding: v})
	}
	corpus := filepath.Join(dir, "corpus.parquet")
	if err := parquet.WriteFile(corpus, rows); err != nil {
		t.Fatal(err)
	}
	embPath := filepath.Join(dir, "emb.parquet")
	if err := parquet.WriteFile(embPath, embs); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ix")
	code, stderr := run(t, "--corpus", corpus, "--out", out, "--embeddings", embPath, "--faiss", "HNSW8")
	if code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	if !strings.Contains(stderr, "50 passages") || !strings.Contains(stderr, "dense 50×8") {
		t.Fatalf("summary: %s", stderr)
	}
	// npy embeddings with a python-written index adopted instead
	out2 := filepath.Join(dir, "ix2")
	code, stderr = run(t, "--corpus", filepath.Join(fixture, "corpus.jsonl"), "--out", out2, "--faiss-read", filepath.Join(fixture, "hnsw32.index"))
	if code != 0 || !strings.Contains(stderr, "dense 500×32") {
		t.Fatalf("%d %s", code, stderr)
	}
	code, stderr = run(t, "--corpus", corpus, "--out", out2, "--faiss-read", filepath.Join(fixture, "hnsw32.index"))
	oneLine(t, code, stderr, "500 vectors for 50 passages")
	code, stderr = run(t, "--corpus", filepath.Join(fixture, "corpus.jsonl"), "--out", filepath.Join(dir, "ix3"), "--embeddings", filepath.Join(fixture, "base.npy"), "--faiss", "Nonsense42")
	oneLine(t, code, stderr, `--faiss "Nonsense42"`)
}
