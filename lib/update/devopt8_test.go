package update

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/testenv"
)

func gpuOrSkip(t *testing.T) {
	t.Helper()
	ok, why := model.CUDAAvailableReason()
	testenv.NeedCUDA(t, ok, why)
}

func gpuTiny(t *testing.T, bf16 bool) *model.Model {
	t.Helper()
	be, err := model.NewCUDA()
	if err != nil {
		t.Fatal(err)
	}
	be.SetBF16(bf16)
	cfg := tinyConfig()
	m, err := model.New(cfg, tinyTensors(cfg, 10), be)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDeviceOptimizer8 checks the 8-bit device optimizer on the GPU:
//   - fp32 mode: three SFT steps with the host's AdamW8 and the device's
//     agree (the kernel is Step8 bit for bit, TestAdamW8KernelMatchesOptim;
//     the backward's atomics make the gradients differ in the last bits,
//     which can move a code by one: within 2e-4 here, at lr 1e-3);
//   - bf16 mode: the weight matrices lose their fp32 copies (device memory
//     falls by 4 bytes a matrix parameter), training lowers the loss, and
//     the lean checkpoint reloads on the CPU to the device's master weights
//     exactly.
func TestDeviceOptimizer8(t *testing.T) {
	gpuOrSkip(t)
	b := sftBatch(t, tinyModel(t, 10))
	plan := Plan{NTraj: len(b.Trajs), Epochs: 3}
	host, dev := leanTrainer(t, gpuTiny(t, false), b, true), leanTrainer(t, gpuTiny(t, false), b, true)
	if err := dev.UseDeviceOptimizer(); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < plan.Steps(); k++ {
		if _, err := host.Step(plan, k, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := dev.Step(plan, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	worst, equal, total := 0.0, 0, 0
	for _, name := range host.Model.ParamNames() {
		a, c := host.Model.Param(name), dev.Model.Param(name)
		for i := range a {
			worst = math.Max(worst, math.Abs(float64(a[i]-c[i])))
			if a[i] == c[i] {
				equal++
			}
			total++
		}
	}
	t.Logf("fp32 mode, 3 steps: host and device 8-bit AdamW within %.3g, %d of %d weights equal", worst, equal, total)
	if worst > 2e-4 || equal < total*9/10 {
		t.Errorf("host and device 8-bit AdamW differ by %g (%d of %d equal)", worst, equal, total)
	}

	// bf16 mode: bf16-only weights.
	m := gpuTiny(t, true)
	be := m.Backend().(*model.CUDA)
	before := be.LiveBytes()
	tr := leanTrainer(t, m, b, true)
	tr.Cfg.Schedule.PeakLR = 1e-2
	all := allTrajs(b)
	l0, _ := tr.SFTLoss(all)
	if err := tr.UseDeviceOptimizer(); err != nil {
		t.Fatal(err)
	}
	if !be.BF16Only(m.ParamTensor("model.layers.0.mlp.up_proj.weight")) || be.BF16Only(m.ParamTensor("model.norm.weight")) {
		t.Fatal("the matrices should be bf16-only, the vectors not")
	}
	t.Logf("bf16 mode: live device bytes %d before the optimizer, %d after", before, be.LiveBytes())
	plan = Plan{NTraj: len(b.Trajs), Epochs: 20}
	for k := 0; k < plan.Steps(); k++ {
		if _, err := tr.Step(plan, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	l1, _ := tr.SFTLoss(all)
	if !(l1 < l0-0.5) {
		t.Errorf("bf16-only weights with the 8-bit optimizer: loss %.4f → %.4f", l0, l1)
	}
	st, w, err := tr.LeanCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	rs := RunState{GlobalStep: tr.StepCount(), PlanStep: 1, PlanSteps: 1, Fingerprint: "d"}
	if err := SaveLeanCheckpoint(dir, m, w, "", st, rs, nil, StatePlace{}); err != nil {
		t.Fatal(err)
	}
	cpu, err := model.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st2, _, err := ReadOptimizer8(filepath.Join(dir, OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	back := leanTrainer(t, cpu, b, true)
	if err := back.LoadLeanState(st2); err != nil {
		t.Fatal(err)
	}
	if err := back.ensureMaster(); err != nil {
		t.Fatal(err)
	}
	for name, lo := range st.MasterLo {
		got := cpu.Param(name)
		want := joinHost(w[name], lo)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d]: reloaded master %v, device %v", name, i, got[i], want[i])
			}
		}
	}
	// A resumed device optimizer picks the remainders up again.
	m3, err := model.Load(dir, be)
	if err != nil {
		t.Fatal(err)
	}
	tr3 := leanTrainer(t, m3, b, true)
	if err := tr3.LoadLeanState(st2); err != nil {
		t.Fatal(err)
	}
	if err := tr3.UseDeviceOptimizer(); err != nil {
		t.Fatal(err)
	}
	st3, w3, _ := tr3.LeanCheckpoint()
	for name, lo := range st.MasterLo {
		for i := range lo {
			if st3.MasterLo[name][i] != lo[i] || w3[name][i] != w[name][i] {
				t.Fatalf("%s[%d]: resumed on the device as %v + %d, saved %v + %d", name, i, w3[name][i], st3.MasterLo[name][i], w[name][i], lo[i])
			}
		}
	}
}
