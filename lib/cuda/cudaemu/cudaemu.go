// Package cudaemu runs lib/cuda's kernels/bert.cu and the GEMMs of
// lib/encoder's GPU forward on the CPU, so that the GPU code path (kernel
// index math, launch shapes, buffer offsets, strided-batched GEMM layouts)
// is tested where no GPU is; and kernels/flatsearch.cu with lib/cuda's flat
// search; and other modules for their tests (NewModule: decode.cu,
// sample.cu, attention2.cu, model.cu, attndecode.cu, attnmma.cu, adamw.cu,
// lora.cu and attngemm.cu compile; the tensor-core instructions of bert.cu,
// skinny.cu and attnmma.cu, inline PTX on the GPU, are the prelude's warp
// exchanges of the same fragments here). The kernel source is the one
// embedded in lib/cuda, compiled at first use by g++ with BERT_EMU and
// CUDA_EMU into a shared library (as NVRTC compiles it on a GPU) and loaded
// with dlopen; each CUDA thread is a fiber (prelude.cc), warp intrinsics
// included. GEMMs are plain loops with lib/cuda's row-major semantics and
// leading-dimension checks; they read fp32, fp16 or bf16 and write any of
// them (16-bit outputs rounded from the fp32 result, as cuBLAS's epilogue
// does).
//
// Memory is C memory with a 256-byte red zone on both sides of every
// allocation. Fresh allocations are filled with 0xFF bytes (NaN as fp32 and
// fp16), so a read of unwritten memory shows up as NaN in the results; red
// zones with 0xFE bytes (-1.7e38 as fp32, -inf-ish in sums), so that a read
// out of bounds shows in the results and any write out of bounds, NaN
// included, damages a red zone, reported by the launch after which it is
// found.
package cudaemu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef const char *(*emu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, uint64_t *);
static const char *call_launch(void *launch, void *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shmem, uint64_t *args) {
	return ((emu_launch_fn)launch)(k, gx, gy, gz, bx, by, bz, shmem, args);
}
typedef unsigned short (*f2h_fn)(float);
typedef float (*h2f_fn)(unsigned short);
static unsigned short call_f2h(void *f, float x) { return ((f2h_fn)f)(x); }
static float call_h2f(void *f, unsigned short h) { return ((h2f_fn)f)(h); }

static void *uptr(uintptr_t p) { return (void *)p; }

// bf2f and f2bf: bfloat16 bits ↔ float (round to nearest even, NaN kept).
static float bf2f(unsigned short h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static unsigned short f2bf(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

// op copies op(X) of a batch entry as rows×cols fp32 values, row r at
// out + r·cols: X row-major with leading dimension ld, transposed when t.
static void op(const char *x, int dt, int t, int rows, int cols, int ld, float *out, void *h2f) {
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++) {
			long long i = t ? (long long)c * ld + r : (long long)r * ld + c;
			out[(long long)r * cols + c] = dt == 2 ? call_h2f(h2f, ((const unsigned short *)x)[i])
			                               : dt == 14 ? bf2f(((const unsigned short *)x)[i]) : ((const float *)x)[i];
		}
}

// gemm: C[m×n] = alpha·op(A)·op(B) + beta·C per batch entry, row-major,
// accumulation in double; C is fp32, or fp16 when ct is 2.
static void gemm(int ta, int tb, int m, int n, int k, float alpha, uintptr_t a, int at, int lda, long long sa,
                 uintptr_t b, int bt, int ldb, long long sb, float beta, uintptr_t c, int ct, int ldc, long long sc, int batch,
                 void *h2f, void *f2h) {
	int ea = at == 2 || at == 14 ? 2 : 4, eb = bt == 2 || bt == 14 ? 2 : 4;
	float *A = (float *)malloc(sizeof(float) * ((size_t)m * k + 1));
	float *Bt = (float *)malloc(sizeof(float) * ((size_t)n * k + 1));
	for (int p = 0; p < batch; p++) {
		op((const char *)a + (long long)p * sa * ea, at, ta, m, k, lda, A, h2f);
		op((const char *)b + (long long)p * sb * eb, bt, !tb, n, k, ldb, Bt, h2f); // op(B)ᵀ: n×k
		float *C = (float *)c + (long long)p * sc;
		unsigned short *Ch = (unsigned short *)c + (long long)p * sc;
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				const float *x = A + (long long)i * k, *y = Bt + (long long)j * k;
				double acc = 0;
				for (int l = 0; l < k; l++) acc += (double)x[l] * y[l];
				float v = alpha * (float)acc;
				long long o = (long long)i * ldc + j;
				if (ct == 2) {
					if (beta != 0) v += beta * call_h2f(h2f, Ch[o]);
					Ch[o] = call_f2h(f2h, v);
				} else if (ct == 14) {
					if (beta != 0) v += beta * bf2f(Ch[o]);
					Ch[o] = f2bf(v);
				} else {
					if (beta != 0) v += beta * C[o];
					C[o] = v;
				}
			}
	}
	free(A);
	free(Bt);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	_ "embed"

	"github.com/mempo/mempo/lib/cuda"
)

