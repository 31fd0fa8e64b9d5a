package encoder

import (
	"fmt"

	"github.com/mempo/mempo/lib/cuda"
)

// UseDevice moves the forward pass to device: "cpu" (or ""), "cuda", or
// "auto" for CUDA when usable and the CPU otherwise, with the reason in
// DeviceNote (as the model commands' --device). Asking for "cuda" where it is not
// usable is an error naming the reason, never a silent fallback. prec is
// the GPU forward's precision ("" = fp16); the CPU forward is fp32 only.
func (e *Encoder) UseDevice(device string, prec Precision) error {
	if prec != "" && prec != FP16 && prec != FP32 {
		return fmt.Errorf("precision %q: want fp16 or fp32", prec)
	}
	if (device == "" || device == "cpu") && prec == FP16 {
		return fmt.Errorf("precision fp16 is for the GPU forward (the CPU forward is fp32)")
	}
	if prec == "" {
		prec = FP16
	}
	e.DeviceNote = ""
	switch device {
	case "", "cpu":
		return e.useCPU()
	case "auto":
		if ok, why := cuda.Available(); !ok {
			e.useCPU()
			e.DeviceNote = "CUDA not usable: " + why
			return nil
		}
		if err := e.useCUDA(prec); err != nil {
			e.useCPU()
			e.DeviceNote = "CUDA not usable: " + err.Error()
		}
		return nil
	case "cuda":
		if ok, why := cuda.Available(); !ok {
			return fmt.Errorf("device cuda: not usable here: %s", why)
		}
		if err := e.useCUDA(prec); err != nil {
			return fmt.Errorf("device cuda: %w", err)
		}
		return nil
	}
	return fmt.Errorf("device %q: want cpu, cuda or auto", device)
}

func (e *Encoder) useCPU() error {
	e.Close()
	e.Device, e.Precision = "cpu", FP32
	return nil
}

func (e *Encoder) useCUDA(prec Precision) error {
	d, err := cuda.Default()
	if err != nil {
		return err
	}
	return e.useGPU(cudaDevice{d}, prec, "cuda")
}

// useGPU puts the weights on dev (a CUDA device, or the tests' emulation).
func (e *Encoder) useGPU(dev gpuDevice, prec Precision, name string) error {
	g, err := newGPUModel(e, dev, prec)
	if err != nil {
		return err
	}
	e.Close()
	e.mu.Lock()
	e.gpu = g
	e.mu.Unlock()
	e.Device, e.Precision = name, prec
	return nil
}

// Close releases the encoder's device memory; the encoder then runs on the
// CPU. It is a no-op on the CPU.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gpu == nil {
		return nil
	}
	lk := e.gpu.dev.Lock()
	lk.Lock()
	e.gpu.free()
	lk.Unlock()
	e.gpu = nil
	e.Device, e.Precision = "cpu", FP32
	return nil
}

// DeviceString describes where and how the forward pass runs, in one line:
// "cuda (NVIDIA H200 (sm_90, …), fp16)" or "cpu (fp32; CUDA not usable: …)".
func (e *Encoder) DeviceString() string {
	if e.gpu != nil {
		return fmt.Sprintf("%s (%s, %s)", e.Device, e.gpu.dev, e.Precision)
	}
	if e.DeviceNote != "" {
		return "cpu (fp32; " + e.DeviceNote + ")"
	}
	return "cpu (fp32)"
}
