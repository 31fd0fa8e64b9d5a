package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/mempo/mempo/lib/tensor/half"
)

func TestPlanFlat(t *testing.T) {
	for _, c := range []struct{ nq, n, k, scratch int }{
		{1, 100, 10, 512 << 20}, {512, 21_000_000, 10, 512 << 20}, {4096, 1_000_000, 1000, 512 << 20}, {37, 50000, 100, 1 << 20},
	} {
		p := planFlat(c.nq, c.n, c.k, c.scratch)
		if p.block%topkChunk != 0 || p.block*p.blocks < c.n || (p.blocks-1)*p.block >= c.n {
			t.Errorf("%+v: %+v does not tile the vectors", c, p)
		}
		if p.block > topkChunk && 4*c.nq*p.block > c.scratch {
			t.Errorf("%+v: %+v scores exceed the scratch", c, p)
		}
		chunks := func(m int) int { return (m + topkChunk - 1) / topkChunk }
		if p.tmp < chunks(p.block)*c.k || p.tmp < chunks(p.blocks*c.k)*c.k {
			t.Errorf("%+v: %+v tmp too small", c, p)
		}
	}
}

// GPU flat search against a CPU reference over the same fp16-rounded
// vectors (skips without a GPU). A small scratch bound splits the vectors
// into several blocks, so the cross-block reduction runs too.
func TestFlatSearchGPU(t *testing.T) {
	d := devOrSkip(t)
	r := rand.New(rand.NewPCG(3, 4))
	const n, dim, nq = 50000, 64, 37
	base := make([]float32, n*dim)
	for i := range base {
		base[i] = float32(r.NormFloat64())
	}
	q := make([]float32, nq*dim)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	x, err := d.NewFlatIndex(n, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	x.scoreMiB = 1
	if err := x.Add(base[:n/2*dim]); err != nil {
		t.Fatal(err)
	}
	if err := x.Add(base[n/2*dim:]); err != nil {
		t.Fatal(err)
	}
	if p := planFlat(nq, n, 100, 1<<20); p.blocks < 2 {
		t.Fatalf("plan %+v: one block", p)
	}
	round := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, f := range v {
			out[i] = float64(half.F16ToF32(half.F32ToF16(f)))
		}
		return out
	}
	b64, q64 := round(base), round(q)
	for _, k := range []int{1, 10, 100} {
		dist, ids, err := x.Search(q, k)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < nq; i++ {
			sc := make([]float64, n)
			idx := make([]int, n)
			for j := 0; j < n; j++ {
				var s float64
				for c := 0; c < dim; c++ {
					s += q64[i*dim+c] * b64[j*dim+c]
				}
				sc[j], idx[j] = s, j
			}
			sort.SliceStable(idx, func(a, b int) bool { return sc[idx[a]] > sc[idx[b]] })
			for j := 0; j < k; j++ {
				want := idx[j]
				if math.Abs(float64(dist[i*k+j])-sc[want]) > 1e-3 {
					t.Fatalf("k=%d query %d rank %d: score %g, reference %g", k, i, j, dist[i*k+j], sc[want])
				}
				// Ids must agree where the reference order is not a near tie.
				tie := (j > 0 && sc[idx[j-1]]-sc[want] < 1e-3) || sc[want]-sc[idx[j+1]] < 1e-3
				if !tie && ids[i*k+j] != int64(want) {
					t.Fatalf("k=%d query %d rank %d: id %d, reference %d", k, i, j, ids[i*k+j], want)
				}
			}
		}
	}
}

// GPU flat search on vectors of small integers: fp16 holds them exactly and
// the GEMM's fp32 sums of them are exact, so the scores are integers full
// of exact ties and the result must be numpy's stable order bit for bit,
// through every kernel (warp selection for k ≤ 256, bitonic above), several
// blocks of vectors (the last one of odd length) and rows where the scores
// rise with the id (every score beats the running threshold). Skips
// without a GPU; lib/encoder's TestEmuFlatSearch runs the same kernels on
// the CPU emulation, NaN and infinities included.
func TestFlatSearchGPUTies(t *testing.T) {
	d := devOrSkip(t)
	r := rand.New(rand.NewPCG(5, 6))
	const n, dim, nq = 30011, 16, 70
	base := make([]float32, n*dim)
	for i := range base {
		base[i] = float32(r.IntN(5) - 2)
	}
	for j := 0; j < n; j++ { // dimension 0: 0…7 rising with the id
		base[j*dim] = float32(j * 8 / n)
	}
	q := make([]float32, nq*dim)
	for i := range q {
		q[i] = float32(r.IntN(3) - 1)
	}
	for c := 0; c < dim; c++ { // query 0 sees only dimension 0
		q[c] = 0
	}
	q[0] = 1
	x, err := d.NewFlatIndex(n, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	x.SetScratchMiB(1) // blocks of 2048 vectors for 70 queries, the last of 1339
	if err := x.Add(base); err != nil {
		t.Fatal(err)
	}
	if p := planFlat(nq, n, 10, 1<<20); p.blocks < 3 || n%p.block%2 == 0 {
		t.Fatalf("plan %+v: want several blocks, the last of odd length", p)
	}
	for _, k := range []int{1, 7, 33, 100, 256, 257, 1000} {
		dist, ids, err := x.Search(q, k)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := 0; i < nq; i++ {
			sc := make([]float32, n)
			idx := make([]int, n)
			for j := 0; j < n; j++ {
				var s float32
				for c := 0; c < dim; c++ {
					s += q[i*dim+c] * base[j*dim+c]
				}
				sc[j], idx[j] = s, j
			}
			sort.SliceStable(idx, func(a, b int) bool { return sc[idx[a]] > sc[idx[b]] })
			for j := 0; j < k; j++ {
				if ids[i*k+j] != int64(idx[j]) || dist[i*k+j] != sc[idx[j]] {
					if bad < 5 {
						t.Errorf("k=%d query %d rank %d: (%g, %d), want (%g, %d)", k, i, j, dist[i*k+j], ids[i*k+j], sc[idx[j]], idx[j])
					}
					bad++
				}
			}
		}
		if bad > 0 {
			t.Errorf("k=%d: %d entries differ", k, bad)
		}
	}
}

// ToF16 split over the CPUs gives the same bits as the one-core loop, at
// every boundary of the split.
func TestToF16Parallel(t *testing.T) {
	src := make([]float32, 3*(1<<14)+77)
	specials := []float32{0, float32(math.Copysign(0, -1)), 65504, 65520, 1e-8, 6e-8, float32(math.Inf(1)), float32(math.NaN())}
	for i := range src {
		src[i] = float32(math.Sin(float64(i))) * float32(1+i%7)
		if i%97 == 0 {
			src[i] = specials[(i/97)%len(specials)]
		}
	}
	want := make([]uint16, len(src))
	toF16(want, src)
	for _, n := range []int{len(src), 2 << 14, 2<<14 - 1} {
		got := make([]uint16, n)
		ToF16(got, src[:n])
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d: value %d (%g): %#04x, want %#04x", n, i, src[i], got[i], want[i])
			}
		}
	}
}
