package cudaemu_test

// lib/cuda's flat search (flatsearch.go's passes and kernels/flatsearch.cu's
// top-k kernels) on the kernel emulation (this package, warp shuffles
// and ballots included), against numpy's order computed here: higher score
// first, lower id first on equal scores, NaN as -inf, missing entries -inf
// with id -1. The emulated GEMM sums in double and rounds to fp32; the
// reference does the same sums in the same order, so scores are equal bit
// for bit and ids must agree exactly, ties included.

import (
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/cuda/cudaemu"
	"github.com/mempo/mempo/lib/tensor/half"
)

var (
	flatEmuOnce sync.Once
	flatEmu     *cudaemu.Device
	flatEmuErr  error
)

func flatEmuDevice(t *testing.T) *cudaemu.Device {
	t.Helper()
	if ok, why := cudaemu.Available(); !ok {
		t.Skipf("no kernel emulation: %s", why)
	}
	flatEmuOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mempo-flat-emu")
		if err != nil {
			flatEmuErr = err
			return
		}
		flatEmu, flatEmuErr = cudaemu.NewModule(dir, "flatsearch", 0)
		os.RemoveAll(dir)
	})
	if flatEmuErr != nil {
		t.Fatal(flatEmuErr)
	}
	return flatEmu
}

// flatReference is the exact top k of every query over the fp16-rounded
// vectors, as the emulation scores them.
func flatReference(base, q []float32, dim, k int) ([]float32, []int64) {
	r16 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, f := range v {
			out[i] = float64(half.F16ToF32(half.F32ToF16(f)))
		}
		return out
	}
	b, qq := r16(base), r16(q)
	n, nq := len(base)/dim, len(q)/dim
	dist := make([]float32, nq*k)
	ids := make([]int64, nq*k)
	for i := 0; i < nq; i++ {
		sc := make([]float32, n)
		idx := make([]int, n)
		for j := 0; j < n; j++ {
			var acc float64
			for c := 0; c < dim; c++ {
				acc += qq[i*dim+c] * b[j*dim+c]
			}
			s := float32(acc)
			if s != s {
				s = float32(math.Inf(-1))
			}
			sc[j], idx[j] = s, j
		}
		sort.SliceStable(idx, func(a, c int) bool { return sc[idx[a]] > sc[idx[c]] })
		for j := 0; j < k; j++ {
			if j < n {
				dist[i*k+j], ids[i*k+j] = sc[idx[j]], int64(idx[j])
			} else {
				dist[i*k+j], ids[i*k+j] = float32(math.Inf(-1)), -1
			}
		}
	}
	return dist, ids
}

func TestEmuFlatSearch(t *testing.T) {
	d := flatEmuDevice(t)
	inf := float32(math.Inf(1))
	type tcase struct {
		name       string
		n, dim, nq int
		scratchMiB int
		ks         []int
		gen        func(r *rand.Rand, base, q []float32)
	}
	normal := func(r *rand.Rand, base, q []float32) {
		for i := range base {
			base[i] = float32(r.NormFloat64())
		}
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
	}
	// Values in {-1, 0, 1}: scores are small integers, every top k is
	// decided among many exact ties.
	ties := func(r *rand.Rand, base, q []float32) {
		for i := range base {
			base[i] = float32(r.IntN(3) - 1)
		}
		for i := range q {
			q[i] = float32(r.IntN(3) - 1)
		}
	}
	// Ties, plus vectors with ±inf components: 0·inf is NaN (counted as
	// -inf), and ±inf scores; a few queries of zeros score NaN everywhere.
	nans := func(r *rand.Rand, base, q []float32) {
		ties(r, base, q)
		for i := 0; i < len(base)/50; i++ {
			j := r.IntN(len(base))
			base[j] = inf
			if r.IntN(2) == 0 {
				base[j] = -inf
			}
		}
		dim := len(q) / 5
		for c := 0; c < dim; c++ {
			q[c] = 0
		}
	}
	// Scores rising with the id: every entry beats the running threshold
	// (the selection's worst case; each step inserts).
	rising := func(r *rand.Rand, base, q []float32) {
		n := len(base) / 2
		for j := 0; j < n; j++ {
			base[2*j], base[2*j+1] = float32(j%1500)/64, 1
		}
		for i := range q {
			q[i] = 1
		}
	}
	for _, c := range []tcase{
		{"normal", 20011, 8, 3, 0, []int{1, 3, 10, 33, 100, 256, 300}, normal},
		{"ties", 9001, 4, 4, 0, []int{1, 10, 64, 65, 200, 300}, ties}, // 300: topk_chunks on ties
		{"nan_inf", 5003, 5, 5, 0, []int{3, 10, 129}, nans},
		{"rising", 6000, 2, 2, 0, []int{7, 40}, rising},
		{"few_vectors", 5, 3, 3, 0, []int{1, 5, 10, 300}, ties},
		// 64 queries and 1 MiB of scores: blocks of 4096 vectors, the last
		// of 3627 (odd), merged by a pass over the blocks' top k.
		{"blocks", 3*4096 + 3627, 6, 64, 1, []int{10, 100}, ties},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.dim)))
			base := make([]float32, c.n*c.dim)
			q := make([]float32, c.nq*c.dim)
			c.gen(r, base, q)
			x, err := cuda.NewFlatIndexOn(d, c.n, c.dim)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := x.Free(); err != nil {
					t.Error(err)
				}
			}()
			if c.scratchMiB > 0 {
				x.SetScratchMiB(c.scratchMiB)
			}
			if err := x.Add(base[:c.n/2*c.dim]); err != nil {
				t.Fatal(err)
			}
			if err := x.Add(base[c.n/2*c.dim:]); err != nil {
				t.Fatal(err)
			}
			for _, k := range c.ks {
				dist, ids, err := x.Search(q, k)
				if err != nil {
					t.Fatalf("k=%d: %v", k, err)
				}
				wd, wi := flatReference(base, q, c.dim, k)
				bad := 0
				for i := range wi {
					if ids[i] != wi[i] || math.Float32bits(dist[i]) != math.Float32bits(wd[i]) {
						if bad < 5 {
							t.Errorf("k=%d query %d rank %d: (%g, %d), want (%g, %d)", k, i/k, i%k, dist[i], ids[i], wd[i], wi[i])
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("k=%d: %d of %d entries differ", k, bad, len(wi))
				}
			}
		})
	}
	if d.Live() != 0 {
		t.Errorf("%d emulated allocations not freed", d.Live())
	}
	for _, name := range []string{"topk_warp1", "topk_warp2", "topk_warp4", "topk_warp8", "topk_chunks", "gemm"} {
		if d.Launches[name] == 0 {
			t.Errorf("%s never ran", name)
		}
	}
}
