//go:build !linux

package tokenizer

func threadCPU() float64 { return 0 }
