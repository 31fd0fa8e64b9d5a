// Package cuda is mempo's binding to NVIDIA GPUs: the CUDA driver API, NVRTC
// and cuBLAS reached through dlopen/dlsym from cgo (binding.c), with no CUDA
// header or toolkit needed at build time. One binary serves CPU-only and GPU
// machines: Available says whether a GPU can be used here and, if not, why.
//
// Kernels are CUDA C sources embedded in the binary (kernels/*.cu), compiled
// by NVRTC for the device's architecture at first use and cached on disk
// (nvrtc.go). Device memory comes from the driver's stream-ordered pool
// (cuMemAllocAsync); host↔device copies go through pinned staging buffers.
package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "binding.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/mempo/mempo/lib/envconfig"
)

// Error is a failed CUDA, NVRTC or cuBLAS call: the call and the library's
// name for the error code.
type Error struct {
	Call string
	Code int
	Name string
}

func (e *Error) Error() string { return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code) }

func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: C.GoString(C.mcuErrorName(r))}
}

func checkBlas(call string, r C.cublasStatus_t) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: cublasStatusName(int(r))}
}

func cublasStatusName(s int) string {
	switch s {
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return "CUBLAS_STATUS_UNKNOWN"
}

// libDirs are the directories searched after MEMPO_CUDA_LIB_DIR and before
// the bare soname (which the dynamic loader resolves through LD_LIBRARY_PATH
// and the ldconfig cache): the toolkit's usual place and the lib folders of
// the pip nvidia-* wheels, where PyTorch keeps its CUDA libraries.
func libDirs() []string {
	var dirs []string
	if v := envconfig.CUDALibDir.Get(); v != "" {
		dirs = append(dirs, filepath.SplitList(v)...)
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu")
	var pats []string
	for _, root := range []string{"/usr/local/lib/python3*/dist-packages", "/usr/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"} {
		pats = append(pats, root+"/nvidia/*/lib", root+"/nvidia/*/lib64")
	}
	if home, err := os.UserHomeDir(); err == nil {
		pats = append(pats, home+"/.local/lib/python3*/site-packages/nvidia/*/lib")
	}
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		pats = append(pats, v+"/lib/python3*/site-packages/nvidia/*/lib")
	}
	for _, p := range pats {
		m, _ := filepath.Glob(p)
		dirs = append(dirs, m...)
	}
	return dirs
}

// findLib returns the first candidate file that exists in the search
// directories, else the bare soname (left to the dynamic loader).
func findLib(dirs []string, names ...string) string {
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return names[0]
}

// findNear prefers a library in dir (where a sibling was found).
func findNear(dir string, dirs []string, names ...string) string {
	if dir != "" && dir != "." {
		dirs = append([]string{dir}, dirs...)
	}
	return findLib(dirs, names...)
}

var (
	loadOnce sync.Once
	loadErr  error
	libPaths = map[string]string{}
)

func cstr(s string) *C.char { return C.CString(s) }

func load() error {
	loadOnce.Do(func() {
		dirs := libDirs()
		// The driver comes from the system (ldconfig), not a wheel.
		drv := "libcuda.so.1"
		if v := envconfig.CUDALibDir.Get(); v != "" {
			for _, d := range filepath.SplitList(v) {
				if _, err := os.Stat(filepath.Join(d, "libcuda.so.1")); err == nil {
					drv = filepath.Join(d, "libcuda.so.1")
					break
				}
			}
		}
		p := cstr(drv)
		defer C.free(unsafe.Pointer(p))
		if e := C.mempo_load_driver(p); e != nil {
			loadErr = fmt.Errorf("no CUDA driver (%s: %s)", drv, C.GoString(e))
			return
		}
		libPaths["driver"] = drv

		nvrtc := findLib(dirs, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
		builtins := findNear(filepath.Dir(nvrtc), dirs, "libnvrtc-builtins.so.13.0", "libnvrtc-builtins.so.13.1", "libnvrtc-builtins.so.13.2", "libnvrtc-builtins.so.12.9", "libnvrtc-builtins.so.12.8", "libnvrtc-builtins.so.12.6", "libnvrtc-builtins.so.12.4")
		if !strings.Contains(builtins, "/") {
			builtins = ""
		}
		pn, pb := cstr(nvrtc), cstr(builtins)
		defer C.free(unsafe.Pointer(pn))
		defer C.free(unsafe.Pointer(pb))
		if e := C.mempo_load_nvrtc(pn, pb); e != nil {
			loadErr = fmt.Errorf("no NVRTC (%s: %s); set MEMPO_CUDA_LIB_DIR to the folder of libnvrtc.so", nvrtc, C.GoString(e))
			return
		}
		libPaths["nvrtc"] = nvrtc

		blas := findLib(dirs, "libcublas.so.13", "libcublas.so.12", "libcublas.so")
		lt := findNear(filepath.Dir(blas), dirs, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so")
		if !strings.Contains(lt, "/") {
			lt = ""
		}
		pl, pc := cstr(lt), cstr(blas)
		defer C.free(unsafe.Pointer(pl))
		defer C.free(unsafe.Pointer(pc))
		if e := C.mempo_load_cublas(pl, pc); e != nil {
			loadErr = fmt.Errorf("no cuBLAS (%s: %s); set MEMPO_CUDA_LIB_DIR to the folder of libcublas.so", blas, C.GoString(e))
			return
		}
		libPaths["cublas"] = blas
		if err := check("cuInit", C.mcuInit(0)); err != nil {
			loadErr = err
			return
		}
		var n C.int
		if err := check("cuDeviceGetCount", C.mcuDeviceGetCount(&n)); err != nil {
			loadErr = err
			return
		}
		if n == 0 {
			loadErr = errors.New("the CUDA driver sees no GPU")
		}
	})
	return loadErr
}

// Available reports whether a CUDA GPU can be used here; when it cannot, the
// reason is one line (no driver, no NVRTC, no cuBLAS, no device, …).
// MEMPO_CUDA_DISABLE=1 switches the GPU off.
func Available() (bool, string) {
	if envconfig.CUDADisable.On() {
		return false, "MEMPO_CUDA_DISABLE=1"
	}
	if err := load(); err != nil {
		return false, err.Error()
	}
	if _, err := Default(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// LibPaths says which library files were loaded (for logs).
func LibPaths() map[string]string {
	out := map[string]string{}
	for k, v := range libPaths {
		out[k] = v
	}
	return out
}

// Debug is MEMPO_CUDA_DEBUG=1: synchronize and check after every launch, so a
// failing kernel is named at its own launch.
var Debug = envconfig.CUDADebug.On()

// Ptr is a device address.
type Ptr uint64

// Device is one GPU with its primary context, one stream, a cuBLAS handle and
// the kernels compiled so far. Its methods may be called from any goroutine
// but not concurrently with each other.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int // compute capability
	SMs          int
	TotalMem     int64
	MaxSmemOptin int
	DriverVer    int

	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream
	blas   C.cublasHandle_t
	async  bool

	capturing bool // between BeginCapture and EndCapture (graph.go)

	mu      sync.Mutex // guards staging and funcs
	pinned  unsafe.Pointer
	pinSize int
	funcs   map[funcKey]*Function
	mods    map[string]C.CUmodule

	// Upload ring: small per-call arrays (ids, positions, tile lists) are
	// staged in pinned memory and copied to a device ring at the same offset;
	// a region is reused only after the stream is synchronized at a wrap.
	ringHost unsafe.Pointer
	ringDev  Ptr
	ringOff  int
	ringGen  uint64 // bumped at every wrap

	// Deferred frees (from finalizers), drained on the caller's goroutine.
	freeMu  sync.Mutex
	pending []Ptr
}

var (
	defOnce sync.Once
	defDev  *Device
	defErr  error
)

// Default opens device 0 once (MEMPO_CUDA_DEVICE picks another ordinal).
func Default() (*Device, error) {
	defOnce.Do(func() {
		if err := load(); err != nil {
			defErr = err
			return
		}
		ord := 0
		if v := envconfig.CUDADevice.Get(); v != "" {
			fmt.Sscan(v, &ord)
		}
		defDev, defErr = open(ord)
	})
	return defDev, defErr
}

const pinnedBytes = 32 << 20

func open(ord int) (*Device, error) {
	d := &Device{Ordinal: ord, funcs: map[funcKey]*Function{}, mods: map[string]C.CUmodule{}}
	if err := check("cuDeviceGet", C.mcuDeviceGet(&d.dev, C.int(ord))); err != nil {
		return nil, err
	}
	attr := func(a int) (int, error) {
		var v C.int
		err := check("cuDeviceGetAttribute", C.mcuDeviceGetAttribute(&v, C.int(a), d.dev))
		return int(v), err
	}
	var err error
	if d.Major, err = attr(75); err != nil {
		return nil, err
	}
	if d.Minor, err = attr(76); err != nil {
		return nil, err
	}
	if d.SMs, err = attr(16); err != nil {
		return nil, err
	}
	if d.MaxSmemOptin, err = attr(97); err != nil {
		return nil, err
	}
	var name [256]C.char
	if err := check("cuDeviceGetName", C.mcuDeviceGetName(&name[0], 256, d.dev)); err != nil {
		return nil, err
	}
	d.Name = C.GoString(&name[0])
	var tm C.size_t
	if err := check("cuDeviceTotalMem", C.mcuDeviceTotalMem(&tm, d.dev)); err != nil {
		return nil, err
	}
	d.TotalMem = int64(tm)
	var dv C.int
	if err := check("cuDriverGetVersion", C.mcuDriverGetVersion(&dv)); err != nil {
		return nil, err
	}
	d.DriverVer = int(dv)
	if err := check("cuDevicePrimaryCtxRetain", C.mcuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return nil, err
	}
	if err := check("cuCtxSetCurrent", C.mcuCtxSetCurrent(d.ctx)); err != nil {
		return nil, err
	}
	C.mempo_set_ctx(d.ctx)
	if err := check("cuStreamCreate", C.mcuStreamCreate(&d.stream, 1 /* CU_STREAM_NON_BLOCKING */)); err != nil {
		return nil, err
	}
	d.async = C.mcuHasAsyncAlloc() != 0 && !envconfig.CUDASyncAlloc.On()
	if d.async {
		if err := check("cuMemPoolSetAttribute(RELEASE_THRESHOLD)", C.mcuSetPoolThresholdMax(d.dev)); err != nil {
			return nil, err
		}
	}
	if err := check("cuMemHostAlloc", C.mcuMemHostAlloc(&d.pinned, pinnedBytes, 0)); err != nil {
		return nil, err
	}
	d.pinSize = pinnedBytes
	if err := check("cuMemHostAlloc", C.mcuMemHostAlloc(&d.ringHost, ringBytes, 0)); err != nil {
		return nil, err
	}
	var rp C.CUdeviceptr
	if err := check("cuMemAlloc", C.mcuMemAlloc(&rp, ringBytes)); err != nil {
		return nil, err
	}
	d.ringDev = Ptr(rp)
	if err := checkBlas("cublasCreate", C.mcublasCreate(&d.blas)); err != nil {
		return nil, err
	}
	if err := checkBlas("cublasSetStream", C.mcublasSetStream(d.blas, d.stream)); err != nil {
		return nil, err
	}
	// CUBLAS_DEFAULT_MATH: with CUBLAS_COMPUTE_32F no TF32 is used.
	if err := checkBlas("cublasSetMathMode", C.mcublasSetMathMode(d.blas, 0)); err != nil {
		return nil, err
	}
	return d, nil
}

// cur is kept for readability at the call sites: since open registered the
// context (mempo_set_ctx), every C wrapper makes it current inside its own
// call, because a goroutine may move to another OS thread between two cgo
// calls.
func (d *Device) cur() error { return nil }

// Arch is the NVRTC architecture name, e.g. "sm_90".
func (d *Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.Major, d.Minor) }

// String describes the device in one line.
func (d *Device) String() string {
	return fmt.Sprintf("%s (%s, %d SMs, %.1f GiB, driver %d)", d.Name, d.Arch(), d.SMs, float64(d.TotalMem)/(1<<30), d.DriverVer)
}

// Alloc returns bytes of device memory, stream-ordered from the driver's
// default pool where available.
func (d *Device) Alloc(bytes int) (Ptr, error) {
	if bytes <= 0 {
		bytes = 4
	}
	d.drainFrees()
	if err := d.cur(); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	if d.async {
		if err := check("cuMemAllocAsync", C.mcuMemAllocAsync(&p, C.size_t(bytes), d.stream)); err != nil {
			return 0, fmt.Errorf("%w (%d bytes)", err, bytes)
		}
	} else if err := check("cuMemAlloc", C.mcuMemAlloc(&p, C.size_t(bytes))); err != nil {
		return 0, fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	return Ptr(p), nil
}

// Free returns p to the pool (stream-ordered: work queued before still sees it).
func (d *Device) Free(p Ptr) error {
	if p == 0 {
		return nil
	}
	if err := d.cur(); err != nil {
		return err
	}
	if d.async {
		return check("cuMemFreeAsync", C.mcuMemFreeAsync(C.CUdeviceptr(p), d.stream))
	}
	if err := d.Sync(); err != nil {
		return err
	}
	return check("cuMemFree", C.mcuMemFree(C.CUdeviceptr(p)))
}

// FreeLater queues p to be freed by the next Alloc or Sync on a caller's
// goroutine: safe to call from a finalizer.
func (d *Device) FreeLater(p Ptr) {
	d.freeMu.Lock()
	d.pending = append(d.pending, p)
	d.freeMu.Unlock()
}

func (d *Device) drainFrees() {
	d.freeMu.Lock()
	ps := d.pending
	d.pending = nil
	d.freeMu.Unlock()
	for _, p := range ps {
		if err := d.Free(p); err != nil {
			panic(err)
		}
	}
}

// MemInfo returns free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	if err = d.cur(); err != nil {
		return
	}
	var f, t C.size_t
	err = check("cuMemGetInfo", C.mcuMemGetInfo(&f, &t))
	return int64(f), int64(t), err
}

// Sync waits for all work queued on the device's stream.
func (d *Device) Sync() error {
	if err := d.cur(); err != nil {
		return err
	}
	if err := check("cuStreamSynchronize", C.mcuStreamSynchronize(d.stream)); err != nil {
		return err
	}
	d.drainFrees()
	return nil
}

// HtoD copies bytes from host memory src to dst through the pinned staging
// buffer. It returns once src may be reused (the copy itself is complete).
func (d *Device) HtoD(dst Ptr, src unsafe.Pointer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.cur(); err != nil {
		return err
	}
	for off := 0; off < bytes; off += d.pinSize {
		n := min(d.pinSize, bytes-off)
		// The staging buffer may still feed an earlier copy: wait for it.
		if err := check("cuStreamSynchronize", C.mcuStreamSynchronize(d.stream)); err != nil {
			return err
		}
		C.memcpy(d.pinned, unsafe.Add(src, off), C.size_t(n))
		if err := check("cuMemcpyHtoDAsync", C.mcuMemcpyHtoDAsync(C.CUdeviceptr(uint64(dst)+uint64(off)), d.pinned, C.size_t(n), d.stream)); err != nil {
			return err
		}
	}
	return check("cuStreamSynchronize", C.mcuStreamSynchronize(d.stream))
}

const ringBytes = 64 << 20

// Upload copies bytes of host memory into device memory that stays valid for
// the kernels queued after it, until the ring wraps (after a synchronization
// of the stream, so never under queued work). For small arrays passed with a
// launch.
func (d *Device) Upload(src unsafe.Pointer, bytes int) (Ptr, error) {
	n := (bytes + 255) &^ 255
	if n > ringBytes {
		return 0, fmt.Errorf("cuda: upload of %d bytes is over the %d-byte ring", bytes, ringBytes)
	}
	if n == 0 {
		return d.ringDev, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.cur(); err != nil {
		return 0, err
	}
	if d.ringOff+n > ringBytes {
		if err := check("cuStreamSynchronize", C.mcuStreamSynchronize(d.stream)); err != nil {
			return 0, err
		}
		d.ringOff = 0
		d.ringGen++
	}
	off := d.ringOff
	d.ringOff += n
	C.memcpy(unsafe.Add(d.ringHost, off), src, C.size_t(bytes))
	dst := d.ringDev + Ptr(off)
	if err := check("cuMemcpyHtoDAsync", C.mcuMemcpyHtoDAsync(C.CUdeviceptr(dst), unsafe.Add(d.ringHost, off), C.size_t(bytes), d.stream)); err != nil {
		return 0, err
	}
	return dst, nil
}

// UploadGen counts the upload ring's wraps: a pointer returned by Upload
// stays valid for later launches as long as UploadGen has not changed (the
// data is not overwritten before the ring comes round again).
func (d *Device) UploadGen() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ringGen
}

// DtoH copies bytes from src to host memory dst, after all queued work.
func (d *Device) DtoH(dst unsafe.Pointer, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.cur(); err != nil {
		return err
	}
	for off := 0; off < bytes; off += d.pinSize {
		n := min(d.pinSize, bytes-off)
		if err := check("cuMemcpyDtoHAsync", C.mcuMemcpyDtoHAsync(d.pinned, C.CUdeviceptr(uint64(src)+uint64(off)), C.size_t(n), d.stream)); err != nil {
			return err
		}
		if err := check("cuStreamSynchronize", C.mcuStreamSynchronize(d.stream)); err != nil {
			return err
		}
		C.memcpy(unsafe.Add(dst, off), d.pinned, C.size_t(n))
	}
	return nil
}

// DtoD queues a device-to-device copy.
func (d *Device) DtoD(dst, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if err := d.cur(); err != nil {
		return err
	}
	return check("cuMemcpyDtoDAsync", C.mcuMemcpyDtoDAsync(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes), d.stream))
}

// Memset32 queues setting n 32-bit words at p to v.
func (d *Device) Memset32(p Ptr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	if err := d.cur(); err != nil {
		return err
	}
	return check("cuMemsetD32Async", C.mcuMemsetD32Async(C.CUdeviceptr(p), C.uint(v), C.size_t(n), d.stream))
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Function is a compiled kernel.
type Function struct {
	f    C.CUfunction
	name string
}

// Launch queues f on the device's stream. Arguments are Ptr, int, int32,
// uint32, float32, float64, int64 or uint64, matching the kernel's parameters
// in size (int and int32 are passed as 32-bit ints).
func (d *Device) Launch(f *Function, grid, block Dim3, shmem int, args ...any) error {
	return d.launch(f, grid, block, shmem, false, args)
}

// CanOverlap says whether LaunchOverlap overlaps launches here: a Hopper or
// later device (griddepcontrol) and a driver with cuLaunchKernelEx.
func (d *Device) CanOverlap() bool { return d.Major >= 9 && C.mcuHasLaunchEx() != 0 }

// LaunchOverlap is Launch with programmatic dependent launch where
// CanOverlap (otherwise it is Launch): the grid may start while the kernel
// before it in the stream is still running, so that its launch and start-up
// hide behind that kernel's tail. The kernel must run PDL_WAIT()
// (kernels/pdl.cuh) before it reads or writes anything the kernels before
// it touch; PDL_RELEASE() lets the next overlapped launch start early.
// Captured into a graph, the overlap becomes a programmatic edge.
func (d *Device) LaunchOverlap(f *Function, grid, block Dim3, shmem int, args ...any) error {
	return d.launch(f, grid, block, shmem, d.CanOverlap(), args)
}

func (d *Device) launch(f *Function, grid, block Dim3, shmem int, overlap bool, args []any) error {
	var slots [32]uint64
	if len(args) > len(slots) {
		return fmt.Errorf("cuda: launch %s: %d arguments", f.name, len(args))
	}
	for i, a := range args {
		switch v := a.(type) {
		case Ptr:
			slots[i] = uint64(v)
		case int:
			slots[i] = uint64(uint32(int32(v)))
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case float32:
			slots[i] = uint64(*(*uint32)(unsafe.Pointer(&v)))
		case float64:
			slots[i] = *(*uint64)(unsafe.Pointer(&v))
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		default:
			return fmt.Errorf("cuda: launch %s: argument %d has type %T", f.name, i, a)
		}
	}
	g := func(x int) C.uint { return C.uint(max(x, 1)) }
	if err := d.cur(); err != nil {
		return err
	}
	call, argp := "cuLaunchKernel(", (*C.uint64_t)(unsafe.Pointer(&slots[0]))
	var r C.CUresult
	if overlap {
		call = "cuLaunchKernelEx("
		r = C.mcuLaunchOverlap(f.f, g(grid.X), g(grid.Y), g(grid.Z), g(block.X), g(block.Y), g(block.Z), C.uint(shmem), d.stream, C.int(len(args)), argp)
	} else {
		r = C.mcuLaunch(f.f, g(grid.X), g(grid.Y), g(grid.Z), g(block.X), g(block.Y), g(block.Z), C.uint(shmem), d.stream, C.int(len(args)), argp)
	}
	if err := check(call+f.name+")", r); err != nil {
		return err
	}
	if Debug && !d.capturing {
		if err := check("cuStreamSynchronize after "+f.name, C.mcuStreamSynchronize(d.stream)); err != nil {
			return err
		}
	}
	return nil
}

// DataType of a GEMM operand.
type DataType int

const (
	F32  DataType = 0  // CUDA_R_32F
	BF16 DataType = 14 // CUDA_R_16BF
)

// Gemm computes, on row-major matrices, C[m×n] = alpha·op(A)·op(B) + beta·C
// with op(A) m×k and op(B) k×n, leading dimensions lda, ldb, ldc in elements.
// Accumulation is fp32 (CUBLAS_COMPUTE_32F: no TF32) for every data type.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a Ptr, at DataType, lda int, b Ptr, bt DataType, ldb int, beta float32, c Ptr, ct DataType, ldc int) error {
	if m == 0 || n == 0 {
		return nil
	}
	if err := d.cur(); err != nil {
		return err
	}
	// Row-major C = op(A)op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ, and a
	// row-major matrix read column-major is its transpose.
	op := func(t bool) C.int {
		if t {
			return 1
		}
		return 0
	}
	r := C.mcublasGemmEx(d.blas, op(transB), op(transA), C.int(n), C.int(m), C.int(k), C.float(alpha),
		C.CUdeviceptr(b), C.int(bt), C.int(ldb), C.CUdeviceptr(a), C.int(at), C.int(lda), C.float(beta),
		C.CUdeviceptr(c), C.int(ct), C.int(ldc), 68 /* CUBLAS_COMPUTE_32F */)
	if err := checkBlas("cublasGemmEx", r); err != nil {
		return fmt.Errorf("%w (m=%d n=%d k=%d)", err, m, n, k)
	}
	if Debug && !d.capturing {
		return check("cuStreamSynchronize after cublasGemmEx", C.mcuStreamSynchronize(d.stream))
	}
	return nil
}

// GemmStridedBatched is Gemm over batch independent products: product i
// reads A at a + i·strideA, B at b + i·strideB and writes C at c + i·strideC
// (strides in elements). Attention uses it for one product per head.
func (d *Device) GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a Ptr, at DataType, lda int, strideA int64, b Ptr, bt DataType, ldb int, strideB int64, beta float32, c Ptr, ct DataType, ldc int, strideC int64, batch int) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	op := func(t bool) C.int {
		if t {
			return 1
		}
		return 0
	}
	// Row-major to column-major as in Gemm: swap the operands.
	r := C.mcublasGemmStridedBatchedEx(d.blas, op(transB), op(transA), C.int(n), C.int(m), C.int(k), C.float(alpha),
		C.CUdeviceptr(b), C.int(bt), C.int(ldb), C.longlong(strideB), C.CUdeviceptr(a), C.int(at), C.int(lda), C.longlong(strideA),
		C.float(beta), C.CUdeviceptr(c), C.int(ct), C.int(ldc), C.longlong(strideC), C.int(batch), 68 /* CUBLAS_COMPUTE_32F */)
	if err := checkBlas("cublasGemmStridedBatchedEx", r); err != nil {
		return fmt.Errorf("%w (m=%d n=%d k=%d batch=%d)", err, m, n, k, batch)
	}
	if Debug && !d.capturing {
		return check("cuStreamSynchronize after cublasGemmStridedBatchedEx", C.mcuStreamSynchronize(d.stream))
	}
	return nil
}

// Event is a point in the stream, for timing.
type Event struct{ e C.CUevent }

// Record creates an event and records it on the stream.
func (d *Device) Record() (*Event, error) {
	if err := d.cur(); err != nil {
		return nil, err
	}
	ev := &Event{}
	if err := check("cuEventCreate", C.mcuEventCreate(&ev.e, 0)); err != nil {
		return nil, err
	}
	return ev, check("cuEventRecord", C.mcuEventRecord(ev.e, d.stream))
}

// Elapsed waits for b and returns the milliseconds from a to b; it destroys
// neither.
func (d *Device) Elapsed(a, b *Event) (float64, error) {
	if err := d.cur(); err != nil {
		return 0, err
	}
	if err := check("cuEventSynchronize", C.mcuEventSynchronize(b.e)); err != nil {
		return 0, err
	}
	var ms C.float
	err := check("cuEventElapsedTime", C.mcuEventElapsedTime(&ms, a.e, b.e))
	return float64(ms), err
}

// Destroy releases the event.
func (e *Event) Destroy() { C.mcuEventDestroy(e.e) }
