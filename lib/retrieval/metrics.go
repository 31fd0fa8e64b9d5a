package retrieval

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// latencyBuckets are the upper bounds (seconds) of the latency histogram.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type metrics struct {
	mu       sync.Mutex
	byCode   map[int]uint64
	buckets  []uint64 // cumulative counts are computed when written
	count    uint64
	sum      float64
	queries  atomic.Uint64
	batches  atomic.Uint64
	batchedQ atomic.Uint64
	inflight atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{byCode: map[int]uint64{}, buckets: make([]uint64, len(latencyBuckets))}
}

func (m *metrics) observe(code int, d time.Duration) {
	s := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byCode[code]++
	m.count++
	m.sum += s
	for i, b := range latencyBuckets {
		if s <= b {
			m.buckets[i]++
			break
		}
	}
}

// write prints the Prometheus text exposition format.
func (m *metrics) write(w io.Writer, queueDepth, queueCap int, docs int64) {
	m.mu.Lock()
	codes := make([]int, 0, len(m.byCode))
	for c := range m.byCode {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	fmt.Fprintln(w, "# HELP mempo_retrieve_requests_total /retrieve requests by HTTP status.")
	fmt.Fprintln(w, "# TYPE mempo_retrieve_requests_total counter")
	for _, c := range codes {
		fmt.Fprintf(w, "mempo_retrieve_requests_total{code=\"%d\"} %d\n", c, m.byCode[c])
	}
	fmt.Fprintln(w, "# HELP mempo_retrieve_latency_seconds /retrieve latency, from request to response.")
	fmt.Fprintln(w, "# TYPE mempo_retrieve_latency_seconds histogram")
	var cum uint64
	for i, b := range latencyBuckets {
		cum += m.buckets[i]
		fmt.Fprintf(w, "mempo_retrieve_latency_seconds_bucket{le=\"%g\"} %d\n", b, cum)
	}
	fmt.Fprintf(w, "mempo_retrieve_latency_seconds_bucket{le=\"+Inf\"} %d\n", m.count)
	fmt.Fprintf(w, "mempo_retrieve_latency_seconds_sum %g\n", m.sum)
	fmt.Fprintf(w, "mempo_retrieve_latency_seconds_count %d\n", m.count)
	m.mu.Unlock()
	fmt.Fprintln(w, "# HELP mempo_retrieve_queries_total Queries answered.")
	fmt.Fprintln(w, "# TYPE mempo_retrieve_queries_total counter")
	fmt.Fprintf(w, "mempo_retrieve_queries_total %d\n", m.queries.Load())
	fmt.Fprintln(w, "# HELP mempo_batches_total Internal search batches run.")
	fmt.Fprintln(w, "# TYPE mempo_batches_total counter")
	fmt.Fprintf(w, "mempo_batches_total %d\n", m.batches.Load())
	fmt.Fprintln(w, "# HELP mempo_batched_requests_total Requests run inside internal batches.")
	fmt.Fprintln(w, "# TYPE mempo_batched_requests_total counter")
	fmt.Fprintf(w, "mempo_batched_requests_total %d\n", m.batchedQ.Load())
	fmt.Fprintln(w, "# HELP mempo_queue_depth Requests waiting for a search worker.")
	fmt.Fprintln(w, "# TYPE mempo_queue_depth gauge")
	fmt.Fprintf(w, "mempo_queue_depth %d\n", queueDepth)
	fmt.Fprintln(w, "# HELP mempo_queue_capacity Requests the queue holds before answering 503.")
	fmt.Fprintln(w, "# TYPE mempo_queue_capacity gauge")
	fmt.Fprintf(w, "mempo_queue_capacity %d\n", queueCap)
	fmt.Fprintln(w, "# HELP mempo_requests_in_flight /retrieve requests being handled.")
	fmt.Fprintln(w, "# TYPE mempo_requests_in_flight gauge")
	fmt.Fprintf(w, "mempo_requests_in_flight %d\n", m.inflight.Load())
	fmt.Fprintln(w, "# HELP mempo_index_documents Passages in the served index.")
	fmt.Fprintln(w, "# TYPE mempo_index_documents gauge")
	fmt.Fprintf(w, "mempo_index_documents %d\n", docs)
}
