package optim

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// TestAdamWByHand runs 3 steps on one scalar with gradients 1, −1, 2,
// lr = 1, no weight decay, worked by hand from the torch docs pseudocode:
//
//	t=1: m = 0.1, v = 0.001, m̂ = 1, v̂ = 1, update 1/(1+1e-8) → θ = −0.99999999
//	t=2: m = 0.09 − 0.1 = −0.01, v = 0.000999 + 0.001 = 0.001999,
//	     m̂ = −0.01/0.19 = −0.0526316, v̂ = 0.001999/0.001999 = 1 → θ = −0.9473684
//	t=3: m = −0.009 + 0.2 = 0.191, v = 0.001997001 + 0.004 = 0.005997001,
//	     m̂ = 0.191/0.271 = 0.7047970, v̂ = 0.005997001/0.002997001 = 2.0010007,
//	     update 0.7047970/1.4145673 = 0.4982421 → θ = −1.4456106
//
// and, on a second parameter with a constant gradient (0.5, −2), lr = 0.1,
// λ = 0.01: each step is θ ← θ·0.999 − 0.1·sign(g) (m̂ = g, v̂ = g² exactly),
// so from (1, −1): 0.899, 0.798101, 0.697302899 and the mirror image.
func TestAdamWByHand(t *testing.T) {
	cfg := DefaultAdamW()
	cfg.WeightDecay = 0
	o, err := NewAdamW(cfg)
	if err != nil {
		t.Fatal(err)
	}
	theta := []float32{0}
	want := []float64{-0.99999999, -0.9473684116, -1.4456105520}
	for i, g := range []float32{1, -1, 2} {
		if err := o.Step([]Param{{Name: "w", Data: theta, Grad: []float32{g}}}, 1); err != nil {
			t.Fatal(err)
		}
		if !near(float64(theta[0]), want[i], 2e-7) {
			t.Errorf("step %d: θ = %.9f, want %.9f", i+1, theta[0], want[i])
		}
	}

	o, _ = NewAdamW(DefaultAdamW())
	xy := []float32{1, -1}
	wantX := []float64{0.899, 0.798101, 0.697302899}
	for i := 0; i < 3; i++ {
		if err := o.Step([]Param{{Name: "xy", Data: xy, Grad: []float32{0.5, -2}}}, 0.1); err != nil {
			t.Fatal(err)
		}
		if !near(float64(xy[0]), wantX[i], 2e-7) || !near(float64(xy[1]), -wantX[i], 2e-7) {
			t.Errorf("weight decay step %d: %v, want ±%v", i+1, xy, wantX[i])
		}
	}
	if o.StepCount() != 3 {
		t.Errorf("StepCount %d", o.StepCount())
	}
}

// refAdamW is an independent float64 AdamW written from the torch docs
// pseudocode (bias corrections applied to m̂ and v̂ explicitly).
type refAdamW struct {
	lr, b1, b2, eps, wd float64
	t                   int
	m, v                []float64
}

func (r *refAdamW) step(theta, g []float64) {
	if r.m == nil {
		r.m, r.v = make([]float64, len(theta)), make([]float64, len(theta))
	}
	r.t++
	for i := range theta {
		theta[i] -= r.lr * r.wd * theta[i]
		r.m[i] = r.b1*r.m[i] + (1-r.b1)*g[i]
		r.v[i] = r.b2*r.v[i] + (1-r.b2)*g[i]*g[i]
		mh := r.m[i] / (1 - math.Pow(r.b1, float64(r.t)))
		vh := r.v[i] / (1 - math.Pow(r.b2, float64(r.t)))
		theta[i] -= r.lr * mh / (math.Sqrt(vh) + r.eps)
	}
}

func TestAdamWMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := AdamWConfig{Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1}
	o, _ := NewAdamW(cfg)
	ref := &refAdamW{lr: 0.01, b1: 0.8, b2: 0.95, eps: 1e-6, wd: 0.1}
	theta := []float32{0.3, -1.2, 2.5, 0}
	th64 := []float64{0.3, -1.2, 2.5, 0}
	for i := range th64 {
		th64[i] = float64(theta[i])
	}
	for s := 0; s < 10; s++ {
		g := make([]float32, 4)
		g64 := make([]float64, 4)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
			g64[i] = float64(g[i])
		}
		if err := o.Step([]Param{{Name: "p", Data: theta, Grad: g}}, 0.01); err != nil {
			t.Fatal(err)
		}
		ref.step(th64, g64)
		for i := range theta {
			if math.Abs(float64(theta[i])-th64[i]) > 1e-6 {
				t.Fatalf("step %d: θ[%d] = %v, reference %v", s+1, i, theta[i], th64[i])
			}
		}
	}
}

