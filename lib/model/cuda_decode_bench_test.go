package model

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/tensor/half"
)

// TestCUDADecodeBenchmarks measures greedy batched decoding (prompts of
// 128 tokens, 128 new tokens, random weights, bf16 mode) on the Qwen2.5
// shapes of MEMPO_CUDA_DECODE_BENCH_MODELS (default 0.5B, 1.5B, 7B) at the
// batches of MEMPO_CUDA_DECODE_BENCH_BATCHES (default 1, 32 and 256), for each decoding path (MEMPO_CUDA_DECODE_BENCH_MODES,
// default generic,direct,graph: the op-by-op path, the fused step launched
// directly, the fused step replayed from CUDA graphs; suffixes run
// variants, setDecodeVariant), next to the HBM bound
// measured in the same process: the bytes a step must read (every GEMM
// weight in bf16 once, an untied embedding table not counted, and the fp32
// KV cache of 192 positions on average) over the device-to-device copy
// bandwidth (bytes read + written). Two rates: the whole Generate (prefill
// of 128 included, as TestCUDABenchmarks reports), and the decoding steps
// alone, (t(128 tokens) − t(1 token)) over 127 steps. Runs when
// MEMPO_CUDA_BENCH=1; lines starting with BENCH are the results.
func TestCUDADecodeBenchmarks(t *testing.T) {
	if envconfig.CUDABench.Or("") != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the CUDA benchmarks")
	}
	be := cudaOrSkip(t)
	bw := copyBandwidth(t, be.Device())
	fmt.Printf("BENCH device %s, copy bandwidth %.2f TB/s (read + write, 1 GiB device to device, median of 20)\n", be.Device(), bw/1e12)
	// What ptxas gave the step's GEMV kernels and the persistent launch (a
	// kernel at its launch bound's registers with local memory spills).
	for _, k := range []string{"dec_persist_2_64", "dec_persist_2_128", "dec_persist_1_256", "gemv_bf16", "gemv_swiglu_bf16", "gemv_qkv_rope_bf16"} {
		regs, local, static, err := be.dev.FuncResources(be.fn("decode", k))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("BENCH kernel resources decode/%s: %d registers, %d bytes of local memory, %d bytes of static shared memory\n", k, regs, local, static)
	}
	models := strings.Split(envconfig.DecodeBenchMods.Or("qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b"), ",")
	modes := strings.Split(envconfig.DecodeBenchMode.Or("generic,direct,graph"), ",")
	be.SetBF16(true)
	for _, name := range models {
		t0 := time.Now()
		m := randomPresetModel(t, be, name)
		var wBytes float64
		for _, sp := range m.specs {
			if sp.rows > 1 && sp.cols > 1 && !(sp.name == "model.embed_tokens.weight" && !m.a.tied) {
				wBytes += 2 * float64(sp.rows*sp.cols)
			}
		}
		fmt.Printf("BENCH %s loaded in %.1fs; a step reads %.3f GB of bf16 weights\n", name, time.Since(t0).Seconds(), wBytes/1e9)
		for _, f := range strings.Split(envconfig.DecodeBenchRows.Or("1,32,256"), ",") {
			B, err := strconv.Atoi(f)
			if err != nil || B < 1 {
				t.Fatalf("%s: batch %q", envconfig.DecodeBenchRows.Name, f)
			}
			reqs := benchPrompts(m, B)
			kvBytes := float64(2*m.a.layers*m.a.kvHeads*m.a.headDim*4) * float64(B) * 192
			bound := float64(B) * bw / (wBytes + kvBytes)
			gen := func(n int) float64 {
				s := time.Now()
				if _, err := m.Generate(reqs, GenerateOptions{MaxTokens: n, IgnoreEOS: true}); err != nil {
					t.Fatal(err)
				}
				return time.Since(s).Seconds()
			}
			for _, mode := range modes {
				setDecodeVariant(t, be, mode)
				be.graphErr = nil
				gen(4) // warm-up: kernels, cuBLAS heuristics, the pool
				t1 := min(gen(1), gen(1))
				t128 := gen(128)
				if t := gen(128); t < t128 {
					t128 = t
				}
				if be.graphErr != nil {
					fmt.Printf("BENCH %s decode %s: graph capture failed: %v\n", name, mode, be.graphErr)
				}
				whole := float64(B*128) / t128
				steps := float64(B*127) / (t128 - t1)
				fmt.Printf("BENCH %s decode B=%d %-7s: %7.0f tokens/s = %5.1f%% of bound (incl. prefill); steps alone %7.0f tokens/s = %5.1f%% (%.3f ms/step); HBM bound %.0f tokens/s\n",
					name, B, mode, whole, 100*whole/bound, steps, 100*steps/bound, 1000*(t128-t1)/127, bound)
			}
			if B == 1 {
				// The phase trace of dec_persist: its default and each
				// persistent variant the run asks for.
				traced := []string{"graph-persist"}
				for _, mode := range modes {
					if strings.HasPrefix(mode, "graph-persist-") && !slices.Contains(traced, mode) {
						traced = append(traced, mode)
					}
				}
				for _, mode := range traced {
					setDecodeVariant(t, be, mode)
					persistTraceReport(t, be, fmt.Sprintf("%s decode B=%d %s", name, B, mode), func() { gen(128) })
				}
			}
			if B == 1 || B == 32 || B == 256 {
				setDecodeVariant(t, be, decodeGraph) // profiling runs the fused step directly, with events
				be.StartProfile()
				d := gen(128)
				ms, calls := be.StopProfile()
				printProfile(fmt.Sprintf("%s decode B=%d fused step", name, B), ms, calls, d)
			}
		}
		m = nil
		runtime.GC()
		be.Sync()
	}
}

