package cudaemu_test

// lib/cuda's kernels/skinny.cu (the products of decoding steps of 5 to 32
// rows) on the kernel emulation, against float64 sums of the same bf16
// inputs: every row-tile count, rows and columns that do not fill a tile,
// one to three products in a launch, partial chunks of k, grids of one
// block, of as many blocks as iterations and between (tiles whole in a
// block, tiles split over two and over several blocks), and the tiles'
// counters left at zero for the next product. The GPU run is lib/model's
// TestCUDADecodeKernels.

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
)

func TestEmuSkinny(t *testing.T) {
	e := newEmuModule(t, "skinny", 5)
	rnd16 := func(n int) ([]uint16, []float64) {
		h, f := make([]uint16, n), make([]float64, n)
		for i, x := range e.rnd(n, 1) {
			h[i] = bf16Round(x)
			f[i] = bf16Value(h[i])
		}
		return h, f
	}
	cases := []struct {
		m, k int
		ns   []int
		G    int // blocks; 0: one an iteration
	}{
		{5, 96, []int{72}, 1},              // one block: a whole tile, then a ragged one
		{16, 544, []int{64}, 0},            // a block a chunk: five segments of one tile
		{17, 544, []int{136}, 4},           // 15 iterations over 4 blocks: tiles split over two blocks
		{32, 320, []int{24, 64, 40}, 5},    // three products, ragged
		{30, 288, []int{130}, 2},           // ragged columns past the last tile
		{32, 800, []int{64, 64}, 3},        // 14 iterations over 3 blocks
		{25, 1024, []int{128, 64, 64}, 11}, // q, k, v shaped
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("m=%d,k=%d,n=%v,G=%d", c.m, c.k, c.ns, c.G), func(t *testing.T) {
			a16, a := rnd16(c.m * c.k)
			aP := e.u16(a16)
			var outs, ws [3]cuda.Ptr
			var ns [3]int
			var wf [][]float64
			tiles := 0
			for i, n := range c.ns {
				w16, w := rnd16(n * c.k)
				ws[i], ns[i] = e.u16(w16), n
				outs[i] = e.empty(4 * c.m * n)
				wf = append(wf, w)
				tiles += (n + 63) / 64
			}
			G := c.G
			if G == 0 {
				G = tiles * ((c.k + 127) / 128)
			}
			part := e.empty(4 * 2 * G * c.m * 64)
			cnt := e.i32(make([]int32, tiles))
			mt := (c.m + 15) / 16
			name := fmt.Sprintf("skinny_bf16_m%d", 16*mt)
			shmem := 4*(64+mt*16)*128*2 + mt*4096
			var first [][]float32
			for run := 0; run < 2; run++ {
				e.runShared(name, cuda.Dim3{X: G}, cuda.Dim3{X: 256}, shmem, outs[0], outs[1], outs[2], ws[0], ws[1], ws[2],
					ns[0], ns[1], ns[2], part, cnt, aP, c.m, c.k)
				for p, n := range c.ns {
					want := make([]float64, c.m*n)
					for r := 0; r < c.m; r++ {
						for j := 0; j < n; j++ {
							var s float64
							for x := 0; x < c.k; x++ {
								s += a[r*c.k+x] * wf[p][j*c.k+x]
							}
							want[r*n+j] = s
						}
					}
					got := e.get(outs[p], c.m*n)
					e.near(fmt.Sprintf("%s product %d", name, p), got, want, 1e-5)
					if run == 0 {
						first = append(first, got)
					} else if !slices.Equal(first[p], got) {
						t.Errorf("product %d: a second launch on the same inputs gave other bits", p)
					}
				}
				if left := e.geti(cnt, tiles); slices.ContainsFunc(left, func(v int32) bool { return v != 0 }) {
					t.Fatalf("counters after the launch: %v, want zeros", left)
				}
			}
		})
	}
}
