package retrieval

// mempo-serve --gpu-search: exact inner-product search on the GPU without
// faiss-gpu. The index's vectors (the .npy it was built from) are kept on
// the device in fp16 and each batch of queries is one cuBLAS GEMM plus a
// top-k kernel (lib/cuda/flatsearch.go), like Search-R1's faiss-gpu Flat
// index with useFloat16. Scores are those of fp16-rounded vectors, so
// near-ties may order differently from the fp32 FAISS index.

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/faiss"
)

// VectorSearcher is an inner-product top-k search over the index's vectors
// (id i = corpus row i), with FAISS's result layout.
type VectorSearcher interface {
	Search(queries []float32, k int) ([]float32, []int64, error)
}

type gpuFlat struct {
	mu *sync.Mutex // the device's, shared with a GPU encoder (encoder.DeviceLock)
	x  *cuda.FlatIndex
}

func (g *gpuFlat) Search(q []float32, k int) ([]float32, []int64, error) {
	if k > cuda.MaxFlatK {
		return nil, nil, fmt.Errorf("GPU flat search: topk %d is over %d", k, cuda.MaxFlatK)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.x.Search(q, k)
}

// LoadGPUFlat puts the float32 [docs, dim] vectors of an .npy file on the
// GPU for flat search.
func LoadGPUFlat(path string, docs int64, dim int) (VectorSearcher, error) {
	if ok, why := cuda.Available(); !ok {
		return nil, fmt.Errorf("no CUDA: %s", why)
	}
	d, err := cuda.Default()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	r, err := faiss.NewNPYReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkNPYSize(path, f, r); err != nil {
		return nil, err
	}
	if r.Rows != docs || r.Dim != dim {
		return nil, fmt.Errorf("%s: %d×%d vectors, the index has %d passages of %d dimensions", path, r.Rows, r.Dim, docs, dim)
	}
	lk := encoder.DeviceLock(d)
	lk.Lock()
	defer lk.Unlock()
	x, err := d.NewFlatIndex(int(r.Rows), r.Dim)
	if err != nil {
		return nil, err
	}
	buf := make([]float32, 65536*dim)
	for {
		n, err := r.Next(buf)
		if n > 0 {
			if err := x.Add(buf[:n*dim]); err != nil {
				x.Free()
				return nil, err
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			x.Free()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if int64(x.Ntotal()) != docs {
		x.Free()
		return nil, fmt.Errorf("%s: read %d of %d vectors", path, x.Ntotal(), docs)
	}
	return &gpuFlat{mu: encoder.DeviceLock(d), x: x}, nil
}
