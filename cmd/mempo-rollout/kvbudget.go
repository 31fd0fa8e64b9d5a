package main

import (
	"fmt"
	"math"

	"github.com/mempo/mempo/lib/model"
)

// autoKVShare is the part of the memory free at the start that the KV
// caches of generation may take when --kv-gib is not given: the rest is
// room for the weights' working buffers, the logits and the memory-reward
// passes (whose shared-prefix cache may take a quarter of what is free).
const autoKVShare = 0.5

// kvBudget is the engine's bound on one generation call, in tokens of KV
// cache (model.CacheRows: each context once, the step tokens for each
// sample; rollout.Options GenTokensPerCall; 0: none), and a description of
// where it came from.
// A turn over it is split into several calls, each task's samples kept
// together, so that the run queues instead of running out of memory. It is
// the smaller of --max-batch-tokens and the --kv-gib budget over the
// policy's KV bytes per token; with neither flag, autoKVShare of the free
// memory the policy reports (none when it reports none, as a scripted
// policy).
func kvBudget(kvGiB float64, maxBatchTokens int, pol policyInfo) (tokens int, from string) {
	tokens, from = maxBatchTokens, "--max-batch-tokens"
	bytes, where := kvGiB*(1<<30), "--kv-gib"
	if kvGiB == 0 && maxBatchTokens == 0 && pol.Available != nil {
		if avail, w, ok := pol.Available(); ok {
			bytes, where = autoKVShare*float64(avail), fmt.Sprintf("%.0f%% of the %s", 100*autoKVShare, w)
		}
	}
	if bytes > 0 && pol.KVBytesPerToken > 0 {
		t := int(min(math.Floor(bytes/pol.KVBytesPerToken), math.MaxInt32))
		if tokens == 0 || t < tokens {
			tokens, from = max(t, 1), fmt.Sprintf("%s (%s of KV cache)", where, model.FormatBytes(bytes))
		}
	}
	return tokens, from
}
