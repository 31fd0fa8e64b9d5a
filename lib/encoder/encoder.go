// Package encoder embeds queries and passages with a BERT-family encoder
// (BertModel checkpoints: e5, bge, contriever) on the CPU or a CUDA GPU
// (gpu.go; Options.Device), as Search-R1's
// dense retriever does with transformers: the checkpoint's WordPiece
// tokenizer with [CLS]/[SEP] and truncation to a max length, the post-
// LayerNorm encoder with exact (erf) GELU, absolute position and token-type
// embeddings, then mean pooling over the attention mask (e5, contriever) or
// the [CLS] row (bge), and L2 normalization. Prefixes ("query: " /
// "passage: " for e5, the bge instruction for bge queries) are chosen from
// the model family as Search-R1 does, and can be overridden.
//
// It checks out against transformers' BertModel in float32 (last hidden
// states and pooled embeddings within 1e-4 on the fixture of
// scripts/golden_bert.py); the GPU forward in fp32 matches the CPU's, and
// its fp16 mode (the GPU default) is within the tolerances of gpu_test.go.
//
//	enc, err := encoder.Load("e5-base-v2/", encoder.Options{})
//	vecs, err := enc.EmbedQueries([]string{"who wrote hamlet?"})
//
// An Encoder is safe for concurrent use; calls run one at a time, each
// using every core (or the GPU).
package encoder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/tensor"
	"github.com/mempo/mempo/lib/tokenizer"
)

// Pooling turns the last hidden states of a text into one vector.
type Pooling string

const (
	PoolMean Pooling = "mean" // mean over the attention mask
	PoolCLS  Pooling = "cls"  // the first ([CLS]) row
)

// Options choose how texts are embedded; zero values take the family's
// defaults.
type Options struct {
	// Family is e5, bge or contriever; "" detects it as Search-R1 does, by
	// substring of the model's name (the directory name, _name_or_path in
	// config.json, or the whole path). "none" means no family: no
	// prefixes, mean pooling.
	Family string
	// Pooling overrides the family's pooling.
	Pooling Pooling
	// QueryPrefix and PassagePrefix, when non-nil, override the family's.
	QueryPrefix, PassagePrefix *string
	// MaxLength is the token limit of one text including [CLS]/[SEP]
	// (default 256, as Search-R1's queries and shipped index; at most
	// max_position_embeddings).
	MaxLength int
	// BatchSize is the number of texts per forward pass (default 32 on
	// the CPU, 128 on a GPU).
	BatchSize int
	// Device is where the forward pass runs: "cpu" (or ""), "cuda", or
	// "auto" for CUDA when usable and the CPU otherwise (DeviceNote says
	// why). The commands' --device defaults to auto.
	Device string
	// Precision is the GPU forward's number format: fp16 (default) or
	// fp32. The CPU forward is fp32.
	Precision Precision
}

// Config is the part of a BertConfig the forward pass uses.
type Config struct {
	ModelType             string   `json:"model_type"`
	Architectures         []string `json:"architectures"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	IntermediateSize      int      `json:"intermediate_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	LayerNormEps          float64  `json:"layer_norm_eps"`
	HiddenAct             string   `json:"hidden_act"`
	PositionEmbeddingType string   `json:"position_embedding_type"`
	NameOrPath            string   `json:"_name_or_path"`
}

type layer struct {
	qkvW, qkvB   []float32 // [3H, H], [3H]: query, key, value stacked
	oW, oB       []float32 // [H, H]
	ln1W, ln1B   []float32
	upW, upB     []float32 // [I, H]
	downW, downB []float32 // [H, I]
	ln2W, ln2B   []float32
}

// Encoder is a loaded BertModel with its tokenizer and embedding options.
type Encoder struct {
	Cfg     Config
	Tok     *tokenizer.Tokenizer
	Family  string
	Pooling Pooling
	// QueryPrefix and PassagePrefix are put before every query / passage.
	QueryPrefix, PassagePrefix string
	MaxLength, BatchSize       int
	// Device is "cpu" or "cuda"; Precision the forward's number format
	// (fp32 on the CPU); DeviceNote, when the device was chosen
	// automatically and is the CPU, why CUDA was not used.
	Device     string
	Precision  Precision
	DeviceNote string
	gpu        *gpuModel

	word, pos, typ []float32
	embLnW, embLnB []float32
	layers         []layer
	padID          int

	mu sync.Mutex // one forward pass at a time (each uses all cores)
}

