package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mempo/mempo/lib/peft"
)

// LoRA: low-rank adapters on the linear layers of every decoder layer, with
// peft's semantics (lib/peft): a targeted projection computes
// y = x·Wᵀ (+ bias) + s·(dropout(x)·Aᵀ)·Bᵀ, A [r, in], B [out, r],
// s = alpha/r. The adapter is written over the Backend's own operations
// (MatMul, Dropout, Add), so every backend runs it; the model is not forked.
// While an adapter is trained the base is frozen: it gets no gradients, and
// TrainableNames lists the adapter's factors only (peft tensor names), which
// is what the optimizer sees. Disabling the adapter (SetAdapterEnabled)
// gives the base model back, which the update uses as the KL reference.

// targetIndex is the order of peft.AllTargets; loraMod slots use it.
const (
	tQ = iota
	tK
	tV
	tO
	tGate
	tUp
	tDown
	nTargets
)

var targetIdx = map[string]int{"q_proj": tQ, "k_proj": tK, "v_proj": tV, "o_proj": tO, "gate_proj": tGate, "up_proj": tUp, "down_proj": tDown}

// loraMod is one adapted projection: its factors and their gradients.
type loraMod struct {
	a, b   Tensor // A [r, in], B [out, r]
	ga, gb Tensor // gradients (nil until ensureGrads)
	nameA  string
	nameB  string
}

type loraState struct {
	cfg     peft.Config
	scale   float32
	layers  [][nTargets]*loraMod
	enabled bool
	names   []string          // factor names in model order (A, B of each module)
	byName  map[string]Tensor // factor name → tensor
	gradBy  map[string]Tensor // factor name → gradient
	shapes  map[string][2]int
}

// loraActs are an adapted projection's saved activations: u = x̃·Aᵀ and x̃,
// the dropped-out input (nil without dropout: x̃ is the layer's own input).
type loraActs struct {
	u, xd Tensor
}

// projShape is the [out, in] shape of target t's base weight.
func (a *arch) projShape(t int) (out, in int) {
	q, kv := a.heads*a.headDim, a.kvHeads*a.headDim
	switch t {
	case tQ:
		return q, a.hidden
	case tK, tV:
		return kv, a.hidden
	case tO:
		return a.hidden, q
	case tGate, tUp:
		return a.inter, a.hidden
	default:
		return a.hidden, a.inter
	}
}

// AttachLoRA adds a fresh adapter as peft initializes one: A from
// kaiming_uniform(a=√5), that is U(−1/√in, 1/√in), B zeros (so the adapted
// model starts equal to the base), drawn from seed. It freezes the base.
func (m *Model) AttachLoRA(cfg peft.Config, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("model: %v", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7261))
	tensors := map[string][]float32{}
	for l := 0; l < m.a.layers; l++ {
		for _, t := range cfg.Targets {
			out, in := m.a.projShape(targetIdx[t])
			mod := peft.ModulePath(l, t)
			A := make([]float32, cfg.R*in)
			bound := 1 / math.Sqrt(float64(in))
			for i := range A {
				A[i] = float32((2*rng.Float64() - 1) * bound)
			}
			tensors[peft.TensorName(mod, "A")] = A
			tensors[peft.TensorName(mod, "B")] = make([]float32, out*cfg.R)
		}
	}
	if err := m.setLoRA(cfg, tensors); err != nil {
		return err
	}
	m.FreezeBase()
	return nil
}

// LoadAdapter applies a peft adapter (unmerged) to the model.
func (m *Model) LoadAdapter(a *peft.Adapter) error {
	if err := a.Check(m.a.layers, func(mod string) []int { return m.ParamShape(mod + ".weight") }); err != nil {
		return err
	}
	return m.setLoRA(a.Config, a.Tensors)
}