//go:embed prelude.cc
var prelude string

const (
	redZone = 256
	redByte = 0xfe
)

// Device is the CPU emulation of a GPU running kernels/bert.cu (or another
// module of lib/cuda's kernels, NewModule).
type Device struct {
	module   string
	lib      unsafe.Pointer
	launch   unsafe.Pointer
	f2h, h2f unsafe.Pointer
	kernels  map[string]unsafe.Pointer
	rows     int

	mu      sync.Mutex // one launch at a time (the fibers share globals)
	lock    sync.Mutex // Lock()
	allocs  map[cuda.Ptr]int
	uploads []cuda.Ptr
	// Launches counts kernel launches and GEMMs (tests check coverage).
	Launches map[string]int
}

// Available says whether the emulation can run here, and why not.
func Available() (bool, string) {
	if runtime.GOARCH != "amd64" {
		return false, "the kernel emulation's stack switch is x86-64 assembly (GOARCH " + runtime.GOARCH + ")"
	}
	if _, err := exec.LookPath("g++"); err != nil {
		return false, "g++ not found: kernels/bert.cu cannot be compiled for the CPU here"
	}
	return true, ""
}

// New compiles kernels/bert.cu for the CPU in dir and loads it. rowThreads
// is the block size the forward uses for its one-block-per-row kernels.
func New(dir string, rowThreads int) (*Device, error) { return NewModule(dir, "bert", rowThreads) }

// NewModule compiles kernels/MODULE.cu of lib/cuda for the CPU in dir and
// loads it; Kernel launches its kernels.
func NewModule(dir, module string, rowThreads int) (*Device, error) {
	if ok, why := Available(); !ok {
		return nil, errors.New(why)
	}
	src, err := cuda.Source(module)
	if err != nil {
		return nil, err
	}
	// The kernels are listed from the preprocessed source: some modules
	// define them through macros (one per register count).
	pp := exec.Command("g++", "-E", "-P", "-x", "c++", "-DBERT_EMU", "-DCUDA_EMU", "-")
	pp.Stdin = strings.NewReader(src)
	expanded, err := pp.Output()
	if err != nil {
		return nil, fmt.Errorf("g++ -E kernels/%s.cu: %v", module, err)
	}
	wrappers, names, err := wrap(string(expanded))
	if err != nil {
		return nil, fmt.Errorf("kernels/%s.cu: %w", module, err)
	}
	cc := filepath.Join(dir, module+"_emu.cc")
	so := filepath.Join(dir, module+"_emu.so")
	// Dynamic shared memory (extern __shared__ T name[]) becomes the
	// emulation's per-block buffer.
	body := dynShared.ReplaceAllString(src, "DYN_SMEM($1, $2);")
	text := prelude + "\n#line 1 \"kernels/" + module + ".cu\"\n" + body + "\n" + wrappers
	if err := os.WriteFile(cc, []byte(text), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-DBERT_EMU", "-DCUDA_EMU", "-fno-strict-aliasing",
		"-Wno-unused-function", "-o", so, cc)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("g++ %s: %v\n%s", cc, err, out)
	}
	cso := C.CString(so)
	defer C.free(unsafe.Pointer(cso))
	lib := C.dlopen(cso, C.RTLD_NOW|C.RTLD_LOCAL)
	if lib == nil {
		return nil, fmt.Errorf("dlopen %s: %s", so, C.GoString(C.dlerror()))
	}
	d := &Device{module: module, lib: lib, kernels: map[string]unsafe.Pointer{}, rows: rowThreads, allocs: map[cuda.Ptr]int{}, Launches: map[string]int{}}
	sym := func(name string) (unsafe.Pointer, error) {
		c := C.CString(name)
		defer C.free(unsafe.Pointer(c))
		p := C.dlsym(lib, c)
		if p == nil {
			return nil, fmt.Errorf("dlsym %s: %s", name, C.GoString(C.dlerror()))
		}
		return p, nil
	}
	if d.launch, err = sym("emu_launch"); err != nil {
		return nil, err
	}
	if d.f2h, err = sym("emu_f2h"); err != nil {
		return nil, err
	}
	if d.h2f, err = sym("emu_h2f"); err != nil {
		return nil, err
	}
	for _, n := range names {
		if d.kernels[n], err = sym("emu_k_" + n); err != nil {
			return nil, err
		}
	}
	return d, nil
}

