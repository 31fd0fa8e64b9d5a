package main

import (
	"fmt"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/model"
)

// checkGenerateSize refuses, before anything is allocated, a generation
// whose sequences are longer than the model's max_position_embeddings or
// whose KV cache does not fit the memory there is, naming the flag to change
// (a huge --max-tokens used to end in "fatal error: runtime: out of memory").
func checkGenerateSize(c *ucli.Context, m *model.Model, dir string, reqs []model.Request, maxTokens int) error {
	if maxTokens == 0 || len(reqs) == 0 {
		return nil
	}
	longest, rows := 0, 0
	for i, q := range reqs {
		if len(q.Prompt) > len(reqs[longest].Prompt) {
			longest = i
		}
		rows += max(q.N, 1)
	}
	prompt := len(reqs[longest].Prompt)
	if mp := m.MaxPositions(); mp > 0 && prompt+maxTokens > mp {
		if prompt >= mp {
			return fmt.Errorf("row %d: a prompt of %d tokens is at or beyond the model's max_position_embeddings %d (%s); shorten the prompt",
				longest+1, prompt, mp, filepath.Join(dir, "config.json"))
		}
		return fmt.Errorf("--max-tokens %d: row %d's prompt of %d tokens plus %d generated is beyond the model's max_position_embeddings %d (%s); use --max-tokens %d or less",
			maxTokens, longest+1, prompt, maxTokens, mp, filepath.Join(dir, "config.json"), mp-prompt)
	}
	cacheRows := model.CacheRows(reqs, model.GenerateOptions{MaxTokens: maxTokens})
	need := m.KVCacheBytes(cacheRows)
	budget := float64(c.Int64("memory-budget-mb")) * (1 << 20)
	where := "--memory-budget-mb"
	if budget <= 0 {
		avail, w, ok := m.AvailableMemory()
		if !ok {
			return nil
		}
		// Weights, activations and logits need room beside the cache.
		budget, where = 0.8*float64(avail), "80% of the "+w
	}
	if need > budget {
		return fmt.Errorf("--max-tokens %d: the KV cache of %d positions (each prompt once, %d rows × %d new tokens) needs %s, more than %s: %s; lower --max-tokens or --n, or split the input",
			maxTokens, cacheRows, rows, maxTokens, model.FormatBytes(need), where, model.FormatBytes(budget))
	}
	return nil
}
