package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/testenv"
)

// requireCUDA skips without a usable GPU, saying why, or fails under
// MEMPO_REQUIRE_CUDA=1 (scripts/gpu/run_encoder.sh sets it).
func requireCUDA(t testing.TB) *cuda.Device {
	t.Helper()
	ok, why := cuda.Available()
	testenv.NeedCUDA(t, ok, why)
	d, err := cuda.Default()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// GPU flat search over the encoder fixture's index gives FAISS's top-10
// wherever FAISS's scores are not within fp16 rounding of a neighbour's.
func TestGPUFlatSearchMatchesFAISS(t *testing.T) {
	requireCUDA(t)
	dir := t.TempDir()
	corpus, queries := encoderCorpus(t, dir)
	enc := loadE5(t)
	ctx := context.Background()
	emb := filepath.Join(dir, "emb.npy")
	if _, err := EmbedCorpus(ctx, enc, corpus, emb, EmbedOptions{}); err != nil {
		t.Fatal(err)
	}
	ixDir := filepath.Join(dir, "ix")
	if _, err := Build(ctx, BuildOptions{Corpus: corpus, Out: ixDir, Analyzer: DefaultAnalyzer, Embeddings: emb}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ixDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	qv, err := enc.Queries().Encode(ctx, queries)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ix.SearchDense(qv, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ix.VectorSearch, err = LoadGPUFlat(emb, ix.Manifest.Docs, enc.Dim()); err != nil {
		t.Fatal(err)
	}
	got, err := ix.SearchDense(qv, 10)
	if err != nil {
		t.Fatal(err)
	}
	compareTop(t, "GPU flat search", got, want, 2e-3)
}

// compareTop checks that got has want's rows rank by rank, except where
// want's score is within tie of a neighbour's (fp16 rounding may swap a
// near tie), and scores within tie; it logs the swaps.
func compareTop(t *testing.T, what string, got, want [][]Hit, tie float64) {
	t.Helper()
	same, swaps, worst := 0, 0, 0.0
	for q := range want {
		if len(got[q]) != len(want[q]) {
			t.Fatalf("%s: query %d has %d hits, want %d", what, q, len(got[q]), len(want[q]))
		}
		for j, w := range want[q] {
			worst = max(worst, math.Abs(got[q][j].Score-w.Score))
			if got[q][j].Row == w.Row {
				same++
				continue
			}
			near := (j > 0 && want[q][j-1].Score-w.Score < tie) || (j+1 < len(want[q]) && w.Score-want[q][j+1].Score < tie)
			if !near {
				t.Errorf("%s: query %d rank %d: row %d, want %d (no neighbour within %g)", what, q, j, got[q][j].Row, w.Row, tie)
			} else {
				swaps++
			}
			if d := got[q][j].Score - w.Score; d > tie || d < -tie {
				t.Errorf("%s: query %d rank %d: score %g, want %g", what, q, j, got[q][j].Score, w.Score)
			}
		}
	}
	t.Logf("%s: %d of %d ranks identical, %d near-tie swaps, scores within %.3g", what, same, len(want)*len(want[0]), swaps, worst)
}

// The dense benchmarks' device-made vectors: unit norms (to fp16
// rounding), and a vector searched for finds itself first.
func TestGPUSynthVectors(t *testing.T) {
	d := requireCUDA(t)
	const n, dim = 50000, 768
	x, err := d.NewFlatIndex(n, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	if err := x.FillRandomUnit(7); err != nil {
		t.Fatal(err)
	}
	q, err := x.Rows(n-100, n)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 100; r++ {
		var ss float64
		for _, v := range q[r*dim : (r+1)*dim] {
			ss += float64(v) * float64(v)
		}
		if math.Abs(math.Sqrt(ss)-1) > 2e-3 {
			t.Fatalf("row %d: norm %g", n-100+r, math.Sqrt(ss))
		}
	}
	scores, ids, err := x.Search(q, 3)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 100; r++ {
		if ids[r*3] != int64(n-100+r) || scores[r*3] < 0.99 || scores[r*3+1] > 0.5 {
			t.Fatalf("query %d: ids %v scores %v", n-100+r, ids[r*3:r*3+3], scores[r*3:r*3+3])
		}
	}
}

// The whole dense pipeline with the encoder on the GPU: mempo-index's
// embedding stage (EmbedCorpus) and query encoding in fp16 on the GPU, the
// GPU flat search over those vectors, and mempo-serve's server with both on
// one device under concurrent requests, against the CPU encoder with
// FAISS: the same top-10 up to near ties. A file embedded on the CPU is not
// resumed by the GPU.
func TestGPUEncoderPipeline(t *testing.T) {
	requireCUDA(t)
	dir := t.TempDir()
	corpus, queries := encoderCorpus(t, dir)
	ctx := context.Background()
	cpu := loadE5(t)
	gpu, err := encoder.Load(filepath.Join(encFixture, "model"), encoder.Options{Family: "e5", MaxLength: 64, BatchSize: 16, Device: "cuda"})
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	if gpu.Device != "cuda" || gpu.Precision != encoder.FP16 {
		t.Fatalf("encoder on %s", gpu.DeviceString())
	}
	t.Logf("encoder: %s", gpu.DeviceString())
	cpuEmb, gpuEmb := filepath.Join(dir, "cpu.npy"), filepath.Join(dir, "gpu.npy")
	if _, err := EmbedCorpus(ctx, cpu, corpus, cpuEmb, EmbedOptions{ChunkRows: 64}); err != nil {
		t.Fatal(err)
	}
	if _, err := EmbedCorpus(ctx, gpu, corpus, gpuEmb, EmbedOptions{ChunkRows: 64}); err != nil {
		t.Fatal(err)
	}
	cv, _ := readNPY(t, cpuEmb)
	gv, _ := readNPY(t, gpuEmb)
	worst := 0.0
	for i := range cv {
		worst = max(worst, math.Abs(float64(cv[i]-gv[i])))
	}
	t.Logf("passage embeddings, GPU fp16 vs CPU: max |diff| %.3g", worst)
	if worst > 8e-4 { // 3.6e-4 on the H200

		t.Errorf("passage embeddings, GPU fp16 vs CPU: max |diff| %.3g", worst)
	}
	// The GPU does not resume the CPU's file.
	if _, err := EmbedCorpus(ctx, gpu, corpus, cpuEmb, EmbedOptions{ChunkRows: 64}); err == nil {
		t.Error("the GPU encoder resumed a file the CPU wrote")
	}

	ixDir := filepath.Join(dir, "ix")
	if _, err := Build(ctx, BuildOptions{Corpus: corpus, Out: ixDir, Analyzer: DefaultAnalyzer, Embeddings: cpuEmb}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ixDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	cq, err := cpu.Queries().Encode(ctx, queries)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ix.SearchDense(cq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ix.VectorSearch, err = LoadGPUFlat(gpuEmb, ix.Manifest.Docs, gpu.Dim()); err != nil {
		t.Fatal(err)
	}
	gq, err := gpu.Queries().Encode(ctx, queries)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ix.SearchDense(gq, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Scores within 2.7e-4 on the H200; swaps are allowed within 1e-3.
	compareTop(t, "GPU encoder + GPU search vs CPU encoder + FAISS", got, want, 1e-3)

	// mempo-serve's server, encoder and search sharing the GPU, one
	// client per query; each query is encoded and searched in a batch with
	// others, so its last bits may differ from the direct search's.
	_, hs := newTestServer(t, ix, ServerConfig{Method: MethodDense, Encoder: gpu.Queries(), MaxBatch: 8, Workers: 4})
	var wg sync.WaitGroup
	served := make([][]Hit, len(queries))
	errs := make([]error, len(queries))
	for i, q := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, body := post(t, hs.URL, fmt.Sprintf(`{"queries": [%q], "topk": 10, "return_scores": true}`, q))
			var resp struct {
				Result [][]struct {
					Document struct{ ID string }
					Score    float64
				}
			}
			if code != 200 || json.Unmarshal(body, &resp) != nil || len(resp.Result) != 1 {
				errs[i] = fmt.Errorf("query %d: status %d: %s", i, code, body)
				return
			}
			for _, h := range resp.Result[0] {
				var row int64
				fmt.Sscan(h.Document.ID, &row)
				served[i] = append(served[i], Hit{Row: row, ID: h.Document.ID, Score: h.Score})
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	compareTop(t, "served (GPU encoder and search on one device) vs CPU encoder + FAISS", served, want, 1e-3)
}