// setDecodeVariant sets the backend's decoding path from a benchmark mode:
// a path (graph, direct, generic) and "-"-separated variants: serial (no
// overlapped launches), perrow (attndecode.cu's per-row attention kernel),
// rope (q/k/v and RoPE as separate launches), attn1 (split attention
// without the in-block split, attn_split_merged), cublas (steps of 5 to 32
// rows with cuBLAS products, not skinny.cu), skinnyall (skinny.cu for every
// product of those steps, not only q, k and v), nopair (gate and up, k
// and v, as two cuBLAS calls each, not one batched call), nogroup (steps
// of more than 4 rows without attn_split_group), gw1, gw2, gw8
// (attn_split_group with 1, 2 or 8 warps a block), sep (small steps' layers
// as separate launches, not dec_persist), persist (dec_persist, with
// MEMPO_CUDA_PERSIST's blocks a multiprocessor or 1), p2 and p4 (dec_persist
// with up to 2 or 4 blocks a multiprocessor).
func setDecodeVariant(t *testing.T, be *CUDA, mode string) {
	parts := strings.Split(mode, "-")
	be.decode = parts[0]
	be.overlap = envconfig.CUDAPDL.Get() != "0"
	be.perRowAttn, be.ropeApart, be.attnNoSub = false, false, false
	be.skinnyOff, be.skinnyAll = envconfig.CUDASkinny.Get() == "0", false
	be.pairOff = envconfig.CUDAPair.Get() == "0"
	be.attnNoGroup, be.groupWarps = envconfig.CUDAAttnGroup.Get() == "0", 0
	be.persistBlocks = persistBlocksFromEnv()
	for _, v := range parts[1:] {
		switch v {
		case "sep":
			be.persistBlocks = 0
		case "persist":
			be.persistBlocks = max(1, be.persistBlocks)
		case "p2", "p4":
			be.persistBlocks = int(v[1] - '0')

		case "serial":
			be.overlap = false
		case "perrow":
			be.perRowAttn = true
		case "rope":
			be.ropeApart = true
		case "attn1":
			be.attnNoSub = true
		case "cublas":
			be.skinnyOff = true
		case "skinnyall":
			be.skinnyAll = true
		case "nopair":
			be.pairOff = true
		case "nogroup":
			be.attnNoGroup = true
		case "gw1", "gw2", "gw8":
			be.groupWarps = int(v[2] - '0')
		default:
			t.Fatalf("decoding benchmark mode %q: unknown variant %q", mode, v)
		}
	}
}

