package safetensors

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/tensor/half"
)

// TestLarge16Bit: tensors past parallelMin take the parallel conversions on
// both write and read; the values equal the element-by-element rounding.
func TestLarge16Bit(t *testing.T) {
	n := parallelMin + 12345
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(math.Sin(float64(i))*1e3) + float32(i%7)*1e-4
	}
	for _, dt := range []DType{BF16, F16} {
		path := filepath.Join(t.TempDir(), "big.safetensors")
		if err := WriteFile(path, []Tensor{{Name: "w", DType: dt, Shape: []int{n}, F32: src}}, nil); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := f.Raw("w")
		got, _, err := f.Float32("w")
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range src {
			var want uint16
			var back float32
			if dt == BF16 {
				want = half.F32ToBF16(v)
				back = half.BF16ToF32(want)
			} else {
				want = half.F32ToF16(v)
				back = half.F16ToF32(want)
			}
			if h := uint16(raw[2*i]) | uint16(raw[2*i+1])<<8; h != want || got[i] != back {
				t.Fatalf("%s [%d]: wrote %#04x read %v, want %#04x and %v", dt, i, h, got[i], want, back)
			}
		}
		f.Close()
	}
}
