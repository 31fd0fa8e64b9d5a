package update

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"time"

	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/safetensors"
)

// Data-parallel steps (ZeRO stage 1). Every rank holds the whole model and
// the whole batch, computes the gradient of its shard of each mini-batch
// (Shard(trajs, rank, size): the very shards of the one-process
// Step(p, k, size)), and the gradients are summed across ranks in buckets.
// The AdamW state is split by tensor: each rank steps only the tensors it
// owns, then every tensor is broadcast from its owner. With dist's rank-order
// sum the result is bit-identical to Step(p, k, size) in one process (AdamW
// is element-wise, so who steps a tensor does not change its rounding).

// DefaultBucketFloats is the gradient bucket of one all-reduce (64 MiB of
// float32), as PyTorch DDP buckets its gradients (25 MiB there).
const DefaultBucketFloats = 16 << 20

// DataParallel is one rank's side of a data-parallel run of a Trainer.
type DataParallel struct {
	T            *Trainer
	Comm         dist.Comm
	Owner        map[string]int // rank that owns each trainable tensor's optimizer state
	BucketFloats int            // floats per gradient all-reduce (0: DefaultBucketFloats)
	names        []string
}

// NewDataParallel partitions the trainable tensors over the ranks. The
// trainer's optimizer must hold (at most) the rank's own tensors' state:
// load it with OwnedState.
func NewDataParallel(t *Trainer, c dist.Comm) (*DataParallel, error) {
	if t.Cfg.Lean {
		return nil, fmt.Errorf("update: the 8-bit optimizer state (--optim-state 8bit) is not sharded across ranks yet; use the fp32 AdamW state with several ranks")
	}
	names := t.Model.TrainableNames()
	sizes := make([]int64, len(names))
	for i, n := range names {
		sizes[i] = safetensors.NumElements(t.Model.ParamShape(n))
	}
	owner, err := Partition(names, sizes, c.Size())
	if err != nil {
		return nil, err
	}
	return &DataParallel{T: t, Comm: c, Owner: owner, names: names}, nil
}

