package main

import (
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
)

// TestWritePeftFixture writes the inputs of scripts/check_peft.py into
// $MEMPO_PEFT_FIXTURE: a tiny random Qwen2 base (base/) and rollouts whose
// log-probs are the base's (rollouts.jsonl), for `mempo-update --lora-rank`
// to train an adapter that transformers + peft then load (scripts/gpu/lora.sh
// does it on the GPU machine, where peft is installed).
func TestWritePeftFixture(t *testing.T) {
	dir := envconfig.PeftFixture.Get()
	if dir == "" {
		t.Skip("MEMPO_PEFT_FIXTURE not set: writes scripts/check_peft.py's inputs only when asked")
	}
	m := updWriteModel(t, filepath.Join(dir, "base"), 48, 7)
	updWriteRollouts(t, filepath.Join(dir, "rollouts.jsonl"), m, 2, 4)
}