var dynShared = regexp.MustCompile(`extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\[\]\s*;`)

var kernelRE = regexp.MustCompile(`extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)`)

// wrap writes, for every kernel of src, a C function emu_k_NAME(uint64_t *a)
// that unpacks the launch's argument slots (packed as lib/cuda's Launch
// packs them) and calls the kernel.
func wrap(src string) (string, []string, error) {
	var b strings.Builder
	var names []string
	for _, m := range kernelRE.FindAllStringSubmatch(src, -1) {
		name := m[1]
		var args []string
		for i, p := range strings.Split(m[2], ",") {
			p = strings.Join(strings.Fields(p), " ")
			var typ string
			if j := strings.LastIndex(p, "*"); j >= 0 {
				typ = p[:j+1]
				args = append(args, fmt.Sprintf("(%s)(uintptr_t)a[%d]", typ, i))
				continue
			}
			if j := strings.LastIndex(p, " "); j >= 0 {
				typ = p[:j]
			}
			switch typ {
			case "int":
				args = append(args, fmt.Sprintf("(int)(uint32_t)a[%d]", i))
			case "long long":
				args = append(args, fmt.Sprintf("(long long)a[%d]", i))
			case "unsigned long long":
				args = append(args, fmt.Sprintf("(unsigned long long)a[%d]", i))
			case "float":
				args = append(args, fmt.Sprintf("__int_as_float((int)(uint32_t)a[%d])", i))
			default:
				return "", nil, fmt.Errorf("kernel %s: parameter %q of a type the emulation does not unpack", name, p)
			}
		}
		fmt.Fprintf(&b, "extern \"C\" void emu_k_%s(uint64_t *a) { %s(%s); }\n", name, name, strings.Join(args, ", "))
		names = append(names, name)
	}
	if len(names) == 0 {
		return "", nil, errors.New("no kernel found")
	}
	return b.String(), names, nil
}

// RowThreads is the block size of the row kernels.
func (d *Device) RowThreads() int { return d.rows }

// SetRowThreads changes it (a power of two, at most 256).
func (d *Device) SetRowThreads(n int) { d.rows = n }

// Lock serializes the device's users.
func (d *Device) Lock() sync.Locker { return &d.lock }

func (d *Device) String() string {
	return fmt.Sprintf("CPU emulation of kernels/%s.cu (%d-thread rows)", d.module, d.rows)
}