// persistTraceReport runs gen with dec_persist's phase clocks on and
// prints, from the last step, the mean time of each phase kind (from the
// barrier that starts it to the last block's end) and of the barrier after
// it (from that end to block 0 leaving it).
func persistTraceReport(t *testing.T, be *CUDA, what string, gen func()) {
	const words = 1 << 20
	buf, err := be.dev.Alloc(8 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer be.dev.Free(buf)
	must(be.dev.Memset32(buf, 0, 2*words))
	be.persistTrace, be.persistGrid = buf, 0
	gen()
	be.persistTrace = 0
	G, nph := be.persistGrid, be.persistPhaseCount
	if G == 0 || (nph+1)*G+nph > words {
		fmt.Printf("BENCH %s dec_persist trace: no persistent step\n", what)
		return
	}
	tr := make([]uint64, nph*G+nph)
	must(be.dev.DtoH(unsafe.Pointer(&tr[0]), buf, 8*len(tr)))
	begin := func(ph int) uint64 { return tr[nph*G+ph] }
	end := func(ph int) uint64 {
		var e uint64
		for b := 0; b < G; b++ {
			e = max(e, tr[ph*G+b])
		}
		return e
	}
	var work, wait [persistPhases]float64
	for ph := 0; ph < nph; ph++ {
		work[ph%persistPhases] += float64(end(ph)-begin(ph)) / 1e3
		if ph+1 < nph {
			wait[ph%persistPhases] += float64(begin(ph+1)-end(ph)) / 1e3
		}
	}
	layers := float64(nph / persistPhases)
	var b strings.Builder
	for p, name := range []string{"norm+qkv", "attention", "o+residual", "norm+gate/up", "down+residual"} {
		fmt.Fprintf(&b, " %s %.2f + barrier %.2f;", name, work[p]/layers, wait[p]/layers)
	}
	fmt.Printf("BENCH %s dec_persist trace (µs a layer, %d blocks):%s step's layers %.1f µs\n", what, G, b.String(), float64(end(nph-1)-begin(0))/1e3)
}

// copyBandwidth is the device's copy rate in bytes moved (read + write) per
// second: the median of 20 device-to-device copies of 1 GiB.
func copyBandwidth(t *testing.T, d *cuda.Device) float64 {
	const n = 1 << 30
	a, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(a)
	defer d.Free(b)
	must(d.Memset32(a, 0x3f800000, n/4))
	var ts []float64
	for i := 0; i < 21; i++ {
		ms := eventMillis(d, func() { must(d.DtoD(b, a, n)) })
		if i > 0 {
			ts = append(ts, ms)
		}
	}
	sort.Float64s(ts)
	return 2 * n / (ts[len(ts)/2] / 1e3)
}

// eventMillis is the device time of the work queued by queue, between two
// events on the stream.
func eventMillis(d *cuda.Device, queue func()) float64 {
	e0, err := d.Record()
	must(err)
	queue()
	e1, err := d.Record()
	must(err)
	ms, err := d.Elapsed(e0, e1)
	must(err)
	e0.Destroy()
	e1.Destroy()
	return ms
}

// randomPresetModel is the preset's shape with checkpoint.RandomInit's
// weights (seed 1) on be.
func randomPresetModel(t *testing.T, be Backend, name string) *Model {
	cfg, err := checkpoint.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, checkpoint.RandomInit(cfg, 1), be)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the host copies of the weights
	return m
}

// benchPrompts are the decoding benchmarks' B prompts of 128 tokens.
func benchPrompts(m *Model, B int) []Request {
	reqs := make([]Request, B)
	for i := range reqs {
		p := make([]int, 128)
		for j := range p {
			p[j] = (j*31 + i*17 + 1) % m.a.vocab
		}
		reqs[i] = Request{Prompt: p}
	}
	return reqs
}

