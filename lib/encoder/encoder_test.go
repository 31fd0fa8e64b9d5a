package encoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/safetensors"
)

// The fixture is scripts/golden_bert.py's: a random-weight BertModel
// (hidden 64, 2 layers, 4 heads) and its outputs from transformers 5.17 in
// float32. Its tokenizer's BertProcessing puts [CLS] ... [SEP] around every
// text, as e5 and bge checkpoints do, so "cls" pooling is the [CLS] row.
const (
	fixtureDir = "../../testdata/encoder"
	modelDir   = fixtureDir + "/model"
)

type texts struct {
	Batch    []string `json:"batch"`
	Passages []string `json:"passages"`
	Queries  []string `json:"queries"`
	MaxLen   int      `json:"max_len"`
}

func loadFixture(t testing.TB) (*Encoder, *safetensors.File, texts) {
	t.Helper()
	e, err := Load(modelDir, Options{Family: "none", MaxLength: 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := safetensors.Open(filepath.Join(fixtureDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var tx texts
	data, err := os.ReadFile(filepath.Join(fixtureDir, "texts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &tx); err != nil {
		t.Fatal(err)
	}
	return e, g, tx
}

func f32(t testing.TB, g *safetensors.File, name string) ([]float32, []int) {
	t.Helper()
	v, sh, err := g.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return v, sh
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestForwardMatchesTransformers(t *testing.T) {
	e, g, tx := loadFixture(t)
	ids64, sh, _ := g.Int64("input_ids")
	mask64, _, _ := g.Int64("attention_mask")
	B, T := sh[0], sh[1]
	// Our tokenization and padding give HF's ids and mask.
	seqs := make([][]int, B)
	for i, s := range tx.Batch {
		seqs[i] = e.Tokenize(s)
	}
	bt := e.Pad(seqs)
	if bt.B != B || bt.T != T {
		t.Fatalf("padded batch %d×%d, HF %d×%d", bt.B, bt.T, B, T)
	}
	for i := range ids64 {
		if int64(bt.IDs[i]) != ids64[i] || int64(bt.Mask[i]) != mask64[i] {
			t.Fatalf("position %d: id %d mask %d, HF %d %d", i, bt.IDs[i], bt.Mask[i], ids64[i], mask64[i])
		}
	}
	if !slices.Contains(bt.Mask, 0) {
		t.Fatal("the golden batch has no padding")
	}
	h, err := e.Forward(bt.IDs, bt.Mask, B, T)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := f32(t, g, "last_hidden")
	if d := maxDiff(h, want); d > 1e-4 {
		t.Errorf("last_hidden: max |diff| %.3g", d)
	} else {
		t.Logf("last_hidden: max |diff| %.3g over %d values (padded positions included)", d, len(h))
	}
	for _, p := range []Pooling{PoolMean, PoolCLS} {
		got := slices.Concat(Pool(h, bt.Mask, B, T, e.Dim(), p)...)
		want, _ := f32(t, g, string(p))
		if d := maxDiff(got, want); d > 1e-4 {
			t.Errorf("%s pooling: max |diff| %.3g", p, d)
		}
	}
}

// topK is the inner-product top k of each query by a FAISS Flat IP index
// (what mempo-index builds), checked against faiss.BruteForceIP.
func topK(t *testing.T, q, p []float32, dim, k int) [][]int64 {
	t.Helper()
	ix, err := faiss.New(dim, "Flat", faiss.InnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Add(p); err != nil {
		t.Fatal(err)
	}
	_, labels, err := ix.Search(q, k)
	if err != nil {
		t.Fatal(err)
	}
	_, bf, err := faiss.BruteForceIP(q, p, dim, k)
	if err != nil || !slices.Equal(bf, labels) {
		t.Fatalf("FAISS Flat and brute force differ: %v", err)
	}
	nq := len(q) / dim
	out := make([][]int64, nq)
	for i := range out {
		out[i] = labels[i*k : (i+1)*k]
	}
	return out
}

func TestEmbedAndSearchMatchGoldens(t *testing.T) {
	_, g, tx := loadFixture(t)
	pe, psh := f32(t, g, "passages.emb")
	qe, _ := f32(t, g, "queries.emb")
	top, _, _ := g.Int64("top10")
	dim := psh[1]
	// The texts in texts.json carry their prefixes; the e5 family adds the
	// same ones to the bare texts. A batch of 7 splits the 20 queries and
	// 200 passages into batches of mixed padding.
	e5, err := Load(modelDir, Options{Family: "e5", MaxLength: tx.MaxLen, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	strip := func(ss []string, p string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			if !strings.HasPrefix(s, p) {
				t.Fatalf("%q lacks %q", s, p)
			}
			out[i] = s[len(p):]
		}
		return out
	}
	gotP, err := e5.EmbedPassages(strip(tx.Passages, "passage: "))
	if err != nil {
		t.Fatal(err)
	}
	gotQ, err := e5.EmbedQueries(strip(tx.Queries, "query: "))
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(slices.Concat(gotP...), pe); d > 1e-4 {
		t.Errorf("passage embeddings: max |diff| %.3g", d)
	} else {
		t.Logf("passage embeddings: max |diff| %.3g", d)
	}
	if d := maxDiff(slices.Concat(gotQ...), qe); d > 1e-4 {
		t.Errorf("query embeddings: max |diff| %.3g", d)
	}
	for name, vecs := range map[string][2][]float32{
		"stored":     {qe, pe},
		"recomputed": {slices.Concat(gotQ...), slices.Concat(gotP...)},
	} {
		got := topK(t, vecs[0], vecs[1], dim, 10)
		for i := range got {
			if !slices.Equal(got[i], top[i*10:(i+1)*10]) {
				t.Errorf("%s: query %d top-10 %v, numpy %v", name, i, got[i], top[i*10:(i+1)*10])
			}
		}
	}
}

// No score ties in the fixture's top-10 lists (a tie would make a
// position's order depend on the search's tie rule).
func TestGoldenTop10HasNoTies(t *testing.T) {
	_, g, _ := loadFixture(t)
	pe, psh := f32(t, g, "passages.emb")
	qe, _ := f32(t, g, "queries.emb")
	dim := psh[1]
	scores, _, err := faiss.BruteForceIP(qe, pe, dim, 11)
	if err != nil {
		t.Fatal(err)
	}
	minGap := math.Inf(1)
	for i := 0; i < len(scores); i += 11 {
		for j := 0; j < 10; j++ {
			minGap = min(minGap, float64(scores[i+j]-scores[i+j+1]))
		}
	}
	t.Logf("smallest gap between consecutive top-11 scores: %.3g", minGap)
	if minGap < 1e-6 {
		t.Errorf("a top-10 position is within %.3g of the next score", minGap)
	}
}

func TestFamilies(t *testing.T) {
	for name, want := range map[string]string{"intfloat/e5-base-v2": "e5", "BAAI/bge-base-en-v1.5": "bge",
		"facebook/contriever-msmarco": "contriever", "bert-base-uncased": "none"} {
		if got := DetectFamily(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	dir := t.TempDir()
	e5dir := filepath.Join(dir, "e5-small")
	os.Mkdir(e5dir, 0o755)
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		os.Symlink(mustAbs(t, filepath.Join(modelDir, f)), filepath.Join(e5dir, f))
	}
	e, err := Load(e5dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Family != "e5" || e.QueryPrefix != "query: " || e.PassagePrefix != "passage: " || e.Pooling != PoolMean || e.MaxLength != 128 {
		t.Errorf("e5 dir: %s %s %q %q %d", e.Family, e.Pooling, e.QueryPrefix, e.PassagePrefix, e.MaxLength)
	}
	// A Hugging Face cache directory names the model above the snapshot.
	snap := filepath.Join(dir, "models--BAAI--bge-small-en-v1.5", "snapshots", "0123abc")
	os.MkdirAll(snap, 0o755)
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		os.Symlink(mustAbs(t, filepath.Join(modelDir, f)), filepath.Join(snap, f))
	}
	if e, err := Load(snap, Options{}); err != nil || e.Family != "bge" || e.Pooling != PoolCLS {
		t.Errorf("HF cache snapshot: %v", err)
	}
	empty := ""
	e, err = Load(e5dir, Options{Family: "bge", QueryPrefix: &empty})
	if err != nil {
		t.Fatal(err)
	}
	if e.Pooling != PoolCLS || e.QueryPrefix != "" || e.PassagePrefix != "" {
		t.Errorf("bge with an empty query prefix: %s %q %q", e.Pooling, e.QueryPrefix, e.PassagePrefix)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Bad checkpoints fail with one line that names the problem.
func TestBadCheckpoints(t *testing.T) {
	cfg, _ := os.ReadFile(filepath.Join(modelDir, "config.json"))
	mk := func(edit func(m map[string]any), weights string) string {
		dir := t.TempDir()
		var m map[string]any
		json.Unmarshal(cfg, &m)
		if edit != nil {
			edit(m)
		}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
		os.Symlink(mustAbs(t, filepath.Join(modelDir, "tokenizer.json")), filepath.Join(dir, "tokenizer.json"))
		if weights != "" {
			os.Symlink(weights, filepath.Join(dir, "model.safetensors"))
		}
		return dir
	}
	weights := mustAbs(t, filepath.Join(modelDir, "model.safetensors"))
	// A checkpoint missing a tensor.
	src, err := safetensors.Open(weights)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, n := range src.Names() {
		if n == "encoder.layer.1.output.dense.bias" {
			continue
		}
		v, sh, _ := src.Float32(n)
		ts = append(ts, safetensors.Tensor{Name: n, DType: safetensors.F32, Shape: sh, F32: v})
	}
	src.Close()
	missing := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.WriteFile(missing, ts, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, want string
	}{
		{"qwen config", mk(func(m map[string]any) {
			m["model_type"], m["architectures"] = "qwen2", []string{"Qwen2ForCausalLM"}
		}, weights), `model_type "qwen2" (architectures [Qwen2ForCausalLM]) is not a BertModel`},
		{"tanh gelu", mk(func(m map[string]any) { m["hidden_act"] = "gelu_new" }, weights), `hidden_act "gelu_new" is not supported`},
		{"relative positions", mk(func(m map[string]any) { m["position_embedding_type"] = "relative_key" }, weights), `position_embedding_type "relative_key"`},
		{"missing tensor", mk(nil, missing), `tensor "encoder.layer.1.output.dense.bias" is missing`},
		{"wrong shape", mk(func(m map[string]any) { m["intermediate_size"] = 256 }, weights), `tensor "encoder.layer.0.intermediate.dense.weight" has shape [128 64], config.json implies [256 64]`},
		{"no weights", mk(nil, ""), "only model.safetensors checkpoints are read"},
		{"no dir", filepath.Join(t.TempDir(), "nope"), "config.json: no such file"},
	}
	for _, c := range cases {
		_, err := Load(c.dir, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", c.name, err, c.want)
		}
	}
	if _, err := Load(modelDir, Options{Family: "dpr"}); err == nil || !strings.Contains(err.Error(), `family "dpr"`) {
		t.Errorf("unknown family: %v", err)
	}
}
