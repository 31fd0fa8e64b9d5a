// Package dist is the collective layer of data-parallel training: a Comm
// joins the processes (ranks) of one run and sums, scatters, gathers and
// broadcasts buffers among them. The rendezvous follows torchrun's
// environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or a
// file on shared storage (MEMPO_DIST_FILE).
//
// The implementation here (tcp.go) runs on any CPU: every rank talks to
// rank 0 over TCP, and rank 0 reduces the contributions in rank order
// 0, 1, …, n−1, so a sum is bit-identical to the one-process loop that adds
// shard 0, then 1, … in float32. It carries the data-parallel logic in
// tests and on machines without NCCL; on GPUs lib/cuda's NCCL communicator
// carries the gradients (its ring order is NCCL's, not rank order).
package dist

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/envconfig"
)

// Comm is one rank's handle on the run's collectives. Every rank must call
// the same collectives in the same order with buffers of the same length.
type Comm interface {
	Rank() int
	Size() int
	// AllReduce replaces buf with the element-wise float32 sum over ranks,
	// added in rank order (rank 0's value, + rank 1's, …).
	AllReduce(buf []float32) error
	// ReduceScatter sums in (len Size()×len(out)) over ranks like AllReduce
	// and leaves rank r the r-th slice of the sum in out.
	ReduceScatter(in, out []float32) error
	// AllGather fills out (len Size()×len(in)) with every rank's in, in rank
	// order.
	AllGather(in, out []float32) error
	// Broadcast copies root's buf into every rank's buf (same length).
	Broadcast(buf []float32, root int) error
	// Exchange gives every rank every rank's bytes (any lengths), in rank
	// order: the small metadata of a step (metrics, ids).
	Exchange(b []byte) ([][]byte, error)
	// Barrier returns once every rank has reached it.
	Barrier() error
	Close() error
}

// Env is the rendezvous read from the environment.
type Env struct {
	Rank, Size, LocalRank int
	Addr                  string // host:port rank 0 listens on (MASTER_ADDR:MASTER_PORT), or ""
	File                  string // MEMPO_DIST_FILE, or ""
}

// ReadEnv reads torchrun's variables. WORLD_SIZE unset means one process
// (Size 1). A bad value is one line naming the variable.
func ReadEnv() (Env, error) {
	e := Env{Size: 1}
	ws := os.Getenv("WORLD_SIZE")
	if ws == "" {
		if os.Getenv("RANK") != "" {
			return e, fmt.Errorf("RANK is set but WORLD_SIZE is not")
		}
		return e, nil
	}
	var err error
	if e.Size, err = strconv.Atoi(ws); err != nil || e.Size < 1 {
		return e, fmt.Errorf("WORLD_SIZE=%q: want a whole number ≥ 1", ws)
	}
	r := os.Getenv("RANK")
	if r == "" && e.Size == 1 {
		r = "0"
	}
	if e.Rank, err = strconv.Atoi(r); err != nil || e.Rank < 0 || e.Rank >= e.Size {
		return e, fmt.Errorf("RANK=%q: want 0 ≤ RANK < WORLD_SIZE=%d", r, e.Size)
	}
	e.LocalRank = e.Rank
	if lr := os.Getenv("LOCAL_RANK"); lr != "" {
		if e.LocalRank, err = strconv.Atoi(lr); err != nil || e.LocalRank < 0 {
			return e, fmt.Errorf("LOCAL_RANK=%q: want a whole number ≥ 0", lr)
		}
	}
	e.File = envconfig.DistFile.Get()
	if e.Size == 1 {
		return e, nil
	}
	if e.File != "" {
		return e, nil
	}
	host, port := os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")
	if host == "" || port == "" {
		return e, fmt.Errorf("WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (or %s)", e.Size, envconfig.DistFile.Name)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return e, fmt.Errorf("MASTER_PORT=%q: want a port number", port)
	}
	// torchrun's agent hosts its own store on MASTER_PORT (it says so with
	// TORCHELASTIC_USE_AGENT_STORE): rank 0 then listens one port above.
	if strings.EqualFold(os.Getenv("TORCHELASTIC_USE_AGENT_STORE"), "true") {
		p++
	}
	e.Addr = fmt.Sprintf("%s:%d", host, p)
	return e, nil
}

// Join connects this process to the run described by e: a Single comm for
// one process, otherwise the TCP comm.
func Join(e Env) (Comm, error) {
	if e.Size == 1 {
		return Single{}, nil
	}
	return DialTCP(e)
}

// Single is the comm of a one-process run: every collective is the
// identity.
type Single struct{}

func (Single) Rank() int                      { return 0 }
func (Single) Size() int                      { return 1 }
func (Single) AllReduce([]float32) error      { return nil }
func (Single) Barrier() error                 { return nil }
func (Single) Close() error                   { return nil }
func (Single) Broadcast([]float32, int) error { return nil }
func (Single) Exchange(b []byte) ([][]byte, error) {
	return [][]byte{append([]byte(nil), b...)}, nil
}
func (Single) ReduceScatter(in, out []float32) error {
	if len(in) != len(out) {
		return fmt.Errorf("dist: reduce-scatter of %d values into %d on 1 rank", len(in), len(out))
	}
	copy(out, in)
	return nil
}
func (Single) AllGather(in, out []float32) error {
	if len(in) != len(out) {
		return fmt.Errorf("dist: all-gather of %d values into %d on 1 rank", len(in), len(out))
	}
	copy(out, in)
	return nil
}

// Span is a rank's part [Lo, Hi) of n items split as evenly as possible
// into size contiguous parts (the earlier parts get the remainder).
func Span(n, rank, size int) (lo, hi int) {
	return rank * n / size, (rank + 1) * n / size
}
