package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/update"
)

// TestLeanUpdate: --optim-state 8bit writes a bf16 checkpoint and the
// 8-bit optimizer file; stopped and resumed it is bit for bit the
// uninterrupted run; the next iteration resumes the 8-bit state (and
// refuses --optim-state fp32); --optimizer-dir writes the state elsewhere
// and --optimizer-every 2 drops it on odd iterations.
func TestLeanUpdate(t *testing.T) {
	f := newUpdFixture(t)
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--optim-state", "8bit"}, knobArgs...)
	full := filepath.Join(f.root, "full")
	if msg, err := runUpdateCmd(t, append(args, "--out", full)...); err != nil {
		t.Fatal(msg, err)
	}
	st, err := safetensors.Open(filepath.Join(full, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range st.Names() {
		if info, _ := st.Info(name); info.DType != safetensors.BF16 {
			t.Errorf("%s is %s, want BF16", name, info.DType)
		}
	}
	st.Close()
	opt, err := safetensors.Open(filepath.Join(full, update.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := opt.Info("model.layers.0.mlp.up_proj.weight.exp_avg.q"); !ok || info.DType != safetensors.U8 {
		t.Errorf("8-bit moments missing: %+v", info)
	}
	if info, ok := opt.Info("model.layers.0.mlp.up_proj.weight.master_lo"); !ok || info.DType != safetensors.I16 {
		t.Errorf("master remainders missing: %+v", info)
	}
	opt.Close()

	part := filepath.Join(f.root, "part")
	if msg, err := runUpdateCmd(t, append(args, "--out", part, "--stop-after", "1")...); err != nil {
		t.Fatal(msg, err)
	}
	if msg, err := runUpdateCmd(t, append(args, "--out", part)...); err != nil || !strings.Contains(msg, "resuming at step 1") {
		t.Fatal(msg, err)
	}
	for _, name := range []string{"model.safetensors", update.OptimizerFile} {
		a, _ := os.ReadFile(filepath.Join(full, name))
		b, _ := os.ReadFile(filepath.Join(part, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the uninterrupted and the resumed 8-bit run", name)
		}
	}

	// Iteration 2 from the 8-bit state; fp32 is refused with the flag named.
	next := []string{"--model", full, "--ref", f.ref, "--rollouts", f.rollouts}
	next = append(next, knobArgs...)
	if msg, err := runUpdateCmd(t, append(next, "--out", filepath.Join(f.root, "x"))...); err == nil || !strings.Contains(err.Error(), "--optim-state 8bit") {
		t.Errorf("an 8-bit state resumed as fp32: %q %v", msg, err)
	}
	shm := filepath.Join(f.root, "shm")
	it2 := filepath.Join(f.root, "it2")
	if msg, err := runUpdateCmd(t, append(next, "--optim-state", "8bit", "--out", it2, "--optimizer-dir", shm, "--optimizer-every", "2")...); err != nil {
		t.Fatal(msg, err)
	}
	files, _ := filepath.Glob(filepath.Join(shm, "*.optimizer.safetensors"))
	small, _ := os.Stat(filepath.Join(it2, update.OptimizerFile))
	if len(files) != 1 || small == nil || small.Size() > 1<<16 {
		t.Fatalf("--optimizer-dir: files %v, checkpoint's own file %v", files, small)
	}
	_, rs, err := update.ReadOptimizer8(filepath.Join(it2, update.OptimizerFile))
	if err != nil || rs.Iteration != 2 {
		t.Fatalf("iteration 2's state through --optimizer-dir: %+v %v", rs, err)
	}
	// Iteration 3 with --optimizer-every 2: the state is dropped.
	it3 := filepath.Join(f.root, "it3")
	next[1] = it2
	if msg, err := runUpdateCmd(t, append(next, "--optim-state", "8bit", "--out", it3, "--optimizer-every", "2")...); err != nil {
		t.Fatal(msg, err)
	}
	st3, rs3, err := update.ReadOptimizer8(filepath.Join(it3, update.OptimizerFile))
	if err != nil || rs3.Iteration != 3 || len(st3.Steps) != 0 {
		t.Errorf("iteration 3: %d states, %+v, %v", len(st3.Steps), rs3, err)
	}
}
