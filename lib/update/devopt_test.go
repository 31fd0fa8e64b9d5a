package update

import (
	"math"
	"testing"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/testenv"
)

// TestDeviceOptimizerMatchesHost runs three MemPO steps of the same batch
// on two copies of a model on the GPU (fp32 mode), one with the host
// optimizer (optim.AdamW, weights and gradients copied across) and one with
// the device optimizer; the weights, the norms and the optimizer states
// must agree: lib/cuda's AdamW is bit for bit optim.AdamW, the clipping
// coefficient is the same float32, and the norms differ only by the order
// of their sums and the atomics of the backward.
// Then the device state resumes on the host and the other way round.
func TestDeviceOptimizerMatchesHost(t *testing.T) {
	ok, why := model.CUDAAvailableReason()
	testenv.NeedCUDA(t, ok, why)
	cfg := tinyConfig()
	newGPU := func() *model.Model {
		be, err := model.NewCUDA()
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(cfg, tinyTensors(cfg, 3), be)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	host, dev := newGPU(), newGPU()
	s := synth{tasks: 3, G: 3, steps: 2, rt: func(task, g int) float64 { return float64((task + g) % 2) }, noise: 0.05, seed: 21}
	b, err := Prepare(s.rollouts(t, tinyModel(t, 3)), rlOpts(host))
	if err != nil {
		t.Fatal(err)
	}
	ucfg := noKL()
	ucfg.MaxGradNorm = 1e-4 // every step clips
	ucfg.Schedule.PeakLR = 1e-3
	before := dev.Param("model.layers.0.mlp.up_proj.weight")
	th, err := NewTrainer(host, b, ucfg)
	if err != nil {
		t.Fatal(err)
	}
	td, err := NewTrainer(dev, b, ucfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := td.UseDeviceOptimizer(); err != nil {
		t.Fatal(err)
	}
	plan := Plan{NTraj: len(b.Trajs), Epochs: 3, MiniBatch: len(b.Trajs)}
	for k := 0; k < plan.Steps(); k++ {
		rh, err := th.Step(plan, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := td.Step(plan, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		// The two models' gradients agree to float32 rounding only: the
		// GPU's bias, norm-weight and embedding gradients add up with
		// float32 atomics in no fixed order, so an element of one run can
		// differ from the other's by a few float32 ulps (2⁻²³ ≈ 1.2e-7
		// relative each), and so can the norm. 2e-6 is about 16 ulps
		// (H200: 1.3e-10 to 3e-7 relative seen over runs); a missing or
		// doubled gradient term moves the norm by far more.
		if d := math.Abs(rh.GradNorm-rd.GradNorm) / rh.GradNorm; d > 2e-6 || rh.GradNorm <= ucfg.MaxGradNorm {
			t.Errorf("step %d: grad norm host %v, device %v", k, rh.GradNorm, rd.GradNorm)
		}
		if rh.Row.Step != rd.Row.Step || rh.Row.LR != rd.Row.LR {
			t.Errorf("step %d: rows differ: host step %d lr %g, device step %d lr %g", k, rh.Row.Step, rh.Row.LR, rd.Row.Step, rd.Row.LR)
		}
	}
	// Gradients a few ulps apart change an AdamW update of about lr by far
	// less than a weight's ulp, but can tip the rounding of w − update to
	// the neighbouring float32: at most one ulp a step (H200: one ulp of a
	// norm weight near 1, 1.19e-7), so 4 ulps of the weight bound 3 steps;
	// small weights keep the absolute bound of 1e-7 that they always met.
	worst, bad := 0.0, 0
	for _, name := range host.ParamNames() {
		a, c := host.Param(name), dev.Param(name)
		for i := range a {
			d := math.Abs(float64(a[i] - c[i]))
			worst = math.Max(worst, d)
			mag := float32(math.Max(math.Abs(float64(a[i])), math.Abs(float64(c[i]))))
			if ulp := float64(math.Nextafter32(mag, 2*mag+1) - mag); d > 1e-7 && d > 4*ulp {
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("weights differ by up to %g after %d steps (%d beyond 1e-7 and 4 ulps)", worst, plan.Steps(), bad)
	}
	moved := 0.0
	for i, v := range dev.Param("model.layers.0.mlp.up_proj.weight") {
		moved = math.Max(moved, math.Abs(float64(v-before[i])))
	}
	if moved < 1e-3 {
		t.Errorf("the device optimizer moved the weights by %g in %d steps at lr 1e-3", moved, plan.Steps())
	}
	sh, sd := th.OptimizerState(), td.OptimizerState()
	for name, n := range sh.Steps {
		if sd.Steps[name] != n {
			t.Fatalf("%s: step count host %d, device %d", name, n, sd.Steps[name])
		}
		// Relative to each value and, for the values of a gradient that
		// cancelled to nearly nothing (whose atomics' rounding is large
		// relative to them, e.g. 7.7e-18 off by 1e-5 relative on the H200),
		// to the tensor's largest.
		top := 0.0
		for _, v := range sh.ExpAvgSq[name] {
			top = math.Max(top, math.Abs(float64(v)))
		}
		for i, v := range sh.ExpAvgSq[name] {
			w := sd.ExpAvgSq[name][i]
			if d := math.Abs(float64(v - w)); d > 1e-5*math.Max(math.Abs(float64(v)), math.Abs(float64(w)))+1e-6*top {
				t.Fatalf("%s: exp_avg_sq[%d] host %g, device %g", name, i, v, w)
			}
		}
	}
	t.Logf("after %d steps: weights within %.3g, step counts equal", plan.Steps(), worst)

	// A device optimizer started from the host's state continues it.
	td2, err := NewTrainer(dev, b, ucfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := td2.Opt.LoadState(sh); err != nil {
		t.Fatal(err)
	}
	if err := td2.UseDeviceOptimizer(); err != nil {
		t.Fatal(err)
	}
	if got := td2.StepCount(); got != th.StepCount() {
		t.Errorf("resumed device optimizer at step %d, host at %d", got, th.StepCount())
	}
}
