package rl

import (
	"fmt"
	"math"
)

// GeoMeanProb returns P(gold | context) of Eq. 5: the geometric mean of the
// teacher-forced probabilities of the gold-answer tokens, exp of the mean of
// their log-probs. logp holds one log-prob per gold token. It is the one
// implementation of the term: the rollout engine scores every <mem> step
// with it.
//
// Edge cases:
//   - no gold tokens is an error (the agent never builds an empty gold, so
//     this is a caller's bug, not a 0);
//   - a NaN or +Inf log-prob is an error (a broken forward pass must not
//     become a reward);
//   - −Inf (probability 0) is allowed and gives 0;
//   - the result is clamped to [0, 1]: a log-prob rounded a hair above 0 in
//     float32 gives 1, not 1+ε.
func GeoMeanProb(logp []float32) (float64, error) {
	if len(logp) == 0 {
		return math.NaN(), fmt.Errorf("rl: geometric-mean probability of an empty gold answer")
	}
	s := 0.0
	for i, x := range logp {
		v := float64(x)
		if math.IsNaN(v) || math.IsInf(v, 1) {
			return math.NaN(), fmt.Errorf("rl: gold token %d has log-prob %v", i, v)
		}
		s += v
	}
	return min(math.Exp(s/float64(len(logp))), 1), nil
}

// MemoryReward returns R^M of Eq. 4 for one <mem> block:
// P(gold | q, mem_t) − P(gold | q, s_<t), from the gold-token log-probs
// teacher-forced under the memory-only context (memLogp) and under the full
// raw history before step t (histLogp; at t = 1 the history is the prompt
// alone). Both must cover the same gold token sequence.
//
// For a k-objective task the spec's default (mempo-paper §2.2 [I]) scores one
// joint gold string "a1; a2; …; ak" built from the first alias of each
// sub-question: a single teacher-forced pass per context, passed here as one
// slice. MultiMemoryReward is the per-objective alternative.
func MemoryReward(memLogp, histLogp []float32) (float64, error) {
	if len(memLogp) != len(histLogp) {
		return math.NaN(), fmt.Errorf("rl: memory reward over %d gold tokens with memory but %d with history", len(memLogp), len(histLogp))
	}
	pm, err := GeoMeanProb(memLogp)
	if err != nil {
		return math.NaN(), fmt.Errorf("memory context: %w", err)
	}
	ph, err := GeoMeanProb(histLogp)
	if err != nil {
		return math.NaN(), fmt.Errorf("history context: %w", err)
	}
	return pm - ph, nil
}

// MultiGoldProb returns the probability of a multi-objective, multi-alias
// gold: objectives[k][a] holds the gold-token log-probs of alias a of
// sub-question k. Each objective scores the max over its aliases of the
// geometric-mean probability (the alias the model finds most likely, as EM
// takes the best alias), and the result is the mean over objectives. This is
// our choice; the paper does not say.
func MultiGoldProb(objectives [][][]float32) (float64, error) {
	ps, err := ObjectiveGoldProbs(objectives)
	if err != nil {
		return math.NaN(), err
	}
	return MeanGoldProb(ps), nil
}

// MeanGoldProb is MultiGoldProb from ObjectiveGoldProbs' terms: their mean,
// summed in objective order.
func MeanGoldProb(ps []float64) float64 {
	sum := 0.0
	for _, p := range ps {
		sum += p
	}
	return sum / float64(len(ps))
}

// ObjectiveGoldProbs is each objective's term of MultiGoldProb: the largest
// GeoMeanProb over its aliases.
func ObjectiveGoldProbs(objectives [][][]float32) ([]float64, error) {
	if len(objectives) == 0 {
		return nil, fmt.Errorf("rl: multi-objective gold with no objectives")
	}
	ps := make([]float64, len(objectives))
	for k, aliases := range objectives {
		if len(aliases) == 0 {
			return nil, fmt.Errorf("rl: objective %d has no gold alias", k)
		}
		best := math.Inf(-1)
		for a, lp := range aliases {
			p, err := GeoMeanProb(lp)
			if err != nil {
				return nil, fmt.Errorf("objective %d alias %d: %w", k, a, err)
			}
			best = math.Max(best, p)
		}
		ps[k] = best
	}
	return ps, nil
}

// MultiMemoryReward is R^M with MultiGoldProb in place of GeoMeanProb:
// MultiGoldProb(mem) − MultiGoldProb(hist), both over the same objectives
// and aliases.
func MultiMemoryReward(mem, hist [][][]float32) (float64, error) {
	if len(mem) != len(hist) {
		return math.NaN(), fmt.Errorf("rl: multi memory reward over %d objectives with memory but %d with history", len(mem), len(hist))
	}
	for k := range mem {
		if len(mem[k]) != len(hist[k]) {
			return math.NaN(), fmt.Errorf("rl: objective %d has %d aliases with memory but %d with history", k, len(mem[k]), len(hist[k]))
		}
	}
	pm, err := MultiGoldProb(mem)
	if err != nil {
		return math.NaN(), fmt.Errorf("memory context: %w", err)
	}
	ph, err := MultiGoldProb(hist)
	if err != nil {
		return math.NaN(), fmt.Errorf("history context: %w", err)
	}
	return pm - ph, nil
}
