package update

import (
	"math"
	"testing"

	"github.com/mempo/mempo/lib/records"
)

// klBatch is 16 trajectories (4 tasks × 4) of two steps whose rollout
// log-probs are m's own minus offset[j] on every output token of the
// trajectories of mini-batch j of epoch 0 of plan (4 trajectories each).
// The recomputed log-ratio of those tokens is then offset[j] (up to the
// float rounding of the recomputation), so while the policy stays m the
// mini-batch's approximate KL is e^c − 1 − c with c = offset[j].
func klBatch(t *testing.T, seed uint64, offset [4]float64) (*Batch, Plan) {
	t.Helper()
	m := tinyModel(t, seed)
	s := synth{tasks: 4, G: 4, steps: 2, rt: func(task, g int) float64 { return float64((g + task) % 2) },
		rm: func(_, g, st int) *float64 { return records.Ptr(0.1*float64(g%3) - 0.05*float64(st)) }, seed: 31}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{NTraj: len(b.Trajs), MiniBatch: 4, Epochs: 2, Seed: 5}
	for j, c := range offset {
		_, trajs := plan.At(j)
		for _, i := range trajs {
			for _, smp := range b.Trajs[i].Samples {
				old := b.Samples[smp].Old
				for q := range old {
					old[q] -= float32(c)
				}
			}
		}
	}
	return b, plan
}

// k3 is the approximate KL of a mini-batch whose log-ratio is c on every token.
func k3(c float64) float64 { return math.Exp(c) - 1 - c }

// runPlan takes the plan's steps with Trainer.Step on a fresh model until the
// end or a stop; it returns the rows, the stop (nil when none) and the
// trained weights.
func runPlan(t *testing.T, seed uint64, b *Batch, plan Plan, cfg Config) ([]records.Update, *StepResult, map[string][]float32) {
	t.Helper()
	tr, err := NewTrainer(tinyModel(t, seed), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rows []records.Update
	for k := 0; k < plan.Steps(); k++ {
		res, err := tr.Step(plan, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped {
			if tr.StepCount() != int64(k) {
				t.Errorf("stopped before plan step %d after %d optimizer steps", k, tr.StepCount())
			}
			return rows, res, tr.Model.Params()
		}
		rows = append(rows, res.Row)
	}
	return rows, nil, tr.Model.Params()
}

func sameParams(t *testing.T, what string, a, b map[string][]float32) {
	t.Helper()
	for name, v := range a {
		for i := range v {
			if math.Float32bits(v[i]) != math.Float32bits(b[name][i]) {
				t.Fatalf("%s: %s[%d] = %v vs %v", what, name, i, v[i], b[name][i])
			}
		}
	}
}

// The early stop by hand: with lr 0 the policy stays the rollout's model,
// so mini-batch j's approximate KL is k3(offset[j]): 0, e^0.1 − 1.1 =
// 0.00517 and 1 − ln 2 = 0.307 for the first three. A target of 0.1 stops
// at 1.5 × 0.1 = 0.15: before the third step (plan step 2), after two
// steps; a target of 0.25 (bound 0.375) lets all eight steps through.
func TestTargetKLStopsAtTheMiniBatch(t *testing.T) {
	const seed = 12
	b, plan := klBatch(t, seed, [4]float64{0, 0.1, math.Ln2, 0})
	cfg := noKL()
	cfg.Schedule.PeakLR = 0
	cfg.TargetKL = 0.1
	rows, stop, _ := runPlan(t, seed, b, plan, cfg)
	if stop == nil || len(rows) != 2 {
		t.Fatalf("target 0.1: %d steps taken, stop %+v; want a stop before plan step 2", len(rows), stop)
	}
	if math.Abs(stop.ApproxKL-(1-math.Ln2)) > 1e-5 {
		t.Errorf("stopping KL %v, want 1 − ln 2 = %v", stop.ApproxKL, 1-math.Ln2)
	}
	if math.Abs(rows[0].ApproxKL) > 1e-6 || math.Abs(rows[1].ApproxKL-k3(0.1)) > 1e-6 {
		t.Errorf("rows' approx_kl %v, %v; want 0, %v", rows[0].ApproxKL, rows[1].ApproxKL, k3(0.1))
	}
	if stop.Row != (records.Update{}) {
		t.Errorf("a stopped step has a row: %+v", stop.Row)
	}
	cfg.TargetKL = 0.25
	if rows, stop, _ := runPlan(t, seed, b, plan, cfg); stop != nil || len(rows) != plan.Steps() {
		t.Errorf("target 0.25: %d of %d steps, stop %+v", len(rows), plan.Steps(), stop)
	}
	for _, bad := range []float64{-0.01, math.NaN(), math.Inf(1)} {
		cfg.TargetKL = bad
		if err := cfg.Validate(); err == nil {
			t.Errorf("target KL %v accepted", bad)
		}
	}
}

// Off, the update is today's: Step with TargetKL 0 (and with a target it
// never reaches) gives bit for bit the weights of the gradient-then-Apply
// loop Step ran before the early stop existed. On and stopping, the
// weights are those of the steps before the stop, and nothing of the
// refused mini-batch reaches them or the optimizer.
func TestTargetKLOffChangesNothing(t *testing.T) {
	const seed = 13
	b, plan := klBatch(t, seed, [4]float64{0, 0.05, 0.9, 0})
	cfg := noKL()
	cfg.Schedule.PeakLR = 1e-3

	ref, err := NewTrainer(tinyModel(t, seed), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var prefix map[string][]float32
	for k := 0; k < plan.Steps(); k++ {
		_, trajs := plan.At(k)
		g, err := ref.Grad(trajs, trajs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Apply(g); err != nil {
			t.Fatal(err)
		}
		if k == 1 {
			prefix = ref.Model.Params()
		}
	}
	want := ref.Model.Params()

	for _, target := range []float64{0, 1e9} {
		cfg.TargetKL = target
		rows, stop, got := runPlan(t, seed, b, plan, cfg)
		if stop != nil || len(rows) != plan.Steps() {
			t.Fatalf("target %v: %d steps, stop %+v", target, len(rows), stop)
		}
		sameParams(t, "guard off vs Grad+Apply", want, got)
	}
	// Mini-batch 2's log-ratio 0.9 gives k3 = 0.56 (the two steps before
	// move the policy a little); a target of 0.1 refuses it.
	cfg.TargetKL = 0.1
	rows, stop, got := runPlan(t, seed, b, plan, cfg)
	if stop == nil || len(rows) != 2 || math.Abs(stop.ApproxKL-k3(0.9)) > 0.05 {
		t.Fatalf("target 0.1: %d steps, stop %+v; want a stop at plan step 2 near %v", len(rows), stop, k3(0.9))
	}
	sameParams(t, "stopped at step 2 vs the first two steps", prefix, got)
}
