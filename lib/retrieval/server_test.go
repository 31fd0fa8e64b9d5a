package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/fileio"
)

const faissFixture = "../../testdata/retrieval/faiss"

var fixtureIndexOnce struct {
	sync.Once
	dir string
	err error
}

// fixtureIndex is the committed 500-passage corpus with the FAISS Flat index
// Python faiss wrote for it (adopted with --faiss-read).
func fixtureIndex(t testing.TB) *Index {
	t.Helper()
	o := &fixtureIndexOnce
	o.Do(func() {
		tmp, err := os.MkdirTemp("", "mempo-fixture-index-")
		if err != nil {
			o.err = err
			return
		}
		o.dir = filepath.Join(tmp, "index")
		_, o.err = Build(context.Background(), BuildOptions{Corpus: filepath.Join(faissFixture, "corpus.jsonl"),
			Out: o.dir, Analyzer: DefaultAnalyzer, FaissRead: filepath.Join(faissFixture, "flat.index")})
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	ix, err := Open(o.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func fixtureQueries(t testing.TB) ([][]float32, int) {
	f, err := os.Open(filepath.Join(faissFixture, "queries.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := faiss.NewNPYReader(f)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for i := 0; i < int(r.Rows); i++ {
		out = append(out, flat[i*r.Dim:(i+1)*r.Dim])
	}
	return out, r.Dim
}

func post(t testing.TB, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

func newTestServer(t testing.TB, ix *Index, cfg ServerConfig) (*Server, *httptest.Server) {
	s := NewServer(ix, cfg)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs
}

func TestServeErrors(t *testing.T) {
	ix := fixtureIndex(t)
	_, hs := newTestServer(t, ix, ServerConfig{MaxBodyBytes: 4096, MaxTopK: 50})
	vec := func(d int) string { return "[" + strings.TrimSuffix(strings.Repeat("0.1,", d), ",") + "]" }
	cases := []struct {
		name, body string
		code       int
		msg        string
	}{
		{"bad JSON", `{"queries": [`, 400, "not a JSON object"},
		{"not an object", `["a"]`, 400, "not a JSON object"},
		{"trailing data", `{"queries": ["a"]} {}`, 400, "after the JSON object"},
		{"no queries", `{"topk": 3}`, 400, `"queries": missing`},
		{"queries not a list", `{"queries": "a"}`, 400, `"queries": want a list`},
		{"queries of numbers", `{"queries": [1, 2]}`, 400, `"queries": want a list`},
		{"empty queries", `{"queries": []}`, 400, `"queries": empty`},
		{"topk string", `{"queries": ["a"], "topk": "3"}`, 400, `"topk"`},
		{"topk fraction", `{"queries": ["a"], "topk": 2.5}`, 400, `"topk"`},
		{"topk negative", `{"queries": ["a"], "topk": -1}`, 400, `"topk": -1 is negative`},
		{"topk too large", `{"queries": ["a"], "topk": 51}`, 400, `limit 50`},
		{"return_scores string", `{"queries": ["a"], "return_scores": "yes"}`, 400, `"return_scores"`},
		{"bad method", `{"queries": ["a"], "method": "splade"}`, 400, `"method"`},
		{"dense without vectors", `{"queries": ["a"], "method": "dense"}`, 400, `needs query vectors`},
		{"vectors count", `{"queries": ["a", "b"], "query_vectors": [` + vec(32) + `]}`, 400, `1 vectors for 2 queries`},
		{"vectors dim", `{"queries": ["a"], "query_vectors": [` + vec(31) + `]}`, 400, `31 dimensions`},
		{"vectors shape", `{"queries": ["a"], "query_vectors": [1, 2]}`, 400, `"query_vectors"`},
		{"vectors with bm25", `{"queries": ["a"], "method": "bm25", "query_vectors": [` + vec(32) + `]}`, 400, `only for method "dense"`},
		{"too large", `{"queries": ["` + strings.Repeat("x", 5000) + `"]}`, 413, "limit"},
	}
	for _, c := range cases {
		code, _, raw := post(t, hs.URL, c.body)
		var e struct{ Error string }
		json.Unmarshal(raw, &e)
		if code != c.code || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: %d %s; want %d with %q", c.name, code, raw, c.code, c.msg)
		}
	}
	// A chunked body (no Content-Length) over the limit is also 413.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"queries": ["`))
		pw.Write(bytes.Repeat([]byte("y"), 8000))
		pw.Write([]byte(`"]}`))
		pw.Close()
	}()
	resp, err := http.Post(hs.URL+"/retrieve", "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked oversize body: %d, want 413", resp.StatusCode)
	}
	resp, err = http.Get(hs.URL + "/retrieve")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /retrieve: %d, want 405", resp.StatusCode)
	}
}

func TestServeContract(t *testing.T) {
	ix := fixtureIndex(t)
	_, hs := newTestServer(t, ix, ServerConfig{DefaultTopK: 3})
	// return_scores false gives plain document lists for every batch size.
	for _, n := range []int{1, 2, 3, 5} {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = fmt.Sprintf("synthetic passage number %d", i*7)
		}
		body, _ := json.Marshal(map[string]any{"queries": qs, "topk": 2, "return_scores": false})
		code, _, raw := post(t, hs.URL, string(body))
		var r struct{ Result [][]docJSON }
		if err := json.Unmarshal(raw, &r); code != 200 || err != nil || len(r.Result) != n {
			t.Fatalf("batch %d: %d %s", n, code, raw)
		}
		for i, docs := range r.Result {
			if len(docs) != 2 || docs[0].ID != fmt.Sprint(i*7) {
				t.Fatalf("batch %d query %d: %+v (want id %d first)", n, i, docs, i*7)
			}
		}
	}
	// topk null, 0 or absent is the server default; return_scores absent is false.
	for _, body := range []string{`{"queries": ["vector 12"], "topk": null, "return_scores": true}`,
		`{"queries": ["vector 12"], "topk": 0, "return_scores": true}`, `{"queries": ["vector 12"], "return_scores": true}`} {
		code, _, raw := post(t, hs.URL, body)
		var r struct {
			Result [][]scoredJSON
		}
		if err := json.Unmarshal(raw, &r); code != 200 || err != nil || len(r.Result[0]) != 3 || r.Result[0][0].Document.ID != "12" || r.Result[0][0].Score <= 0 {
			t.Fatalf("%s: %d %s", body, code, raw)
		}
	}
	// Dense search with query vectors returns what Python faiss returned.
	qv, _ := fixtureQueries(t)
	var e expectedFaiss
	raw, _ := os.ReadFile(filepath.Join(faissFixture, "expected.json"))
	json.Unmarshal(raw, &e)
	qs := make([]string, len(qv))
	body, _ := json.Marshal(map[string]any{"queries": qs, "query_vectors": qv, "topk": 5, "return_scores": true})
	code, _, raw := post(t, hs.URL, string(body))
	var r struct{ Result [][]scoredJSON }
	if err := json.Unmarshal(raw, &r); code != 200 || err != nil {
		t.Fatalf("dense: %d %s", code, raw)
	}
	for q := range qv {
		for j := 0; j < 5; j++ {
			got := r.Result[q][j]
			if got.Document.ID != fmt.Sprint(e.Flat.IDs[q][j]) || abs(got.Score-e.Flat.Scores[q][j]) > 1e-5 {
				t.Fatalf("dense query %d rank %d: %+v; python faiss: id %d score %g", q, j, got, e.Flat.IDs[q][j], e.Flat.Scores[q][j])
			}
		}
	}
	// health and metrics
	resp, err := http.Get(hs.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"status":"ok"`) || !strings.Contains(string(raw), `"documents":500`) {
		t.Fatalf("health: %s", raw)
	}
	resp, err = http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`mempo_retrieve_requests_total{code="200"} 8`, "mempo_queue_depth 0",
		`mempo_retrieve_latency_seconds_bucket{le="+Inf"} 8`, "mempo_retrieve_latency_seconds_count 8", "mempo_index_documents 500"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("metrics lack %q:\n%s", want, raw)
		}
	}
}

type expectedFaiss struct {
	Flat struct {
		IDs    [][]int64   `json:"ids"`
		Scores [][]float64 `json:"scores"`
	} `json:"flat"`
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// blockingEncoder stalls dense requests until released, to fill the queue.
type blockingEncoder struct {
	d       int
	entered chan struct{}
	release chan struct{}
}

func (b *blockingEncoder) Dim() int { return b.d }
func (b *blockingEncoder) Encode(ctx context.Context, qs []string) ([][]float32, error) {
	b.entered <- struct{}{}
	<-b.release
	out := make([][]float32, len(qs))
	for i := range out {
		out[i] = make([]float32, b.d)
		out[i][0] = 1
	}
	return out, nil
}

func TestServeQueueFull(t *testing.T) {
	ix := fixtureIndex(t)
	enc := &blockingEncoder{d: 32, entered: make(chan struct{}, 4), release: make(chan struct{})}
	_, hs := newTestServer(t, ix, ServerConfig{Workers: 1, QueueSize: 1, Encoder: enc, RetryAfter: 2})
	type res struct {
		code int
		raw  []byte
	}
	results := make(chan res, 2)
	send := func() {
		code, _, raw := post(t, hs.URL, `{"queries": ["q"], "method": "dense", "return_scores": true}`)
		results <- res{code, raw}
	}
	go send()
	<-enc.entered // the only worker is busy
	go send()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := http.Get(hs.URL + "/metrics")
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(raw), "mempo_queue_depth 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, hdr, raw := post(t, hs.URL, `{"queries": ["q"]}`)
	if code != 503 || hdr.Get("Retry-After") != "2" || !strings.Contains(string(raw), "queue full") {
		t.Fatalf("full queue: %d Retry-After=%q %s", code, hdr.Get("Retry-After"), raw)
	}
	close(enc.release)
	for i := 0; i < 2; i++ {
		if r := <-results; r.code != 200 {
			t.Fatalf("queued request: %d %s", r.code, r.raw)
		}
	}
}

func TestServeConcurrent(t *testing.T) {
	ix := fixtureIndex(t)
	_, hs := newTestServer(t, ix, ServerConfig{})
	want, err := ix.SearchBM25([]string{"synthetic passage number 42", "vector 7"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(hs.URL)
	const n = 400
	var wg sync.WaitGroup
	var failures atomic.Int64
	var first atomic.Value
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Search(context.Background(), []string{"synthetic passage number 42", "vector 7"}, 5)
			if err == nil {
				for q := range want {
					for j := range want[q] {
						if got[q][j].ID != want[q][j].ID || got[q][j].Contents != want[q][j].Contents {
							err = fmt.Errorf("query %d rank %d: %s, want %s", q, j, got[q][j].ID, want[q][j].ID)
						}
					}
				}
			}
			if err != nil {
				failures.Add(1)
				first.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	wg.Wait()
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d parallel requests failed; first: %v", f, n, first.Load())
	}
}

func TestClientRetries(t *testing.T) {
	var calls atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case strings.Contains(r.URL.RawQuery, "x"):
		case n <= 2:
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"busy"}`, 503)
			return
		}
		var req struct{ Queries []string }
		json.NewDecoder(r.Body).Decode(&req)
		w.Write([]byte(`{"result": [[{"document": {"id": "9", "contents": "\"T\"\nbody"}, "score": 1.5}]]}`))
	}))
	defer hs.Close()
	c := NewClient(hs.URL)
	c.Backoff, c.MaxBackoff = time.Millisecond, 10*time.Millisecond
	hits, err := c.Search(context.Background(), []string{"q"}, 3)
	if err != nil || calls.Load() != 3 || hits[0][0].Title != "T" || hits[0][0].Score != 1.5 {
		t.Fatalf("after two 503s: %v %v calls=%d", hits, err, calls.Load())
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(400)
		w.Write([]byte(`{"error":"field \"queries\": empty list"}`))
	}))
	defer bad.Close()
	calls.Store(0)
	c = NewClient(bad.URL)
	_, err = c.Search(context.Background(), []string{}, 3)
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 400 || calls.Load() != 1 || !strings.Contains(he.Message, "empty list") {
		t.Fatalf("400 is not retried and is reported: %v (calls %d)", err, calls.Load())
	}
	// A dead server fails after the retries, within the context.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c = NewClient("http://" + addr)
	c.Retries, c.Backoff = 2, time.Millisecond
	if _, err := c.Search(context.Background(), []string{"q"}, 3); err == nil || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("dead server: %v", err)
	}
}

