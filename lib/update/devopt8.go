package update

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/tensor"
	"github.com/mempo/mempo/lib/tensor/half"
)

// deviceOpt8 is the 8-bit AdamW (optim.AdamW8) on the GPU: moments as
// codes and scales in device memory, the step lib/cuda's adamw8_step kernel
// (bit for bit optim.Step8). In bf16 mode each weight matrix keeps no fp32
// copy: its bf16 weight (what the products read) and a 16-bit remainder
// make the fp32 master weight (optim.SplitMaster), 4 bytes a parameter
// instead of fp32's 4 plus bf16's 2. Vectors and every parameter in fp32
// mode keep their fp32 master in the model's tensor.
//
// The remainders are read and written by the step alone, so they live in
// host memory and pass through the GPU one parameter at a time during the
// step (a copy each way, 2 B a parameter): the forward and backward then
// see 8 B a parameter of state instead of 10, which at Qwen2.5-7B is the
// 14 GiB between an 81 GiB and a 67 GiB update (docs/BENCHMARKS.md).
type deviceOpt8 struct {
	be    *model.CUDA
	cfg   optim.AdamWConfig
	slots map[string]*slot8
	tabs  cuda.Ptr
	hold  []model.Tensor // buffers owned here (kept reachable)
}

type slot8 struct {
	n, rows, cols  int
	step           int64
	split          bool
	hi             cuda.Ptr // split: bf16 weight
	lo             []int16  // split: the remainders, in host memory
	mq, ms, vq, vs cuda.Ptr
}

// leanTables packs the two codebooks as adamw8_step reads them.
func leanTables() []float32 {
	cm, cv := optim.CodeExpAvg, optim.CodeExpAvgSq
	out := append([]float32(nil), cm.Vals...)
	out = append(out, cm.Mids...)
	out = append(out, cv.Vals...)
	return append(out, cv.Mids...)
}

// newDeviceOpt8 starts the device optimizer from st (possibly empty); the
// model's weights are a lean checkpoint's bf16 weights, or fp32 weights
// when st has no remainders. st's remainders complete the master weights.
// In bf16 mode the matrices are split and their fp32 buffers freed here.
func newDeviceOpt8(m *model.Model, cfg optim.AdamWConfig, st optim.State8) (*deviceOpt8, error) {
	be, ok := m.Backend().(*model.CUDA)
	if !ok {
		return nil, fmt.Errorf("update: the device optimizer needs the CUDA backend, the model is on %s", m.Backend().Name())
	}
	d := &deviceOpt8{be: be, cfg: cfg, slots: map[string]*slot8{}}
	tabs := leanTables()
	t, p := be.Bytes(4 * len(tabs))
	be.CopyFromHost(p, unsafe.Pointer(&tabs[0]), 4*len(tabs))
	d.hold, d.tabs = append(d.hold, t), p
	alloc := func(n int) cuda.Ptr {
		t, p := be.Bytes(n)
		d.hold = append(d.hold, t)
		return p
	}
	for _, name := range m.ParamNames() {
		pt := m.ParamTensor(name)
		s := &slot8{n: pt.Rows() * pt.Cols(), rows: pt.Rows(), cols: pt.Cols()}
		nb := optim.Blocks8(s.n)
		s.mq, s.vq, s.ms, s.vs = alloc(s.n), alloc(s.n), alloc(4*nb), alloc(4*nb)
		if n, ok := st.Steps[name]; ok {
			mo, vo := st.ExpAvg[name], st.ExpAvgSq[name]
			if len(mo.Q) != s.n {
				return nil, fmt.Errorf("update: optimizer state of %s has %d values, the parameter %d", name, len(mo.Q), s.n)
			}
			be.CopyFromHost(s.mq, unsafe.Pointer(&mo.Q[0]), s.n)
			be.CopyFromHost(s.vq, unsafe.Pointer(&vo.Q[0]), s.n)
			be.CopyFromHost(s.ms, unsafe.Pointer(&mo.Scale[0]), 4*nb)
			be.CopyFromHost(s.vs, unsafe.Pointer(&vo.Scale[0]), 4*nb)
			s.step = n
		}
		lo, haveLo := st.MasterLo[name]
		if haveLo && len(lo) != s.n {
			return nil, fmt.Errorf("update: master remainder of %s has %d values, the parameter %d", name, len(lo), s.n)
		}
		if be.BF16() && s.rows > 1 && s.cols > 1 {
			s.split = true
			tmp, dlo := be.Bytes(2 * s.n)
			var loIn cuda.Ptr
			if haveLo {
				be.CopyFromHost(dlo, unsafe.Pointer(&lo[0]), 2*s.n)
				loIn = dlo // read then written element by element
			}
			hi, err := be.DropF32(pt, func(f32, bf16 cuda.Ptr) error {
				return be.Device().SplitMaster(f32, bf16, dlo, loIn, s.n)
			})
			if err != nil {
				return nil, err
			}
			s.hi = hi
			if !haveLo {
				lo = make([]int16, s.n)
			}
			be.CopyToHost(unsafe.Pointer(&lo[0]), dlo, 2*s.n)
			s.lo = lo
			be.Free(tmp)
		} else if haveLo {
			if err := m.SetParam(name, joinHost(m.Param(name), lo)); err != nil {
				return nil, err
			}
		}
		d.slots[name] = s
	}
	be.FlushPool()
	return d, nil
}

