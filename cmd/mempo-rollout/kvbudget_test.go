package main

import (
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/rollout"
)

func TestKVBudget(t *testing.T) {
	free := func(b int64) func() (int64, string, bool) {
		return func() (int64, string, bool) { return b, "free GPU memory", true }
	}
	// 0.5B's KV cache: 24 layers × 2 kv heads × 64 dims × 2 (keys, values) × 4 bytes = 24 KiB a token.
	const perToken = 24 << 10
	pol := policyInfo{KVBytesPerToken: perToken, Available: free(80 << 30)}
	cases := []struct {
		what      string
		kvGiB     float64
		maxTokens int
		pol       policyInfo
		want      int
		from      string
	}{
		{"automatic: half of 80 GiB free", 0, 0, pol, (40 << 30) / perToken, "50% of the free GPU memory (40.0 GiB"},
		{"--kv-gib", 3, 0, pol, (3 << 30) / perToken, "--kv-gib (3.0 GiB"},
		{"--max-batch-tokens alone: no automatic bound beside it", 0, 5000, pol, 5000, "--max-batch-tokens"},
		{"--max-batch-tokens smaller than --kv-gib", 3, 5000, pol, 5000, "--max-batch-tokens"},
		{"--kv-gib smaller than --max-batch-tokens", 0.001, 1 << 20, pol, (1 << 30) / 1000 / perToken, "--kv-gib"},
		{"a tiny budget still lets one token through", 1e-9, 0, pol, 1, "--kv-gib"},
		{"a scripted policy: no sizes, no bound", 0, 0, policyInfo{}, 0, "--max-batch-tokens"},
		{"memory unknown: no automatic bound", 0, 0, policyInfo{KVBytesPerToken: perToken}, 0, "--max-batch-tokens"},
	}
	for _, c := range cases {
		got, from := kvBudget(c.kvGiB, c.maxTokens, c.pol)
		if got != c.want || !strings.HasPrefix(from, c.from) {
			t.Errorf("%s: %d tokens from %q, want %d from %q…", c.what, got, from, c.want, c.from)
		}
	}
}

// The summary line's KV-cache part: the calls, the largest call's cache
// with its bytes, all calls' and the bound that split the turns.
func TestKVPart(t *testing.T) {
	st := rollout.Stats{GenerateCalls: 3, CacheRows: 5000, CacheRowsMax: 2048, CacheRowsPeak: 1024, Preempted: 7}
	cases := []struct {
		bytesPerPos float64
		bound       int
		from, want  string
	}{
		{24 << 10, 43690, "--kv-gib (1.0 GiB of KV cache)",
			"KV cache: 3 generation calls, the largest 2048 positions (48.0 MiB), at most 1024 positions (24.0 MiB) in use, 5000 positions in all, samples preempted 7, a call's bound 43690 positions from --kv-gib (1.0 GiB of KV cache)"},
		{0, 0, "--max-batch-tokens",
			"KV cache: 3 generation calls, the largest 2048 positions, at most 1024 positions in use, 5000 positions in all, samples preempted 7, no bound"},
	}
	for _, c := range cases {
		if got := kvPart(st, c.bytesPerPos, c.bound, c.from); got != c.want {
			t.Errorf("kvPart:\n got %s\nwant %s", got, c.want)
		}
	}
}