func (m *Model) setLoRA(cfg peft.Config, tensors map[string][]float32) error {
	if m.lora != nil {
		return fmt.Errorf("model: an adapter is already attached")
	}
	st := &loraState{cfg: cfg, scale: cfg.Scale(), enabled: true, layers: make([][nTargets]*loraMod, m.a.layers),
		byName: map[string]Tensor{}, gradBy: map[string]Tensor{}, shapes: map[string][2]int{}}
	for l := 0; l < m.a.layers; l++ {
		for _, name := range peft.AllTargets {
			if !slices.Contains(cfg.Targets, name) {
				continue
			}
			t := targetIdx[name]
			out, in := m.a.projShape(t)
			mod := peft.ModulePath(l, name)
			md := &loraMod{nameA: peft.TensorName(mod, "A"), nameB: peft.TensorName(mod, "B")}
			for _, f := range []struct {
				name string
				r, c int
				dst  *Tensor
			}{{md.nameA, cfg.R, in, &md.a}, {md.nameB, out, cfg.R, &md.b}} {
				v, ok := tensors[f.name]
				if !ok || len(v) != f.r*f.c {
					return fmt.Errorf("model: adapter tensor %s missing or not %d×%d", f.name, f.r, f.c)
				}
				*f.dst = m.be.FromHost(v, f.r, f.c)
				st.byName[f.name] = *f.dst
				st.shapes[f.name] = [2]int{f.r, f.c}
				st.names = append(st.names, f.name)
			}
			if wm, ok := m.be.(interface{ MarkWeight(Tensor) }); ok {
				wm.MarkWeight(md.a)
				wm.MarkWeight(md.b)
			}
			st.layers[l][t] = md
		}
	}
	m.lora = st
	return nil
}

// Adapter returns the attached adapter's config and factors (copied to the
// host), or nil when none is attached: what peft.Write saves.
func (m *Model) Adapter() *peft.Adapter {
	if m.lora == nil {
		return nil
	}
	a := &peft.Adapter{Config: m.lora.cfg, Tensors: map[string][]float32{}, Shapes: map[string][]int{}}
	for _, name := range m.lora.names {
		a.Tensors[name] = m.be.ToHost(m.lora.byName[name], nil)
		s := m.lora.shapes[name]
		a.Shapes[name] = []int{s[0], s[1]}
	}
	return a
}

// SetAdapterDropout changes the attached adapter's dropout rate.
func (m *Model) SetAdapterDropout(p float64) error {
	if m.lora == nil {
		return fmt.Errorf("model: no adapter attached")
	}
	c := m.lora.cfg
	c.Dropout = p
	if err := c.Validate(); err != nil {
		return fmt.Errorf("model: %v", err)
	}
	m.lora.cfg = c
	return nil
}

// HasAdapter reports whether an adapter is attached.
func (m *Model) HasAdapter() bool { return m.lora != nil }

// SetAdapterEnabled switches the attached adapter on or off; off, the model
// computes exactly the base model (the adapter's products are skipped).
func (m *Model) SetAdapterEnabled(on bool) {
	if m.lora != nil {
		m.lora.enabled = on
	}
}

// FreezeBase stops gradients into the base weights: the backward skips the
// weight-gradient products of every base matrix (embedding, projections,
// LM head), and TrainableNames lists only the adapter. The normalization
// and bias gradients, a few vectors, are still accumulated into scratch
// tensors nobody reads.
func (m *Model) FreezeBase() {
	m.frozen = true
	if m.grads != nil {
		for _, s := range m.specs {
			if s.rows > 1 && s.cols > 1 {
				m.be.Free(m.grads.byName[s.name])
			}
		}
		m.grads = nil
	}
}

// TrainableNames lists the parameters the optimizer updates: every base
// parameter (ParamNames), or, with a frozen base, the adapter's factors by
// peft tensor name in model order.
func (m *Model) TrainableNames() []string {
	if !m.frozen {
		return m.ParamNames()
	}
	if m.lora == nil {
		return nil
	}
	return append([]string(nil), m.lora.names...)
}

// loraTensor looks a name up among the adapter's factors (or, grad, their
// gradients).
func (m *Model) loraTensor(name string, grad bool) Tensor {
	if m.lora == nil {
		return nil
	}
	if grad {
		m.ensureGrads()
		return m.lora.gradBy[name]
	}
	return m.lora.byName[name]
}

// ensureLoRAGrads allocates the adapter's gradients.
func (m *Model) ensureLoRAGrads() {
	st := m.lora
	if st == nil || len(st.gradBy) > 0 {
		return
	}
	for _, layer := range st.layers {
		for _, md := range layer {
			if md == nil {
				continue
			}
			md.ga = m.be.Zeros(md.a.Rows(), md.a.Cols())
			md.gb = m.be.Zeros(md.b.Rows(), md.b.Cols())
			st.gradBy[md.nameA], st.gradBy[md.nameB] = md.ga, md.gb
		}
	}
}

func (m *Model) loraOn(l, t int) *loraMod {
	if m.lora == nil || !m.lora.enabled {
		return nil
	}
	return m.lora.layers[l][t]
}

