package retrieval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/encoder"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/tokenizer"
)

// Benchmarks of dense retrieval on a GPU, run by scripts/gpu/run_encoder.sh
// (MEMPO_CUDA_BENCH=1) beside scripts/gpu/bench_dense.py, PyTorch's matmul +
// topk on the same shapes. Each result is one line starting with BENCH.

func benchEnv(t *testing.T) *cuda.Device {
	if envconfig.CUDABench.Get() != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the GPU retrieval benchmarks")
	}
	return requireCUDA(t)
}

func envInts(t *testing.T, v envconfig.Var, def string) []int {
	s := v.Or(def)
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a list of positive integers", v.Name, s)
		}
		out = append(out, n)
	}
	return out
}

// unitVectors is n random unit vectors of dim values (normal, normalized).
func unitVectors(n, dim int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n*dim)
	for i := 0; i < n; i++ {
		row := v[i*dim : (i+1)*dim]
		var ss float64
		for j := range row {
			row[j] = float32(r.NormFloat64())
			ss += float64(row[j]) * float64(row[j])
		}
		for j := range row {
			row[j] /= float32(math.Sqrt(ss))
		}
	}
	return v
}

// TestCUDADenseBenchmarks: queries/s of the GPU flat search (lib/cuda's
// FlatIndex, what mempo-serve --gpu-search runs) over synthetic fp16 unit
// vectors made on the device, at several query batches. Each search is one
// call: fp16 rounding and upload of the queries, the GEMMs, the top-k
// passes and the copy back. MEMPO_BENCH_DENSE_SIZES (default
// 1000000,21000000: wiki-18 has 21M passages), MEMPO_BENCH_DENSE_BATCHES
// (1,64,512), MEMPO_BENCH_DENSE_K (10), MEMPO_BENCH_DENSE_DIM (768).
func TestCUDADenseBenchmarks(t *testing.T) {
	d := benchEnv(t)
	sizes := envInts(t, envconfig.BenchDenseSizes, "1000000,21000000")
	batches := envInts(t, envconfig.BenchDenseBatches, "1,64,512")
	k := envInts(t, envconfig.BenchDenseK, "10")[0]
	dim := envInts(t, envconfig.BenchDenseDim, "768")[0]
	queries := unitVectors(slices.Max(batches), dim, 3)
	for _, n := range sizes {
		t0 := time.Now()
		x, err := d.NewFlatIndex(n, dim)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.FillRandomUnit(uint64(n)); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d × %d fp16 vectors (%.1f GB) made on the device in %.2fs", n, dim, float64(2*n*dim)/1e9, time.Since(t0).Seconds())
		for _, b := range batches {
			q := queries[:b*dim]
			if _, _, err := x.Search(q, k); err != nil { // warm-up (kernel load, pool growth)
				t.Fatal(err)
			}
			iters := 0
			start := time.Now()
			for iters < 3 || time.Since(start) < time.Second {
				if _, _, err := x.Search(q, k); err != nil {
					t.Fatal(err)
				}
				iters++
			}
			s := time.Since(start).Seconds()
			fmt.Printf("BENCH dense impl=mempo n=%d dim=%d k=%d batch=%d qps=%.1f ms_per_batch=%.3f\n", n, dim, k, b, float64(b*iters)/s, 1000*s/float64(iters))
		}
		// A query that is a stored vector finds itself (the search is not
		// timing garbage).
		row, err := x.Rows(n/2, n/2+1)
		if err != nil {
			t.Fatal(err)
		}
		_, ids, err := x.Search(row, 1)
		if err != nil || ids[0] != int64(n/2) {
			t.Fatalf("vector %d searched for: %v %v", n/2, ids, err)
		}
		if err := x.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCUDARetrieveBenchmark is /retrieve end to end with the encoder in the
// loop on the GPU: mempo-serve --encoder DIR --device cuda --gpu-search
// FILE over a synthetic corpus of MEMPO_BENCH_E2E_N passages (default
// 100,000, with random unit vectors of 768 dimensions), the encoder a
// random base-sized e5 checkpoint (768 hidden, 12 layers, the fixture's
// WordPiece tokenizer), and a Go load client: many concurrent clients, one
// text query per request, topk 3, for MEMPO_BENCH_E2E_SECONDS (default 4)
// per concurrency in MEMPO_BENCH_E2E_CLIENTS (16,64,256). The server is the
// binary at MEMPO_SERVE_BIN (run_encoder.sh ships it). For comparison, the
// same with the encoder on this machine's CPU and FAISS's CPU Flat search
// at 16 clients (the only setup run where no GPU is, unless
// MEMPO_REQUIRE_CUDA=1).
func TestCUDARetrieveBenchmark(t *testing.T) {
	if envconfig.CUDABench.Get() != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the GPU retrieval benchmarks")
	}
	if envconfig.ServeBin.Get() == "" {
		t.Skip("set MEMPO_SERVE_BIN to a mempo-serve binary")
	}
	gpu, why := cuda.Available()
	if !gpu && envconfig.RequireCUDA.Get() == "1" {
		t.Fatalf("MEMPO_REQUIRE_CUDA=1 but no CUDA: %s", why)
	}
	n := envInts(t, envconfig.BenchE2EN, "100000")[0]
	secs := envInts(t, envconfig.BenchE2ESeconds, "4")[0]
	clients := envInts(t, envconfig.BenchE2EClients, "16,64,256")
	const dim = 768
	dir := t.TempDir()
	t0 := time.Now()
	var corpus bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&corpus, "{\"id\":\"%d\",\"contents\":\"\\\"Title %d\\\"\\npassage number %d\"}\n", i, i, i)
	}
	corpusPath := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(corpusPath, corpus.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	npy := filepath.Join(dir, "emb.npy")
	f, err := os.Create(npy)
	if err != nil {
		t.Fatal(err)
	}
	if err := faiss.WriteNPY(f, unitVectors(n, dim, 1), dim); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ixDir := filepath.Join(dir, "ix")
	if _, err := Build(context.Background(), BuildOptions{Corpus: corpusPath, Out: ixDir, Analyzer: DefaultAnalyzer, Embeddings: npy}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(encFixture, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encoder.Random(encoder.BaseConfig, tok, 1, encoder.Options{Family: "e5"})
	if err != nil {
		t.Fatal(err)
	}
	encDir := filepath.Join(dir, "e5-base-random")
	if err := enc.Save(encDir, filepath.Join(encFixture, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	t.Logf("corpus, index and checkpoint of %d passages made in %.1fs", n, time.Since(t0).Seconds())
	data, err := os.ReadFile(filepath.Join(encFixture, "texts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tx encTexts
	json.Unmarshal(data, &tx)
	for i, q := range tx.Queries {
		tx.Queries[i] = strings.TrimPrefix(q, "query: ")
	}

	run := func(label string, args []string, conc []int) {
		addr, stop := startServe(t, args)
		defer stop()
		for _, c := range conc {
			st := loadRetrieve(t, addr, tx.Queries, c, time.Duration(secs)*time.Second)
			fmt.Printf("BENCH retrieve impl=mempo-serve setup=%s n=%d clients=%d requests=%d req_per_s=%.1f p50_ms=%.2f p99_ms=%.2f failed=%d\n",
				label, n, c, st.n, st.rate, st.p50, st.p99, st.failed)
			if st.failed > 0 {
				t.Errorf("%s, %d clients: %d requests failed", label, c, st.failed)
			}
		}
	}
	base := []string{"--index", ixDir, "--encoder", encDir, "--topk", "3", "--max-topk", "100"}
	if gpu {
		run("gpu-encoder-fp16+gpu-search", append(slices.Clip(base), "--device", "cuda", "--gpu-search", npy), clients)
	} else {
		t.Logf("no CUDA (%s): the GPU setup is not run", why)
	}
	run("cpu-encoder+faiss-cpu", append(slices.Clip(base), "--device", "cpu"), []int{16})
}

// startServe runs mempo-serve with args on a free loopback port and waits
// until it serves; stop ends it.
func startServe(t *testing.T, args []string) (string, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args = append(args, "--addr", addr)
	cmd := exec.Command(envconfig.ServeBin.Get(), args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(120 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("mempo-serve %s exited before serving", strings.Join(args, " "))
			}
			t.Logf("server: %s", l)
			if strings.Contains(l, "serving ") {
				go func() {
					for l := range lines {
						t.Logf("server: %s", l)
					}
				}()
				return addr, func() {
					cmd.Process.Signal(os.Interrupt)
					cmd.Wait()
				}
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("mempo-serve did not serve within 120s")
		}
	}
}

type loadStats struct {
	n, failed      int
	rate, p50, p99 float64
}

// loadRetrieve sends one-query /retrieve requests from c clients for d.
func loadRetrieve(t *testing.T, addr string, queries []string, c int, d time.Duration) loadStats {
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	url := "http://" + addr + "/retrieve"
	var mu sync.Mutex
	var lat []float64
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; time.Now().Before(end); j++ {
				q := queries[(i*7+j)%len(queries)]
				body := fmt.Sprintf(`{"queries": [%q], "topk": 3, "return_scores": true}`, fmt.Sprintf("%s %d", q, j%100))
				t0 := time.Now()
				resp, err := hc.Post(url, "application/json", strings.NewReader(body))
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				ms := float64(time.Since(t0).Microseconds()) / 1000
				mu.Lock()
				if ok {
					lat = append(lat, ms)
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s := time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return loadStats{n: len(lat), failed: failed, rate: float64(len(lat)) / s, p50: pct(0.5), p99: pct(0.99)}
}
