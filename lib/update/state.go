package update

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/safetensors"
)

// Files written into a checkpoint directory beside the HF files.
const (
	OptimizerFile = "optimizer.safetensors" // AdamW moments and step counts + RunState in metadata
	MetricsFile   = "update_metrics.jsonl"  // the metrics rows of the run that wrote the directory
)

// RunState is what a resumed run needs besides the weights and the moments.
// It travels in the optimizer file's metadata under "mempo.*" keys.
type RunState struct {
	GlobalStep  int64  // optimizer steps ever taken (the schedule's step)
	Seed        int64  // plan seed (the shuffle is a function of it: no RNG state to save)
	PlanStep    int    // steps of the current plan done
	PlanSteps   int    // steps of the current plan
	Fingerprint string // of the rollouts, knobs and starting step of the current plan
	Schedule    optim.Schedule
	AdamW       optim.AdamWConfig
	Iteration   int64 // updates finished in this chain of checkpoints (--optimizer-every reads it)
	// Stopped: the plan ended after PlanStep of its PlanSteps steps because
	// Config.TargetKL stopped it; the run is finished, not partial.
	Stopped bool
}

// Done reports whether the plan of this state is finished: every step
// taken, or stopped early.
func (r RunState) Done() bool { return r.Stopped || r.PlanStep >= r.PlanSteps }

func (r RunState) meta() (map[string]string, error) {
	sched, err := json.Marshal(r.Schedule)
	if err != nil {
		return nil, err
	}
	adam, err := json.Marshal(r.AdamW)
	if err != nil {
		return nil, err
	}
	meta := map[string]string{
		"mempo.global_step": strconv.FormatInt(r.GlobalStep, 10),
		"mempo.seed":        strconv.FormatInt(r.Seed, 10),
		"mempo.plan_step":   strconv.Itoa(r.PlanStep),
		"mempo.plan_steps":  strconv.Itoa(r.PlanSteps),
		"mempo.fingerprint": r.Fingerprint,
		"mempo.schedule":    string(sched),
		"mempo.adamw":       string(adam),
		"mempo.iteration":   strconv.FormatInt(r.Iteration, 10),
	}
	if r.Stopped { // only then: the files of runs without the early stop stay as they were
		meta["mempo.stopped"] = "true"
	}
	return meta, nil
}

func runStateFrom(path string, meta map[string]string) (RunState, error) {
	var r RunState
	var err error
	get := func(k string) string { return meta["mempo."+k] }
	if r.GlobalStep, err = strconv.ParseInt(get("global_step"), 10, 64); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.global_step: %v", path, err)
	}
	if r.Seed, err = strconv.ParseInt(get("seed"), 10, 64); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.seed: %v", path, err)
	}
	if r.PlanStep, err = strconv.Atoi(get("plan_step")); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.plan_step: %v", path, err)
	}
	if r.PlanSteps, err = strconv.Atoi(get("plan_steps")); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.plan_steps: %v", path, err)
	}
	if it := get("iteration"); it != "" { // absent in files from before it was kept
		if r.Iteration, err = strconv.ParseInt(it, 10, 64); err != nil {
			return r, fmt.Errorf("%s: metadata mempo.iteration: %v", path, err)
		}
	}
	if st := get("stopped"); st != "" {
		if r.Stopped, err = strconv.ParseBool(st); err != nil {
			return r, fmt.Errorf("%s: metadata mempo.stopped: %v", path, err)
		}
	}
	r.Fingerprint = get("fingerprint")
	if err := json.Unmarshal([]byte(get("schedule")), &r.Schedule); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.schedule: %v", path, err)
	}
	if err := json.Unmarshal([]byte(get("adamw")), &r.AdamW); err != nil {
		return r, fmt.Errorf("%s: metadata mempo.adamw: %v", path, err)
	}
	return r, nil
}

// WriteOptimizer writes the AdamW state and the run state to path
// atomically: tensors "<param>.exp_avg", "<param>.exp_avg_sq" (float32,
// the parameter's shape when known), step counts and RunState in metadata.
func WriteOptimizer(path string, st optim.State, rs RunState, shapes map[string][]int) error {
	flat, meta := st.Flat()
	extra, err := rs.meta()
	if err != nil {
		return err
	}
	for k, v := range extra {
		meta[k] = v
	}
	ts := make([]safetensors.Tensor, 0, len(flat))
	for name, v := range flat {
		shape := []int{len(v)}
		base := name[:len(name)-len(filepath.Ext(name))]
		if s, ok := shapes[base]; ok && safetensors.NumElements(s) == int64(len(v)) {
			shape = s
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: shape, F32: v})
	}
	return safetensors.WriteFile(path, ts, meta)
}

