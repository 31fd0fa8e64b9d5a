package model

import "fmt"

// CUDAAvailable reports whether the CUDA backend can run here (a driver and
// a device are present, and MEMPO_CUDA_DISABLE is not 1).
func CUDAAvailable() bool {
	ok, _ := CUDAAvailableReason()
	return ok
}

// NewBackend returns the backend for a --device value: "cpu", "cuda", or ""
// / "auto" for CUDA when usable and the CPU otherwise. Asking for "cuda" where
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
	case "cuda":
		be, err := NewCUDA()
		if err != nil {
			return nil, fmt.Errorf("device cuda: not usable here: %v", err)
		}
		return be, nil
	}
	return nil, fmt.Errorf("device %q: want cpu or cuda", device)
}