// Partition assigns tensors (in the model's order) to n ranks in
// contiguous runs of about equal size, each rank at least one tensor.
func Partition(names []string, sizes []int64, n int) (map[string]int, error) {
	if len(names) < n {
		return nil, fmt.Errorf("update: %d ranks but only %d trainable tensors to share the optimizer state", n, len(names))
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	owner := make(map[string]int, len(names))
	r := 0
	var cum int64
	for i, name := range names {
		left := len(names) - i // tensors not yet assigned, this one included
		// Move to the next rank once this one has its share, or when the
		// ranks after it need every tensor that is left.
		if r < n-1 && i > 0 && owner[names[i-1]] == r && (cum >= int64(r+1)*total/int64(n) || left <= n-1-r) {
			r++
		}
		owner[name] = r
		cum += sizes[i]
	}
	return owner, nil
}

// Owns reports whether this rank steps tensor name.
func (d *DataParallel) Owns(name string) bool { return d.Owner[name] == d.Comm.Rank() }

// OwnedState keeps the part of st this rank steps.
func (d *DataParallel) OwnedState(st optim.State) optim.State {
	out := optim.State{Steps: map[string]int64{}, ExpAvg: map[string][]float32{}, ExpAvgSq: map[string][]float32{}}
	for name, n := range st.Steps {
		if d.Owns(name) {
			out.Steps[name], out.ExpAvg[name], out.ExpAvgSq[name] = n, st.ExpAvg[name], st.ExpAvgSq[name]
		}
	}
	return out
}

// shardMeta is what ranks exchange of a ShardResult besides the gradient.
type shardMeta struct {
	Metrics                     rl.Metrics
	Trajs, Shards               int
	PeakSum, DriftSum, DriftMax float64
}

// Step is Trainer.Step(p, k, Comm.Size()) across the ranks: this rank's
// shard, the summed gradient, the sharded AdamW step. Every rank returns the
// same row.
func (d *DataParallel) Step(p Plan, k int) (*StepResult, error) {
	t := d.T
	start := time.Now()
	epoch, trajs := p.At(k)
	r, err := t.grad(trajs, Shard(trajs, d.Comm.Rank(), d.Comm.Size()), false)
	if err != nil {
		return nil, err
	}
	sum, err := d.reduce(r)
	if err != nil {
		return nil, err
	}
	// Every rank holds the same merged metrics, so all of them stop here.
	if t.Cfg.klStop(sum.Metrics) {
		return t.stopped(sum), nil
	}
	res, err := d.apply(sum)
	if err != nil {
		return nil, err
	}
	res.Row.Epoch = int32(epoch)
	res.Row.WallS = time.Since(start).Seconds()
	return res, nil
}

// reduce sums the ranks' gradients in buckets (tensors in the model's
// order, split where a bucket fills) and merges their metrics in rank
// order, as ShardResult.Add does.
func (d *DataParallel) reduce(r *ShardResult) (*ShardResult, error) {
	bucket := d.BucketFloats
	if bucket <= 0 {
		bucket = DefaultBucketFloats
	}
	buf := make([]float32, 0, bucket)
	type span struct {
		name   string
		lo, hi int
	}
	var spans []span
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := d.Comm.AllReduce(buf); err != nil {
			return err
		}
		off := 0
		for _, s := range spans {
			off += copy(r.Grads[s.name][s.lo:s.hi], buf[off:])
		}
		buf, spans = buf[:0], spans[:0]
		return nil
	}
	for _, name := range d.names {
		g, ok := r.Grads[name]
		if !ok {
			return nil, fmt.Errorf("update: gradient has no tensor %s", name)
		}
		for lo := 0; lo < len(g); {
			n := min(len(g)-lo, bucket-len(buf))
			buf = append(buf, g[lo:lo+n]...)
			spans = append(spans, span{name, lo, lo + n})
			lo += n
			if len(buf) == bucket {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}

	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(shardMeta{Metrics: r.Metrics, Trajs: r.Trajs, Shards: r.Shards,
		PeakSum: r.PeakSum, DriftSum: r.DriftSum, DriftMax: r.DriftMax}); err != nil {
		return nil, err
	}
	parts, err := d.Comm.Exchange(b.Bytes())
	if err != nil {
		return nil, err
	}
	sum := &ShardResult{Grads: r.Grads}
	for i, p := range parts {
		var m shardMeta
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&m); err != nil {
			return nil, fmt.Errorf("update: rank %d's step metrics: %v", i, err)
		}
		o := &ShardResult{Metrics: m.Metrics}
		o.Trajs, o.Shards, o.PeakSum, o.DriftSum, o.DriftMax = m.Trajs, m.Shards, m.PeakSum, m.DriftSum, m.DriftMax
		if i == 0 {
			sum.Metrics, sum.Trajs, sum.Shards = o.Metrics, o.Trajs, o.Shards
			sum.PeakSum, sum.DriftSum, sum.DriftMax = o.PeakSum, o.DriftSum, o.DriftMax
			continue
		}
		sum.addSums(o)
	}
	return sum, nil
}

// apply is Trainer.Apply with the AdamW step split by owner: the clip
// factor comes from the whole (identical) summed gradient on every rank.
func (d *DataParallel) apply(g *ShardResult) (*StepResult, error) {
	t, m := d.T, d.T.Model
	params := make([]optim.Param, len(d.names))
	var own []optim.Param
	for i, name := range d.names {
		params[i] = optim.Param{Name: name, Grad: g.Grads[name]}
		if d.Owns(name) {
			params[i].Data = m.Param(name)
		} else {
			params[i].Data = make([]float32, len(g.Grads[name])) // only the gradient matters here
		}
	}
	norm, err := optim.ClipGradNorm(params, t.Cfg.MaxGradNorm)
	if err != nil {
		return nil, fmt.Errorf("update: %v: step skipped, nothing written", err)
	}
	for _, p := range params {
		if d.Owns(p.Name) {
			own = append(own, p)
		}
	}
	lr := t.Cfg.Schedule.LR(t.StepCount())
	if err := t.Opt.Step(own, lr); err != nil {
		return nil, err
	}
	// Every tensor from its owner: the all-gather of the parameters.
	for _, p := range params {
		if err := d.Comm.Broadcast(p.Data, d.Owner[p.Name]); err != nil {
			return nil, err
		}
		if err := m.SetParam(p.Name, p.Data); err != nil {
			return nil, err
		}
	}
	return t.result(g, norm, lr), nil
}
