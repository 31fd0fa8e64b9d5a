package model

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
)

// TestCUDABenchmarks measures the CUDA backend on random-weight Qwen2.5
// shapes when MEMPO_CUDA_BENCH=1 (scripts/gpu/run.sh sets it): a training
// step (forward+backward of the token log-probs, packed sequences of 2048),
// prefill (LogProbs), greedy batched decoding, and the time by kernel of one
// training step. MEMPO_CUDA_BENCH_MODELS picks the presets (comma list),
// MEMPO_CUDA_BENCH_BATCH the training batch in sequences. Lines starting with
// "BENCH" are the results.
func TestCUDABenchmarks(t *testing.T) {
	if envconfig.CUDABench.Get() != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the CUDA benchmarks")
	}
	be := cudaOrSkip(t)
	// Runs are model:mode, mode fp32 or bf16 (bf16 GEMM operands, fp32
	// accumulation); a bare model name runs both modes.
	var runs [][2]string
	for _, r := range strings.Split(envconfig.CUDABenchRuns.Or(envconfig.CUDABenchModels.Or("qwen2.5-0.5b,qwen2.5-1.5b")), ",") {
		name, mode, ok := strings.Cut(r, ":")
		if !ok {
			runs = append(runs, [2]string{name, "fp32"}, [2]string{name, "bf16"})
		} else {
			runs = append(runs, [2]string{name, mode})
		}
	}
	batch, _ := strconv.Atoi(envconfig.CUDABenchBatch.Or("8"))
	T := 2048
	fmt.Printf("BENCH device %s\n", be.Device())
	for _, run := range runs {
		name, mode := run[0], run[1]
		be.SetBF16(mode == "bf16")
		t0 := time.Now()
		m := randomPresetModel(t, be, name)
		// LM head in chunks of 2048 rows (the model's default, 32 MiB of
		// logits a chunk, suits the CPU; the GPU has room for larger GEMMs).
		m.headRows = 2048
		fmt.Printf("BENCH %s %s loaded in %.1fs (LM head chunk 2048 rows)\n", name, mode, time.Since(t0).Seconds())
		name = name + " " + mode
		flops := trainFLOPsCUDA(m, T)

		seqs := make([][]int, batch)
		weights := make([][]float32, batch)
		for b := range seqs {
			seqs[b] = make([]int, T)
			weights[b] = make([]float32, T)
			for i := range seqs[b] {
				seqs[b][i] = (i*7919 + b*104729) % m.a.vocab
				weights[b][i] = 1
			}
		}
		// Training step.
		step := func() {
			m.ZeroGrads()
			if _, _, err := m.Backward(seqs, weights); err != nil {
				t.Fatal(err)
			}
			be.Sync()
		}
		step() // warm-up: compiles kernels, grows the pool
		var best float64
		for i := 0; i < 2; i++ {
			s := time.Now()
			step()
			d := time.Since(s).Seconds()
			if best == 0 || d < best {
				best = d
			}
		}
		tok := float64(batch*T) / best
		fmt.Printf("BENCH %s train B=%d T=%d: %.0f tokens/s (%.3f s/step), %.1f TFLOP/s = MFU %.1f%% of 989 (bf16 dense) / %.1f%% of 67 (fp32)\n",
			name, batch, T, tok, best, flops*float64(batch)/best/1e12, 100*flops*float64(batch)/best/989e12, 100*flops*float64(batch)/best/67e12)

		// Time by kernel of one training step.
		be.StartProfile()
		step()
		ms, calls := be.StopProfile()
		printProfile(name+" train", ms, calls, best)

		// Prefill: forward + LM head + log-probs over the same batch.
		m.Recompute = false
		s := time.Now()
		if _, err := m.LogProbs(seqs); err != nil {
			t.Fatal(err)
		}
		d := time.Since(s).Seconds()
		s = time.Now()
		if _, err := m.LogProbs(seqs); err != nil {
			t.Fatal(err)
		}
		d = min(d, time.Since(s).Seconds())
		fmt.Printf("BENCH %s prefill B=%d T=%d: %.0f tokens/s\n", name, batch, T, float64(batch*T)/d)

		// Greedy decoding: prompts of 128, 128 new tokens.
		// Weight bytes a decoding step reads: fp32, or the kept bf16 copies
		// of the matrices in bf16 mode (norm vectors are negligible).
		wbytes, wkind := 4.0, "fp32"
		if be.BF16() {
			wbytes, wkind = 2, "bf16"
		}
		var paramBytes float64
		for _, sp := range m.specs {
			paramBytes += wbytes * float64(sp.rows*sp.cols)
		}
		for _, B := range []int{1, 32, 256} {
			reqs := benchPrompts(m, B)
			opts := GenerateOptions{MaxTokens: 128, IgnoreEOS: true}
			// Warm-up at this batch: its kernels (skinny or cuBLAS products,
			// split attention) are compiled by NVRTC at first use, which
			// must not fall inside the timed run.
			if _, err := m.Generate(reqs, GenerateOptions{MaxTokens: 4, IgnoreEOS: true}); err != nil {
				t.Fatal(err)
			}
			if B == 256 {
				be.StartProfile()
			}
			s := time.Now()
			if _, err := m.Generate(reqs, opts); err != nil {
				t.Fatal(err)
			}
			d := time.Since(s).Seconds()
			if B == 256 {
				ms, calls := be.StopProfile()
				printProfile(name+" decode B=256", ms, calls, d)
			}
			// HBM bound: every step reads all weights once and the fp32
			// cache (192 positions on average).
			kvBytes := float64(2*m.a.layers*m.a.kvHeads*m.a.headDim*4) * float64(B) * 192
			bound := float64(B) * 4.3e12 / (paramBytes + kvBytes)
			fmt.Printf("BENCH %s decode B=%d: %.0f tokens/s (incl. prefill of 128), HBM bound %.0f tokens/s (%s weights %.2f GB, 4.3 TB/s)\n",
				name, B, float64(B*128)/d, bound, wkind, paramBytes/1e9)
		}
		m = nil
		runtime.GC()
		be.Sync()
	}
}

// printProfile prints time by kernel, largest first, and the kernels' sum
// against the wall time (the rest is host work and launch gaps).
func printProfile(what string, ms map[string]float64, calls map[string]int, wall float64) {
	var total float64
	var names []string
	for k, v := range ms {
		total += v
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return ms[names[i]] > ms[names[j]] })
	fmt.Printf("BENCH %s: kernels %.1f ms of %.1f ms wall\n", what, total, 1000*wall)
	for _, k := range names {
		if ms[k] < 0.005*total {
			continue
		}
		fmt.Printf("BENCH %s kernel %-24s %8.1f ms %5.1f%% (%d calls)\n", what, k, ms[k], 100*ms[k]/total, calls[k])
	}
}

// trainFLOPsCUDA is trainFLOPs of bench_test.go: useful FLOPs of one
// forward+backward of a sequence of T tokens.
func trainFLOPsCUDA(m *Model, T int) float64 {
	a := m.a
	var w float64
	for _, s := range m.specs {
		if s.rows > 1 && s.name != "model.embed_tokens.weight" {
			w += float64(s.rows * s.cols)
		}
	}
	w += float64(a.vocab * a.hidden)
	fwd := 2*w*float64(T) + float64(a.layers)*2*float64(T)*float64(T)*float64(a.heads*a.headDim)
	return 3 * fwd
}
