package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// ServerConfig tunes the HTTP server; zero fields take the defaults shown.
type ServerConfig struct {
	DefaultTopK  int    // 3: used when a request's topk is null or 0 (Search-R1 --topk)
	MaxTopK      int    // 1000
	MaxQueries   int    // 4096 queries in one request
	MaxBodyBytes int64  // 8 MiB; larger bodies get 413
	QueueSize    int    // 1024 requests waiting; beyond, 503 with Retry-After
	Workers      int    // GOMAXPROCS search workers
	MaxBatch     int    // 256 queries per internal batch
	Method       Method // default method: bm25
	// Encoder, when set, lets dense requests send plain queries.
	Encoder QueryEncoder
	// RetryAfter is the Retry-After value (seconds) of a 503; 1 by default.
	RetryAfter int
	// ReadTimeout bounds the reading of a whole request, headers and body
	// (30 s); HeaderTimeout the headers alone (10 s); WriteTimeout the
	// time from the end of the headers to the end of the answer (60 s).
	ReadTimeout, HeaderTimeout, WriteTimeout time.Duration
	// MaxConns caps the open connections (1024); more clients wait in the
	// listen backlog until one closes.
	MaxConns int
	// Logger receives panics met by a request (log.Default when nil).
	Logger *log.Logger
}