// familyDefaults are Search-R1's: prefixes from retrieval_server.py and
// pooling from index_builder.py's MODEL2POOLING.
var familyDefaults = map[string]struct {
	query, passage string
	pool           Pooling
}{
	"e5":         {"query: ", "passage: ", PoolMean},
	"bge":        {"Represent this sentence for searching relevant passages: ", "", PoolCLS},
	"contriever": {"", "", PoolMean},
	"none":       {"", "", PoolMean},
}

// DetectFamily returns the family named in name (e5, bge, contriever), or
// "none".
func DetectFamily(name string) string {
	n := strings.ToLower(name)
	for _, f := range []string{"e5", "bge", "contriever"} {
		if strings.Contains(n, f) {
			return f
		}
	}
	return "none"
}

// Load reads a BertModel checkpoint directory: config.json,
// model.safetensors and tokenizer.json.
func Load(dir string, opt Options) (*Encoder, error) {
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("encoder %s: %w", dir, unwrapPath(err))
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgPath, err)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	e := &Encoder{Cfg: cfg}
	if e.Tok, err = tokenizer.Load(filepath.Join(dir, "tokenizer.json")); err != nil {
		return nil, fmt.Errorf("encoder tokenizer: %w", err)
	}
	e.padID = 0
	if id, ok := e.Tok.TokenID("[PAD]"); ok {
		e.padID = id
	}
	if err := e.loadWeights(filepath.Join(dir, "model.safetensors")); err != nil {
		return nil, err
	}

	fam := opt.Family
	if fam == "" {
		// The directory's name, else config.json's _name_or_path, else the
		// whole path (a Hugging Face cache keeps the model's name in
		// models--intfloat--e5-base-v2/snapshots/<hash>).
		abs, _ := filepath.Abs(dir)
		for _, name := range []string{filepath.Base(abs), cfg.NameOrPath, abs} {
			if fam = DetectFamily(name); fam != "none" {
				break
			}
		}
	}
	d, ok := familyDefaults[fam]
	if !ok {
		return nil, fmt.Errorf("encoder family %q is not known (e5, bge, contriever or none)", fam)
	}
	e.Family, e.Pooling, e.QueryPrefix, e.PassagePrefix = fam, d.pool, d.query, d.passage
	if opt.Pooling != "" {
		if opt.Pooling != PoolMean && opt.Pooling != PoolCLS {
			return nil, fmt.Errorf("pooling %q is not supported (mean or cls)", opt.Pooling)
		}
		e.Pooling = opt.Pooling
	}
	if opt.QueryPrefix != nil {
		e.QueryPrefix = *opt.QueryPrefix
	}
	if opt.PassagePrefix != nil {
		e.PassagePrefix = *opt.PassagePrefix
	}
	e.MaxLength = opt.MaxLength
	if e.MaxLength <= 0 {
		e.MaxLength = 256
	}
	if e.MaxLength > cfg.MaxPositionEmbeddings {
		e.MaxLength = cfg.MaxPositionEmbeddings
	}
	if err := e.UseDevice(opt.Device, opt.Precision); err != nil {
		return nil, err
	}
	e.setBatchSize(opt.BatchSize)
	return e, nil
}

