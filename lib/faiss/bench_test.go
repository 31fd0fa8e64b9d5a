package faiss

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
)

// BenchmarkFlatSearch compares FAISS IndexFlatIP with a plain OpenBLAS sgemm
// brute force (BruteForceIP) on the same random unit vectors in the same run.
// N defaults to 100,000×768; MEMPO_BENCH_FAISS_N=1000000 gives the 1M×768
// measurement in docs/BENCHMARKS.md (about 3 GiB of vectors).
func BenchmarkFlatSearch(b *testing.B) {
	n := 100000
	if s := envconfig.BenchFaissN.Get(); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("MEMPO_BENCH_FAISS_N=%q", s)
		}
		n = v
	}
	const d, nq, k = 768, 256, 10
	rng := rand.New(rand.NewPCG(3, 4))
	unit := func(rows int) []float32 {
		v := make([]float32, rows*d)
		for i := 0; i < rows; i++ {
			row := v[i*d : (i+1)*d]
			var s float32
			for j := range row {
				row[j] = float32(rng.NormFloat64())
				s += row[j] * row[j]
			}
			inv := float32(1 / math.Sqrt(float64(s)))
			for j := range row {
				row[j] *= inv
			}
		}
		return v
	}
	base := unit(n)
	queries := unit(nq)
	x, err := New(d, "Flat", InnerProduct)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if err := x.Add(base); err != nil {
		b.Fatal(err)
	}
	SetThreads(runtime.GOMAXPROCS(0))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		_, fi, err := x.Search(queries, k)
		if err != nil {
			b.Fatal(err)
		}
		fs := time.Since(t).Seconds()
		t = time.Now()
		_, bi, err := BruteForceIP(queries, base, d, k)
		if err != nil {
			b.Fatal(err)
		}
		bs := time.Since(t).Seconds()
		same := 0
		for j := range fi {
			if fi[j] == bi[j] {
				same++
			}
		}
		if same < len(fi)*99/100 {
			b.Fatalf("faiss and brute force agree on only %d of %d ids", same, len(fi))
		}
		b.ReportMetric(float64(n), "vectors")
		b.ReportMetric(nq/fs, "faiss_qps")
		b.ReportMetric(nq/bs, "sgemm_qps")
		b.ReportMetric(bs/fs, "faiss_speedup")
	}
}