func (c *ServerConfig) defaults() {
	if c.DefaultTopK <= 0 {
		c.DefaultTopK = 3
	}
	if c.MaxTopK <= 0 {
		c.MaxTopK = 1000
	}
	if c.MaxQueries <= 0 {
		c.MaxQueries = 4096
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1024
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.Method == "" {
		c.Method = MethodBM25
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 1
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = min(10*time.Second, c.ReadTimeout)
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
}

// Server answers the Search-R1 retrieval contract over an Index:
//
//	POST /retrieve {"queries": [...], "topk": 3, "return_scores": true,
//	                "method": "bm25"|"dense", "query_vectors": [[...], ...]}
//	→ {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}
//	  (with return_scores false: {"result": [[{"id", "contents"}, ...], ...]})
//	GET /health, GET /metrics (Prometheus text)
//
// Requests wait in a bounded queue; workers take several waiting requests at
// once and search them as one batch (one FAISS call for dense requests).
type Server struct {
	ix      *Index
	cfg     ServerConfig
	queue   chan *job
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	m       *metrics
	logger  *log.Logger
	readers bodyReaders
}

type job struct {
	ctx     context.Context
	method  Method
	queries []string
	vectors [][]float32
	topk    int
	res     [][]Hit
	err     error
	done    chan struct{}
}

// NewServer starts the search workers; Close stops them.
func NewServer(ix *Index, cfg ServerConfig) *Server {
	cfg.defaults()
	s := &Server{ix: ix, cfg: cfg, queue: make(chan *job, cfg.QueueSize), stop: make(chan struct{}), m: newMetrics(), logger: cfg.Logger}
	for i := 0; i < cfg.Workers; i++ {
		s.wg.Add(1)
		go s.worker()
	}
	return s
}

// Close stops the workers; requests still queued get 503.
func (s *Server) Close() {
	s.stopped.Do(func() { close(s.stop) })
	s.wg.Wait()
}

func (s *Server) worker() {
	defer s.wg.Done()
	for {
		var first *job
		select {
		case <-s.stop:
			return
		case first = <-s.queue:
		}
		batch := []*job{first}
		n := len(first.queries)
	gather:
		for n < s.cfg.MaxBatch {
			select {
			case j := <-s.queue:
				batch = append(batch, j)
				n += len(j.queries)
			default:
				break gather
			}
		}
		s.m.batches.Add(1)
		s.m.batchedQ.Add(uint64(len(batch)))
		s.runSafely(batch)
		for _, j := range batch {
			close(j.done)
		}
	}
}

// run searches a batch: BM25 jobs query by query, dense jobs in one FAISS
// call, and all hits come from the docstore in one query per kind.
func (s *Server) run(batch []*job) {
	var bm, dense, toEncode []*job
	for _, j := range batch {
		if j.ctx.Err() != nil {
			j.err = j.ctx.Err()
			continue
		}
		if j.method == MethodDense {
			if j.vectors == nil {
				toEncode = append(toEncode, j)
				continue
			}
			dense = append(dense, j)
		} else {
			bm = append(bm, j)
		}
	}
	// The text queries of every request in the batch are encoded in one
	// call, so that a model encoder sees batches across clients.
	if len(toEncode) > 0 {
		var texts []string
		for _, j := range toEncode {
			texts = append(texts, j.queries...)
		}
		vecs, err := s.cfg.Encoder.Encode(context.WithoutCancel(toEncode[0].ctx), texts)
		if err == nil && len(vecs) != len(texts) {
			err = fmt.Errorf("the encoder returned %d vectors for %d queries", len(vecs), len(texts))
		}
		i := 0
		for _, j := range toEncode {
			if err != nil {
				j.err = fmt.Errorf("encoding queries: %w", err)
				continue
			}
			j.vectors = vecs[i : i+len(j.queries)]
			i += len(j.queries)
			dense = append(dense, j)
		}
	}
	if len(bm) > 0 {
		var scored [][]ScoredDoc
		for _, j := range bm {
			for _, q := range j.queries {
				scored = append(scored, s.ix.BM25.Search(q, j.topk))
			}
		}
		hits, err := s.ix.hits(scored)
		i := 0
		for _, j := range bm {
			if err != nil {
				j.err = err
				continue
			}
			j.res = hits[i : i+len(j.queries)]
			i += len(j.queries)
		}
	}
	if len(dense) > 0 {
		k := 0
		var vecs [][]float32
		for _, j := range dense {
			k = max(k, j.topk)
			vecs = append(vecs, j.vectors...)
		}
		hits, err := s.ix.SearchDense(vecs, k)
		i := 0
		for _, j := range dense {
			if err != nil {
				j.err = err
				continue
			}
			j.res = hits[i : i+len(j.vectors)]
			for q := range j.res {
				if len(j.res[q]) > j.topk {
					j.res[q] = j.res[q][:j.topk]
				}
			}
			i += len(j.vectors)
		}
	}
}

// Handler is the HTTP handler of the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/retrieve", s.retrieve)
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/metrics", s.metricsHandler)
	return recoverHandler(mux, s.logger)
}

type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

type retrieveRequest struct {
	queries      []string
	topk         int
	returnScores bool
	method       Method
	vectors      [][]float32
}

// parseRequest validates a /retrieve body field by field.
func (s *Server) parseRequest(body []byte) (*retrieveRequest, *httpError) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return nil, badRequest("body is not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, badRequest("body has data after the JSON object")
	}
	isNull := func(r json.RawMessage) bool { return len(r) == 0 || string(r) == "null" }
	req := &retrieveRequest{topk: s.cfg.DefaultTopK, method: s.cfg.Method}
	q, ok := raw["queries"]
	if !ok || isNull(q) {
		return nil, badRequest(`field "queries": missing; want a list of strings`)
	}
	if err := json.Unmarshal(q, &req.queries); err != nil {
		return nil, badRequest(`field "queries": want a list of strings`)
	}
	if len(req.queries) == 0 {
		return nil, badRequest(`field "queries": empty list`)
	}
	if len(req.queries) > s.cfg.MaxQueries {
		return nil, badRequest(`field "queries": %d queries, at most %d per request`, len(req.queries), s.cfg.MaxQueries)
	}
	if r, ok := raw["topk"]; ok && !isNull(r) {
		var k float64
		if err := json.Unmarshal(r, &k); err != nil || k != float64(int(k)) {
			return nil, badRequest(`field "topk": want an integer or null`)
		}
		switch {
		case k < 0:
			return nil, badRequest(`field "topk": %d is negative`, int(k))
		case k > float64(s.cfg.MaxTopK):
			return nil, badRequest(`field "topk": %d is above the server's limit %d`, int(k), s.cfg.MaxTopK)
		case k > 0:
			req.topk = int(k)
		}
	}
	if r, ok := raw["return_scores"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &req.returnScores); err != nil {
			return nil, badRequest(`field "return_scores": want true, false or null`)
		}
	}
	if r, ok := raw["method"]; ok && !isNull(r) {
		var m string
		if err := json.Unmarshal(r, &m); err != nil || (m != string(MethodBM25) && m != string(MethodDense)) {
			return nil, badRequest(`field "method": want "bm25" or "dense"`)
		}
		req.method = Method(m)
	}
	if r, ok := raw["query_vectors"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &req.vectors); err != nil {
			return nil, badRequest(`field "query_vectors": want a list of lists of numbers`)
		}
		if _, given := raw["method"]; !given {
			req.method = MethodDense
		}
	}
	if req.method == MethodDense {
		if s.ix.Dense == nil {
			return nil, badRequest(`field "method": this index has no dense (FAISS) index`)
		}
		if req.vectors == nil && s.cfg.Encoder == nil {
			return nil, badRequest(`field "query_vectors": dense search needs query vectors (the server has no query encoder)`)
		}
		if req.vectors != nil {
			if len(req.vectors) != len(req.queries) {
				return nil, badRequest(`field "query_vectors": %d vectors for %d queries`, len(req.vectors), len(req.queries))
			}
			d := s.ix.Dense.D()
			for i, v := range req.vectors {
				if len(v) != d {
					return nil, badRequest(`field "query_vectors": vector %d has %d dimensions, the index has %d`, i, len(v), d)
				}
			}
		}
	} else if req.vectors != nil {
		return nil, badRequest(`field "query_vectors": only for method "dense"`)
	}
	return req, nil
}

