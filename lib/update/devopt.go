package update

import (
	"fmt"
	"math"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
)

// deviceOpt is the optimizer step on the GPU, for a model on the CUDA
// backend trained in one process: the moments live in device tensors beside
// the weights, the gradient stays where the backward left it, and only the
// gradient norm comes back to the host. The arithmetic is lib/optim's: the
// same clipping coefficient (from a float64 norm whose sum runs in another
// order, so it agrees to rounding) and lib/cuda's AdamW kernel, bit for bit
// optim.AdamW given the same gradient. Its state converts to and from
// optim.State for the optimizer file, so a run can resume on either path.
type deviceOpt struct {
	be   *model.CUDA
	cfg  optim.AdamWConfig
	m, v map[string]model.Tensor
	step map[string]int64
}

// newDeviceOpt starts a device optimizer from st (the host optimizer's
// state, possibly empty).
func newDeviceOpt(m *model.Model, cfg optim.AdamWConfig, st optim.State) (*deviceOpt, error) {
	be, ok := m.Backend().(*model.CUDA)
	if !ok {
		return nil, fmt.Errorf("update: the device optimizer needs the CUDA backend, the model is on %s", m.Backend().Name())
	}
	d := &deviceOpt{be: be, cfg: cfg, m: map[string]model.Tensor{}, v: map[string]model.Tensor{}, step: map[string]int64{}}
	for _, name := range m.TrainableNames() {
		p := m.ParamTensor(name)
		r, c := p.Rows(), p.Cols()
		if n, ok := st.Steps[name]; ok {
			if len(st.ExpAvg[name]) != r*c {
				return nil, fmt.Errorf("update: optimizer state of %s has %d values, the parameter %d", name, len(st.ExpAvg[name]), r*c)
			}
			d.m[name] = be.FromHost(st.ExpAvg[name], r, c)
			d.v[name] = be.FromHost(st.ExpAvgSq[name], r, c)
			d.step[name] = n
		} else {
			d.m[name], d.v[name] = be.Zeros(r, c), be.Zeros(r, c)
		}
	}
	return d, nil
}

// state copies the moments to the host as an optim.State (parameters that
// never took a step are left out, as optim.AdamW leaves them).
func (d *deviceOpt) state() optim.State {
	st := optim.State{Steps: map[string]int64{}, ExpAvg: map[string][]float32{}, ExpAvgSq: map[string][]float32{}}
	for name, n := range d.step {
		if n == 0 {
			continue
		}
		st.Steps[name] = n
		st.ExpAvg[name] = d.be.ToHost(d.m[name], nil)
		st.ExpAvgSq[name] = d.be.ToHost(d.v[name], nil)
	}
	return st
}

// stepCount is optim.AdamW.StepCount.
func (d *deviceOpt) stepCount() int64 {
	var n int64
	for _, s := range d.step {
		n = max(n, s)
	}
	return n
}

// apply clips the model's accumulated gradient to maxNorm (as
// optim.ClipGradNorm) and takes one AdamW step at rate lr. It returns the
// norm before clipping; a non-finite norm is an error, and nothing changes.
func (d *deviceOpt) apply(m *model.Model, maxNorm, lr float64) (float64, error) {
	norm, err := clipOnDevice(d.be, m, maxNorm, lr)
	if err != nil {
		return norm, err
	}
	cfg := d.cfg
	for _, name := range m.TrainableNames() {
		d.step[name]++
		s := cuda.AdamWScalars(cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, lr, int(d.step[name]))
		d.be.AdamW(m.ParamTensor(name), m.GradTensor(name), d.m[name], d.v[name], s)
	}
	return norm, nil
}

// clipOnDevice takes the global norm of the gradient of the trainable
// parameters on the device, clips it to maxNorm (as optim.ClipGradNorm) and
// checks lr; it returns the norm before clipping, and a non-finite norm or a
// bad rate is an error.
func clipOnDevice(be *model.CUDA, m *model.Model, maxNorm, lr float64) (float64, error) {
	names := m.TrainableNames() // the adapter's factors when the base is frozen
	var total float64
	for _, name := range names {
		total += be.SumSquares(m.GradTensor(name))
	}
	norm := math.Sqrt(total)
	c, clip, err := optim.ClipCoef(norm, maxNorm)
	if err != nil {
		return norm, err
	}
	if clip {
		for _, name := range names {
			be.Scale(m.GradTensor(name), c)
		}
	}
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return norm, fmt.Errorf("optim: learning rate must be finite and ≥ 0, got %v", lr)
	}
	return norm, nil
}
