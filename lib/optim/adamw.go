// Package optim holds the optimizer of mempo's update stage: AdamW over
// named flat float32 parameters (fp32 master weights) with torch semantics,
// gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_),
// learning-rate schedules (constant and linear warmup + cosine, HF
// conventions), and an optimizer state that exports to and imports from
// named flat slices so that a resumed run is bit-identical to an
// uninterrupted one.
//
// It depends on nothing but the standard library; the update command maps
// model tensors to Params by name. Work is split across goroutines in fixed
// chunks whose results never depend on the number of goroutines, so results
// are deterministic.
package optim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Param is one named parameter: its fp32 master weights, updated in place,
// and its gradient.
type Param struct {
	Name string
	Data []float32
	Grad []float32 // nil: no gradient this step; the parameter and its state are left alone (torch: p.grad is None)
}

// AdamWConfig holds AdamW's constants; the learning rate is passed to each
// Step (it comes from a Schedule).
type AdamWConfig struct {
	Beta1, Beta2 float64 // 0.9, 0.999
	Eps          float64 // 1e-8
	WeightDecay  float64 // decoupled weight decay λ (0.01)
}

// DefaultAdamW returns torch.optim.AdamW's defaults (β = (0.9, 0.999),
// ε = 1e-8, weight decay 0.01).
func DefaultAdamW() AdamWConfig {
	return AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

func (c AdamWConfig) validate() error {
	ok := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !ok(c.Beta1) || !ok(c.Beta2) || c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1 {
		return fmt.Errorf("optim: AdamW betas must lie in [0, 1), got %v, %v", c.Beta1, c.Beta2)
	}
	if !ok(c.Eps) || c.Eps < 0 || !ok(c.WeightDecay) || c.WeightDecay < 0 {
		return fmt.Errorf("optim: AdamW eps and weight decay must be finite and ≥ 0, got %v, %v", c.Eps, c.WeightDecay)
	}
	return nil
}

type paramState struct {
	step int64
	m, v []float32 // exp_avg, exp_avg_sq
}

// AdamW is torch.optim.AdamW (amsgrad off, maximize off) over float32
// parameters. Each parameter has its own step count, as in torch.
type AdamW struct {
	cfg   AdamWConfig
	state map[string]*paramState
}

// NewAdamW returns an optimizer with empty state.
func NewAdamW(cfg AdamWConfig) (*AdamW, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &AdamW{cfg: cfg, state: map[string]*paramState{}}, nil
}

// Config returns the optimizer's constants.
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// StepCount returns the largest per-parameter step count: the number of
// steps taken when every parameter had a gradient at every step.
func (o *AdamW) StepCount() int64 {
	var n int64
	for _, s := range o.state {
		n = max(n, s.step)
	}
	return n
}

// Step applies one AdamW update with learning rate lr to every parameter
// with a gradient, in the order of torch's _single_tensor_adam with
// decoupled weight decay:
//
//	step += 1
//	θ ← θ·(1 − lr·λ)
//	m ← lerp(m, g, 1 − β1) = m + (1 − β1)·(g − m)
//	v ← v·β2 + (1 − β2)·g·g
//	bc1 = 1 − β1^step, bc2 = 1 − β2^step
//	θ ← θ − (lr/bc1)·m / (√v/√bc2 + ε)
//
// Tensor arithmetic is float32 with torch's CPU roundings: the lerp and the
// addcmul are fused multiply-adds (one rounding), every other operation is
// rounded on its own; the scalars (1 − lr·λ, lr/bc1, √bc2, …) are computed
// in float64 and rounded to float32 once, as torch passes Python floats to
// float32 kernels. Given the same gradients, the weights and moments are bit
// for bit those of torch 2.11's AdamW(foreach=False) on the CPU
// (TestAgainstTorch); CUDA's fused/foreach kernels round differently.
func (o *AdamW) Step(params []Param, lr float64) error {
	if err := checkStep(params, lr, func(name string) int {
		if s := o.state[name]; s != nil {
			return len(s.m)
		}
		return -1
	}); err != nil {
		return err
	}
	c := o.cfg
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		s := o.state[p.Name]
		if s == nil {
			s = &paramState{m: make([]float32, len(p.Data)), v: make([]float32, len(p.Data))}
			o.state[p.Name] = s
		}
		s.step++
		step := float64(s.step)
		bc1 := 1 - math.Pow(c.Beta1, step)
		bc2 := 1 - math.Pow(c.Beta2, step)
		decay := float32(1 - lr*c.WeightDecay)
		w1 := float32(1 - c.Beta1)
		b2 := float32(c.Beta2)
		w2 := float32(1 - c.Beta2)
		bc2sqrt := float32(math.Sqrt(bc2))
		eps := float32(c.Eps)
		negStep := float32(-(lr / bc1))
		doDecay := c.WeightDecay != 0
		theta, g, m, v := p.Data, p.Grad, s.m, s.v
		parallelFor(len(theta), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				// Where torch's vectorized CPU kernels fuse a
				// multiply-add (lerp_vec's fmadd; addcmul's
				// self + s·t1·t2, contracted by the compiler) we
				// call fma32; elsewhere explicit float32
				// conversions keep every product rounded on its
				// own, since Go may fuse a*b+c on some targets.
				if doDecay {
					theta[i] = float32(theta[i] * decay)
				}
				gi := g[i]
				m[i] = fma32(w1, gi-m[i], m[i])
				v[i] = float32(v[i] * b2)
				v[i] = fma32(float32(w2*gi), gi, v[i])
				den := float32(float32(sqrt32(v[i])/bc2sqrt) + eps)
				theta[i] = theta[i] + float32(float32(negStep*m[i])/den)
			}
		})
	}
	return nil
}