type docJSON struct {
	ID       string `json:"id"`
	Contents string `json:"contents"`
}

type scoredJSON struct {
	Document docJSON `json:"document"`
	Score    float64 `json:"score"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, "{\"error\":%q}\n", err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, e *httpError) {
	if e.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(s.cfg.RetryAfter))
	}
	writeJSON(w, e.code, map[string]string{"error": e.msg})
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.m.inflight.Add(1)
	code := http.StatusOK
	defer func() {
		s.m.inflight.Add(-1)
		s.m.observe(code, time.Since(start))
	}()
	fail := func(e *httpError) {
		code = e.code
		s.fail(w, e)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fail(&httpError{http.StatusMethodNotAllowed, "use POST /retrieve"})
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		fail(&httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes is above the limit of %d", r.ContentLength, s.cfg.MaxBodyBytes)})
		return
	}
	rc := http.NewResponseController(w)
	if !s.readers.start(rc) {
		fail(&httpError{http.StatusServiceUnavailable, "server is shutting down"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	s.readers.done(rc)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			fail(&httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body is above the limit of %d bytes", s.cfg.MaxBodyBytes)})
		} else if isTimeout(err) {
			fail(&httpError{http.StatusRequestTimeout, "body not received in time (or the server is shutting down)"})
		} else {
			fail(badRequest("reading body: %v", err))
		}
		return
	}
	req, herr := s.parseRequest(body)
	if herr != nil {
		fail(herr)
		return
	}
	j := &job{ctx: r.Context(), method: req.method, queries: req.queries, vectors: req.vectors, topk: req.topk, done: make(chan struct{})}
	select {
	case <-s.stop:
		fail(&httpError{http.StatusServiceUnavailable, "server is shutting down"})
		return
	default:
	}
	select {
	case s.queue <- j:
	default:
		fail(&httpError{http.StatusServiceUnavailable, fmt.Sprintf("queue full (%d requests waiting); retry later", cap(s.queue))})
		return
	}
	select {
	case <-j.done:
	case <-r.Context().Done():
		code = 499 // client went away; nothing to write
		return
	case <-s.stop:
		fail(&httpError{http.StatusServiceUnavailable, "server is shutting down"})
		return
	}
	if j.err != nil {
		if r.Context().Err() != nil {
			code = 499 // client went away; nothing to write
			return
		}
		fail(&httpError{http.StatusInternalServerError, j.err.Error()})
		return
	}
	s.m.queries.Add(uint64(len(req.queries)))
	if req.returnScores {
		out := make([][]scoredJSON, len(j.res))
		for q, hs := range j.res {
			out[q] = make([]scoredJSON, len(hs))
			for i, h := range hs {
				out[q][i] = scoredJSON{Document: docJSON{ID: h.ID, Contents: h.Contents}, Score: h.Score}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"result": out})
		return
	}
	out := make([][]docJSON, len(j.res))
	for q, hs := range j.res {
		out[q] = make([]docJSON, len(hs))
		for i, h := range hs {
			out[q][i] = docJSON{ID: h.ID, Contents: h.Contents}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": out})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status":       "ok",
		"documents":    s.ix.Manifest.Docs,
		"bm25":         true,
		"dense":        s.ix.Dense != nil,
		"encoder":      s.cfg.Encoder != nil,
		"queue_depth":  len(s.queue),
		"default_topk": s.cfg.DefaultTopK,
	})
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	s.m.write(w, len(s.queue), cap(s.queue), s.ix.Manifest.Docs)
}

// ListenAndServe serves the index on addr until ctx is done, then shuts down
// gracefully: it stops accepting, lets requests in progress finish (up to
// grace), and stops the workers. ready, when not nil, receives the bound
// address once listening.
func ListenAndServe(ctx context.Context, addr string, ix *Index, cfg ServerConfig, grace time.Duration, logger *log.Logger, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = logger
	}
	s := NewServer(ix, cfg)
	defer s.Close()
	cfg = s.cfg
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: cfg.HeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: 120 * time.Second}
	if logger != nil {
		srv.ErrorLog = logger
	}
	ln = newLimitListener(ln, cfg.MaxConns)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Requests still reading their body are cut short (408): only requests
	// being searched are worth the grace period.
	s.readers.cut()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
