package optim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The memory-lean AdamW of the full-parameter update (docs/formats.md,
// "8-bit optimizer state"). The arithmetic of a step is AdamW's in float32
// on fp32 master weights, exactly as AdamW.Step; only the moments are
// stored in 8 bits between steps: blockwise, Block8 values sharing one
// float32 scale = absmax(block)/max(code), each value the code of
// value/scale in a small float format:
//
//   - exp_avg: "E3M4", 1 sign, 3 exponent (bias 3), 4 mantissa bits,
//     subnormals, no inf/NaN: ±31 down to 2^-6 (a dynamic range of 1984
//     within a block), relative spacing 1/16 to 1/32;
//   - exp_avg_sq: "E4M4U", unsigned, 4 exponent (bias 7), 4 mantissa bits:
//     496 down to 2^-10 (range 5·10^5); a positive value never rounds to
//     zero (it takes the smallest code), so √v can never fall to 0 under a
//     non-zero m, which would make the step m/ε.
//
// Chosen by measurement (scripts/adamw8_maps.go, docs/formats.md): over
// 100 steps of a noisy least-squares problem, these two maps kept the
// weights within 3.6–5.3% of fp32 AdamW's path (relative to the distance
// fp32 AdamW moved), FP8 E4M3 for both within 9–12%, and bitsandbytes'
// dynamic maps within 7–9%; bf16 moments 0.3–0.6%. Rounding to a code is
// to nearest, ties toward zero, by the same table search on the CPU and in
// the CUDA kernel (lib/cuda/kernels/adamw.cu, adamw8_step), so both
// produce the same bytes and a resumed run is bit for bit an uninterrupted
// one.
//
// Memory per parameter: 2 bytes of moments (plus 8 bytes of scales per 256
// values) instead of AdamW's 8. On the GPU the master weights are kept as
// the bf16 weight the products read plus a 16-bit remainder (SplitMaster),
// so the fp32 master costs 2 bytes beyond the bf16 weight.

// Block8 is the number of moment values sharing one scale.
const Block8 = 256

// Codebook is an 8-bit float format: the values of its non-negative codes
// in ascending order (code i, plus the sign bit 0x80 when Signed), and the
// midpoints between neighbours that rounding searches.
type Codebook struct {
	Name   string
	Vals   []float32 // Vals[i] = value of code i (i < 128 signed, < 256 unsigned)
	Mids   []float32 // Mids[i] = (Vals[i] + Vals[i+1]) / 2, exact
	Signed bool
	NoZero bool // a positive value never rounds to code 0
	Max    float32
}

// smallFloat builds the codebook of a float format with e exponent and m
// mantissa bits, bias b, subnormals, and every code finite.
func smallFloat(name string, e, m, b int, signed, noZero bool) *Codebook {
	cb := &Codebook{Name: name, Signed: signed, NoZero: noZero}
	for ex := 0; ex < 1<<e; ex++ {
		for mt := 0; mt < 1<<m; mt++ {
			f := float64(mt) / float64(int(1)<<m)
			v := math.Ldexp(f, 1-b) // subnormal
			if ex > 0 {
				v = math.Ldexp(1+f, ex-b)
			}
			cb.Vals = append(cb.Vals, float32(v))
		}
	}
	for i := 0; i+1 < len(cb.Vals); i++ {
		cb.Mids = append(cb.Mids, float32((float64(cb.Vals[i])+float64(cb.Vals[i+1]))/2))
	}
	cb.Max = cb.Vals[len(cb.Vals)-1]
	return cb
}

// The codebooks of exp_avg and exp_avg_sq.
var (
	CodeExpAvg   = smallFloat("e3m4", 3, 4, 3, true, false)
	CodeExpAvgSq = smallFloat("e4m4u", 4, 4, 7, false, true)
)

// Value is the value of code c.
func (cb *Codebook) Value(c uint8) float32 {
	if cb.Signed {
		v := cb.Vals[c&0x7f]
		if c&0x80 != 0 {
			return -v
		}
		return v
	}
	return cb.Vals[c]
}

// Encode returns the code nearest to x (ties toward zero), clamped to
// ±Max; x must not be NaN (and not negative for an unsigned book).
func (cb *Codebook) Encode(x float32) uint8 {
	a := x
	if a < 0 {
		a = -a
	}
	// Number of midpoints strictly below |x|: a binary search over the
	// ascending table (the kernel does the same comparisons).
	lo, hi := 0, len(cb.Mids)
	for lo < hi {
		mid := (lo + hi) / 2
		if cb.Mids[mid] < a {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 && cb.NoZero && a > 0 {
		lo = 1
	}
	c := uint8(lo)
	if cb.Signed && x < 0 && c != 0 {
		c |= 0x80
	}
	return c
}

// Quantize stores x as codes q and per-block scales s: s[b] =
// absmax(block)/Max, q[i] = Encode(x[i]/s[b]). A block of zeros gets scale
// 0 and zero codes.
func (cb *Codebook) Quantize(x []float32, q []uint8, s []float32) {
	for b := range s {
		lo, hi := b*Block8, min((b+1)*Block8, len(x))
		var amax float32
		for _, v := range x[lo:hi] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		sc := float32(amax / cb.Max)
		s[b] = sc
		for i := lo; i < hi; i++ {
			if sc == 0 {
				q[i] = 0
				continue
			}
			q[i] = cb.Encode(x[i] / sc)
		}
	}
}

// Dequantize is the inverse of Quantize up to its rounding: x[i] =
// Value(q[i])·s[i/Block8], one float32 product.
func (cb *Codebook) Dequantize(q []uint8, s []float32, x []float32) {
	for i := range x {
		x[i] = float32(cb.Value(q[i]) * s[i/Block8])
	}
}

// Blocks8 is the number of scales of n values.
func Blocks8(n int) int { return (n + Block8 - 1) / Block8 }

// SplitMaster writes an fp32 master weight as the bf16 weight hi that the
// products read (round to nearest, ties away from zero) and the remainder
// lo of its bit pattern: bits(x) = hi<<16 + lo exactly, lo in
// [−32768, 32767]. (Ties away from zero rather than to even is what makes
// every remainder fit 16 bits; the two differ on exact ties only.)
func SplitMaster(x float32) (hi uint16, lo int16) {
	b := math.Float32bits(x)
	h := (b + 0x8000) >> 16
	return uint16(h), int16(int32(b - h<<16))
}

// JoinMaster is the inverse of SplitMaster.
func JoinMaster(hi uint16, lo int16) float32 {
	return math.Float32frombits(uint32(hi)<<16 + uint32(int32(lo)))
}

// moment8 is one 8-bit moment of one parameter.
type moment8 struct {
	q []uint8
	s []float32
}

func newMoment8(n int) moment8 { return moment8{q: make([]uint8, n), s: make([]float32, Blocks8(n))} }

func (m moment8) clone() moment8 {
	return moment8{q: append([]uint8(nil), m.q...), s: append([]float32(nil), m.s...)}
}

type paramState8 struct {
	step int64
	m, v moment8 // exp_avg and exp_avg_sq
}

// AdamW8 is AdamW with 8-bit blockwise moments (see the comment at the top
// of this file). Each parameter has its own step count, as in AdamW.
type AdamW8 struct {
	cfg   AdamWConfig
	state map[string]*paramState8
}

// NewAdamW8 returns an 8-bit optimizer with empty state.
func NewAdamW8(cfg AdamWConfig) (*AdamW8, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &AdamW8{cfg: cfg, state: map[string]*paramState8{}}, nil
}

// StepCount is AdamW.StepCount.
func (o *AdamW8) StepCount() int64 {
	var n int64
	for _, s := range o.state {
		n = max(n, s.step)
	}
	return n
}

// Step8Scalars are a step's float32 constants, rounded once from float64 as
// AdamW.Step rounds them (the CUDA kernel takes the same values).
type Step8Scalars struct {
	Decay, W1, B2, W2, BC2Sqrt, Eps, NegStep float32
	DoDecay                                  bool
}

// Scalars8 returns the constants of step (1-based) at rate lr.
func Scalars8(c AdamWConfig, lr float64, step int64) Step8Scalars {
	s := float64(step)
	return Step8Scalars{
		Decay: float32(1 - lr*c.WeightDecay), W1: float32(1 - c.Beta1), B2: float32(c.Beta2), W2: float32(1 - c.Beta2),
		BC2Sqrt: float32(math.Sqrt(1 - math.Pow(c.Beta2, s))), Eps: float32(c.Eps),
		NegStep: float32(-(lr / (1 - math.Pow(c.Beta1, s)))), DoDecay: c.WeightDecay != 0,
	}
}

// Step takes one step on every parameter with a gradient: the moments are
// dequantized, AdamW.Step's float32 arithmetic updates θ, m and v, and the
// new m and √v are quantized again.
func (o *AdamW8) Step(params []Param, lr float64) error {
	if err := checkStep(params, lr, func(name string) int {
		if s := o.state[name]; s != nil {
			return len(s.m.q)
		}
		return -1
	}); err != nil {
		return err
	}
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		s := o.state[p.Name]
		if s == nil {
			s = &paramState8{m: newMoment8(len(p.Data)), v: newMoment8(len(p.Data))}
			o.state[p.Name] = s
		}
		s.step++
		Step8(p.Data, p.Grad, s.m.q, s.m.s, s.v.q, s.v.s, Scalars8(o.cfg, lr, s.step))
	}
	return nil
}

// Step8 is one 8-bit AdamW step over flat arrays: θ (fp32 master weights,
// in place), g, and the moments' codes and scales (in place). Blocks run in
// parallel; each block's arithmetic is sequential and fixed.
func Step8(theta, g []float32, mq []uint8, ms []float32, vq []uint8, vs []float32, c Step8Scalars) {
	nb := Blocks8(len(theta))
	cm, cv := CodeExpAvg, CodeExpAvgSq
	parallelFor(nb, func(b0, b1 int) {
		var mb, vb [Block8]float32
		for b := b0; b < b1; b++ {
			lo, hi := b*Block8, min((b+1)*Block8, len(theta))
			for i := lo; i < hi; i++ {
				m := float32(cm.Value(mq[i]) * ms[b])
				v := float32(cv.Value(vq[i]) * vs[b])
				th := theta[i]
				if c.DoDecay {
					th = float32(th * c.Decay)
				}
				gi := g[i]
				m = fma32(c.W1, gi-m, m)
				v = float32(v * c.B2)
				v = fma32(float32(c.W2*gi), gi, v)
				den := float32(float32(sqrt32(v)/c.BC2Sqrt) + c.Eps)
				theta[i] = th + float32(float32(c.NegStep*m)/den)
				mb[i-lo], vb[i-lo] = m, v
			}
			cm.Quantize(mb[:hi-lo], mq[lo:hi], ms[b:b+1])
			cv.Quantize(vb[:hi-lo], vq[lo:hi], vs[b:b+1])
		}
	})
}

// Moment8 is one stored 8-bit moment: E4M3 codes and per-block scales.
type Moment8 struct {
	Q     []uint8
	Scale []float32
}

// State8 is an AdamW8 state: per-parameter step counts, exp_avg and
// exp_avg_sq in 8 bits, and (filled by the caller that splits its master
// weights, nil otherwise) the 16-bit remainders of the master weights.
type State8 struct {
	Steps    map[string]int64
	ExpAvg   map[string]Moment8
	ExpAvgSq map[string]Moment8
	MasterLo map[string][]int16
}

// NewState8 returns an empty state.
func NewState8() State8 {
	return State8{Steps: map[string]int64{}, ExpAvg: map[string]Moment8{}, ExpAvgSq: map[string]Moment8{}, MasterLo: map[string][]int16{}}
}

// State returns a deep copy of the optimizer state (MasterLo empty).
func (o *AdamW8) State() State8 {
	st := NewState8()
	for name, s := range o.state {
		m, v := s.m.clone(), s.v.clone()
		st.Steps[name] = s.step
		st.ExpAvg[name] = Moment8{Q: m.q, Scale: m.s}
		st.ExpAvgSq[name] = Moment8{Q: v.q, Scale: v.s}
	}
	return st
}

// LoadState replaces the optimizer state by a deep copy of st (its
// MasterLo is the caller's business).
func (o *AdamW8) LoadState(st State8) error {
	if err := st.Validate(nil); err != nil {
		return err
	}
	o.state = map[string]*paramState8{}
	for name, n := range st.Steps {
		m, r := st.ExpAvg[name], st.ExpAvgSq[name]
		o.state[name] = &paramState8{step: n, m: moment8{m.Q, m.Scale}.clone(), v: moment8{r.Q, r.Scale}.clone()}
	}
	return nil
}

// Validate checks the state's consistency and, with sizes (parameter name
// → values), that it fits the model.
func (st State8) Validate(sizes map[string]int) error {
	names := make([]string, 0, len(st.Steps))
	for name := range st.Steps {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(st.ExpAvg) != len(st.Steps) || len(st.ExpAvgSq) != len(st.Steps) {
		return fmt.Errorf("optim: 8-bit state has %d step counts, %d exp_avg and %d exp_avg_sq", len(st.Steps), len(st.ExpAvg), len(st.ExpAvgSq))
	}
	for _, name := range names {
		m, okm := st.ExpAvg[name]
		r, okr := st.ExpAvgSq[name]
		if !okm || !okr {
			return fmt.Errorf("optim: 8-bit state of %q lacks exp_avg or exp_avg_sq", name)
		}
		n := len(m.Q)
		if len(r.Q) != n || len(m.Scale) != Blocks8(n) || len(r.Scale) != Blocks8(n) {
			return fmt.Errorf("optim: 8-bit state of %q: %d and %d codes with %d and %d scales (want %d scales)", name, n, len(r.Q), len(m.Scale), len(r.Scale), Blocks8(n))
		}
		if st.Steps[name] < 1 {
			return fmt.Errorf("optim: 8-bit state of %q has step count %d", name, st.Steps[name])
		}
		if sizes != nil {
			want, ok := sizes[name]
			if !ok {
				return fmt.Errorf("optim: 8-bit state for %s, which the model does not have (mismatched checkpoint)", name)
			}
			if n != want {
				return fmt.Errorf("optim: 8-bit state for %s has %d values, the parameter %d (mismatched checkpoint)", name, n, want)
			}
		}
	}
	for name, lo := range st.MasterLo {
		if sizes == nil {
			continue
		}
		if want, ok := sizes[name]; !ok || len(lo) != want {
			return fmt.Errorf("optim: master remainder of %s has %d values, the parameter %d (mismatched checkpoint)", name, len(lo), want)
		}
	}
	return nil
}

// Names of the 8-bit state's tensors and metadata (docs/formats.md).
const (
	Format8        = "mempo-adamw8-v1"
	suffixQ        = ".exp_avg.q"
	suffixQScale   = ".exp_avg.scale"
	suffixR        = ".exp_avg_sq.q"
	suffixRScale   = ".exp_avg_sq.scale"
	suffixMasterLo = ".master_lo"
	metaBlock      = "block"
)

// Flat8 is a State8 as named raw arrays: codes (uint8), scales (float32)
// and remainders (int16), with metadata "format" = Format8, "block" = 256
// and "<param>.step".
type Flat8 struct {
	Codes  map[string][]uint8
	Scales map[string][]float32
	Lo     map[string][]int16
	Meta   map[string]string
}

// Flat returns the state's arrays by file name (the slices are the
// state's own).
func (st State8) Flat() Flat8 {
	f := Flat8{Codes: map[string][]uint8{}, Scales: map[string][]float32{}, Lo: map[string][]int16{},
		Meta: map[string]string{metaFormat: Format8, metaBlock: strconv.Itoa(Block8)}}
	for name, n := range st.Steps {
		f.Codes[name+suffixQ] = st.ExpAvg[name].Q
		f.Scales[name+suffixQScale] = st.ExpAvg[name].Scale
		f.Codes[name+suffixR] = st.ExpAvgSq[name].Q
		f.Scales[name+suffixRScale] = st.ExpAvgSq[name].Scale
		f.Meta[name+suffixStep] = strconv.FormatInt(n, 10)
	}
	for name, lo := range st.MasterLo {
		f.Lo[name+suffixMasterLo] = lo
	}
	return f
}

// State8FromFlat is the inverse of Flat.
func State8FromFlat(f Flat8) (State8, error) {
	st := NewState8()
	if got := f.Meta[metaFormat]; got != Format8 {
		return st, fmt.Errorf("optim: optimizer state format %q, want %q", got, Format8)
	}
	if b := f.Meta[metaBlock]; b != strconv.Itoa(Block8) {
		return st, fmt.Errorf("optim: 8-bit state block %q, want %d", b, Block8)
	}
	moment := func(name string, q []uint8, s []float32) {
		switch {
		case strings.HasSuffix(name, suffixQ):
			p := strings.TrimSuffix(name, suffixQ)
			m := st.ExpAvg[p]
			m.Q = q
			if s != nil {
				m.Scale = s
			}
			st.ExpAvg[p] = m
		case strings.HasSuffix(name, suffixR):
			p := strings.TrimSuffix(name, suffixR)
			m := st.ExpAvgSq[p]
			m.Q = q
			st.ExpAvgSq[p] = m
		}
	}
	for name, q := range f.Codes {
		if !strings.HasSuffix(name, suffixQ) && !strings.HasSuffix(name, suffixR) {
			return st, fmt.Errorf("optim: 8-bit state tensor %q is neither %s nor %s", name, suffixQ, suffixR)
		}
		moment(name, q, nil)
	}
	for name, s := range f.Scales {
		switch {
		case strings.HasSuffix(name, suffixQScale):
			p := strings.TrimSuffix(name, suffixQScale)
			m := st.ExpAvg[p]
			m.Scale = s
			st.ExpAvg[p] = m
		case strings.HasSuffix(name, suffixRScale):
			p := strings.TrimSuffix(name, suffixRScale)
			m := st.ExpAvgSq[p]
			m.Scale = s
			st.ExpAvgSq[p] = m
		default:
			return st, fmt.Errorf("optim: 8-bit state tensor %q is neither %s nor %s", name, suffixQScale, suffixRScale)
		}
	}
	for name, lo := range f.Lo {
		if !strings.HasSuffix(name, suffixMasterLo) {
			return st, fmt.Errorf("optim: 8-bit state tensor %q is not a %s", name, suffixMasterLo)
		}
		st.MasterLo[strings.TrimSuffix(name, suffixMasterLo)] = lo
	}
	for name := range st.ExpAvg {
		s, ok := f.Meta[name+suffixStep]
		if !ok {
			return st, fmt.Errorf("optim: optimizer state of %q has no step count (metadata %q)", name, name+suffixStep)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return st, fmt.Errorf("optim: optimizer state of %q: step count %q: %v", name, s, err)
		}
		st.Steps[name] = n
	}
	return st, st.Validate(nil)
}
