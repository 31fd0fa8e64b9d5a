package update

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/tensor"
)

// The lean full-parameter update (Config.Lean): optim.AdamW8's 8-bit
// moments, fp32 master weights written as the checkpoint's bf16 weights
// plus 16-bit remainders in the optimizer file (docs/formats.md), and on
// the GPU no fp32 copy of the weight matrices (deviceOpt8).

// Metadata keys of a lean optimizer file besides RunState's.
const (
	metaStateFile = "mempo.state_file" // the state was written there (StatePlace.Dir)
	metaState     = "mempo.state"      // "dropped": no moments were kept (StatePlace.Drop)
	codebookPref  = "mempo.codebook."  // tensors: the codebooks' values, for readers
)

// StatePlace says where a lean checkpoint's optimizer state goes.
type StatePlace struct {
	Dir  string // write it into this directory instead of the checkpoint ("" = the checkpoint)
	Drop bool   // keep no moments: the next run starts AdamW afresh from the bf16 weights
}

// LoadLeanState sets the 8-bit optimizer's state; its remainders complete
// the model's (bf16) weights: on the device optimizer's split weights when
// UseDeviceOptimizer follows, else (with the host optimizer's copy of the
// state) on the model's own tensors before the first forward.
func (t *Trainer) LoadLeanState(st optim.State8) error {
	if t.Opt8 == nil {
		return fmt.Errorf("update: an 8-bit optimizer state given to a run without --optim-state 8bit")
	}
	sizes := map[string]int{}
	for _, name := range t.Model.ParamNames() {
		sizes[name] = numel(t.Model.ParamShape(name))
	}
	if err := st.Validate(sizes); err != nil {
		return err
	}
	// Kept as is until it is known where the optimizer runs: a 7B state is
	// 30 GB, and the device optimizer needs no host copy of it.
	t.pending8 = &st
	return nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// ensureMaster joins pending remainders into the model's weights (host
// optimizer path), once.
func (t *Trainer) ensureMaster() error {
	if t.pending8 == nil || t.dev8 != nil {
		return nil
	}
	st := t.pending8
	t.pending8 = nil
	if err := t.Opt8.LoadState(*st); err != nil {
		return err
	}
	for name, l := range st.MasterLo {
		if err := t.Model.SetParam(name, joinHost(t.Model.Param(name), l)); err != nil {
			return err
		}
	}
	return nil
}

// LeanCheckpoint returns the 8-bit state with the master weights'
// remainders, and the bf16 weights (as float32 values) to save with it.
func (t *Trainer) LeanCheckpoint() (optim.State8, map[string][]float32, error) {
	if t.dev8 != nil {
		st, w := t.dev8.state(t.Model)
		return st, w, nil
	}
	if t.Opt8 == nil {
		return optim.State8{}, nil, fmt.Errorf("update: not a lean run")
	}
	if err := t.ensureMaster(); err != nil {
		return optim.State8{}, nil, err
	}
	st := t.Opt8.State()
	w := map[string][]float32{}
	for _, name := range t.Model.ParamNames() {
		w[name], st.MasterLo[name] = splitHost(t.Model.Param(name))
	}
	return st, w, nil
}

func bytesOf[T uint8 | int16 | float32](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// WriteOptimizer8 writes a lean optimizer file (docs/formats.md): per
// parameter "<p>.exp_avg.q" and "<p>.exp_avg_sq.q" (U8 codes, the
// parameter's shape), "<p>.exp_avg.scale" and "<p>.exp_avg_sq.scale" (F32,
// one per 256 values), "<p>.master_lo" (I16, the parameter's shape); the
// two codebooks as F32 tensors "mempo.codebook.exp_avg(_sq)"; step counts,
// format and RunState in metadata. extra adds metadata.
func WriteOptimizer8(path string, st optim.State8, rs RunState, shapes map[string][]int, extra map[string]string) error {
	f := st.Flat()
	meta, err := rs.meta()
	if err != nil {
		return err
	}
	for k, v := range f.Meta {
		meta[k] = v
	}
	for k, v := range extra {
		meta[k] = v
	}
	meta[codebookPref+"exp_avg"] = optim.CodeExpAvg.Name
	meta[codebookPref+"exp_avg_sq"] = optim.CodeExpAvgSq.Name
	shapeOf := func(name, suffix string, n int) []int {
		if s, ok := shapes[strings.TrimSuffix(name, suffix)]; ok && numel(s) == n {
			return s
		}
		return []int{n}
	}
	ts := []safetensors.Tensor{
		{Name: codebookPref + "exp_avg", DType: safetensors.F32, Shape: []int{len(optim.CodeExpAvg.Vals)}, F32: optim.CodeExpAvg.Vals},
		{Name: codebookPref + "exp_avg_sq", DType: safetensors.F32, Shape: []int{len(optim.CodeExpAvgSq.Vals)}, F32: optim.CodeExpAvgSq.Vals},
	}
	for name, q := range f.Codes {
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.U8, Shape: shapeOf(name, filepath.Ext(strings.TrimSuffix(name, ".q"))+".q", len(q)), Raw: bytesOf(q)})
	}
	for name, s := range f.Scales {
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{len(s)}, F32: s})
	}
	for name, lo := range f.Lo {
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.I16, Shape: shapeOf(name, ".master_lo", len(lo)), Raw: bytesOf(lo)})
	}
	return safetensors.WriteFile(path, ts, meta)
}

