package model

// stepper is a backend's own decoding step (the CUDA backend's replays a
// CUDA graph per token, cuda_decode.go): for each row i, token ids[i] at
// position seqs[i].Past goes through every layer over the KV cache as
// seqs[i] places it (one query row, a shared prefix or none; its keys and
// values are written to row K+Past), and the next token is drawn from the
// logits with params[i] and u[i], exactly as lastLogits followed by
// Backend.Sample would. Generate uses it for every step after the prefill
// when the backend makes one.
type stepper interface {
	step(ids []int, seqs []AttnSeq, params []SampleParams, u []float64) []Sampled
	free()
}

// stepBackend is a backend that can make a stepper for up to rows rows over
// cache c (nil: use the op-by-op path).
type stepBackend interface {
	newStepper(m *Model, c *kvCache, rows int) stepper
}

// newStepper returns the backend's stepper for this generation, or nil. A
// stepper runs the base model's layers only: with a LoRA adapter attached
// (lora.go), every step takes the op-by-op path, which adds its products.
func (m *Model) newStepper(c *kvCache, rows int) stepper {
	if m.lora != nil {
		return nil
	}
	if sb, ok := m.be.(stepBackend); ok {
		return sb.newStepper(m, c, rows)
	}
	return nil
}