// setBatchSize sets BatchSize, or the device's default when n <= 0.
func (e *Encoder) setBatchSize(n int) {
	e.BatchSize = n
	if n <= 0 {
		e.BatchSize = 32
		if e.gpu != nil {
			e.BatchSize = 128
		}
	}
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

func (c *Config) check() error {
	bert := c.ModelType == "bert"
	for _, a := range c.Architectures {
		if strings.HasPrefix(a, "Bert") {
			bert = true
		}
	}
	if !bert {
		return fmt.Errorf("model_type %q (architectures %v) is not a BertModel (e5, bge and contriever are)", c.ModelType, c.Architectures)
	}
	if c.HiddenAct != "" && c.HiddenAct != "gelu" {
		return fmt.Errorf("hidden_act %q is not supported (gelu, as BERT, e5 and bge use)", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		return fmt.Errorf("position_embedding_type %q is not supported (absolute)", c.PositionEmbeddingType)
	}
	if c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0 ||
		c.MaxPositionEmbeddings <= 0 || c.VocabSize <= 0 {
		return errors.New("hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, max_position_embeddings and vocab_size must be positive")
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.TypeVocabSize <= 0 {
		c.TypeVocabSize = 2
	}
	if c.LayerNormEps == 0 {
		c.LayerNormEps = 1e-12
	}
	return nil
}

func (e *Encoder) loadWeights(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		if _, serr := os.Stat(path); serr != nil {
			return fmt.Errorf("encoder weights: %w (only model.safetensors checkpoints are read)", unwrapPath(serr))
		}
		return fmt.Errorf("encoder weights: %w", err)
	}
	defer f.Close()
	// BertFor* checkpoints prefix the encoder's tensors with "bert.".
	prefix := ""
	if _, ok := f.Info("embeddings.word_embeddings.weight"); !ok {
		if _, ok := f.Info("bert.embeddings.word_embeddings.weight"); ok {
			prefix = "bert."
		}
	}
	c := e.Cfg
	H, I := c.HiddenSize, c.IntermediateSize
	var firstErr error
	get := func(name string, shape ...int) []float32 {
		if firstErr != nil {
			return nil
		}
		v, sh, err := f.Float32(prefix + name)
		if err != nil {
			if _, ok := f.Info(prefix + name); !ok {
				err = fmt.Errorf("%s: tensor %q is missing", path, prefix+name)
			}
			firstErr = err
			return nil
		}
		if !slices.Equal(sh, shape) {
			firstErr = fmt.Errorf("%s: tensor %q has shape %v, config.json implies %v", path, prefix+name, sh, shape)
			return nil
		}
		return v
	}
	e.word = get("embeddings.word_embeddings.weight", c.VocabSize, H)
	e.pos = get("embeddings.position_embeddings.weight", c.MaxPositionEmbeddings, H)
	e.typ = get("embeddings.token_type_embeddings.weight", c.TypeVocabSize, H)
	e.embLnW = get("embeddings.LayerNorm.weight", H)
	e.embLnB = get("embeddings.LayerNorm.bias", H)
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		var L layer
		q, k, v := get(p+"attention.self.query.weight", H, H), get(p+"attention.self.key.weight", H, H), get(p+"attention.self.value.weight", H, H)
		qb, kb, vb := get(p+"attention.self.query.bias", H), get(p+"attention.self.key.bias", H), get(p+"attention.self.value.bias", H)
		L.qkvW = slices.Concat(q, k, v)
		L.qkvB = slices.Concat(qb, kb, vb)
		L.oW, L.oB = get(p+"attention.output.dense.weight", H, H), get(p+"attention.output.dense.bias", H)
		L.ln1W, L.ln1B = get(p+"attention.output.LayerNorm.weight", H), get(p+"attention.output.LayerNorm.bias", H)
		L.upW, L.upB = get(p+"intermediate.dense.weight", I, H), get(p+"intermediate.dense.bias", I)
		L.downW, L.downB = get(p+"output.dense.weight", H, I), get(p+"output.dense.bias", H)
		L.ln2W, L.ln2B = get(p+"output.LayerNorm.weight", H), get(p+"output.LayerNorm.bias", H)
		e.layers = append(e.layers, L)
	}
	if firstErr != nil {
		return firstErr
	}
	if e.Tok.VocabSize() > c.VocabSize {
		return fmt.Errorf("tokenizer has %d ids, the model's vocab_size is %d", e.Tok.VocabSize(), c.VocabSize)
	}
	return nil
}

// Dim is the embedding size (hidden_size).
func (e *Encoder) Dim() int { return e.Cfg.HiddenSize }

// Tokenize returns the ids of text with [CLS]/[SEP] (as the checkpoint's
// post-processor says), truncated to MaxLength.
func (e *Encoder) Tokenize(text string) []int { return e.Tok.EncodeSpecial(text, e.MaxLength) }

// Forward runs the encoder on B sequences of T ids (row-major, padded) with
// their attention mask (1 = token, 0 = padding) and returns the last hidden
// states [B, T, hidden]. Token type ids are 0, as in a single-sequence
// encode.
func (e *Encoder) Forward(ids []int, mask []int, B, T int) ([]float32, error) {
	if err := e.checkBatch(ids, mask, B, T); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gpu != nil {
		return e.gpu.run(ids, mask, B, T, e.Pooling, true)
	}
	return e.forward(ids, mask, B, T), nil
}

// EmbedIDs is Forward followed by Pool with the encoder's pooling: the
// L2-normalized embeddings of a padded batch (on a GPU only [B, H] comes
// back to the host).
func (e *Encoder) EmbedIDs(ids, mask []int, B, T int) ([][]float32, error) {
	if e.gpu == nil {
		h, err := e.Forward(ids, mask, B, T)
		if err != nil {
			return nil, err
		}
		return Pool(h, mask, B, T, e.Dim(), e.Pooling), nil
	}
	if err := e.checkBatch(ids, mask, B, T); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	flat, err := e.gpu.run(ids, mask, B, T, e.Pooling, false)
	if err != nil {
		return nil, err
	}
	H := e.Dim()
	out := make([][]float32, B)
	for b := range out {
		out[b] = flat[b*H : (b+1)*H : (b+1)*H]
	}
	return out, nil
}

func (e *Encoder) checkBatch(ids, mask []int, B, T int) error {
	if B < 0 || T < 0 || len(ids) != B*T || len(mask) != B*T {
		return fmt.Errorf("ids/mask have %d/%d entries, want %d×%d", len(ids), len(mask), B, T)
	}
	if T > e.Cfg.MaxPositionEmbeddings {
		return fmt.Errorf("sequence length %d exceeds max_position_embeddings %d", T, e.Cfg.MaxPositionEmbeddings)
	}
	for i, id := range ids {
		if id < 0 || id >= e.Cfg.VocabSize {
			return fmt.Errorf("ids[%d] = %d is outside the vocabulary [0, %d)", i, id, e.Cfg.VocabSize)
		}
	}
	return nil
}

func (e *Encoder) forward(ids []int, mask []int, B, T int) []float32 {
	c := e.Cfg
	H, I, nh := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads
	hd := H / nh
	N := B * T
	eps := float32(c.LayerNormEps)

	x := make([]float32, N*H)
	tensor.Parallel(N, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t := r % T
			row := x[r*H : (r+1)*H]
			w := e.word[ids[r]*H:]
			p := e.pos[t*H:]
			for j := range row {
				row[j] = w[j] + p[j] + e.typ[j]
			}
		}
	})
	layerNorm(x, nil, e.embLnW, e.embLnB, H, eps)

	qkv := make([]float32, N*3*H)
	ctx := make([]float32, N*H)
	tmp := make([]float32, N*H)
	up := make([]float32, N*I)
	// Valid keys of each sequence: padding keys get exactly zero weight in
	// HF (exp of finfo.min underflows), so they are left out.
	lens := make([]int, B)
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			lens[b] += mask[b*T+t]
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	scores := make([]float32, T*T)
	for _, L := range e.layers {
		linear(x, L.qkvW, L.qkvB, qkv, N, H, 3*H)
		for b := 0; b < B; b++ {
			nk := lens[b]
			if nk == 0 {
				nk = T // no valid key: HF's uniform softmax over all positions
			}
			base := b * T * 3 * H
			for h := 0; h < nh; h++ {
				q := qkv[base+h*hd:]
				k := qkv[base+H+h*hd:]
				v := qkv[base+2*H+h*hd:]
				sc := scores[:T*nk]
				tensor.Sgemm(false, true, T, nk, hd, scale, q, 3*H, k, 3*H, 0, sc, nk)
				tensor.Parallel(T, max(1, 8192/nk), func(lo, hi int) {
					for i := lo; i < hi; i++ {
						softmax(sc[i*nk : (i+1)*nk])
					}
				})
				tensor.Sgemm(false, false, T, hd, nk, 1, sc, nk, v, 3*H, 0, ctx[b*T*H+h*hd:], H)
			}
		}
		linear(ctx, L.oW, L.oB, tmp, N, H, H)
		layerNorm(x, tmp, L.ln1W, L.ln1B, H, eps)
		linear(x, L.upW, L.upB, up, N, H, I)
		tensor.Parallel(len(up), 1<<14, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				up[i] = gelu(up[i])
			}
		})
		linear(up, L.downW, L.downB, tmp, N, I, H)
		layerNorm(x, tmp, L.ln2W, L.ln2B, H, eps)
	}
	return x
}