// ReadOptimizer8 reads a file written by WriteOptimizer8, following a
// checkpoint's pointer to a state written elsewhere (StatePlace.Dir); a
// dropped state reads as empty.
func ReadOptimizer8(path string) (optim.State8, RunState, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return optim.State8{}, RunState{}, err
	}
	defer f.Close()
	rs, err := runStateFrom(path, f.Metadata)
	if err != nil {
		return optim.State8{}, rs, err
	}
	if ext := f.Metadata[metaStateFile]; ext != "" {
		st, ers, err := ReadOptimizer8(ext)
		if err != nil {
			return st, rs, fmt.Errorf("%s: the optimizer state it names: %w", path, err)
		}
		if ers.Fingerprint != rs.Fingerprint || ers.GlobalStep != rs.GlobalStep {
			return st, rs, fmt.Errorf("%s: the optimizer state it names, %s, is of another run (fingerprint %s step %d, want %s step %d)",
				path, ext, ers.Fingerprint, ers.GlobalStep, rs.Fingerprint, rs.GlobalStep)
		}
		return st, rs, nil
	}
	if f.Metadata[metaState] == "dropped" {
		return optim.NewState8(), rs, nil
	}
	fl := optim.Flat8{Codes: map[string][]uint8{}, Scales: map[string][]float32{}, Lo: map[string][]int16{}, Meta: f.Metadata}
	for _, name := range f.Names() {
		if strings.HasPrefix(name, codebookPref) {
			continue
		}
		info, _ := f.Info(name)
		raw, err := f.Raw(name)
		if err != nil {
			return optim.State8{}, rs, err
		}
		switch info.DType {
		case safetensors.U8:
			fl.Codes[name] = append([]uint8(nil), raw...)
		case safetensors.I16:
			lo := make([]int16, len(raw)/2)
			copy(bytesOf(lo), raw)
			fl.Lo[name] = lo
		case safetensors.F32:
			v, _, err := f.Float32(name)
			if err != nil {
				return optim.State8{}, rs, err
			}
			fl.Scales[name] = v
		default:
			return optim.State8{}, rs, fmt.Errorf("%s: tensor %q: dtype %s is not one of a lean optimizer file (U8, I16, F32)", path, name, info.DType)
		}
	}
	for _, k := range []string{"exp_avg", "exp_avg_sq"} {
		want := optim.CodeExpAvg
		if k == "exp_avg_sq" {
			want = optim.CodeExpAvgSq
		}
		if got := f.Metadata[codebookPref+k]; got != want.Name {
			return optim.State8{}, rs, fmt.Errorf("%s: %s codebook %q, this build reads %q", path, k, got, want.Name)
		}
	}
	st, err := optim.State8FromFlat(fl)
	if err != nil {
		return st, rs, fmt.Errorf("%s: %w", path, err)
	}
	return st, rs, nil
}

