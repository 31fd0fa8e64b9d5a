package update

import (
	"fmt"
	"math/rand/v2"
)

// Plan orders a batch's trajectories into optimizer steps: Epochs passes,
// each a seeded shuffle of the trajectories cut into mini-batches of
// MiniBatch trajectories (the last one may be smaller). The order depends
// only on (Seed, epoch, NTraj), so any process can recompute the mini-batch
// of any step — the grad shards and a resumed run rely on it.
type Plan struct {
	NTraj     int
	MiniBatch int // trajectories per optimizer step; 0 or ≥ NTraj = all
	Epochs    int
	Seed      int64
}

// Validate checks the plan.
func (p Plan) Validate() error {
	if p.NTraj <= 0 {
		return fmt.Errorf("update: plan over %d trajectories", p.NTraj)
	}
	if p.MiniBatch < 0 {
		return fmt.Errorf("update: mini-batch size %d < 0", p.MiniBatch)
	}
	if p.Epochs < 1 {
		return fmt.Errorf("update: epochs must be ≥ 1, got %d", p.Epochs)
	}
	return nil
}

func (p Plan) mb() int {
	if p.MiniBatch <= 0 || p.MiniBatch > p.NTraj {
		return p.NTraj
	}
	return p.MiniBatch
}

// PerEpoch is the number of optimizer steps in one epoch.
func (p Plan) PerEpoch() int { return (p.NTraj + p.mb() - 1) / p.mb() }

// Steps is the number of optimizer steps of the plan.
func (p Plan) Steps() int { return p.Epochs * p.PerEpoch() }

// At returns the epoch (0-based) and the trajectory indices of step k.
func (p Plan) At(k int) (epoch int, trajs []int) {
	per := p.PerEpoch()
	epoch, j := k/per, k%per
	r := rand.New(rand.NewPCG(uint64(p.Seed), uint64(epoch)+0x9e3779b97f4a7c15))
	perm := r.Perm(p.NTraj)
	lo := j * p.mb()
	hi := min(lo+p.mb(), p.NTraj)
	return epoch, perm[lo:hi]
}

// Shard returns shard i of n of a mini-batch: a contiguous run of its
// trajectories (some shards may be empty when n exceeds the mini-batch).
func Shard(trajs []int, i, n int) []int {
	lo := i * len(trajs) / n
	hi := (i + 1) * len(trajs) / n
	return trajs[lo:hi]
}
