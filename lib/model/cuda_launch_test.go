package model

import (
	"slices"
	"testing"
)

// The dK/dV kernel's work list and its choice between whole head groups per
// block and atomics: plain Go, no GPU.
func TestDKVWork(t *testing.T) {
	tiles, rows := dkvTiles([]AttnSeq{{N: 100}, {N: 200}, {N: 1}})
	if want := []int{1, 0, 1, 64, 0, 0, 1, 128, 0, 64, 1, 192, 2, 0}; !slices.Equal(tiles, want) {
		t.Errorf("dkvTiles tiles = %v, want %v", tiles, want)
	}
	if want := []int{200, 136, 100, 72, 36, 8, 1}; !slices.Equal(rows, want) {
		t.Errorf("dkvTiles rows = %v, want %v", rows, want)
	}
	packed := func(n, length int) []int {
		var seqs []AttnSeq
		for range n {
			seqs = append(seqs, AttnSeq{N: length})
		}
		_, r := dkvTiles(seqs)
		return r
	}
	for _, c := range []struct {
		name       string
		rows       []int
		kv, g, sms int
		want       int
	}{
		// The 0.5B and 1.5B training benchmark: 8 × 2048, 2 kv heads on 132
		// multiprocessors: 512 blocks whose longest (32 query tiles × g) is
		// the mean load of the 264 slots.
		{"8x2048 g=7", packed(8, 2048), 2, 7, 132, 7},
		{"8x2048 g=6", packed(8, 2048), 2, 6, 132, 6},
		{"8x4096", packed(8, 4096), 2, 7, 132, 7},
		// Few tiles: the heads of a group spread over blocks.
		{"1x2048", packed(1, 2048), 2, 7, 132, 1},
		{"8x1024", packed(8, 1024), 2, 7, 132, 1},
		{"one long, many short", append(packed(1, 4096), packed(64, 64)...), 2, 7, 132, 1},
		{"no group", packed(8, 2048), 4, 1, 132, 1},
	} {
		if got := dkvHeadsPerBlock(c.rows, c.kv, c.g, c.sms); got != c.want {
			t.Errorf("%s: dkvHeadsPerBlock = %d, want %d", c.name, got, c.want)
		}
	}
}

// normLaunch's thread counts, which TestEmuNormLaunchSameBits (lib/cuda/cudaemu)
// runs against the full layout.
func TestNormLaunch(t *testing.T) {
	for _, c := range []struct{ dim, want int }{{64, 64}, {128, 128}, {256, 256}, {320, 160}, {768, 256}, {896, 224}, {1536, 256}, {3584, 256}, {928, 928}} {
		if got := normLaunch(c.dim); got != c.want {
			t.Errorf("normLaunch(%d) = %d, want %d", c.dim, got, c.want)
		}
	}
}
