package cuda

import "math"

// AdamWStep holds the scalars passed to adamw_f32.
type AdamWStep struct {
	Decay   float32
	DoDecay int32
	W1      float32
	B2      float32
	W2      float32
	BC2Sqrt float32
	Eps     float32
	NegStep float32
}

// AdamWScalars returns the scalars of step (1-based) for a learning rate.
func AdamWScalars(beta1, beta2, eps, wd, lr float64, step int) AdamWStep {
	s := float64(step)
	bc1 := 1 - math.Pow(beta1, s)
	bc2 := 1 - math.Pow(beta2, s)
	dd := int32(0)
	if wd != 0 {
		dd = 1
	}
	return AdamWStep{
		Decay: float32(1 - lr*wd), DoDecay: dd, W1: float32(1 - beta1), B2: float32(beta2), W2: float32(1 - beta2),
		BC2Sqrt: float32(math.Sqrt(bc2)), Eps: float32(eps), NegStep: float32(-(lr / bc1)),
	}
}

// AdamW runs one fused AdamW step over n fp32 values on the device: p, m, v
// updated in place from g.
func (d *Device) AdamW(p, g, m, v Ptr, n int, s AdamWStep) error {
	f, err := d.Func("adamw", "adamw_f32")
	if err != nil {
		return err
	}
	grid := min(max((n+255)/256, 1), d.SMs*16)
	return d.Launch(f, Dim3{X: grid}, Dim3{X: 256}, 0, p, g, m, v, int64(n), s.Decay, s.DoDecay, s.W1, s.B2, s.W2, s.BC2Sqrt, s.Eps, s.NegStep)
}

// AdamW8 runs lib/optim's 8-bit AdamW step (Step8) over n values on the
// device: the master weights are p32 (fp32), or when p32 is 0 the bf16
// weights hi with their 16-bit remainders lo; g is the fp32 gradient; mq, vq
// the moments' codes (n bytes each) and ms, vs their per-256 scales; tabs the
// two codebooks (766 floats: optim.CodeExpAvg's values and midpoints, then
// optim.CodeExpAvgSq's) with their largest values mMax, vMax.
func (d *Device) AdamW8(p32, hi, lo, g, mq, ms, vq, vs Ptr, n int, tabs Ptr, mMax, vMax float32, s AdamWStep) error {
	f, err := d.Func("adamw", "adamw8_step")
	if err != nil {
		return err
	}
	grid := max((n+255)/256, 1)
	return d.Launch(f, Dim3{X: grid}, Dim3{X: 256}, 0, p32, hi, lo, g, mq, ms, vq, vs, int64(n), tabs, mMax, vMax,
		s.Decay, s.DoDecay, s.W1, s.B2, s.W2, s.BC2Sqrt, s.Eps, s.NegStep)
}

// SplitMaster writes the fp32 values p as bf16 weights hi and 16-bit
// remainders lo (optim.SplitMaster); with loIn ≠ 0 the low 16 bits of p are
// replaced by loIn's first.
func (d *Device) SplitMaster(p, hi, lo, loIn Ptr, n int) error {
	f, err := d.Func("adamw", "split_master")
	if err != nil {
		return err
	}
	grid := min(max((n+255)/256, 1), d.SMs*16)
	return d.Launch(f, Dim3{X: grid}, Dim3{X: 256}, 0, p, hi, lo, loIn, int64(n))
}