// dropoutSeed is the seed of the dropout mask of target t in layer l for the
// current backward: a function of the caller's DropoutSeed only, so a
// recomputed layer draws the same mask and a resumed run the same masks.
func (m *Model) dropoutSeed(l, t int) uint64 {
	return splitmix64(m.DropoutSeed ^ splitmix64(uint64(l*nTargets+t)+0x9e3779b97f4a7c15))
}

// loraForward adds target t's adapter product to y = x·Wᵀ (layer l) and
// keeps its activations in a.lora[t]. Dropout applies in the training
// forward only (b.train).
func (m *Model) loraForward(l, t int, x, y Tensor, a *acts, b *batch) {
	md := m.loraOn(l, t)
	if md == nil {
		return
	}
	be, st := m.be, m.lora
	R := x.Rows()
	xin := x
	var xd Tensor
	if b.train && st.cfg.Dropout > 0 {
		xd = be.Empty(R, x.Cols())
		be.Dropout(xd, x, float32(st.cfg.Dropout), m.dropoutSeed(l, t))
		xin = xd
	}
	u := be.Empty(R, st.cfg.R)
	be.MatMul(u, xin, md.a, false, true, 1, 0)
	be.MatMul(y, u, md.b, false, true, st.scale, 1)
	a.lora[t] = loraActs{u: u, xd: xd}
}

// loraBackward takes dy = dL/dy of target t's projection in layer l, whose
// input was x: it accumulates dA, dB and adds the adapter's share of dL/dx
// into dx.
func (m *Model) loraBackward(l, t int, dy, x, dx Tensor, a *acts) {
	md := m.loraOn(l, t)
	if md == nil {
		return
	}
	be, st := m.be, m.lora
	la := a.lora[t]
	xin := x
	if la.xd != nil {
		xin = la.xd
	}
	R := dy.Rows()
	// y += s·u·Bᵀ: dB += s·dyᵀ·u, du = s·dy·B; u = x̃·Aᵀ: dA += duᵀ·x̃.
	be.MatMul(md.gb, dy, la.u, true, false, st.scale, 1)
	du := be.Empty(R, st.cfg.R)
	be.MatMul(du, dy, md.b, false, false, st.scale, 0)
	be.MatMul(md.ga, du, xin, true, false, 1, 1)
	if la.xd == nil {
		be.MatMul(dx, du, md.a, false, false, 1, 1)
	} else {
		// dx̃ = du·A; the dropout's backward is the same mask and scale.
		dxd := be.Empty(R, x.Cols())
		be.MatMul(dxd, du, md.a, false, false, 1, 0)
		be.Dropout(dxd, dxd, float32(st.cfg.Dropout), m.dropoutSeed(l, t))
		be.Add(dx, dxd)
		m.free(dxd)
	}
	m.free(du)
}

// needsF32Input reports whether target t's input must keep its fp32
// values (the dropout reads them), so the forward may not mark it
// ProductOnly.
func (m *Model) needsF32Input(t int) bool {
	return m.lora != nil && m.lora.cfg.Dropout > 0 && m.lora.layers[0][t] != nil
}

func (la *loraActs) release(m *Model) {
	m.free(la.u, la.xd)
	*la = loraActs{}
}

// splitmix64 is Steele et al.'s 64-bit mixer: the counter-based random
// numbers of the dropout masks (dropoutKeep), the same on every backend.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// dropoutKeep reports whether element i survives a dropout of rate p under
// seed: u = the top 24 bits of splitmix64(seed + i) / 2^24, kept when u ≥ p.
// lib/cuda/kernels/lora.cu computes the same bits.
func dropoutKeep(seed uint64, i int64, p float32) bool {
	u := float32(splitmix64(seed+uint64(i))>>40) * (1.0 / (1 << 24))
	return u >= p
}

// LoadAdapted loads the model in dir for inference (rollouts, generation,
// scoring) with the peft adapter in adapterDir, if any, applied unmerged:
// the base frozen (LoadFrozen: bf16 weights only on CUDA in bf16 mode, the
// same values the products would round to) under the adapter's fp32
// factors.
func LoadAdapted(dir, adapterDir string, be Backend) (*Model, error) {
	if adapterDir == "" {
		return LoadFrozen(dir, be)
	}
	a, err := peft.Read(adapterDir)
	if err != nil {
		return nil, err
	}
	m, err := LoadFrozen(dir, be)
	if err != nil {
		return nil, err
	}
	if err := m.LoadAdapter(a); err != nil {
		return nil, fmt.Errorf("%s: %w", adapterDir, err)
	}
	return m, nil
}
