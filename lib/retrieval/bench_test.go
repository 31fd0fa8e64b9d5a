package retrieval

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
)

// runLoad sends every query once through s from conc goroutines and reports
// queries/s and the p50/p99 latency of single-query calls.
func runLoad(b *testing.B, s Searcher, queries []string, conc int) {
	b.Helper()
	lat := make([]time.Duration, len(queries))
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	cpu0 := CPUTime()
	start := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(queries) {
					return
				}
				t := time.Now()
				if _, err := s.Search(context.Background(), queries[i:i+1], 10); err != nil {
					failed.Add(1)
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := CPUTime() - cpu0
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d queries failed", f)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(len(queries))/wall.Seconds(), "queries/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99_ms")
	// CPU per query (whole process: client, server and search) stays
	// meaningful when the machine is shared and wall-clock numbers are not.
	b.ReportMetric(cpu.Seconds()*1000/float64(len(queries)), "cpu_ms/query")
}

func benchSearch(b *testing.B, ix *Index, queries []string) {
	local := &Local{Index: ix, Method: MethodBM25}
	srv := NewServer(ix, ServerConfig{})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close() }()
	client := NewClient(hs.URL)
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("inproc/c=%d", conc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runLoad(b, local, queries, conc)
			}
		})
		b.Run(fmt.Sprintf("http/c=%d", conc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runLoad(b, client, queries, conc)
			}
		})
	}
}

// BenchmarkHotpotBuild indexes the ~11k HotpotQA dev paragraphs.
func BenchmarkHotpotBuild(b *testing.B) {
	sharedData(b, hotpotFiles[0])
	tmp := b.TempDir()
	corpus, _ := hotpotCorpus(b, tmp)
	for i := 0; i < b.N; i++ {
		start, cpu0 := time.Now(), CPUTime()
		m, err := Build(context.Background(), BuildOptions{Corpus: corpus, Out: filepath.Join(tmp, "ix"), Analyzer: DefaultAnalyzer})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(m.Docs)/time.Since(start).Seconds(), "passages/s")
		b.ReportMetric(float64(m.Docs)/(CPUTime()-cpu0).Seconds(), "passages/cpu_s")
		b.ReportMetric(float64(PeakRSS())/(1<<20), "peak_rss_MiB")
	}
}

// BenchmarkHotpotBM25 runs the 1,100 HotpotQA questions against the ~11k
// passage index, in process and over HTTP, at concurrency 1, 16 and 64.
func BenchmarkHotpotBM25(b *testing.B) {
	dir, qs := hotpotIndex(b)
	ix, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	queries := make([]string, len(qs))
	for i, q := range qs {
		queries[i] = q.Question
	}
	benchSearch(b, ix, queries)
}

// BenchmarkLargeBM25 does the same on a large index given by
// MEMPO_BENCH_INDEX (built by scripts/bench_retrieval_1m.sh); it needs the
// HotpotQA questions for queries.
func BenchmarkLargeBM25(b *testing.B) {
	dir := envconfig.BenchIndex.Get()
	if dir == "" {
		b.Skip("set MEMPO_BENCH_INDEX to a large index directory (scripts/bench_retrieval_1m.sh does)")
	}
	_, qs := hotpotCorpus(b, b.TempDir())
	start := time.Now()
	ix, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	b.Logf("opened %d passages in %v", ix.Manifest.Docs, time.Since(start))
	queries := make([]string, len(qs))
	for i, q := range qs {
		queries[i] = q.Question
	}
	benchSearch(b, ix, queries)
}
