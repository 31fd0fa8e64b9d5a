package model

import "fmt"

// CUDAAvailable reports whether the CUDA backend can run here (a driver and
// a device are present, and MEMPO_CUDA_DISABLE is not 1).
func CUDAAvailable() bool {
	ok, _ := CUDAAvailableReason()
	return ok
}

// NewBackend returns the backend for a --device value: "cpu", "cuda" (fp32
// mode, or bf16 mode when MEMPO_CUDA_BF16=1), "cuda-bf16" (bf16 mode), or ""
// / "auto" for CUDA when usable and the CPU otherwise. Asking for CUDA where
// it is not usable is an error naming the reason, never a silent fallback.
func NewBackend(device string) (Backend, error) {
	switch device {
	case "", "auto":
		if CUDAAvailable() {
			if be, err := NewCUDA(); err == nil {
				return be, nil
			}
		}
		return NewCPU(), nil
	case "cpu":
		return NewCPU(), nil
	case "cuda", "cuda-bf16":
		be, err := NewCUDA()
		if err != nil {
			return nil, fmt.Errorf("device %s: not usable here: %v", device, err)
		}
		if device == "cuda-bf16" {
			be.SetBF16(true)
		}
		return be, nil
	}
	return nil, fmt.Errorf("device %q: want cpu, cuda, cuda-bf16 or auto", device)
}
