package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/safetensors"
)

// The encoder fixture of scripts/golden_bert.py: a random-weight BertModel,
// 200 passages and 20 queries with their embeddings and numpy top-10 lists
// made by transformers.
const encFixture = "../../testdata/encoder"

type encTexts struct {
	Passages, Queries []string
	MaxLen            int `json:"max_len"`
}

// encoderCorpus writes the fixture's passages (without their "passage: "
// prefix, which the e5 family adds back) as a corpus whose ids are row
// numbers, and returns it with the bare queries.
func encoderCorpus(t *testing.T, dir string) (string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(encFixture, "texts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tx encTexts
	if err := json.Unmarshal(data, &tx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i, p := range tx.Passages {
		b, _ := json.Marshal(Passage{ID: fmt.Sprint(i), Contents: strings.TrimPrefix(p, "passage: ")})
		buf.Write(append(b, '\n'))
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(corpus, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, q := range tx.Queries {
		qs = append(qs, strings.TrimPrefix(q, "query: "))
	}
	return corpus, qs
}

func loadE5(t *testing.T) *encoder.Encoder {
	t.Helper()
	e, err := encoder.Load(filepath.Join(encFixture, "model"), encoder.Options{Family: "e5", MaxLength: 64, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func goldenTensors(t *testing.T) (pe []float32, top []int64) {
	t.Helper()
	g, err := safetensors.Open(filepath.Join(encFixture, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pe, _, err = g.Float32("passages.emb")
	if err != nil {
		t.Fatal(err)
	}
	top, _, err = g.Int64("top10")
	if err != nil {
		t.Fatal(err)
	}
	return pe, top
}

func readNPY(t *testing.T, path string) ([]float32, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := faiss.NewNPYReader(f)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return v, r.Dim
}

// An embedding run stopped after two chunks, with a third chunk half on
// disk as a kill leaves it, resumes at the last whole chunk and ends
// byte-identical to an uninterrupted run; that file builds a Flat index
// whose dense search of text queries gives transformers' top-10.
func TestEmbedCorpusResumeAndSearch(t *testing.T) {
	dir := t.TempDir()
	corpus, queries := encoderCorpus(t, dir)
	enc := loadE5(t)
	ctx := context.Background()

	full := filepath.Join(dir, "full.npy")
	st, err := EmbedCorpus(ctx, enc, corpus, full, EmbedOptions{ChunkRows: 64, Model: "m"})
	if err != nil || st.Rows != 200 || st.Resumed != 0 {
		t.Fatalf("full run: %+v %v", st, err)
	}

	part := filepath.Join(dir, "part.npy")
	stop := errors.New("interrupted")
	_, err = EmbedCorpus(ctx, enc, corpus, part, EmbedOptions{ChunkRows: 64, Model: "m",
		AfterChunk: func(rows int64) error {
			if rows >= 128 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) {
		t.Fatalf("interrupted run: %v", err)
	}
	// A kill in the middle of the third chunk's write: 10 rows and a bit.
	f, _ := os.OpenFile(part, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 10*4*enc.Dim()+3))
	f.Close()
	var log bytes.Buffer
	st, err = EmbedCorpus(ctx, enc, corpus, part, EmbedOptions{ChunkRows: 64, Model: "m", Log: &log})
	if err != nil || st.Rows != 200 || st.Resumed != 128 {
		t.Fatalf("resumed run: %+v %v", st, err)
	}
	if !strings.Contains(log.String(), "resuming "+part+" at row 128") {
		t.Errorf("log: %q", log.String())
	}
	a, _ := os.ReadFile(full)
	b, _ := os.ReadFile(part)
	if !bytes.Equal(a, b) {
		t.Fatal("the resumed file differs from the uninterrupted one")
	}
	// A complete file is kept as is.
	st, err = EmbedCorpus(ctx, enc, corpus, part, EmbedOptions{ChunkRows: 64, Model: "m"})
	if err != nil || st.Resumed != 200 {
		t.Fatalf("rerun over a complete file: %+v %v", st, err)
	}
	// Other settings do not resume.
	if _, err := EmbedCorpus(ctx, enc, corpus, part, EmbedOptions{ChunkRows: 32, Model: "m"}); err == nil ||
		!strings.Contains(err.Error(), "was made with other settings") {
		t.Errorf("chunk size changed: %v", err)
	}

	got, d := readNPY(t, full)
	pe, top := goldenTensors(t)
	if d != enc.Dim() || len(got) != len(pe) {
		t.Fatalf("npy %d values of dim %d, golden %d", len(got), d, len(pe))
	}
	for i := range got {
		if math.Abs(float64(got[i]-pe[i])) > 1e-4 {
			t.Fatalf("embedding value %d: %g, transformers %g", i, got[i], pe[i])
		}
	}

	ixDir := filepath.Join(dir, "ix")
	if _, err := Build(ctx, BuildOptions{Corpus: corpus, Out: ixDir, Analyzer: DefaultAnalyzer, Embeddings: full}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ixDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	l := &Local{Index: ix, Method: MethodDense, Encoder: enc.Queries()}
	hits, err := l.Search(ctx, queries, 10)
	if err != nil {
		t.Fatal(err)
	}
	for q, hs := range hits {
		var ids []int64
		for _, h := range hs {
			ids = append(ids, h.Row)
			if h.ID != fmt.Sprint(h.Row) {
				t.Fatalf("hit id %q for row %d", h.ID, h.Row)
			}
		}
		if want := top[q*10 : (q+1)*10]; !slices.Equal(ids, want) {
			t.Errorf("query %d %q: %v, numpy %v", q, queries[q], ids, want)
		}
	}
}

// gatedEncoder holds its first call until released, so that the requests
// sent meanwhile queue up; it records the size of every call.
type gatedEncoder struct {
	QueryEncoder
	entered, release chan struct{}
	calls            chan int
}

func (g *gatedEncoder) Encode(ctx context.Context, qs []string) ([][]float32, error) {
	g.calls <- len(qs)
	if g.entered != nil {
		close(g.entered)
		g.entered = nil
		<-g.release
	}
	return g.QueryEncoder.Encode(ctx, qs)
}

// Text queries of requests from many clients that wait in the queue
// together are encoded in one call, and each client gets its own top-k.
func TestServerBatchesQueryEncoding(t *testing.T) {
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
	_, top := goldenTensors(t)
	g := &gatedEncoder{QueryEncoder: enc.Queries(), entered: make(chan struct{}), release: make(chan struct{}), calls: make(chan int, 100)}
	entered := g.entered
	s, hs := newTestServer(t, ix, ServerConfig{Workers: 1, Method: MethodDense, Encoder: g, MaxBatch: 256})
	type reply struct {
		q   int
		ids []string
		err error
	}
	replies := make(chan reply, len(queries))
	ask := func(q int) {
		code, _, raw := post(t, hs.URL, fmt.Sprintf(`{"queries": [%q], "topk": 10, "return_scores": true}`, queries[q]))
		var r struct {
			Result [][]struct{ Document struct{ ID string } }
		}
		if err := json.Unmarshal(raw, &r); err != nil || code != 200 || len(r.Result) != 1 {
			replies <- reply{q: q, err: fmt.Errorf("%d %s", code, raw)}
			return
		}
		var ids []string
		for _, h := range r.Result[0] {
			ids = append(ids, h.Document.ID)
		}
		replies <- reply{q: q, ids: ids}
	}
	go ask(0)
	<-entered // the worker is inside the first Encode
	for q := 1; q < len(queries); q++ {
		go ask(q)
	}
	for len(s.queue) < len(queries)-1 {
		runtime.Gosched()
	}
	close(g.release)
	for range queries {
		r := <-replies
		if r.err != nil {
			t.Fatal(r.err)
		}
		var want []string
		for _, id := range top[r.q*10 : (r.q+1)*10] {
			want = append(want, fmt.Sprint(id))
		}
		if !slices.Equal(r.ids, want) {
			t.Errorf("query %d: %v, numpy %v", r.q, r.ids, want)
		}
	}
	close(g.calls)
	var sizes []int
	for n := range g.calls {
		sizes = append(sizes, n)
	}
	if !slices.Equal(sizes, []int{1, len(queries) - 1}) {
		t.Errorf("encoder calls of %v queries, want [1 %d]", sizes, len(queries)-1)
	}
}
