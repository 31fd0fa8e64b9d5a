package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls a /retrieve server (mempo-serve or Search-R1's
// retrieval_server.py) and implements Searcher. Transient failures (network
// errors, 429, 502, 503, 504) are retried with exponential backoff and jitter,
// honouring Retry-After; other statuses fail at once with an *HTTPError.
type Client struct {
	URL        string       // base URL, e.g. http://127.0.0.1:8000
	HTTP       *http.Client // per-attempt timeout lives here (Timeout)
	Retries    int          // extra attempts after the first
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Method, when set, is sent as "method" (mempo-serve extension).
	Method Method
}

// NewClient returns a client with a 30 s per-attempt timeout, 4 retries,
// backoff from 200 ms up to 5 s, and a connection pool sized for many
// concurrent callers (rollout workers share one Client).
func NewClient(baseURL string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	return &Client{URL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second, Transport: tr},
		Retries: 4, Backoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second}
}

// HTTPError is a non-2xx answer.
type HTTPError struct {
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("retrieval server: HTTP %d: %s", e.Status, e.Message)
}

// Search implements Searcher: topk ≤ 0 asks for the server's default.
func (c *Client) Search(ctx context.Context, queries []string, topk int) ([][]Hit, error) {
	return c.Retrieve(ctx, queries, nil, topk)
}

// Retrieve is Search with optional query vectors (dense search).
func (c *Client) Retrieve(ctx context.Context, queries []string, vectors [][]float32, topk int) ([][]Hit, error) {
	req := map[string]any{"queries": queries, "return_scores": true}
	if topk > 0 {
		req["topk"] = topk
	}
	if c.Method != "" {
		req["method"] = c.Method
	}
	if vectors != nil {
		req["query_vectors"] = vectors
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Result [][]struct {
			Document struct {
				ID       string `json:"id"`
				Contents string `json:"contents"`
			} `json:"document"`
			Score float64 `json:"score"`
		} `json:"result"`
	}
	if err := c.post(ctx, "/retrieve", body, &resp); err != nil {
		return nil, err
	}
	if len(resp.Result) != len(queries) {
		return nil, fmt.Errorf("retrieval server: %d result lists for %d queries", len(resp.Result), len(queries))
	}
	out := make([][]Hit, len(resp.Result))
	for q, hs := range resp.Result {
		out[q] = make([]Hit, len(hs))
		for i, h := range hs {
			title, _ := SplitContents(h.Document.Contents)
			out[q][i] = Hit{Row: -1, ID: h.Document.ID, Title: title, Contents: h.Document.Contents, Score: h.Score}
		}
	}
	return out, nil
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusBadGateway ||
		status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

func (c *Client) post(ctx context.Context, path string, body []byte, out any) error {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	maxBackoff := c.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 5 * time.Second
	}
	var last error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			wait := backoff << (attempt - 1)
			if wait > maxBackoff || wait <= 0 {
				wait = maxBackoff
			}
			var he *httpErrorRetry
			if errors.As(last, &he) && he.retryAfter > 0 {
				wait = min(he.retryAfter, maxBackoff)
			}
			wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			case <-t.C:
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err
			continue
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode/100 != 2 {
			e := &httpErrorRetry{HTTPError: HTTPError{Status: resp.StatusCode, Message: errorMessage(raw)}}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				e.retryAfter = time.Duration(s) * time.Second
			}
			if !retryable(resp.StatusCode) {
				return &e.HTTPError
			}
			last = e
			continue
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("retrieval server: bad JSON answer: %w", err)
		}
		return nil
	}
	var he *httpErrorRetry
	if errors.As(last, &he) {
		return fmt.Errorf("after %d attempts: %w", c.Retries+1, &he.HTTPError)
	}
	return fmt.Errorf("retrieval server: after %d attempts: %w", c.Retries+1, last)
}

type httpErrorRetry struct {
	HTTPError
	retryAfter time.Duration
}

func (e *httpErrorRetry) Error() string { return e.HTTPError.Error() }

func errorMessage(raw []byte) string {
	var e struct {
		Error  string `json:"error"`
		Detail any    `json:"detail"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if e.Error != "" {
			return e.Error
		}
		if e.Detail != nil {
			return fmt.Sprint(e.Detail)
		}
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
