package update

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/safetensors"
)

// GradMeta describes one gradient shard file. Apply checks that the files it
// combines are shards 0..n−1 of the same plan step of the same run.
type GradMeta struct {
	Shard, Shards int
	PlanStep      int    // optimizer step of the plan this gradient is for
	PlanSteps     int    // steps of the plan
	Epoch         int    // epoch of that step
	GlobalStep    int64  // optimizer steps the model had taken (must match apply's model)
	Fingerprint   string // of the rollouts and knobs
	SFT           bool

	Metrics  rl.Metrics
	Trajs    int
	PeakSum  float64
	DriftSum float64
	DriftMax float64
}

// WriteGrads writes a shard's gradient to path atomically: one float32
// tensor per parameter under the model's name and shape, GradMeta as JSON in
// metadata "mempo.grad", and readable "shard", "tokens", "trajectories" and
// "loss" entries.
func WriteGrads(path string, r *ShardResult, gm GradMeta, m *model.Model) error {
	gm.Metrics, gm.Trajs, gm.PeakSum, gm.DriftSum, gm.DriftMax = r.Metrics, r.Trajs, r.PeakSum, r.DriftSum, r.DriftMax
	js, err := json.Marshal(gm)
	if err != nil {
		return fmt.Errorf("%s: metadata: %v", path, err)
	}
	meta := map[string]string{
		"format":       "mempo-grad-v1",
		"mempo.grad":   string(js),
		"shard":        fmt.Sprintf("%d/%d", gm.Shard, gm.Shards),
		"tokens":       strconv.Itoa(r.Metrics.Tokens),
		"trajectories": strconv.Itoa(r.Trajs),
		"loss":         strconv.FormatFloat(r.Metrics.Loss, 'g', -1, 64),
	}
	ts := make([]safetensors.Tensor, 0, len(r.Grads))
	for _, name := range m.TrainableNames() {
		g, ok := r.Grads[name]
		if !ok {
			return fmt.Errorf("%s: no gradient for %s", path, name)
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: m.ParamShape(name), F32: g})
	}
	return safetensors.WriteFile(path, ts, meta)
}

// ReadGrads reads a file written by WriteGrads.
func ReadGrads(path string) (*ShardResult, GradMeta, error) {
	var gm GradMeta
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, gm, err
	}
	defer f.Close()
	if f.Metadata["format"] != "mempo-grad-v1" {
		return nil, gm, fmt.Errorf("%s: not a mempo gradient file (metadata format %q)", path, f.Metadata["format"])
	}
	if err := json.Unmarshal([]byte(f.Metadata["mempo.grad"]), &gm); err != nil {
		return nil, gm, fmt.Errorf("%s: metadata mempo.grad: %v", path, err)
	}
	r := &ShardResult{Grads: map[string][]float32{}, Metrics: gm.Metrics, Trajs: gm.Trajs,
		PeakSum: gm.PeakSum, DriftSum: gm.DriftSum, DriftMax: gm.DriftMax, Shards: 1}
	for _, name := range f.Names() {
		v, _, err := f.Float32(name)
		if err != nil {
			return nil, gm, err
		}
		r.Grads[name] = v
	}
	return r, gm, nil
}
