package cuda

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/safetensors"
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

// The kernel's code, run serially on the CPU by g++ through the same passes
// as Search, gives numpy's stable top-k on rows full of ties.
func TestTopKKernelOnCPU(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found: the CUDA kernel cannot be run on the CPU here")
	}
	exe := filepath.Join(t.TempDir(), "topk_emu")
	if out, err := exec.Command(gxx, "-O2", "-DTK_SERIAL_EMU", "-o", exe, "testdata/topk_emu.cpp").CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 {
		t.Fatalf("output: %s", out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, "mismatches=0") {
			t.Errorf("%s", l)
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
			out[i] = float64(safetensors.F16ToF32(safetensors.F32ToF16(f)))
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
