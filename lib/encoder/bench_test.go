package encoder

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
)

// BenchmarkBaseCPU embeds passages of exactly 256 tokens with a base-sized
// random encoder (768 hidden, 12 layers): the cost of Search-R1's passage
// encoding (max_length 256) per passage on this machine's CPU.
// MEMPO_BENCH_ENCODER_BATCH sets the batch (default 8).
//
//	go test -run '^$' -bench BaseCPU -benchtime 1x ./lib/encoder/
func BenchmarkBaseCPU(b *testing.B) {
	benchBase(b, 256)
}

// BenchmarkBaseCPUQuery is the same for query-length texts (24 tokens).
func BenchmarkBaseCPUQuery(b *testing.B) {
	benchBase(b, 24)
}

func benchBase(b *testing.B, T int) {
	e, err := Random(BaseConfig, nil, 1, Options{})
	if err != nil {
		b.Fatal(err)
	}
	B := 8
	if v, err := strconv.Atoi(envconfig.BenchEncoderBatch.Get()); err == nil && v > 0 {
		B = v
	}
	ids := make([]int, B*T)
	mask := make([]int, B*T)
	for i := range ids {
		ids[i] = 1000 + (i*7919)%28000
		mask[i] = 1
	}
	// Warm-up on one short row (page faults of the weights, BLAS threads).
	if _, err := e.Forward(ids[:T], mask[:T], 1, T); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuSeconds()
	for i := 0; i < b.N; i++ {
		if _, err := e.Forward(ids, mask, B, T); err != nil {
			b.Fatal(err)
		}
	}
	secs := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	n := float64(B * b.N)
	b.ReportMetric(n/secs, "texts/s")
	b.ReportMetric(n/cpu, "texts/cpu-s")
	b.Logf("%d texts of %d tokens, batch %d: %.2f texts/s wall, %.2f per CPU-second (GOMAXPROCS %d; %s)",
		B*b.N, T, B, n/secs, n/cpu, runtime.GOMAXPROCS(0), fmt.Sprint(time.Duration(secs*1e9/n)))
}