// IsLeanOptimizer reports whether an optimizer file's metadata is a lean
// (8-bit) state's.
func IsLeanOptimizer(meta map[string]string) bool { return meta["format"] == optim.Format8 }

// SaveLeanCheckpoint is SaveCheckpoint for a lean run: bf16 weights (the
// split master's high halves, so that loading them and the remainders gives
// the master weights back exactly) and the 8-bit optimizer file, in the
// checkpoint or where place says. A state written elsewhere is written
// before the checkpoint is swapped in, under a name of its own, so a failure
// at any point leaves the previous checkpoint and state usable. Errors name
// the file that failed.
func SaveLeanCheckpoint(dir string, m *model.Model, weights map[string][]float32, tokDir string, st optim.State8, rs RunState, rows []records.Update, place StatePlace) error {
	tmp, err := fileio.TempDirBeside(dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, "ckpt")
	final := func(err error, name string) error { return namedWrite(err, dir, tmp, name) }
	opts := checkpoint.SaveOptions{DType: safetensors.BF16}
	if tokDir != "" {
		if _, err := os.Stat(filepath.Join(tokDir, "tokenizer.json")); err == nil {
			opts.TokenizerDir = tokDir
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for name, w := range weights {
		var bad atomic.Int64
		bad.Store(-1)
		tensor.Parallel(len(w), 1<<16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if math.Float32bits(w[i])&0xffff != 0 {
					bad.CompareAndSwap(-1, int64(i))
					return
				}
			}
		})
		if i := bad.Load(); i >= 0 {
			return fmt.Errorf("update: weight %s[%d] = %v is not a bf16 value (internal error)", name, i, w[i])
		}
	}
	if err := checkpoint.Save(built, m.Config(), weights, opts); err != nil {
		return final(err, "model.safetensors")
	}
	shapes := map[string][]int{}
	for _, name := range m.ParamNames() {
		shapes[name] = m.ParamShape(name)
	}
	optPath := filepath.Join(built, OptimizerFile)
	switch {
	case place.Drop:
		if err := WriteOptimizer8(optPath, optim.NewState8(), rs, shapes, map[string]string{metaState: "dropped"}); err != nil {
			return final(err, OptimizerFile)
		}
	case place.Dir != "":
		ext, err := filepath.Abs(filepath.Join(place.Dir, fmt.Sprintf("%s-%s-step%d.optimizer.safetensors", filepath.Base(filepath.Clean(dir)), rs.Fingerprint, rs.GlobalStep)))
		if err != nil {
			return err
		}
		if err := WriteOptimizer8(ext, st, rs, shapes, nil); err != nil {
			return fmt.Errorf("writing the optimizer state: %w", err)
		}
		if err := WriteOptimizer8(optPath, optim.NewState8(), rs, shapes, map[string]string{metaStateFile: ext}); err != nil {
			return final(err, OptimizerFile)
		}
	default:
		if err := WriteOptimizer8(optPath, st, rs, shapes, nil); err != nil {
			return final(err, OptimizerFile)
		}
	}
	if err := records.WriteFile(filepath.Join(built, MetricsFile), rows); err != nil {
		return final(err, MetricsFile)
	}
	return fileio.ReplaceDir(built, dir)
}

// namedWrite says which file of checkpoint dir failed to be written (a full
// disk, say): the file's final path, with the temporary build directory
// taken out of the underlying message. The previous dir is untouched.
func namedWrite(err error, dir, tmp, name string) error {
	msg := strings.ReplaceAll(err.Error(), filepath.Join(tmp, "ckpt")+"/", "")
	return fmt.Errorf("writing %s: %s (the previous %s is unchanged)", filepath.Join(dir, name), msg, dir)
}