// ReadOptimizer reads a file written by WriteOptimizer, or the index of a
// state written in shards by a data-parallel run (dpstate.go) with its
// shards.
func ReadOptimizer(path string) (optim.State, RunState, error) { return readOptimizer(path, nil) }

// readOptimizer is ReadOptimizer keeping only the parameters keep accepts
// (nil: all).
func readOptimizer(path string, keep func(param string) bool) (optim.State, RunState, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return optim.State{}, RunState{}, err
	}
	defer f.Close()
	if f.Metadata[metaShards] != "" {
		return readShardedOptimizer(path, f.Metadata, keep)
	}
	flat := map[string][]float32{}
	for _, name := range f.Names() {
		if keep != nil && !keep(name[:len(name)-len(filepath.Ext(name))]) {
			continue
		}
		v, _, err := f.Float32(name)
		if err != nil {
			return optim.State{}, RunState{}, err
		}
		flat[name] = v
	}
	st, err := optim.StateFromFlat(flat, f.Metadata)
	if err != nil {
		return optim.State{}, RunState{}, fmt.Errorf("%s: %v", path, err)
	}
	rs, err := runStateFrom(path, f.Metadata)
	return st, rs, err
}

// CheckState verifies that an optimizer state fits the model: every moment
// names a parameter and has its size.
func CheckState(path string, st optim.State, m *model.Model) error {
	sizes := map[string]int{}
	for _, name := range m.TrainableNames() {
		sizes[name] = int(safetensors.NumElements(m.ParamShape(name)))
	}
	names := make([]string, 0, len(st.ExpAvg))
	for name := range st.ExpAvg {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n, ok := sizes[name]
		if !ok {
			return fmt.Errorf("%s: optimizer state for %s, which the model does not have (mismatched checkpoint)", path, name)
		}
		if len(st.ExpAvg[name]) != n {
			return fmt.Errorf("%s: optimizer state for %s has %d values, the parameter %d (mismatched checkpoint)", path, name, len(st.ExpAvg[name]), n)
		}
	}
	return nil
}

// SaveCheckpoint writes dir as a whole or not at all: the HF model directory
// (float32 weights, config, generation config, the tokenizer files copied
// from tokDir when it holds a tokenizer.json), the optimizer file and the
// metrics rows. It is built beside dir and swapped in, so a failure leaves
// an existing dir (even when it is the run's --model) untouched.
func SaveCheckpoint(dir string, m *model.Model, tokDir string, st optim.State, rs RunState, rows []records.Update) error {
	tmp, err := fileio.TempDirBeside(dir)
	if err != nil {
		return err
	}
	defer fileio.RemoveTempDir(tmp)
	return saveBuilt(dir, tmp, m, tokDir, rows, func(built string, shapes map[string][]int) error {
		return WriteOptimizer(filepath.Join(built, OptimizerFile), st, rs, shapes)
	})
}

// saveBuilt is SaveCheckpoint in the temporary directory tmp, with
// writeOpt writing the optimizer file(s) into the built checkpoint.
func saveBuilt(dir, tmp string, m *model.Model, tokDir string, rows []records.Update, writeOpt func(built string, shapes map[string][]int) error) error {
	built := filepath.Join(tmp, "ckpt")
	opts := checkpoint.SaveOptions{DType: safetensors.F32}
	if tokDir != "" {
		if _, err := os.Stat(filepath.Join(tokDir, "tokenizer.json")); err == nil {
			opts.TokenizerDir = tokDir
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := checkpoint.Save(built, m.Config(), m.Params(), opts); err != nil {
		return namedWrite(err, dir, tmp, "model.safetensors")
	}
	shapes := map[string][]int{}
	for _, name := range m.ParamNames() {
		shapes[name] = m.ParamShape(name)
	}
	if err := writeOpt(built, shapes); err != nil {
		return namedWrite(err, dir, tmp, OptimizerFile)
	}
	if err := records.WriteFile(filepath.Join(built, MetricsFile), rows); err != nil {
		return namedWrite(err, dir, tmp, MetricsFile)
	}
	return fileio.ReplaceDir(built, dir)
}

// ReadOptimizerMeta reads only the run state of an optimizer file (the
// header), to decide whether a directory holds a partial run to continue.
func ReadOptimizerMeta(path string) (map[string]string, RunState, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, RunState{}, err
	}
	defer f.Close()
	rs, err := runStateFrom(path, f.Metadata)
	return f.Metadata, rs, err
}
