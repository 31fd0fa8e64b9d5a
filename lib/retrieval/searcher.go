package retrieval

import (
	"context"
	"fmt"
)

// Searcher is what the rollout stage calls: for each query, the top passages
// best first. topk ≤ 0 means the searcher's default. Both the in-process
// Local searcher and the HTTP Client implement it.
type Searcher interface {
	Search(ctx context.Context, queries []string, topk int) ([][]Hit, error)
}

// Method selects how a query is searched.
type Method string

// Methods.
const (
	MethodBM25  Method = "bm25"
	MethodDense Method = "dense"
)

// Local searches an opened Index in process.
type Local struct {
	Index *Index
	// Method is bm25 (default) or dense; dense needs Encoder.
	Method  Method
	Encoder QueryEncoder
	// DefaultTopK is used when Search gets topk ≤ 0 (3 when zero, as Search-R1).
	DefaultTopK int
}

// NewLocal opens an index directory for in-process BM25 search.
func NewLocal(dir string) (*Local, error) {
	ix, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return &Local{Index: ix, Method: MethodBM25, DefaultTopK: 3}, nil
}

// Search implements Searcher.
func (l *Local) Search(ctx context.Context, queries []string, topk int) ([][]Hit, error) {
	if topk <= 0 {
		topk = l.DefaultTopK
		if topk <= 0 {
			topk = 3
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch l.Method {
	case "", MethodBM25:
		return l.Index.SearchBM25(queries, topk)
	case MethodDense:
		if l.Encoder == nil {
			return nil, fmt.Errorf("dense search needs a query encoder")
		}
		vecs, err := l.Encoder.Encode(ctx, queries)
		if err != nil {
			return nil, err
		}
		return l.Index.SearchDense(vecs, topk)
	}
	return nil, fmt.Errorf("unknown method %q (want bm25 or dense)", l.Method)
}

// Close closes the index.
func (l *Local) Close() error { return l.Index.Close() }
