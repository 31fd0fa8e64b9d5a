package model

import "fmt"

// CUDAAvailable reports whether a CUDA backend can run here. No CUDA backend
// is built yet, so it is always false.
func CUDAAvailable() bool { return false }

// NewBackend returns the backend for a --device value: "cpu", "cuda", or ""
// / "auto" for CUDA when usable and the CPU otherwise. Asking for "cuda" where
// it is not usable is an error, never a silent fallback.
func NewBackend(device string) (Backend, error) {
	switch device {
	case "", "auto":
		return NewCPU(), nil
	case "cpu":
		return NewCPU(), nil
	case "cuda":
		return nil, fmt.Errorf("device cuda: no CUDA backend is available (this build has only the CPU backend)")
	}
	return nil, fmt.Errorf("device %q: want cpu or cuda", device)
}
