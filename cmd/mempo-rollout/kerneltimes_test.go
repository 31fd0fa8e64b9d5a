package main

import (
	"strings"
	"testing"
)

func TestKernelTimes(t *testing.T) {
	ms := map[string]float64{"score gemm_bf16": 30, "score attn_mma_fwd_64": 10, "decode graph": 5, "prefill gemm_bf16": 20, "loose": 1}
	calls := map[string]int{"score gemm_bf16": 7, "score attn_mma_fwd_64": 2, "decode graph": 100, "prefill gemm_bf16": 3, "loose": 1}
	got := kernelTimes(ms, calls)
	want := []string{
		"kernel times (CUDA events, ms):",
		"  score          40.0 ms in 9 launches",
		"    gemm_bf16                          30.0 ms  75.0%         7 launches",
		"    attn_mma_fwd_64                    10.0 ms  25.0%         2 launches",
		"  prefill        20.0 ms in 3 launches",
		"  decode          5.0 ms in 100 launches",
		"  other           1.0 ms in 1 launches",
	}
	lines := strings.Split(got, "\n")
	at := 0
	for _, w := range want {
		for at < len(lines) && lines[at] != w {
			at++
		}
		if at == len(lines) {
			t.Fatalf("no line %q (in order) in\n%s", w, got)
		}
	}
}
