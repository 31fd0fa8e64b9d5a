package model

import "testing"

func TestPoolSize(t *testing.T) {
	prev := 0
	for n := 1; n < 1<<26; n = n*5/4 + 1 {
		s := poolSize(n)
		if s < n || s < prev {
			t.Fatalf("poolSize(%d) = %d (previous %d)", n, s, prev)
		}
		if n > 1<<20 && float64(s-n) > float64(n)/16 {
			t.Fatalf("poolSize(%d) = %d wastes more than 1/16", n, s)
		}
		if s%512 != 0 {
			t.Fatalf("poolSize(%d) = %d is not a multiple of 512", n, s)
		}
		prev = s
	}
}
