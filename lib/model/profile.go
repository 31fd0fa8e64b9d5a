package model

// Kernel times: where the backend's device time goes, by what the model was
// doing (prefill, decode, score), for MEMPO_CUDA_KERNEL_TIMES.

// profiler is a backend that can time its kernels (CUDA).
type profiler interface {
	StartProfile()
	SetProfilePhase(phase string)
	StopProfile() (ms map[string]float64, calls map[string]int)
}

// setPhase labels the kernels timed from now on, when the backend times
// them.
func (m *Model) setPhase(phase string) {
	if p, ok := m.be.(profiler); ok {
		p.SetProfilePhase(phase)
	}
}

// StartKernelTimes starts timing every kernel and GEMM of the model's
// backend (CUDA events; the queue is synchronized every few thousand
// launches, so it costs a little time), labelled by phase: "prefill" and
// "decode" in Generate, "score" in the LogProbs calls. False where the
// backend cannot.
func (m *Model) StartKernelTimes() bool {
	p, ok := m.be.(profiler)
	if ok {
		p.StartProfile()
	}
	return ok
}

// StopKernelTimes stops timing and returns the milliseconds and launches of
// each "phase kernel" since StartKernelTimes (empty where nothing was timed).
func (m *Model) StopKernelTimes() (ms map[string]float64, calls map[string]int) {
	if p, ok := m.be.(profiler); ok {
		return p.StopProfile()
	}
	return map[string]float64{}, map[string]int{}
}
