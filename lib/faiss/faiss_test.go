package faiss

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

const fixture = "../../testdata/retrieval/faiss"

func readNPY(t *testing.T, path string) ([]float32, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewNPYReader(f)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return v, r.Dim
}

type expected struct {
	N, D, K int
	Flat    struct {
		IDs    [][]int64   `json:"ids"`
		Scores [][]float32 `json:"scores"`
	} `json:"flat"`
	HNSW32 struct {
		IDs      [][]int64   `json:"ids"`
		Scores   [][]float32 `json:"scores"`
		EfSearch int         `json:"efSearch"`
	} `json:"hnsw32"`
}

func loadExpected(t *testing.T) expected {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixture, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func checkSame(t *testing.T, name string, k int, dist []float32, ids []int64, wantIDs [][]int64, wantScores [][]float32) {
	t.Helper()
	for q := range wantIDs {
		for j := 0; j < k; j++ {
			if ids[q*k+j] != wantIDs[q][j] {
				t.Fatalf("%s: query %d rank %d: id %d, python faiss gave %d", name, q, j, ids[q*k+j], wantIDs[q][j])
			}
			if d := math.Abs(float64(dist[q*k+j] - wantScores[q][j])); d > 1e-5 {
				t.Fatalf("%s: query %d rank %d: score %g, python faiss gave %g", name, q, j, dist[q*k+j], wantScores[q][j])
			}
		}
	}
}

// Index files written by Python faiss are read and searched with the results
// Python faiss recorded.
func TestReadPythonIndexes(t *testing.T) {
	e := loadExpected(t)
	queries, d := readNPY(t, filepath.Join(fixture, "queries.npy"))
	if d != e.D {
		t.Fatalf("queries dim %d, want %d", d, e.D)
	}
	flat, err := Read(filepath.Join(fixture, "flat.index"))
	if err != nil {
		t.Fatal(err)
	}
	defer flat.Close()
	if flat.Ntotal() != int64(e.N) || flat.D() != e.D || flat.Metric() != InnerProduct {
		t.Fatalf("flat: ntotal %d d %d metric %v", flat.Ntotal(), flat.D(), flat.Metric())
	}
	dist, ids, err := flat.Search(queries, e.K)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "flat", e.K, dist, ids, e.Flat.IDs, e.Flat.Scores)

	h, err := Read(filepath.Join(fixture, "hnsw32.index"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.SetParam("efSearch", float64(e.HNSW32.EfSearch)); err != nil {
		t.Fatal(err)
	}
	dist, ids, err = h.Search(queries, e.K)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "hnsw32", e.K, dist, ids, e.HNSW32.IDs, e.HNSW32.Scores)
}

// An index built here with index_factory over the same vectors, written and
// read back, agrees with Python faiss and with the sgemm brute force.
func TestBuildWriteReadAgrees(t *testing.T) {
	e := loadExpected(t)
	base, d := readNPY(t, filepath.Join(fixture, "base.npy"))
	queries, _ := readNPY(t, filepath.Join(fixture, "queries.npy"))
	x, err := New(d, "Flat", InnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Add(base); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flat.index")
	if err := x.Write(path); err != nil {
		t.Fatal(err)
	}
	x.Close()
	if _, _, err := x.Search(queries, 3); err == nil {
		t.Fatal("search on a closed index did not fail")
	}
	y, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	dist, ids, err := y.Search(queries, e.K)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "go-built flat", e.K, dist, ids, e.Flat.IDs, e.Flat.Scores)
	bd, bi, err := BruteForceIP(queries, base, d, e.K)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "sgemm brute force", e.K, bd, bi, e.Flat.IDs, e.Flat.Scores)
}

func TestTrainedIVF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 2000, 16
	v := make([]float32, n*d)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	x, err := New(d, "IVF16,Flat", InnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.IsTrained() {
		t.Fatal("IVF index reports trained before training")
	}
	if err := x.Add(v); err == nil {
		t.Fatal("add before train did not fail")
	}
	if err := x.Train(v); err != nil {
		t.Fatal(err)
	}
	if err := x.Add(v); err != nil {
		t.Fatal(err)
	}
	if err := x.SetParam("nprobe", 16); err != nil {
		t.Fatal(err)
	}
	// With every list probed, IVF is exact.
	dist, ids, err := x.Search(v[:5*d], 4)
	if err != nil {
		t.Fatal(err)
	}
	bd, bi, _ := BruteForceIP(v[:5*d], v, d, 4)
	for i := range ids {
		if ids[i] != bi[i] || math.Abs(float64(dist[i]-bd[i])) > 1e-4 {
			t.Fatalf("rank %d: ivf (%d, %g) vs brute force (%d, %g)", i, ids[i], dist[i], bi[i], bd[i])
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := New(8, "NoSuchIndex", InnerProduct); err == nil {
		t.Fatal("bad factory string accepted")
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.index")); err == nil {
		t.Fatal("missing file accepted")
	}
	x, _ := New(4, "Flat", InnerProduct)
	defer x.Close()
	if err := x.Add(make([]float32, 7)); err == nil {
		t.Fatal("ragged vectors accepted")
	}
}

func TestNPYRoundTrip(t *testing.T) {
	v := []float32{1, 2, 3, 4, 5, 6}
	var b bytes.Buffer
	if err := WriteNPY(&b, v, 3); err != nil {
		t.Fatal(err)
	}
	r, err := NewNPYReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rows != 2 || r.Dim != 3 {
		t.Fatalf("shape %d×%d", r.Rows, r.Dim)
	}
	got, err := r.ReadAll()
	if err != nil || len(got) != 6 || got[5] != 6 {
		t.Fatalf("got %v %v", got, err)
	}
	if _, err := NewNPYReader(bytes.NewReader([]byte("\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'shape': (2,)}     "))); err == nil {
		t.Fatal("float64 npy accepted")
	}
}
