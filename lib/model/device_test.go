package model

import (
	"strings"
	"testing"
)

func TestNewBackend(t *testing.T) {
	if be, err := NewBackend("cpu"); err != nil || be.Name() != "cpu" {
		t.Fatalf("cpu: %v, %v", be, err)
	}
	if _, err := NewBackend("tpu"); err == nil || !strings.Contains(err.Error(), `"tpu"`) || !strings.Contains(err.Error(), "cuda-bf16") {
		t.Errorf("tpu: %v", err)
	}
	for _, d := range []string{"cuda", "cuda-bf16"} {
		be, err := NewBackend(d)
		if !CUDAAvailable() {
			if err == nil || !strings.Contains(err.Error(), "device "+d+": not usable here") {
				t.Errorf("%s without a GPU: %v", d, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if d == "cuda-bf16" && !be.(*CUDA).BF16() {
			t.Errorf("cuda-bf16 is not in bf16 mode")
		}
	}
}
