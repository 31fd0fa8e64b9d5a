package update

import (
	"math"
)

// SFT cold start (mempo-paper §4.1): cross-entropy on the output ids of each
// step given exactly its stored context, averaged over all output tokens of
// the mini-batch (token-mean). Context ids — the prompt, the previous step
// and its <information> — are never targets.

// DefaultSFTPeakLR is the SFT cold start's peak learning rate (mempo-update
// sft --lr), larger than DefaultConfig's RL rate (1e-6): the warm start on
// demonstrations is plain cross-entropy, not a clipped policy step.
const DefaultSFTPeakLR = 1e-5

// sftWeights returns Backward's per-position weights for one sample: w on
// the output positions, 0 on the context.
func sftWeights(s *Sample, w float32) []float32 {
	out := make([]float32, len(s.IDs))
	for p := s.Ctx; p < len(s.IDs); p++ {
		out[p] = w
	}
	return out
}

func (t *Trainer) tokens(trajs []int) int {
	n := 0
	for _, i := range trajs {
		n += t.Batch.Trajs[i].Tokens
	}
	return n
}

// SFTShardGrad is ShardGrad for the SFT loss: the shard's part of the
// mini-batch's mean cross-entropy and its gradient.
func (t *Trainer) SFTShardGrad(mbTrajs, shard []int) (*ShardResult, error) {
	return t.sftShardGrad(mbTrajs, shard, false)
}

func (t *Trainer) sftShardGrad(mbTrajs, shard []int, onDevice bool) (*ShardResult, error) {
	b := t.Batch
	res := &ShardResult{Trajs: len(shard), Shards: 1}
	N := t.tokens(mbTrajs)
	m := t.Model
	m.ZeroGrads()
	if N > 0 {
		w := float32(1 / float64(N))
		mbs := micros(b, samplesOf(b, shard), t.Cfg.micro())
		for n, mb := range mbs {
			if t.OnMicro != nil {
				t.OnMicro("backward", n, len(mbs))
			}
			ws := make([][]float32, len(mb))
			for k, s := range mb {
				ws[k] = sftWeights(&b.Samples[s], w)
				res.Metrics.Tokens += b.Samples[s].Out()
			}
			loss, _, err := m.Backward(seqsOf(b, mb), ws)
			if err != nil {
				return nil, err
			}
			res.Metrics.Loss += loss
		}
	}
	for _, i := range shard {
		res.PeakSum += float64(b.Trajs[i].Peak)
	}
	res.takeGrads(m, onDevice)
	return res, nil
}

// SFTLoss is the mean cross-entropy of the output tokens of the
// trajectories under the current model (no gradient).
func (t *Trainer) SFTLoss(trajs []int) (float64, error) {
	b := t.Batch
	lp, _, err := outputLogProbs(t.Model, b, samplesOf(b, trajs), t.Cfg.micro(), false, nil)
	if err != nil {
		return 0, err
	}
	s, n := 0.0, 0
	for _, v := range lp {
		for _, x := range v {
			s -= float64(x)
			n++
		}
	}
	if n == 0 {
		return math.NaN(), nil
	}
	return s / float64(n), nil
}