// F2H and H2F are the emulation's half conversions (tests check them
// against lib/safetensors').
func (d *Device) F2H(f float32) uint16 { return uint16(C.call_f2h(d.f2h, C.float(f))) }
func (d *Device) H2F(h uint16) float32 { return float32(C.call_h2f(d.h2f, C.ushort(h))) }

// Alloc returns bytes of poisoned memory between red zones.
func (d *Device) Alloc(bytes int) (cuda.Ptr, error) {
	if bytes <= 0 {
		bytes = 4
	}
	p := C.malloc(C.size_t(bytes + 2*redZone))
	if p == nil {
		return 0, fmt.Errorf("emulation: out of memory (%d bytes)", bytes)
	}
	C.memset(p, redByte, C.size_t(bytes+2*redZone))
	C.memset(unsafe.Add(p, redZone), 0xff, C.size_t(bytes))
	ptr := cuda.Ptr(uintptr(p) + redZone)
	d.allocs[ptr] = bytes
	return ptr, nil
}

// Free checks p's red zones and releases it.
func (d *Device) Free(p cuda.Ptr) error {
	if p == 0 {
		return nil
	}
	n, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("emulation: free of %#x, not an allocation", p)
	}
	err := d.checkZones(p, n)
	delete(d.allocs, p)
	C.free(ptrOf(p - redZone))
	return err
}

// Live is the number of allocations not freed.
func (d *Device) Live() int { return len(d.allocs) }

func (d *Device) checkZones(p cuda.Ptr, n int) error {
	for _, z := range []cuda.Ptr{p - redZone, p + cuda.Ptr(n)} {
		b := unsafe.Slice((*byte)(ptrOf(z)), redZone)
		for i, v := range b {
			if v != redByte {
				return fmt.Errorf("emulation: write out of bounds of the %d-byte allocation at %#x (byte %d of a red zone at %+d)",
					n, p, i, int64(z)-int64(p))
			}
		}
	}
	return nil
}

// Check checks the red zones of every live allocation (after kernels of
// other modules' emulations ran on this one's memory).
func (d *Device) Check() error { return d.checkAll("check") }

func (d *Device) checkAll(after string) error {
	ps := make([]cuda.Ptr, 0, len(d.allocs))
	for p := range d.allocs {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		if err := d.checkZones(p, d.allocs[p]); err != nil {
			return fmt.Errorf("after %s: %w", after, err)
		}
	}
	return nil
}

// inside reports whether [p, p+bytes) lies in one allocation.
func (d *Device) inside(p cuda.Ptr, bytes int) bool {
	for a, n := range d.allocs {
		if p >= a && p+cuda.Ptr(bytes) <= a+cuda.Ptr(n) {
			return true
		}
	}
	return false
}

func (d *Device) HtoD(dst cuda.Ptr, src unsafe.Pointer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if !d.inside(dst, bytes) {
		return fmt.Errorf("emulation: HtoD of %d bytes to %#x is outside every allocation", bytes, dst)
	}
	C.memcpy(ptrOf(dst), src, C.size_t(bytes))
	return nil
}

func (d *Device) DtoH(dst unsafe.Pointer, src cuda.Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if !d.inside(src, bytes) {
		return fmt.Errorf("emulation: DtoH of %d bytes from %#x is outside every allocation", bytes, src)
	}
	C.memcpy(dst, ptrOf(src), C.size_t(bytes))
	return nil
}

// Upload copies to a new allocation, kept until Close (lib/cuda's ring).
func (d *Device) Upload(src unsafe.Pointer, bytes int) (cuda.Ptr, error) {
	p, err := d.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	d.uploads = append(d.uploads, p)
	return p, d.HtoD(p, src, bytes)
}

// ReleaseUploads frees the uploads (lib/cuda reuses its ring instead).
func (d *Device) ReleaseUploads() error {
	var first error
	for _, p := range d.uploads {
		if err := d.Free(p); err != nil && first == nil {
			first = err
		}
	}
	d.uploads = nil
	return first
}

