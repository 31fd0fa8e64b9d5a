// Package tensor is the CPU math under lib/model: a cgo wrapper over OpenBLAS's
// cblas_sgemm (row-major, with transposes and leading dimensions, so a head of
// a packed [rows, heads*headDim] matrix is an ordinary operand) and helpers that
// spread elementwise Go loops over the cores.
package tensor

// #cgo LDFLAGS: -lopenblas
// #include <cblas.h>
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices, where
// op(X) is X or Xᵀ. op(A) is m×k, op(B) is k×n, C is m×n; lda, ldb, ldc are the
// row strides of A, B and C as stored. It panics when a slice is too short for
// the shape it is given, rather than letting BLAS read out of bounds.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	check := func(name string, s []float32, rows, cols, ld int) {
		if ld < cols || (rows > 0 && len(s) < (rows-1)*ld+cols) {
			panic(fmt.Sprintf("tensor.Sgemm: %s has %d elements, too few for %d×%d with stride %d", name, len(s), rows, cols, ld))
		}
	}
	check("C", c, m, n, ldc)
	if k == 0 {
		// BLAS still scales C by beta; do it here so empty operands are fine.
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				row[j] *= beta
			}
		}
		return
	}
	check("A", a, ar, ac, lda)
	check("B", b, br, bc, ldb)
	if m == 1 {
		// One row (decoding one token): a matrix-vector product. OpenBLAS's
		// sgemm packs all of B first, which makes it about 3× slower than
		// sgemv here, where reading B once is the whole cost.
		// c = alpha·op(B)ᵀ·a + beta·c, with op(B)ᵀ = B (transB) or Bᵀ.
		x := a
		incx := 1
		if transA {
			incx = lda // op(A) = Aᵀ with A k×1: its column is strided
		}
		tr := C.enum_CBLAS_TRANSPOSE(C.CblasTrans)
		rows, cols := k, n // B as stored, without transB
		if transB {
			tr, rows, cols = C.CblasNoTrans, n, k
		}
		C.cblas_sgemv(C.CblasRowMajor, tr, C.blasint(rows), C.blasint(cols), C.float(alpha),
			(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
			(*C.float)(unsafe.Pointer(&x[0])), C.blasint(incx), C.float(beta),
			(*C.float)(unsafe.Pointer(&c[0])), 1)
		return
	}
	ta, tb := C.enum_CBLAS_TRANSPOSE(C.CblasNoTrans), C.enum_CBLAS_TRANSPOSE(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

// SetBLASThreads sets the number of threads OpenBLAS uses for one call.
func SetBLASThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// BLASThreads is the number of threads OpenBLAS uses for one call.
func BLASThreads() int { return int(C.openblas_get_num_threads()) }

// SgemmFLOPS measures the sgemm rate of this machine, in FLOP/s, on square
// n×n matrices for at least the given duration: the reference that model
// benchmarks report their throughput against.
func SgemmFLOPS(n int, minTime time.Duration) float64 {
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i] = float32(i%7) * 0.01
		b[i] = float32(i%5) * 0.01
	}
	Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n) // warm up threads and caches
	reps := 0
	start := time.Now()
	for reps == 0 || time.Since(start) < minTime {
		Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		reps++
	}
	return 2 * float64(n) * float64(n) * float64(n) * float64(reps) / time.Since(start).Seconds()
}
