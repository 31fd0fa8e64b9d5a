package main

import (
	"fmt"
	"strconv"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/update"
)

// goldenSeqs and goldenLen bound the golden file: logits are T×V floats per
// sequence (V = 152k for Qwen), so a few short sequences suffice.
const (
	goldenSeqs = 2
	goldenLen  = 24
)

// writeGolden writes, for the first few step samples of the batch (context ⊕
// output, cut to goldenLen ids), "ids.k" (int64 [T]) and the model's
// "logits.k" (float32 [T, V]): scripts/check_update_hf.py loads the written
// checkpoint in transformers and compares its logits with these.
func writeGolden(path string, m *model.Model, b *update.Batch) error {
	var seqs [][]int
	for k := 0; k < len(b.Samples) && len(seqs) < goldenSeqs; k++ {
		ids := b.Samples[k].IDs
		seqs = append(seqs, ids[:min(len(ids), goldenLen)])
	}
	logits, err := m.Logits(seqs)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	V := m.VocabSize()
	var ts []safetensors.Tensor
	for k, s := range seqs {
		ids := make([]int64, len(s))
		for i, x := range s {
			ids[i] = int64(x)
		}
		ts = append(ts,
			safetensors.Tensor{Name: fmt.Sprintf("ids.%d", k), DType: safetensors.I64, Shape: []int{len(s)}, I64: ids},
			safetensors.Tensor{Name: fmt.Sprintf("logits.%d", k), DType: safetensors.F32, Shape: []int{len(s), V}, F32: logits[k]})
	}
	return safetensors.WriteFile(path, ts, map[string]string{"format": "mempo-golden-v1", "count": strconv.Itoa(len(seqs)), "writer": "mempo-update"})
}