// TestCUDASkinnyBenchmarks times the products of decoding steps of 8 to 32
// rows on the Qwen2.5-0.5B and 7B shapes (bf16 operands, fp32 out), as the
// step groups them: the step's own kernel (skinny.cu; q, k and v in one
// launch, gate and up in one) against cuBLAS (cublasGemmEx, one call a
// product: what the step ran before), over enough copies of the weights
// that none is read from L2, next to the floor: the weights read once at the
// device-to-device copy bandwidth (bytes read + written), as the decoding
// benchmark's HBM bound. scripts/gpu/bench_skinny.py times PyTorch on the
// same products. Runs when MEMPO_CUDA_BENCH=1.
func TestCUDASkinnyBenchmarks(t *testing.T) {
	if envconfig.CUDABench.Or("") != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the CUDA benchmarks")
	}
	be := cudaOrSkip(t)
	be.SetBF16(true)
	d := be.Device()
	bw := copyBandwidth(t, d)
	fmt.Printf("BENCH device %s, copy bandwidth %.2f TB/s (read + write)\n", d, bw/1e12)
	for mt, name := range skinnyKernels {
		f, err := d.Func("skinny", name)
		must(err)
		must(d.SetMaxDynamicShared(f, skinnyShared(mt+1)))
		r, err := d.ResidentBlocks(f, skinnyThreads, skinnyShared(mt+1))
		must(err)
		fmt.Printf("BENCH skinny %s: %d blocks a multiprocessor resident (%d bytes of shared memory a block)\n", name, r, skinnyShared(mt+1))
	}
	const chunk = 1 << 26 // bf16 values of the host pattern the copies are filled from
	pattern := make([]uint16, chunk)
	for i := range pattern {
		pattern[i] = half.F32ToBF16(float32((i*7919)%2003-1001) / 1e4)
	}
	fill := func(p cuda.Ptr, n int) {
		for off := 0; off < n; off += chunk {
			must(d.HtoD(p+cuda.Ptr(2*off), unsafe.Pointer(&pattern[0]), 2*min(chunk, n-off)))
		}
	}
	alloc := func(bytes int) cuda.Ptr {
		p, err := d.Alloc(bytes)
		must(err)
		return p
	}
	for _, sh := range []struct {
		model                string
		hidden, inter, q, kv int
		vocab                int
	}{{"qwen2.5-0.5b", 896, 4864, 896, 128, 151936}, {"qwen2.5-7b", 3584, 18944, 3584, 512, 152064}} {
		for _, gr := range []struct {
			name string
			ns   []int
			k    int
		}{{"qkv", []int{sh.q, sh.kv, sh.kv}, sh.hidden}, {"o", []int{sh.hidden}, sh.q}, {"gate+up", []int{sh.inter, sh.inter}, sh.hidden},
			{"down", []int{sh.hidden}, sh.inter}, {"head", []int{sh.vocab}, sh.hidden}} {
			k, bytes, tiles := gr.k, 0, 0
			for _, n := range gr.ns {
				bytes += 2 * n * k
				tiles += (n + skinnyCols - 1) / skinnyCols
			}
			copies := min(16, max(1, (400<<20)/bytes+1))
			ws := make([][]cuda.Ptr, copies) // [copy][product]
			for i := range ws {
				for _, n := range gr.ns {
					p := alloc(2 * n * k)
					fill(p, n*k)
					ws[i] = append(ws[i], p)
				}
			}
			for _, m := range []int{8, 16, 32} {
				a := alloc(2 * m * k)
				fill(a, m*k)
				var cs []cuda.Ptr
				for _, n := range gr.ns {
					cs = append(cs, alloc(4*m*n))
				}
				st := &cudaStepper{b: be, maxB: m, bf16: true}
				st.skPart, st.skCnt = alloc(4*skinnyParts(d.SMs, m)), alloc(4*tiles)
				must(d.Memset32(st.skCnt, 0, tiles))
				run := func(i int, cublas bool) {
					w := ws[i%copies]
					if !cublas {
						st.skinnyGemm(a, m, k, cs, w, gr.ns)
						return
					}
					for p, n := range gr.ns {
						must(d.Gemm(false, true, m, n, k, 1, a, cuda.BF16, k, w[p], cuda.BF16, k, 0, cs[p], cuda.F32, n))
					}
				}
				timeIt := func(cublas bool) float64 {
					const reps = 48
					for i := 0; i < 4; i++ {
						run(i, cublas)
					}
					ms := eventMillis(d, func() {
						for i := 0; i < reps; i++ {
							run(i, cublas)
						}
					})
					return 1e3 * ms / reps
				}
				sk, cb := timeIt(false), timeIt(true)
				sk = min(sk, timeIt(false))
				floor := float64(bytes) / bw * 1e6
				fmt.Printf("BENCH skinny %s %-7s %v×%d m=%2d: skinny %8.2f µs (%5.1f%% of the floor %.2f µs; %d blocks) cuBLAS %8.2f µs (%5.1f%%) speedup %.2f×\n",
					sh.model, gr.name, gr.ns, k, m, sk, 100*floor/sk, floor, skinnyGrid(tiles, k, d.SMs), cb, 100*floor/cb, cb/sk)
				for _, p := range append(cs, a, st.skPart, st.skCnt) {
					must(d.Free(p))
				}
			}
			for _, w := range ws {
				for _, p := range w {
					must(d.Free(p))
				}
			}
		}
	}
}
