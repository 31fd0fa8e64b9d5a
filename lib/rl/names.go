package rl

import "fmt"

// StdModes and MemPools are the text forms of the advantage knobs, as
// mempo-update's --std and --mem-pool flags take them. (The types have no
// String method on purpose: mempo-update fingerprints its configs with %+v
// to decide whether a run may resume, and a String method would change
// every fingerprint.)
var (
	StdModes = map[string]StdMode{"unbiased": StdUnbiased, "population": StdPopulation}
	MemPools = map[string]MemPool{"task": PoolTask, "step": PoolStep}
	// MemBaselines: mempo-update's --mem-baseline.
	MemBaselines = map[string]MemBaseline{"history": BaselineHistory, "previous": BaselinePrevMemory}
)

// ParseStdMode accepts "unbiased" and "population".
func ParseStdMode(s string) (StdMode, error) {
	if m, ok := StdModes[s]; ok {
		return m, nil
	}
	return 0, fmt.Errorf("--std %q: want unbiased or population", s)
}

// ParseMemPool accepts "task" and "step".
func ParseMemPool(s string) (MemPool, error) {
	if p, ok := MemPools[s]; ok {
		return p, nil
	}
	return 0, fmt.Errorf("--mem-pool %q: want task or step", s)
}

// ParseMemBaseline accepts "history" and "previous".
func ParseMemBaseline(s string) (MemBaseline, error) {
	if b, ok := MemBaselines[s]; ok {
		return b, nil
	}
	return 0, fmt.Errorf("--mem-baseline %q: want history or previous", s)
}
