package tensor

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// naive is the textbook triple loop the BLAS call is checked against.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				av := a[i*lda+p]
				if transA {
					av = a[p*lda+i]
				}
				bv := b[p*ldb+j]
				if transB {
					bv = b[j*ldb+p]
				}
				s += float64(av) * float64(bv)
			}
			c[i*ldc+j] = alpha*float32(s) + beta*c[i*ldc+j]
		}
	}
}

func TestSgemmAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			for _, m := range []int{7, 1} { // m = 1 takes the sgemv path
				sgemmCase(t, fill, ta, tb, m)
			}
		}
	}
}

func sgemmCase(t *testing.T, fill func(int) []float32, ta, tb bool, m int) {
	n, k := 5, 9
	// Strides wider than the operands: a head inside a packed matrix.
	lda, ldb, ldc := 13, 11, 8
	a, b := fill(20*lda), fill(20*ldb)
	c1 := fill(m * ldc)
	c2 := append([]float32(nil), c1...)
	Sgemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c1, ldc)
	naive(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c2, ldc)
	for i := range c1 {
		if d := math.Abs(float64(c1[i] - c2[i])); d > 1e-4 {
			t.Fatalf("m=%d transA=%v transB=%v: element %d: %g vs %g", m, ta, tb, i, c1[i], c2[i])
		}
	}
}

func TestSgemmShortSlicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a too-short operand")
		}
	}()
	Sgemm(false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
}

func TestSgemmEmptyK(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	Sgemm(false, false, 2, 2, 0, 1, nil, 0, nil, 2, 0.5, c, 2)
	if c[3] != 2 {
		t.Fatalf("beta not applied with k=0: %v", c)
	}
}

func TestParallelCoversEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000} {
		seen := make([]int32, n)
		Parallel(n, 3, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		for i, v := range seen {
			if v != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, v)
			}
		}
	}
}

func TestLogSumExpAndDot(t *testing.T) {
	x := []float32{1000, 1000}
	if got := LogSumExp(x); math.Abs(float64(got)-(1000+math.Ln2)) > 1e-3 {
		t.Fatalf("LogSumExp = %g", got)
	}
	a := []float32{1, 2, 3, 4, 5}
	if got := Dot(a, a); got != 55 {
		t.Fatalf("Dot = %g", got)
	}
	if m, i := Max([]float32{1, 3, 3, 2}); m != 3 || i != 1 {
		t.Fatalf("Max = %g, %d", m, i)
	}
}

func BenchmarkSgemm(b *testing.B) {
	for i := 0; i < b.N; i++ {
		f := SgemmFLOPS(512, 200*time.Millisecond)
		b.ReportMetric(f/1e9, "GFLOP/s")
	}
}