// Kernel runs a kernel of the module, then checks every red zone.
func (d *Device) Kernel(name string, grid, block cuda.Dim3, shmem int, args ...any) error {
	k, ok := d.kernels[name]
	if !ok {
		return fmt.Errorf("emulation: no kernel %q in kernels/%s.cu", name, d.module)
	}
	slots := (*[32]C.uint64_t)(C.malloc(32 * 8))
	defer C.free(unsafe.Pointer(slots))
	for i, a := range args {
		var v uint64
		switch x := a.(type) {
		case cuda.Ptr:
			v = uint64(x)
		case int:
			v = uint64(uint32(int32(x)))
		case int32:
			v = uint64(uint32(x))
		case uint32:
			v = uint64(x)
		case float32:
			v = uint64(math.Float32bits(x))
		case int64:
			v = uint64(x)
		case uint64:
			v = x
		default:
			return fmt.Errorf("emulation: launch %s: argument %d has type %T", name, i, a)
		}
		slots[i] = C.uint64_t(v)
	}
	g := func(x int) C.uint { return C.uint(max(x, 1)) }
	d.mu.Lock()
	msg := C.call_launch(d.launch, k, g(grid.X), g(grid.Y), g(grid.Z), g(block.X), g(block.Y), g(block.Z), C.uint(shmem), &slots[0])
	d.mu.Unlock()
	if msg != nil {
		return fmt.Errorf("emulation: launch %s: %s", name, C.GoString(msg))
	}
	d.Launches[name]++
	return d.checkAll(name)
}

func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, b cuda.Ptr, bt cuda.DataType, ldb int, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int) error {
	return d.GemmStridedBatched(transA, transB, m, n, k, alpha, a, at, lda, 0, b, bt, ldb, 0, beta, c, ct, ldc, 0, 1)
}

func (d *Device) GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, strideA int64, b cuda.Ptr, bt cuda.DataType, ldb int, strideB int64, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int, strideC int64, batch int) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	known := func(t cuda.DataType) bool { return t == cuda.F32 || t == cuda.F16 || t == cuda.BF16 }
	if !known(ct) || !known(at) || !known(bt) {
		return fmt.Errorf("emulation: GEMM types %d·%d→%d (fp32, fp16 or bf16)", at, bt, ct)
	}
	// Leading dimensions as cuBLAS checks them (row-major view).
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if lda < max(ac, 1) || ldb < max(bc, 1) || ldc < max(n, 1) {
		return fmt.Errorf("emulation: GEMM m=%d n=%d k=%d: lda %d ldb %d ldc %d too small (CUBLAS_STATUS_INVALID_VALUE)", m, n, k, lda, ldb, ldc)
	}
	esz := func(t cuda.DataType) int {
		if t == cuda.F16 || t == cuda.BF16 {
			return 2
		}
		return 4
	}
	span := func(stride int64, rows, cols, ld, e int) int {
		return (int(stride)*(batch-1) + (rows-1)*ld + cols) * e
	}
	if !d.inside(a, span(strideA, ar, ac, lda, esz(at))) || !d.inside(b, span(strideB, br, bc, ldb, esz(bt))) || !d.inside(c, span(strideC, m, n, ldc, esz(ct))) {
		return fmt.Errorf("emulation: GEMM m=%d n=%d k=%d batch %d reads or writes outside an allocation", m, n, k, batch)
	}
	C.gemm(b2i(transA), b2i(transB), C.int(m), C.int(n), C.int(k), C.float(alpha), C.uintptr_t(a), C.int(at), C.int(lda), C.longlong(strideA),
		C.uintptr_t(b), C.int(bt), C.int(ldb), C.longlong(strideB), C.float(beta), C.uintptr_t(c), C.int(ct), C.int(ldc), C.longlong(strideC), C.int(batch), d.h2f, d.f2h)
	name := "gemm"
	if batch > 1 || strideA != 0 {
		name = "gemm_strided_batched"
	}
	d.Launches[name]++
	return d.checkAll(name)
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// ptrOf turns an emulated device address (C memory) into a pointer.
func ptrOf(p cuda.Ptr) unsafe.Pointer { return C.uptr(C.uintptr_t(p)) }
