package main

import (
	"fmt"
	"math"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/model"
)

// generateCacheLimit refuses, before anything is allocated, a generation
// whose sequences are longer than the model's max_position_embeddings or
// whose KV cache cannot fit the memory there is even with rows taking cache
// as they write (model.StartCacheRows), naming the flag to change (a huge
// --max-tokens used to end in "fatal error: runtime: out of memory"); else
// it returns the KV-cache rows the budget holds, the generation's
// CacheLimit (0: no bound known).
func generateCacheLimit(c *ucli.Context, m *model.Model, dir string, reqs []model.Request, maxTokens int) (int, error) {
	if maxTokens == 0 || len(reqs) == 0 {
		return 0, nil
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
			return 0, fmt.Errorf("row %d: a prompt of %d tokens is at or beyond the model's max_position_embeddings %d (%s); shorten the prompt",
				longest+1, prompt, mp, filepath.Join(dir, "config.json"))
		}
		return 0, fmt.Errorf("--max-tokens %d: row %d's prompt of %d tokens plus %d generated is beyond the model's max_position_embeddings %d (%s); use --max-tokens %d or less",
			maxTokens, longest+1, prompt, maxTokens, mp, filepath.Join(dir, "config.json"), mp-prompt)
	}
	opts := model.GenerateOptions{MaxTokens: maxTokens}
	cacheRows, least := model.CacheRows(reqs, opts), model.StartCacheRows(reqs, opts)
	budget := float64(c.Int64("memory-budget-mb")) * (1 << 20)
	where := "--memory-budget-mb"
	if budget <= 0 {
		avail, w, ok := m.AvailableMemory()
		if !ok {
			return 0, nil
		}
		// Weights, activations and logits need room beside the cache.
		budget, where = 0.8*float64(avail), "80% of the "+w
	}
	if need := m.KVCacheBytes(least); need > budget {
		return 0, fmt.Errorf("--max-tokens %d: the KV cache needs at least %d positions (each prompt once, %d rows × %d new tokens reserved: %d) and %s, more than %s: %s; lower --max-tokens or --n, or split the input",
			maxTokens, least, rows, maxTokens, cacheRows, model.FormatBytes(need), where, model.FormatBytes(budget))
	}
	perRow := m.KVCacheBytes(1)
	if perRow <= 0 {
		return 0, nil
	}
	return int(min(budget/perRow, math.MaxInt32)), nil
}