// checkStep validates a step's arguments: a usable rate, each parameter
// once, gradients and states (stateLen: −1 when none) of the parameter's
// length.
func checkStep(params []Param, lr float64, stateLen func(name string) int) error {
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return fmt.Errorf("optim: learning rate must be finite and ≥ 0, got %v", lr)
	}
	seen := make(map[string]bool, len(params))
	for _, p := range params {
		if seen[p.Name] {
			return fmt.Errorf("optim: parameter %q given twice", p.Name)
		}
		seen[p.Name] = true
		if p.Grad == nil {
			continue
		}
		if len(p.Grad) != len(p.Data) {
			return fmt.Errorf("optim: parameter %q has %d values but a gradient of %d", p.Name, len(p.Data), len(p.Grad))
		}
		if n := stateLen(p.Name); n >= 0 && n != len(p.Data) {
			return fmt.Errorf("optim: parameter %q has %d values but its optimizer state %d", p.Name, len(p.Data), n)
		}
	}
	return nil
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// fma32 returns a·b + c rounded once to float32, as a float32 FMA
// instruction does. a·b is exact in float64 and math.FMA adds c with one
// rounding to float64; rounding that to float32 is a second rounding, which
// is wrong only when the float64 sum lands exactly on a float32 midpoint
// while the exact sum does not. TwoSum recovers the float64 rounding error
// e, and at such a midpoint the neighbour on e's side is the right answer.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24 + 24 bits of significand
	cc := float64(c)
	s := p + cc
	r := float32(s)
	// Fast path: in float32's normal range a float32 midpoint has exactly
	// bit 28 set among the 29 low significand bits of the float64.
	if math.Abs(s) >= 0x1p-126 && math.Float64bits(s)&(1<<29-1) != 1<<28 {
		return r
	}
	if math.IsInf(s, 0) || math.IsNaN(s) || float64(r) == s {
		return r
	}
	// TwoSum: s + e == p + c exactly.
	bv := s - p
	e := (p - (s - bv)) + (cc - bv)
	if e == 0 {
		return r
	}
	var other float32
	if float64(r) < s {
		other = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		other = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(r)+float64(other))/2 != s {
		return r // not a midpoint: the float64 rounding cannot have crossed one
	}
	if (e > 0) == (other > r) {
		return other
	}
	return r
}

// State is an AdamW state: per-parameter step counts and moments.
type State struct {
	Steps    map[string]int64
	ExpAvg   map[string][]float32
	ExpAvgSq map[string][]float32
}