func (d *deviceOpt8) stepCount() int64 {
	var n int64
	for _, s := range d.slots {
		n = max(n, s.step)
	}
	return n
}

// apply is deviceOpt.apply with the 8-bit step (the kernel's scalars are
// optim.Scalars8's, computed the same way by cuda.AdamWScalars).
func (d *deviceOpt8) apply(m *model.Model, maxNorm, lr float64) (float64, error) {
	norm, err := clipOnDevice(d.be, m, maxNorm, lr)
	if err != nil {
		return norm, err
	}
	names := m.ParamNames()
	cm, cv := optim.CodeExpAvg, optim.CodeExpAvgSq
	for _, name := range names {
		s := d.slots[name]
		s.step++
		sc := cuda.AdamWScalars(d.cfg.Beta1, d.cfg.Beta2, d.cfg.Eps, d.cfg.WeightDecay, lr, int(s.step))
		var p32, dlo cuda.Ptr
		var tmp model.Tensor
		if !s.split {
			p32 = d.be.DevicePtr(m.ParamTensor(name))
			d.be.Touch(m.ParamTensor(name))
		} else {
			tmp, dlo = d.be.Bytes(2 * s.n)
			d.be.CopyFromHost(dlo, unsafe.Pointer(&s.lo[0]), 2*s.n)
		}
		g := d.be.DevicePtr(m.GradTensor(name))
		if err := d.be.Device().AdamW8(p32, s.hi, dlo, g, s.mq, s.ms, s.vq, s.vs, s.n, d.tabs, cm.Max, cv.Max, sc); err != nil {
			return norm, err
		}
		if s.split {
			d.be.CopyToHost(unsafe.Pointer(&s.lo[0]), dlo, 2*s.n)
			d.be.Free(tmp)
		}
	}
	return norm, nil
}

// state copies the moments to the host, and returns them with the
// remainders (shared with the optimizer: written out before the next step)
// and the bf16 weights of the checkpoint (as float32 values) beside it.
func (d *deviceOpt8) state(m *model.Model) (optim.State8, map[string][]float32) {
	st := optim.NewState8()
	weights := map[string][]float32{}
	for _, name := range m.ParamNames() {
		s := d.slots[name]
		if s.split {
			hi := make([]uint16, s.n)
			d.be.CopyToHost(unsafe.Pointer(&hi[0]), s.hi, 2*s.n)
			lo := s.lo // shared: valid until the next step
			w := make([]float32, s.n)
			tensor.Parallel(s.n, 1<<16, func(a, b int) {
				for i := a; i < b; i++ {
					w[i] = half.BF16ToF32(hi[i])
				}
			})
			weights[name], st.MasterLo[name] = w, lo
		} else {
			weights[name], st.MasterLo[name] = splitHost(m.Param(name))
		}
		if s.step == 0 {
			continue
		}
		nb := optim.Blocks8(s.n)
		mo := optim.Moment8{Q: make([]uint8, s.n), Scale: make([]float32, nb)}
		vo := optim.Moment8{Q: make([]uint8, s.n), Scale: make([]float32, nb)}
		d.be.CopyToHost(unsafe.Pointer(&mo.Q[0]), s.mq, s.n)
		d.be.CopyToHost(unsafe.Pointer(&vo.Q[0]), s.vq, s.n)
		d.be.CopyToHost(unsafe.Pointer(&mo.Scale[0]), s.ms, 4*nb)
		d.be.CopyToHost(unsafe.Pointer(&vo.Scale[0]), s.vs, 4*nb)
		st.Steps[name], st.ExpAvg[name], st.ExpAvgSq[name] = s.step, mo, vo
	}
	return st, weights
}

// splitHost splits fp32 master weights into the bf16 weights (as float32
// values) and the remainders.
func splitHost(x []float32) ([]float32, []int16) {
	w, lo := make([]float32, len(x)), make([]int16, len(x))
	for i, v := range x {
		h, l := optim.SplitMaster(v)
		w[i], lo[i] = half.BF16ToF32(h), l
	}
	return w, lo
}

// joinHost completes bf16 weights with their remainders: the fp32 master
// weights (the low 16 bits of w are replaced).
func joinHost(w []float32, lo []int16) []float32 {
	out := make([]float32, len(w))
	for i, v := range w {
		out[i] = optim.JoinMaster(uint16(math.Float32bits(v)>>16), lo[i])
	}
	return out
}
