package cuda

import (
	"math"
	"testing"
	"unsafe"
)

// TestGraphReplay captures two launches of a kernel (x += in, twice) and a
// memset, and replays the graph three times with in rewritten before each
// replay by a copy from pinned memory: nothing runs at capture time, and
// each replay reruns the captured work on the buffers' current contents.
func TestGraphReplay(t *testing.T) {
	d := devOrSkip(t)
	if !d.GraphsAvailable() {
		t.Skip("the driver has no CUDA graphs")
	}
	const n = 1000
	x := upload(t, d, make([]float32, n))
	in := upload(t, d, make([]float32, n))
	scratch := upload(t, d, make([]float32, n))
	f, err := d.Func("model", "add_f32")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if !d.Capturing() {
		t.Fatal("not capturing after BeginCapture")
	}
	for i := 0; i < 2; i++ {
		if err := d.Launch(f, Dim3{X: 4}, Dim3{X: 256}, 0, x, in, int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Memset32(scratch, math.Float32bits(7), n); err != nil {
		t.Fatal(err)
	}
	g, err := d.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if d.Capturing() {
		t.Fatal("still capturing after EndCapture")
	}
	got := make([]float32, n)
	if err := d.DtoH(unsafe.Pointer(&got[0]), x, 4*n); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("x[%d] = %g after capture: the captured work ran", i, v)
		}
	}
	host, err := d.PinnedAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Free()
	hv := unsafe.Slice((*float32)(unsafe.Pointer(&host.Bytes()[0])), n)
	want := make([]float64, n)
	for rep := 1; rep <= 3; rep++ {
		for i := range hv {
			hv[i] = float32(rep*i%17) - 8
			want[i] += 2 * float64(hv[i])
		}
		if err := d.CopyIn(in, host, 4*n); err != nil {
			t.Fatal(err)
		}
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CopyOut(host, x, 4*n); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range hv {
		if float64(hv[i]) != want[i] {
			t.Fatalf("x[%d] = %g after 3 replays, want %g", i, hv[i], want[i])
		}
	}
	if err := d.DtoH(unsafe.Pointer(&got[0]), scratch, 4*n); err != nil {
		t.Fatal(err)
	}
	if got[0] != 7 || got[n-1] != 7 {
		t.Fatalf("captured memset not replayed: %g %g", got[0], got[n-1])
	}
}
