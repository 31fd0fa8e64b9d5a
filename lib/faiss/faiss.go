// Package faiss is mempo's binding of FAISS (Debian's libfaiss-dev 1.7.3, CPU),
// through a small C++ shim (shim.cpp) because Debian's static library lacks the
// objects of the FAISS C API. It covers what retrieval needs: index_factory,
// train, add, search, read_index/write_index (files interchangeable with Python
// faiss), and an OpenBLAS sgemm brute-force search used as a reference.
//
// libfaiss and libgomp are linked statically; OpenBLAS and libstdc++
// dynamically. OMP_WAIT_POLICY defaults to PASSIVE (see the cgo preamble).
package faiss

/*
#cgo CXXFLAGS: -O2 -std=c++17 -fopenmp
#cgo LDFLAGS: -l:libfaiss.a -lopenblas -l:libgomp.a -lstdc++ -lm -ldl -lpthread
#include <stdlib.h>
#include "shim.h"

// OpenMP threads that spin while waiting (libgomp's default) fight
// OpenBLAS's own threads and anything else on a shared machine: measured 9×
// slower FAISS Flat search here. libgomp is linked statically so that this
// constructor (priority 101) runs before libgomp reads its environment; a
// wait policy the user sets still wins.
__attribute__((constructor(101))) static void mempo_omp_passive(void) {
	setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Metric is a FAISS metric type.
type Metric int

// Metrics, with FAISS's numbering.
const (
	InnerProduct Metric = 0
	L2           Metric = 1
)

func (m Metric) String() string {
	switch m {
	case InnerProduct:
		return "inner_product"
	case L2:
		return "l2"
	}
	return fmt.Sprintf("metric(%d)", int(m))
}

// Index is a FAISS index owned by Go. Searches may run concurrently; Add,
// Train and Close take the index exclusively.
type Index struct {
	mu sync.RWMutex
	p  C.mfaiss_index
}

func cerr(msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New("faiss: " + C.GoString(msg))
}

// New makes an index with faiss::index_factory (e.g. "Flat", "HNSW32",
// "IVF4096,Flat").
func New(d int, description string, metric Metric) (*Index, error) {
	if d <= 0 {
		return nil, fmt.Errorf("faiss: dimension %d must be positive", d)
	}
	cs := C.CString(description)
	defer C.free(unsafe.Pointer(cs))
	var p C.mfaiss_index
	if err := cerr(C.mfaiss_index_factory(C.int(d), cs, C.int(metric), &p)); err != nil {
		return nil, err
	}
	return &Index{p: p}, nil
}

// Read loads an index file written by faiss.write_index (Python or Go).
func Read(path string) (*Index, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var p C.mfaiss_index
	if err := cerr(C.mfaiss_read_index(cs, &p)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Index{p: p}, nil
}

// Write stores the index at path (not atomically: write under a temporary
// name and rename if readers may be watching).
func (x *Index) Write(path string) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.p == nil {
		return errClosed
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return cerr(C.mfaiss_write_index(x.p, cs))
}

var errClosed = errors.New("faiss: index is closed")

func (x *Index) checkVectors(v []float32) (int64, error) {
	d := int(C.mfaiss_d(x.p))
	if len(v)%d != 0 {
		return 0, fmt.Errorf("faiss: %d floats is not a whole number of %d-dimensional vectors", len(v), d)
	}
	return int64(len(v) / d), nil
}

// Train trains the index (IVF, PQ, ...) on row-major vectors.
func (x *Index) Train(v []float32) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.p == nil {
		return errClosed
	}
	n, err := x.checkVectors(v)
	if err != nil || n == 0 {
		return err
	}
	return cerr(C.mfaiss_train(x.p, C.int64_t(n), (*C.float)(unsafe.Pointer(&v[0]))))
}

// Add appends row-major vectors; their ids continue from Ntotal.
func (x *Index) Add(v []float32) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.p == nil {
		return errClosed
	}
	n, err := x.checkVectors(v)
	if err != nil || n == 0 {
		return err
	}
	return cerr(C.mfaiss_add(x.p, C.int64_t(n), (*C.float)(unsafe.Pointer(&v[0]))))
}

// Search returns, for each of the row-major queries, k scores and ids (row
// major, nq×k); missing results have id -1.
func (x *Index) Search(queries []float32, k int) ([]float32, []int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.p == nil {
		return nil, nil, errClosed
	}
	if k <= 0 {
		return nil, nil, fmt.Errorf("faiss: k=%d must be positive", k)
	}
	n, err := x.checkVectors(queries)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, nil
	}
	dist := make([]float32, int(n)*k)
	ids := make([]int64, int(n)*k)
	err = cerr(C.mfaiss_search(x.p, C.int64_t(n), (*C.float)(unsafe.Pointer(&queries[0])), C.int64_t(k),
		(*C.float)(unsafe.Pointer(&dist[0])), (*C.int64_t)(unsafe.Pointer(&ids[0]))))
	if err != nil {
		return nil, nil, err
	}
	return dist, ids, nil
}

// SetParam sets a search-time parameter through faiss::ParameterSpace
// (e.g. "efSearch" for HNSW, "nprobe" for IVF).
func (x *Index) SetParam(name string, value float64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.p == nil {
		return errClosed
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return cerr(C.mfaiss_set_param(x.p, cs, C.double(value)))
}

// Ntotal is the number of vectors in the index.
func (x *Index) Ntotal() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.p == nil {
		return 0
	}
	return int64(C.mfaiss_ntotal(x.p))
}

// D is the vector dimension.
func (x *Index) D() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.p == nil {
		return 0
	}
	return int(C.mfaiss_d(x.p))
}

// IsTrained reports whether the index is ready for Add.
func (x *Index) IsTrained() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.p != nil && C.mfaiss_is_trained(x.p) != 0
}

// Metric is the index's metric.
func (x *Index) Metric() Metric {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.p == nil {
		return -1
	}
	return Metric(C.mfaiss_metric(x.p))
}

// Close frees the index; later calls fail with an error.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.p != nil {
		C.mfaiss_free(x.p)
		x.p = nil
	}
}

// SetThreads sets the number of OpenMP threads FAISS uses.
func SetThreads(n int) { C.mfaiss_set_threads(C.int(n)) }

// InnerProducts computes out[i*nb+j] = q_i · b_j with one OpenBLAS sgemm
// (q: nq×d, b: nb×d, row major).
func InnerProducts(q, b []float32, d int) ([]float32, error) {
	if d <= 0 || len(q)%d != 0 || len(b)%d != 0 {
		return nil, fmt.Errorf("faiss: sgemm: shapes %d, %d not multiples of d=%d", len(q), len(b), d)
	}
	nq, nb := len(q)/d, len(b)/d
	if nq == 0 || nb == 0 {
		return nil, nil
	}
	out := make([]float32, nq*nb)
	C.mfaiss_sgemm_ip(C.int64_t(nq), C.int64_t(nb), C.int(d), (*C.float)(unsafe.Pointer(&q[0])),
		(*C.float)(unsafe.Pointer(&b[0])), (*C.float)(unsafe.Pointer(&out[0])))
	return out, nil
}

// BruteForceIP is the exact inner-product top-k of each query over b, computed
// by sgemm in blocks of base rows (bounded scratch) and a per-query heap. It is
// the reference FAISS Flat is checked and benchmarked against.
func BruteForceIP(q, b []float32, d, k int) ([]float32, []int64, error) {
	if d <= 0 || len(q)%d != 0 || len(b)%d != 0 {
		return nil, nil, fmt.Errorf("faiss: brute force: shapes %d, %d not multiples of d=%d", len(q), len(b), d)
	}
	nq, nb := len(q)/d, len(b)/d
	tops := make([]topK, nq)
	for i := range tops {
		tops[i] = topK{k: k}
	}
	const block = 16384
	for start := 0; start < nb; start += block {
		end := min(start+block, nb)
		s, err := InnerProducts(q, b[start*d:end*d], d)
		if err != nil {
			return nil, nil, err
		}
		w := end - start
		for i := 0; i < nq; i++ {
			row := s[i*w : (i+1)*w]
			for j, v := range row {
				tops[i].push(v, int64(start+j))
			}
		}
	}
	dist := make([]float32, nq*k)
	ids := make([]int64, nq*k)
	for i := range tops {
		sc, id := tops[i].sorted()
		for j := 0; j < k; j++ {
			if j < len(sc) {
				dist[i*k+j], ids[i*k+j] = sc[j], id[j]
			} else {
				dist[i*k+j], ids[i*k+j] = float32(negInf()), -1
			}
		}
	}
	return dist, ids, nil
}
