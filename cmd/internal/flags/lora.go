package flags

import (
	ucli "github.com/urfave/cli/v2"
)

// Adapter is the --adapter flag: a peft LoRA adapter directory (lib/peft).
// The inference commands apply it unmerged over --model; mempo-update
// continues training it (usage says which).
func Adapter(usage string) *ucli.StringFlag {
	if usage == "" {
		usage = "peft LoRA adapter directory applied (unmerged) over --model"
	}
	return &ucli.StringFlag{Name: "adapter", Usage: usage}
}

// LoRA is mempo-update's adapter group: --lora-rank turns the update into
// the training of a fresh adapter over the frozen --model; --adapter
// continues one. cmd/mempo-update/lora.go parses it (it reads the adapter
// directory to check the flags against its config).
func LoRA() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "lora-rank", Usage: "train a LoRA adapter of this rank over the frozen --model (0: full-parameter update)"},
		&ucli.Float64Flag{Name: "lora-alpha", Usage: "LoRA alpha: the adapter's product is scaled by alpha/rank (default: 2·rank)"},
		&ucli.Float64Flag{Name: "lora-dropout", Usage: "dropout on the adapter's input during the backward (peft's lora_dropout)"},
		&ucli.StringFlag{Name: "lora-targets", Usage: "comma-separated modules to adapt (default: q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)"},
		Adapter("peft adapter directory to continue training (its optimizer.safetensors, when present, is resumed); implies LoRA"),
	}
}
