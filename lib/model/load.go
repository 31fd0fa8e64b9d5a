package model

import (
	"fmt"

	"github.com/mempo/mempo/lib/checkpoint"
)

func archOf(cfg *checkpoint.Config) arch {
	return arch{
		vocab: cfg.VocabSize, hidden: cfg.HiddenSize, inter: cfg.IntermediateSize, layers: cfg.NumLayers,
		heads: cfg.NumHeads, kvHeads: cfg.NumKVHeads, headDim: cfg.HeadDim,
		theta: cfg.RopeTheta, eps: float32(cfg.RMSNormEps),
		tied: cfg.TieWordEmbeddings, qkvBias: cfg.QKVBias(), oBias: cfg.OProjBias(), qkNorm: cfg.QKNorm,
	}
}

// New builds a model on be from a config and parameters by Hugging Face name
// (checkpoint.RandomInit's map, or the update stage's). The values are copied.
func New(cfg *checkpoint.Config, tensors map[string][]float32, be Backend) (*Model, error) {
	return newFrom(cfg, tensors, be, false)
}

// NewFrozen is New for a base that is not trained (see LoadFrozen).
func NewFrozen(cfg *checkpoint.Config, tensors map[string][]float32, be Backend) (*Model, error) {
	return newFrom(cfg, tensors, be, true)
}

func newFrom(cfg *checkpoint.Config, tensors map[string][]float32, be Backend, frozen bool) (*Model, error) {
	if cfg == nil {
		return nil, fmt.Errorf("model: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: config: %w", err)
	}
	if be == nil {
		be = NewCPU()
	}
	m, err := newModel(archOf(cfg), be, tensors, frozen)
	if err != nil {
		return nil, err
	}
	m.cfg = cfg
	return m, nil
}

// Config is the configuration the model was built from.
func (m *Model) Config() *checkpoint.Config { return m.cfg }

// EOS is the config's end-of-sequence ids (generation_config.json first).
func (m *Model) EOS() []int {
	if m.cfg == nil {
		return nil
	}
	return append([]int(nil), m.cfg.EOSTokenIDs...)
}

// Load opens a Hugging Face model directory with lib/checkpoint (config,
// single or sharded safetensors, f32/bf16/f16 weights, all validated) and
// builds the model on be (nil: the CPU).
func Load(dir string, be Backend) (*Model, error) { return load(dir, be, false) }

// LoadFrozen is Load for a base that is not trained: for inference, or
// under an adapter. The base gets no gradients (FreezeBase), and a backend
// that can keep product-only weights compactly does so: CUDA in bf16 mode
// holds the bf16 rounding of every weight matrix but the embedding table
// and no fp32 copy (the products read the same bf16 values either way), so
// a 7B base takes 15 GB instead of 45 GB.
func LoadFrozen(dir string, be Backend) (*Model, error) { return load(dir, be, true) }

func load(dir string, be Backend, frozen bool) (*Model, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	tensors, err := ck.LoadAll()
	if err != nil {
		return nil, err
	}
	return newFrom(ck.Config, tensors, be, frozen)
}
