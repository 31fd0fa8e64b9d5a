package encoder

import (
	"fmt"
	"math/rand/v2"

	"github.com/mempo/mempo/lib/tokenizer"
)

// BaseConfig is the shape of bert-base / e5-base-v2 / bge-base: 768 hidden,
// 12 layers of 12 heads, 3072 intermediate, 512 positions, 30522 ids.
var BaseConfig = Config{ModelType: "bert", VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
	IntermediateSize: 3072, MaxPositionEmbeddings: 512, TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu"}

// Random builds an encoder of shape cfg with random weights (normal, std
// 0.02, LayerNorm weights 1), for benchmarks: its cost per text is that of
// a trained checkpoint of the same shape. tok may be nil when only Forward
// is used.
func Random(cfg Config, tok *tokenizer.Tokenizer, seed uint64, opt Options) (*Encoder, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if tok != nil && tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("tokenizer has %d ids, vocab_size is %d", tok.VocabSize(), cfg.VocabSize)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	normal := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(0.02 * r.NormFloat64())
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	e := &Encoder{Cfg: cfg, Tok: tok, word: normal(cfg.VocabSize * H), pos: normal(cfg.MaxPositionEmbeddings * H),
		typ: normal(cfg.TypeVocabSize * H), embLnW: ones(H), embLnB: make([]float32, H)}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		e.layers = append(e.layers, layer{qkvW: normal(3 * H * H), qkvB: normal(3 * H), oW: normal(H * H), oB: normal(H),
			ln1W: ones(H), ln1B: make([]float32, H), upW: normal(I * H), upB: normal(I), downW: normal(H * I), downB: normal(H),
			ln2W: ones(H), ln2B: make([]float32, H)})
	}
	fam := opt.Family
	if fam == "" {
		fam = "none"
	}
	d, ok := familyDefaults[fam]
	if !ok {
		return nil, fmt.Errorf("encoder family %q is not known (e5, bge, contriever or none)", fam)
	}
	e.Family, e.Pooling, e.QueryPrefix, e.PassagePrefix = fam, d.pool, d.query, d.passage
	e.MaxLength = min(max(opt.MaxLength, 0), cfg.MaxPositionEmbeddings)
	if e.MaxLength == 0 {
		e.MaxLength = min(256, cfg.MaxPositionEmbeddings)
	}
	if err := e.UseDevice(opt.Device, opt.Precision); err != nil {
		return nil, err
	}
	e.setBatchSize(opt.BatchSize)
	return e, nil
}
