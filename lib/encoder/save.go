package encoder

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mempo/mempo/lib/safetensors"
)

// Save writes the encoder as a BertModel checkpoint directory that Load (and
// transformers) reads: config.json, model.safetensors (float32, Hugging
// Face's tensor names) and a copy of tokenizerJSON (a tokenizer.json file).
// Benchmarks use it to serve a random base-sized encoder.
func (e *Encoder) Save(dir, tokenizerJSON string) error {
	tok, err := os.ReadFile(tokenizerJSON)
	if err != nil {
		return fmt.Errorf("encoder save: %w", unwrapPath(err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c := e.Cfg
	cfg := map[string]any{
		"architectures": []string{"BertModel"}, "model_type": "bert", "vocab_size": c.VocabSize, "hidden_size": c.HiddenSize,
		"num_hidden_layers": c.NumHiddenLayers, "num_attention_heads": c.NumAttentionHeads, "intermediate_size": c.IntermediateSize,
		"max_position_embeddings": c.MaxPositionEmbeddings, "type_vocab_size": c.TypeVocabSize, "layer_norm_eps": c.LayerNormEps,
		"hidden_act": "gelu", "position_embedding_type": "absolute", "pad_token_id": e.padID,
	}
	data, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644); err != nil {
		return err
	}
	H, I := c.HiddenSize, c.IntermediateSize
	var ts []safetensors.Tensor
	add := func(name string, v []float32, shape ...int) {
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: shape, F32: v})
	}
	add("embeddings.word_embeddings.weight", e.word, c.VocabSize, H)
	add("embeddings.position_embeddings.weight", e.pos, c.MaxPositionEmbeddings, H)
	add("embeddings.token_type_embeddings.weight", e.typ, c.TypeVocabSize, H)
	add("embeddings.LayerNorm.weight", e.embLnW, H)
	add("embeddings.LayerNorm.bias", e.embLnB, H)
	for l, L := range e.layers {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		for i, n := range []string{"query", "key", "value"} {
			add(p+"attention.self."+n+".weight", L.qkvW[i*H*H:(i+1)*H*H], H, H)
			add(p+"attention.self."+n+".bias", L.qkvB[i*H:(i+1)*H], H)
		}
		add(p+"attention.output.dense.weight", L.oW, H, H)
		add(p+"attention.output.dense.bias", L.oB, H)
		add(p+"attention.output.LayerNorm.weight", L.ln1W, H)
		add(p+"attention.output.LayerNorm.bias", L.ln1B, H)
		add(p+"intermediate.dense.weight", L.upW, I, H)
		add(p+"intermediate.dense.bias", L.upB, I)
		add(p+"output.dense.weight", L.downW, H, I)
		add(p+"output.dense.bias", L.downB, H)
		add(p+"output.LayerNorm.weight", L.ln2W, H)
		add(p+"output.LayerNorm.bias", L.ln2B, H)
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"})
}
