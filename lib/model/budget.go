package model

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// MaxPositions is the model's max_position_embeddings: the longest sequence
// (prompt and generated tokens) it was configured for.
func (m *Model) MaxPositions() int { return m.cfg.MaxPositions }

// KVCacheBytes is what rows rows of Generate's key/value cache take (keys
// and values of every layer, float32); CacheRows is the rows of a call.
func (m *Model) KVCacheBytes(rows int) float64 {
	return 2 * float64(m.a.layers) * float64(rows) * float64(m.a.kvHeads*m.a.headDim) * 4
}

// AvailableMemory is what a generation may allocate on the model's backend:
// on a GPU the device's free memory plus the buffers the backend's pool
// holds for reuse (it gives them back to the driver when an allocation
// fails), the kernel's MemAvailable on the CPU; ok is false when it cannot
// be told.
func (m *Model) AvailableMemory() (bytes int64, where string, ok bool) {
	if c, isCUDA := m.be.(*CUDA); isCUDA {
		if c.Device() == nil { // the kernel emulation of the tests
			return 0, "", false
		}
		free, _, err := c.Device().MemInfo()
		_, _, pooled := c.PoolStats()
		return free + pooled, "free GPU memory", err == nil
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb); err == nil {
				return kb << 10, "available memory (MemAvailable)", true
			}
		}
	}
	return 0, "", false
}

// FormatBytes writes a byte count with a binary unit (12.5 GiB).
func FormatBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// Bounds of ForwardBudget, in ids.
const (
	minForwardIDs = 2048
	maxForwardIDs = 1 << 18
)

// activationBytesPerID is a generous estimate of what one id costs an
// inference forward at its peak inside a layer: the residual stream and the
// norms' outputs, q, k, v and the attention's output, gate, up and their
// product, in fp32 with the bf16 copies the products read.
func (m *Model) activationBytesPerID() float64 {
	A := &m.a
	qd, kvd := A.heads*A.headDim, A.kvHeads*A.headDim
	return 4 * float64(8*A.hidden+3*qd+3*kvd+4*A.inter)
}

// ForwardBudget is the most ids one inference forward (a prefill, a scoring
// pass) should run: what a quarter of the memory free now holds of the
// forward's activations, within [2048, 262144] ids; 16384 where the free
// memory cannot be told. Callers split larger work into several forwards,
// so that a large batch queues instead of running out of memory.
func (m *Model) ForwardBudget() int {
	free, _, ok := m.AvailableMemory()
	if !ok {
		return 16384
	}
	n := float64(free) / 4 / m.activationBytesPerID()
	return int(max(minForwardIDs, min(maxForwardIDs, n)))
}