func TestAdamWSkipsParamsWithoutGrad(t *testing.T) {
	o, _ := NewAdamW(DefaultAdamW())
	a, b := []float32{1}, []float32{1}
	_ = o.Step([]Param{{Name: "a", Data: a, Grad: []float32{1}}, {Name: "b", Data: b}}, 0.1)
	if b[0] != 1 || a[0] == 1 {
		t.Errorf("a = %v, b = %v", a, b)
	}
	st := o.State()
	if st.Steps["a"] != 1 || len(st.Steps) != 1 {
		t.Errorf("state %+v", st)
	}
	if err := o.Step([]Param{{Name: "a", Data: a, Grad: []float32{1, 2}}}, 0.1); err == nil {
		t.Error("gradient of the wrong length accepted")
	}
	if err := o.Step([]Param{{Name: "a", Data: []float32{1, 2}, Grad: []float32{1, 2}}}, 0.1); err == nil {
		t.Error("parameter whose length differs from its state accepted")
	}
	if err := o.Step([]Param{{Name: "c", Data: a, Grad: a}, {Name: "c", Data: a, Grad: a}}, 0.1); err == nil {
		t.Error("duplicate name accepted")
	}
}

func TestClipGradNorm(t *testing.T) {
	// Norm of (1, 2) and (2): sqrt(1 + 4 + 4) = 3; max 1 → coef 1/(3+1e-6).
	p := []Param{{Name: "a", Grad: []float32{1, 2}}, {Name: "b", Grad: []float32{2}}, {Name: "c"}}
	norm, err := ClipGradNorm(p, 1)
	if err != nil || norm != 3 {
		t.Fatalf("norm %v (%v), want 3", norm, err)
	}
	c := 1 / (3 + 1e-6)
	if !near(float64(p[0].Grad[0]), c, 1e-7) || !near(float64(p[0].Grad[1]), 2*c, 1e-7) || !near(float64(p[1].Grad[0]), 2*c, 1e-7) {
		t.Errorf("clipped grads %v %v", p[0].Grad, p[1].Grad)
	}
	if n := GlobalNorm(p); !near(n, 1, 1e-6) {
		t.Errorf("norm after clipping %v", n)
	}
	// Below the bound: untouched.
	q := []Param{{Grad: []float32{0.3, 0.4}}}
	if norm, _ := ClipGradNorm(q, 1); !near(norm, 0.5, 1e-7) || q[0].Grad[0] != 0.3 || q[0].Grad[1] != 0.4 {
		t.Errorf("norm %v grads %v", norm, q[0].Grad)
	}
	// Non-finite: error, untouched.
	r := []Param{{Grad: []float32{float32(math.Inf(1)), 1}}}
	if _, err := ClipGradNorm(r, 1); err == nil || r[0].Grad[1] != 1 {
		t.Errorf("non-finite norm: err %v grads %v", err, r[0].Grad)
	}
}

// TestNormDeterministic checks that a gradient spanning many chunks gives the
// same norm with 1 and several goroutines, and the exact sum of squares.
func TestNormDeterministic(t *testing.T) {
	n := 5*chunk + 123
	g := make([]float32, n)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	p := []Param{{Grad: g}}
	prev := runtime.GOMAXPROCS(1)
	a := GlobalNorm(p)
	runtime.GOMAXPROCS(4)
	b := GlobalNorm(p)
	runtime.GOMAXPROCS(prev)
	if a != b {
		t.Errorf("norm %v with 1 goroutine, %v with 4", a, b)
	}
	// All-ones: sqrt(n) exactly.
	for i := range g {
		g[i] = 1
	}
	if got := GlobalNorm(p); got != math.Sqrt(float64(n)) {
		t.Errorf("norm of ones %v, want sqrt(%d)", got, n)
	}
}

