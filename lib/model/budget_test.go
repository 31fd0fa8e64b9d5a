package model

import "testing"

// ForwardBudget stays within its bounds, and the activation estimate it
// divides by counts what the comment says for a small shape (hidden 8,
// 2 heads and 1 kv head of 4, intermediate 12): 4·(8·8 + 3·8 + 3·4 + 4·12)
// bytes.
func TestForwardBudget(t *testing.T) {
	m := randomModel(t, tinyConfig(false), 1)
	if got, want := m.activationBytesPerID(), 4.0*(8*8+3*8+3*4+4*12); got != want {
		t.Errorf("activation bytes per id %v, want %v", got, want)
	}
	b := m.ForwardBudget()
	if _, _, ok := m.AvailableMemory(); ok && (b < minForwardIDs || b > maxForwardIDs) {
		t.Errorf("ForwardBudget %d outside [%d, %d]", b, minForwardIDs, maxForwardIDs)
	}
	if _, _, ok := m.AvailableMemory(); !ok && b != 16384 {
		t.Errorf("ForwardBudget without a memory reading: %d, want 16384", b)
	}
}