// linear is y = x·Wᵀ + b for x [n, in], W [out, in] (torch's layout).
func linear(x, w, b, y []float32, n, in, out int) {
	for r := 0; r < n; r++ {
		copy(y[r*out:(r+1)*out], b)
	}
	tensor.Sgemm(false, true, n, out, in, 1, x, in, w, in, 1, y, out)
}

// layerNorm sets x = LayerNorm(x + add) row by row (add may be nil), with
// statistics accumulated in float64.
func layerNorm(x, add, w, b []float32, H int, eps float32) {
	n := len(x) / H
	tensor.Parallel(n, max(1, 4096/H), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := x[r*H : (r+1)*H]
			if add != nil {
				a := add[r*H : (r+1)*H]
				for j := range row {
					row[j] += a[j]
				}
			}
			var s float64
			for _, v := range row {
				s += float64(v)
			}
			mean := s / float64(H)
			var ss float64
			for _, v := range row {
				d := float64(v) - mean
				ss += d * d
			}
			inv := 1 / math.Sqrt(ss/float64(H)+float64(eps))
			for j, v := range row {
				row[j] = float32((float64(v)-mean)*inv)*w[j] + b[j]
			}
		}
	})
}

func softmax(s []float32) {
	m := s[0]
	for _, v := range s[1:] {
		m = max(m, v)
	}
	var sum float64
	for i, v := range s {
		ev := math.Exp(float64(v - m))
		s[i] = float32(ev)
		sum += ev
	}
	inv := float32(1 / sum)
	for i := range s {
		s[i] *= inv
	}
}