func TestSchedules(t *testing.T) {
	c := Schedule{Kind: Constant, PeakLR: 1e-6}
	if c.LR(0) != 1e-6 || c.LR(1000) != 1e-6 {
		t.Errorf("constant: %v %v", c.LR(0), c.LR(1000))
	}
	cw := Schedule{Kind: Constant, PeakLR: 2, WarmupSteps: 4}
	for step, want := range []float64{0, 0.5, 1, 1.5, 2, 2} {
		if got := cw.LR(int64(step)); got != want {
			t.Errorf("constant with warmup: LR(%d) = %v, want %v", step, got, want)
		}
	}
	// Warmup 10, total 110, min ratio 0.1, peak 1:
	//   0 → 0; 5 → 0.5; 10 (warmup end) → 1; 60 (mid decay) → 0.1 + 0.9·0.5 = 0.55;
	//   35 (quarter) → 0.1 + 0.9·0.5·(1 + cos(π/4)) = 0.868198;
	//   110 (end) → 0.1; 500 (after) → 0.1.
	s := Schedule{Kind: WarmupCosine, PeakLR: 1, WarmupSteps: 10, TotalSteps: 110, MinRatio: 0.1}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step int64
		want float64
	}{{0, 0}, {5, 0.5}, {10, 1}, {60, 0.55}, {35, 0.1 + 0.45*(1+math.Sqrt(0.5))}, {110, 0.1}, {500, 0.1}} {
		if got := s.LR(tc.step); !near(got, tc.want, 1e-12) {
			t.Errorf("cosine: LR(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	if !near(s.LR(35), 0.8681980515, 1e-9) {
		t.Errorf("cosine quarter %v", s.LR(35))
	}
	for _, bad := range []Schedule{
		{Kind: WarmupCosine, PeakLR: 1, WarmupSteps: 10, TotalSteps: 10},
		{Kind: WarmupCosine, PeakLR: 1, TotalSteps: 10, MinRatio: 1.5},
		{Kind: Constant, PeakLR: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("invalid schedule accepted: %+v", bad)
		}
	}
}

// TestResumeBitIdentical: N steps straight vs k steps, export through the
// flat form, import into a fresh optimizer, N−k more steps.
func TestResumeBitIdentical(t *testing.T) {
	const N, k = 7, 3
	sched := Schedule{Kind: WarmupCosine, PeakLR: 1e-2, WarmupSteps: 2, TotalSteps: N, MinRatio: 0.1}
	init := func() []Param {
		rng := rand.New(rand.NewPCG(9, 9))
		ps := []Param{{Name: "model.layers.0.mlp.weight", Data: make([]float32, 3*chunk+5)}, {Name: "lm_head.weight", Data: make([]float32, 7)}}
		for _, p := range ps {
			for i := range p.Data {
				p.Data[i] = float32(rng.NormFloat64())
			}
		}
		return ps
	}
	// Gradients depend on the step and the current weights, like a real run.
	grads := func(ps []Param, step int) {
		for j := range ps {
			ps[j].Grad = make([]float32, len(ps[j].Data))
			for i, x := range ps[j].Data {
				ps[j].Grad[i] = float32(math.Sin(float64(x)*float64(step+1)+float64(i))) * 3
			}
		}
	}
	run := func(o *AdamW, ps []Param, from, to int) {
		for s := from; s < to; s++ {
			grads(ps, s)
			if _, err := ClipGradNorm(ps, 1); err != nil {
				t.Fatal(err)
			}
			if err := o.Step(ps, sched.LR(int64(s))); err != nil {
				t.Fatal(err)
			}
		}
	}
	straight := init()
	o1, _ := NewAdamW(DefaultAdamW())
	run(o1, straight, 0, N)

	resumed := init()
	o2, _ := NewAdamW(DefaultAdamW())
	run(o2, resumed, 0, k)
	tensors, meta := o2.State().Flat()
	if meta["lm_head.weight.step"] != "3" || len(tensors["lm_head.weight.exp_avg_sq"]) != 7 {
		t.Fatalf("flat state: meta %v", meta)
	}
	st, err := StateFromFlat(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	o3, _ := NewAdamW(DefaultAdamW())
	if err := o3.LoadState(st); err != nil {
		t.Fatal(err)
	}
	run(o3, resumed, int(o3.StepCount()), N)
	for j := range straight {
		for i := range straight[j].Data {
			if math.Float32bits(straight[j].Data[i]) != math.Float32bits(resumed[j].Data[i]) {
				t.Fatalf("%s[%d]: straight %v, resumed %v", straight[j].Name, i, straight[j].Data[i], resumed[j].Data[i])
			}
		}
	}
	// The run must actually move the weights, or the comparison is empty.
	if fresh := init(); fresh[1].Data[0] == straight[1].Data[0] {
		t.Error("weights did not change")
	}
	// Flat-form errors.
	bad := map[string][]float32{"x.exp_avg": {1}, "x.exp_avg_sq": {1}}
	if _, err := StateFromFlat(bad, map[string]string{}); err == nil {
		t.Error("state without a step count accepted")
	}
	if _, err := StateFromFlat(map[string][]float32{"x.momentum": {1}}, nil); err == nil {
		t.Error("unknown tensor accepted")
	}
	if _, err := StateFromFlat(map[string][]float32{"x.exp_avg": {1}, "x.exp_avg_sq": {1, 2}}, map[string]string{"x.step": "1"}); err == nil {
		t.Error("moments of different lengths accepted")
	}
}

// TestFMA32 compares fma32 with a·b + c computed exactly (math/big) and
// rounded once to float32, on random inputs and on inputs built so that the
// float64 sum lands on a float32 midpoint (where a plain
// float32(math.FMA(…)) rounds twice and goes wrong).
func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 50000; i++ {
		a := float32(rng.NormFloat64())
		b := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		c := float32(rng.NormFloat64())
		if got, want := fma32(a, b, c), exact(a, b, c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v, exact %v", a, b, c, got, want)
		}
	}
	// a = 1 + 2^-12, b = (1 − 2^-12 + 2^-24)·2^-24, so a·b = 2^-24 + 2^-60
	// exactly, and c = 1: the exact sum is just above the midpoint between 1
	// and 1 + 2^-23, so it rounds up; in float64 the 2^-60 is lost, the sum
	// sits on the midpoint and ties to even (down to 1).
	a := float32(1 + math.Pow(2, -12))
	b := float32((1 - math.Pow(2, -12) + math.Pow(2, -24)) * math.Pow(2, -24))
	c := float32(1)
	want := exact(a, b, c)
	if got := fma32(a, b, c); got != want {
		t.Errorf("midpoint case: fma32 = %v, exact %v", got, want)
	}
	if twice := float32(math.FMA(float64(a), float64(b), float64(c))); twice == want {
		t.Logf("midpoint case not hit by double rounding (%v): the construction is wrong", twice)
		t.Fail()
	}
	// The same construction around random c of both signs and many
	// exponents (subnormals included), with a·b = ±(ulp(c)/2)·(1 ± 2^-36):
	// exact sums just off a midpoint that float64 rounds onto it.
	hits := 0
	for i := 0; i < 20000; i++ {
		c := float32(math.Ldexp(1+rng.Float64(), rng.IntN(260)-150))
		if rng.IntN(2) == 0 {
			c = -c
		}
		half := float64(math.Nextafter32(c, float32(math.Inf(1)))-c) / 2
		var a, b float32
		if rng.IntN(2) == 0 { // (1 + 2^-12)(1 − 2^-12 + 2^-24) = 1 + 2^-36
			a, b = float32(1+math.Pow(2, -12)), float32((1-math.Pow(2, -12)+math.Pow(2, -24))*half)
		} else { // (1 + 2^-18)(1 − 2^-18) = 1 − 2^-36
			a, b = float32(1+math.Pow(2, -18)), float32((1-math.Pow(2, -18))*half)
		}
		if rng.IntN(2) == 0 {
			b = -b
		}
		want := exact(a, b, c)
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v, exact %v", a, b, c, got, want)
		}
		if float32(math.FMA(float64(a), float64(b), float64(c))) != want {
			hits++
		}
	}
	t.Logf("%d of 20000 constructed cases defeat a double rounding", hits)
	if hits < 1000 {
		t.Errorf("only %d of the constructed cases defeat a double rounding", hits)
	}
}
