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
