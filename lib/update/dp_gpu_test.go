package update

import (
	"math"
	"testing"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/testenv"
)

// TestNCCLDataParallelOneRank runs three MemPO steps on two copies of a
// model on the GPU: the plain step with the host optimizer, and the
// data-parallel step of one rank whose gradient all-reduce and parameter
// broadcasts go through NCCL on the device. A sum over one rank is exact, so
// the two differ only as two GPU backwards do (their atomics): the bounds
// of TestDeviceOptimizerMatchesHost.
func TestNCCLDataParallelOneRank(t *testing.T) {
	ok, why := model.CUDAAvailableReason()
	testenv.NeedCUDA(t, ok, why)
	testenv.NeedNCCL(t, cuda.LoadNCCL())
	cfg := tinyConfig()
	var dev *cuda.Device
	newGPU := func() *model.Model {
		be, err := model.NewCUDA()
		if err != nil {
			t.Fatal(err)
		}
		dev = be.Device()
		m, err := model.New(cfg, tinyTensors(cfg, 3), be)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	plain, ranked := newGPU(), newGPU()
	s := synth{tasks: 3, G: 3, steps: 2, rt: func(task, g int) float64 { return float64((task + g) % 2) }, noise: 0.05, seed: 21}
	b, err := Prepare(s.rollouts(t, tinyModel(t, 3)), rlOpts(plain))
	if err != nil {
		t.Fatal(err)
	}
	ucfg := noKL()
	ucfg.MaxGradNorm = 1e-4
	ucfg.Schedule.PeakLR = 1e-3
	tp, err := NewTrainer(plain, b, ucfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer(ranked, b, ucfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := cuda.JoinNCCL(dev, dist.Single{})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dp, err := NewDataParallel(tr, nc)
	if err != nil {
		t.Fatal(err)
	}
	dp.BucketFloats = 1000 // several buckets, one split tensor at least
	plan := Plan{NTraj: len(b.Trajs), Epochs: 3, MiniBatch: len(b.Trajs)}
	for k := 0; k < plan.Steps(); k++ {
		rp, err := tp.Step(plan, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := dp.Step(plan, k)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(rp.GradNorm-rr.GradNorm) / rp.GradNorm; d > 1e-8 {
			t.Errorf("step %d: grad norm plain %v, NCCL rank %v", k, rp.GradNorm, rr.GradNorm)
		}
		if rp.Row.Step != rr.Row.Step || rp.Row.LR != rr.Row.LR || rp.Row.Tokens != rr.Row.Tokens {
			t.Errorf("step %d: rows differ: %+v vs %+v", k, rp.Row, rr.Row)
		}
	}
	worst := 0.0
	for _, name := range plain.ParamNames() {
		a, c := plain.Param(name), ranked.Param(name)
		for i := range a {
			worst = math.Max(worst, math.Abs(float64(a[i]-c[i])))
		}
	}
	if worst > 1e-7 {
		t.Errorf("weights differ by %g after %d steps", worst, plan.Steps())
	}
	t.Logf("after %d steps: weights within %.3g", plan.Steps(), worst)
}
