package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/testenv"
)

func devOrSkip(t *testing.T) *Device {
	t.Helper()
	ok, why := Available()
	testenv.NeedCUDA(t, ok, why)
	d, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAvailableSaysWhy(t *testing.T) {
	ok, why := Available()
	if !ok && (why == "" || strings.Contains(why, "\n")) {
		t.Errorf("reason %q: want one line", why)
	}
	if ok {
		d, _ := Default()
		maj, min, _ := NVRTCVersion()
		t.Logf("device %s, nvrtc %d.%d, libraries %v", d, maj, min, LibPaths())
	} else {
		t.Logf("no CUDA: %s", why)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv(envconfig.CUDACache.Name, "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	if got := CacheDir(); got != "/x/mempo/cuda" {
		t.Errorf("CacheDir = %q", got)
	}
}

func upload(t *testing.T, d *Device, v []float32) Ptr {
	p, err := d.Alloc(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.HtoD(p, unsafe.Pointer(&v[0]), 4*len(v)); err != nil {
		t.Fatal(err)
	}
	return p
}

func download(t *testing.T, d *Device, p Ptr, n int) []float32 {
	v := make([]float32, n)
	if err := d.DtoH(unsafe.Pointer(&v[0]), p, 4*n); err != nil {
		t.Fatal(err)
	}
	return v
}

// A copy larger than the pinned staging buffer, in and out, unchanged.
func TestRoundTrip(t *testing.T) {
	d := devOrSkip(t)
	n := pinnedBytes/4*2 + 12345
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i) * 0.5
	}
	p := upload(t, d, v)
	defer d.Free(p)
	q, _ := d.Alloc(4 * n)
	defer d.Free(q)
	if err := d.DtoD(q, p, 4*n); err != nil {
		t.Fatal(err)
	}
	w := download(t, d, q, n)
	for i := range v {
		if v[i] != w[i] {
			t.Fatalf("element %d: %g, want %g", i, w[i], v[i])
		}
	}
}

// GEMM in fp32 against a float64 reference: well under TF32's 1e-3.
func TestGemmFP32NoTF32(t *testing.T) {
	d := devOrSkip(t)
	r := rand.New(rand.NewPCG(1, 2))
	m, n, k := 67, 129, 515
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	pa, pb := upload(t, d, a), upload(t, d, b)
	pc, _ := d.Alloc(4 * m * n)
	d.Memset32(pc, 0x7fc00000, m*n) // NaN
	if err := d.Gemm(false, false, m, n, k, 1, pa, F32, k, pb, F32, n, 0, pc, F32, n); err != nil {
		t.Fatal(err)
	}
	c := download(t, d, pc, m*n)
	var num, den float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += float64(a[i*k+l]) * float64(b[l*n+j])
			}
			num += (float64(c[i*n+j]) - s) * (float64(c[i*n+j]) - s)
			den += s * s
		}
	}
	if e := math.Sqrt(num / den); !(e < 1e-5) {
		t.Errorf("relative error %.3g: want < 1e-5 (fp32, no TF32)", e)
	}
}

// The fused AdamW kernel gives lib/optim's CPU AdamW bit for bit.
func TestAdamWKernelMatchesOptim(t *testing.T) {
	d := devOrSkip(t)
	r := rand.New(rand.NewPCG(3, 4))
	n := 100003
	theta := make([]float32, n)
	for i := range theta {
		theta[i] = float32(r.NormFloat64())
	}
	cfg := optim.DefaultAdamW()
	cfg.WeightDecay = 0.01
	opt, err := optim.NewAdamW(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cpu := append([]float32(nil), theta...)
	pp := upload(t, d, theta)
	pm, _ := d.Alloc(4 * n)
	pv, _ := d.Alloc(4 * n)
	d.Memset32(pm, 0, n)
	d.Memset32(pv, 0, n)
	f, err := d.Func("adamw", "adamw_f32")
	if err != nil {
		t.Fatal(err)
	}
	lr := 1e-3
	for step := 1; step <= 3; step++ {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32(r.NormFloat64())
		}
		if err := opt.Step([]optim.Param{{Name: "w", Data: cpu, Grad: g}}, lr); err != nil {
			t.Fatal(err)
		}
		pg := upload(t, d, g)
		s := AdamWScalars(cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, lr, step)
		if err := d.Launch(f, Dim3{X: 256}, Dim3{X: 256}, 0, pp, pg, pm, pv, int64(n), s.Decay, s.DoDecay, s.W1, s.B2, s.W2, s.BC2Sqrt, s.Eps, s.NegStep); err != nil {
			t.Fatal(err)
		}
		d.Free(pg)
	}
	got := download(t, d, pp, n)
	diff := 0
	for i := range got {
		if got[i] != cpu[i] {
			diff++
		}
	}
	if diff != 0 {
		t.Errorf("%d of %d weights differ from lib/optim", diff, n)
	}
}

func TestCompileErrorHasLog(t *testing.T) {
	d := devOrSkip(t)
	_, err := nvrtcCompile("bad", "extern \"C\" __global__ void f() { undefined_thing(); }", []string{"--gpu-architecture=" + d.Arch()})
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") {
		t.Errorf("error %v: want NVRTC's log naming the identifier", err)
	}
}