// gelu is the exact GELU of BERT's "gelu": x·Φ(x) with erf.
func gelu(x float32) float32 {
	return float32(0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2)))
}

// Pool reduces last hidden states [B, T, H] to L2-normalized vectors.
func Pool(hidden []float32, mask []int, B, T, H int, p Pooling) [][]float32 {
	out := make([][]float32, B)
	for b := 0; b < B; b++ {
		v := make([]float32, H)
		if p == PoolCLS {
			copy(v, hidden[b*T*H:b*T*H+H])
		} else {
			acc := make([]float64, H)
			n := 0
			for t := 0; t < T; t++ {
				if mask[b*T+t] == 0 {
					continue
				}
				n++
				row := hidden[(b*T+t)*H:]
				for j := range acc {
					acc[j] += float64(row[j])
				}
			}
			for j := range v {
				v[j] = float32(acc[j] / float64(max(n, 1)))
			}
		}
		normalize(v)
		out[b] = v
	}
	return out
}

// normalize is F.normalize: v / max(‖v‖, 1e-12).
func normalize(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	n := max(math.Sqrt(ss), 1e-12)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
}

// Batch is a padded batch of tokenized texts.
type Batch struct {
	IDs, Mask []int
	B, T      int
}

// Pad pads tokenized texts to the longest, with [PAD] and mask 0 (as HF's
// padding=True, on the right).
func (e *Encoder) Pad(seqs [][]int) Batch {
	T := 1
	for _, s := range seqs {
		T = max(T, len(s))
	}
	b := Batch{IDs: make([]int, len(seqs)*T), Mask: make([]int, len(seqs)*T), B: len(seqs), T: T}
	for i, s := range seqs {
		for t := 0; t < T; t++ {
			if t < len(s) {
				b.IDs[i*T+t], b.Mask[i*T+t] = s[t], 1
			} else {
				b.IDs[i*T+t] = e.padID
			}
		}
	}
	return b
}

// Embed embeds texts as given (no prefix), BatchSize at a time. Texts are
// grouped by token length so that batches carry little padding; the
// result is in input order. A text with no tokens at all (possible only
// without [CLS]/[SEP]) embeds to the zero vector.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.enc.embed(ctx, texts, e.prefix)
}

// Embedder embeds texts with one prefix (queries or passages).
type Embedder struct {
	enc    *Encoder
	prefix string
}

// Queries is the query-side embedder (QueryPrefix) and implements
// retrieval.QueryEncoder.
func (e *Encoder) Queries() *Embedder { return &Embedder{e, e.QueryPrefix} }

// Passages is the passage-side embedder (PassagePrefix).
func (e *Encoder) Passages() *Embedder { return &Embedder{e, e.PassagePrefix} }

// Encode implements retrieval.QueryEncoder.
func (e *Embedder) Encode(ctx context.Context, texts []string) ([][]float32, error) {
	return e.Embed(ctx, texts)
}

// Dim implements retrieval.QueryEncoder.
func (e *Embedder) Dim() int { return e.enc.Dim() }

// EmbedQueries embeds queries with the query prefix.
func (e *Encoder) EmbedQueries(texts []string) ([][]float32, error) {
	return e.embed(context.Background(), texts, e.QueryPrefix)
}

// EmbedPassages embeds passages with the passage prefix.
func (e *Encoder) EmbedPassages(texts []string) ([][]float32, error) {
	return e.embed(context.Background(), texts, e.PassagePrefix)
}

func (e *Encoder) embed(ctx context.Context, texts []string, prefix string) ([][]float32, error) {
	seqs := make([][]int, len(texts))
	tensor.Parallel(len(texts), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			seqs[i] = e.Tokenize(prefix + texts[i])
		}
	})
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]]) < len(seqs[order[b]]) })
	out := make([][]float32, len(texts))
	for lo := 0; lo < len(order); lo += e.BatchSize {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx := order[lo:min(lo+e.BatchSize, len(order))]
		batch := make([][]int, len(idx))
		for i, j := range idx {
			batch[i] = seqs[j]
		}
		bt := e.Pad(batch)
		vecs, err := e.EmbedIDs(bt.IDs, bt.Mask, bt.B, bt.T)
		if err != nil {
			return nil, err
		}
		for i, j := range idx {
			if len(seqs[j]) == 0 {
				clear(vecs[i])
			}
			out[j] = vecs[i]
		}
	}
	return out, nil
}