// State returns a deep copy of the optimizer state.
func (o *AdamW) State() State {
	st := State{Steps: map[string]int64{}, ExpAvg: map[string][]float32{}, ExpAvgSq: map[string][]float32{}}
	for name, s := range o.state {
		st.Steps[name] = s.step
		st.ExpAvg[name] = append([]float32(nil), s.m...)
		st.ExpAvgSq[name] = append([]float32(nil), s.v...)
	}
	return st
}

// LoadState replaces the optimizer state by a deep copy of st.
func (o *AdamW) LoadState(st State) error {
	if err := st.validate(); err != nil {
		return err
	}
	o.state = map[string]*paramState{}
	for name, n := range st.Steps {
		o.state[name] = &paramState{
			step: n,
			m:    append([]float32(nil), st.ExpAvg[name]...),
			v:    append([]float32(nil), st.ExpAvgSq[name]...),
		}
	}
	return nil
}

func (st State) validate() error {
	if len(st.ExpAvg) != len(st.Steps) || len(st.ExpAvgSq) != len(st.Steps) {
		return fmt.Errorf("optim: state has %d step counts, %d exp_avg and %d exp_avg_sq", len(st.Steps), len(st.ExpAvg), len(st.ExpAvgSq))
	}
	for name, n := range st.Steps {
		m, okm := st.ExpAvg[name]
		v, okv := st.ExpAvgSq[name]
		if !okm || !okv {
			return fmt.Errorf("optim: state of %q lacks exp_avg or exp_avg_sq", name)
		}
		if len(m) != len(v) {
			return fmt.Errorf("optim: state of %q has exp_avg of %d values and exp_avg_sq of %d", name, len(m), len(v))
		}
		if n < 1 {
			return fmt.Errorf("optim: state of %q has step count %d", name, n)
		}
	}
	return nil
}

// Names of the flat export.
const (
	suffixExpAvg   = ".exp_avg"
	suffixExpAvgSq = ".exp_avg_sq"
	suffixStep     = ".step"
	metaFormat     = "format"
	formatValue    = "mempo-adamw-v1"
)

// Flat returns the state as named flat tensors and string metadata, ready
// for a safetensors file: tensors "<param>.exp_avg" and "<param>.exp_avg_sq"
// (float32, the parameter's length), metadata "<param>.step" = decimal step
// count and "format" = "mempo-adamw-v1". The slices are the state's own;
// copy them before changing them.
func (st State) Flat() (map[string][]float32, map[string]string) {
	tensors := make(map[string][]float32, 2*len(st.Steps))
	meta := map[string]string{metaFormat: formatValue}
	for name, n := range st.Steps {
		tensors[name+suffixExpAvg] = st.ExpAvg[name]
		tensors[name+suffixExpAvgSq] = st.ExpAvgSq[name]
		meta[name+suffixStep] = strconv.FormatInt(n, 10)
	}
	return tensors, meta
}

// StateFromFlat is the inverse of Flat. Unknown tensor names, a missing
// moment or step count, or a different format are errors.
func StateFromFlat(tensors map[string][]float32, meta map[string]string) (State, error) {
	st := State{Steps: map[string]int64{}, ExpAvg: map[string][]float32{}, ExpAvgSq: map[string][]float32{}}
	if f, ok := meta[metaFormat]; ok && f != formatValue {
		return st, fmt.Errorf("optim: optimizer state format %q, want %q", f, formatValue)
	}
	names := make([]string, 0, len(tensors))
	for k := range tensors {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch {
		case strings.HasSuffix(k, suffixExpAvgSq):
			st.ExpAvgSq[strings.TrimSuffix(k, suffixExpAvgSq)] = tensors[k]
		case strings.HasSuffix(k, suffixExpAvg):
			st.ExpAvg[strings.TrimSuffix(k, suffixExpAvg)] = tensors[k]
		default:
			return st, fmt.Errorf("optim: optimizer state tensor %q is neither .exp_avg nor .exp_avg_sq", k)
		}
	}
	for name := range st.ExpAvg {
		s, ok := meta[name+suffixStep]
		if !ok {
			return st, fmt.Errorf("optim: optimizer state of %q has no step count (metadata %q)", name, name+suffixStep)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return st, fmt.Errorf("optim: optimizer state of %q: step count %q: %v", name, s, err)
		}
		st.Steps[name] = n
	}
	return st, st.validate()
}
