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
	if cfg == nil {
		return nil, fmt.Errorf("model: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: config: %w", err)
	}
	if be == nil {
		be = NewCPU()
	}
	m, err := newModel(archOf(cfg), be, tensors)
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
func Load(dir string, be Backend) (*Model, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	tensors, err := ck.LoadAll()
	if err != nil {
		return nil, err
	}
	return New(ck.Config, tensors, be)
}