func TestGracefulShutdown(t *testing.T) {
	ix := fixtureIndex(t)
	enc := &blockingEncoder{d: 32, entered: make(chan struct{}, 1), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, "127.0.0.1:0", ix, ServerConfig{Encoder: enc}, 10*time.Second, nil,
			func(a net.Addr) { addrc <- a.String() })
	}()
	url := "http://" + <-addrc
	codec := make(chan int, 1)
	go func() {
		code, _, _ := post(t, url, `{"queries": ["q"], "method": "dense"}`)
		codec <- code
	}()
	<-enc.entered
	cancel() // SIGTERM arrives while a request is in progress
	time.Sleep(50 * time.Millisecond)
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("server still accepts connections after shutdown began")
	}
	close(enc.release)
	if code := <-codec; code != 200 {
		t.Fatalf("in-flight request got %d during shutdown, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
}

// The wiki-18 slice is indexed and served with contents byte-identical to
// the corpus.
func TestServeWiki18ByteIdentical(t *testing.T) {
	corpus := sharedData(t, "wiki18/wiki18-first-1000.jsonl")
	dir := filepath.Join(t.TempDir(), "ix")
	if _, err := Build(context.Background(), BuildOptions{Corpus: corpus, Out: dir, Analyzer: DefaultAnalyzer}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	byID := map[string]string{}
	f, _ := os.Open(corpus)
	err = fileio.EachJSONL(f, corpus, func(line int, raw []byte) error {
		var p Passage
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		byID[p.ID] = p.Contents
		doc, err := ix.Docs.Get(int64(line - 1))
		if err != nil {
			return err
		}
		if doc.ID != p.ID || doc.Contents != p.Contents {
			return fmt.Errorf("row %d differs from the corpus", line)
		}
		return nil
	})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(byID) != 1000 {
		t.Fatalf("%d passages", len(byID))
	}
	_, hs := newTestServer(t, ix, ServerConfig{})
	body := `{"queries": ["Evan Morris lobbyist Genentech", "album released by the band", "French football club", "river in Europe"], "topk": 10, "return_scores": true}`
	code, _, raw := post(t, hs.URL, body)
	var r struct{ Result [][]scoredJSON }
	if err := json.Unmarshal(raw, &r); code != 200 || err != nil {
		t.Fatalf("%d %s", code, raw)
	}
	if r.Result[0][0].Document.ID != "0" {
		t.Errorf("Evan Morris query ranks %s first, want 0", r.Result[0][0].Document.ID)
	}
	n, want := 0, 0
	for _, q := range []string{"Evan Morris lobbyist Genentech", "album released by the band", "French football club", "river in Europe"} {
		want += len(ix.BM25.Search(q, 10))
	}
	for _, hs := range r.Result {
		for _, h := range hs {
			n++
			if byID[h.Document.ID] != h.Document.Contents {
				t.Fatalf("served contents of %s differ from the corpus", h.Document.ID)
			}
		}
	}
	if n != want || n < 30 {
		t.Fatalf("%d hits, want %d (and at least 30)", n, want)
	}
}
