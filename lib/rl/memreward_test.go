package rl

import (
	"math"
	"testing"
)

// The edge cases GeoMeanProb documents, which the rollout engine relies on.
func TestGeoMeanProbEdges(t *testing.T) {
	// A log-prob a rounding step above 0 (log-softmax of a certain token in
	// float32) is probability 1, not more.
	if p, err := GeoMeanProb([]float32{1e-7, 2e-7}); err != nil || p != 1 {
		t.Errorf("log-probs above 0: %v (%v), want 1", p, err)
	}
	if _, err := GeoMeanProb([]float32{0, float32(math.Inf(1))}); err == nil {
		t.Error("+Inf log-prob accepted")
	}
	if _, err := GeoMeanProb([]float32{}); err == nil {
		t.Error("zero gold tokens accepted")
	}
	// exp(mean) of a hand-computed case: ln 0.5 and ln 0.125 → sqrt(1/16).
	if p, err := GeoMeanProb([]float32{float32(math.Log(0.5)), float32(math.Log(0.125))}); err != nil || math.Abs(p-0.25) > 1e-7 {
		t.Errorf("geo mean of 0.5, 0.125 = %v (%v), want 0.25", p, err)
	}
}
