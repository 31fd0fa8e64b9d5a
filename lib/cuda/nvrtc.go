package cuda

/*
#include <stdlib.h>
#include "binding.h"
*/
import "C"

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/mempo/mempo/lib/envconfig"
)

//go:embed kernels/*.cu
var kernelFS embed.FS

// devicePrelude is prepended to every module NVRTC compiles: the PDL_WAIT
// and PDL_RELEASE macros of programmatic dependent launch (pdl.cuh), and
// shared-memory addresses and asynchronous copies (async.cuh).
var devicePrelude = pdlPrelude + asyncPrelude

//go:embed kernels/pdl.cuh
var pdlPrelude string

//go:embed kernels/async.cuh
var asyncPrelude string

// Source returns the embedded CUDA C source of a module ("model" for
// kernels/model.cu).
func Source(module string) (string, error) {
	b, err := kernelFS.ReadFile("kernels/" + module + ".cu")
	return string(b), err
}

// NVRTCVersion returns NVRTC's major and minor version.
func NVRTCVersion() (int, int, error) {
	if err := load(); err != nil {
		return 0, 0, err
	}
	var a, b C.int
	if r := C.mnvrtcVersion(&a, &b); r != 0 {
		return 0, 0, &Error{Call: "nvrtcVersion", Code: int(r), Name: C.GoString(C.mnvrtcErrorString(r))}
	}
	return int(a), int(b), nil
}

// CacheDir is where compiled kernels are kept: $MEMPO_CUDA_CACHE,
// $XDG_CACHE_HOME/mempo/cuda or ~/.cache/mempo/cuda.
func CacheDir() string {
	if v := envconfig.CUDACache.Get(); v != "" {
		return v
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "mempo", "cuda")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "mempo", "cuda")
	}
	return filepath.Join(os.TempDir(), "mempo-cuda-cache")
}

// compile returns the cubin of src for the device, from the disk cache keyed
// by the hash of the source, the architecture, NVRTC's version and the
// options, or from NVRTC (then cached).
func (d *Device) compile(name, src string) ([]byte, error) {
	maj, min, err := NVRTCVersion()
	if err != nil {
		return nil, err
	}
	opts := []string{"--gpu-architecture=" + d.Arch(), "-default-device", "--std=c++17", "-lineinfo"}
	if envconfig.CUDAFastMath.On() {
		opts = append(opts, "--use_fast_math")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00%s\x00", name, d.Arch(), maj, min, strings.Join(opts, " "))
	h.Write([]byte(src))
	key := hex.EncodeToString(h.Sum(nil))[:32]
	path := filepath.Join(CacheDir(), fmt.Sprintf("%s-%s-%s.cubin", name, d.Arch(), key))
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return b, nil
	}
	b, err := nvrtcCompile(name, src, opts)
	if err != nil {
		return nil, err
	}
	// Best effort: a read-only cache only costs a recompile next time.
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
		if os.WriteFile(tmp, b, 0o644) == nil {
			os.Rename(tmp, path)
		}
	}
	return b, nil
}

func nvrtcCompile(name, src string, opts []string) ([]byte, error) {
	csrc, cname := C.CString(src), C.CString(name+".cu")
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	var prog C.nvrtcProgram
	if r := C.mnvrtcCreateProgram(&prog, csrc, cname); r != 0 {
		return nil, &Error{Call: "nvrtcCreateProgram(" + name + ")", Code: int(r), Name: C.GoString(C.mnvrtcErrorString(r))}
	}
	defer C.mnvrtcDestroyProgram(&prog)
	copts := C.malloc(C.size_t(len(opts)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(copts)
	arr := unsafe.Slice((**C.char)(copts), len(opts))
	for i, o := range opts {
		arr[i] = C.CString(o)
		defer C.free(unsafe.Pointer(arr[i]))
	}
	r := C.mnvrtcCompileProgram(prog, C.int(len(opts)), (**C.char)(copts))
	var logp *C.char
	C.mnvrtcGetProgramLog(prog, &logp)
	log := ""
	if logp != nil {
		log = C.GoString(logp)
		C.free(unsafe.Pointer(logp))
	}
	if r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcCompileProgram(%s, %s): %s\n%s", name, strings.Join(opts, " "), C.GoString(C.mnvrtcErrorString(r)), log)
	}
	var out *C.char
	var n C.size_t
	if r := C.mnvrtcGetCUBIN(prog, &out, &n); r != 0 {
		return nil, &Error{Call: "nvrtcGetCUBIN(" + name + ")", Code: int(r), Name: C.GoString(C.mnvrtcErrorString(r))}
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}

// Func returns kernel fn of the embedded module, compiling and loading the
// module at first use.
func (d *Device) Func(module, fn string) (*Function, error) {
	key := funcKey{module, fn}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.funcs[key]; ok {
		return f, nil
	}
	if err := d.cur(); err != nil {
		return nil, err
	}
	src, err := Source(module)
	if err != nil {
		return nil, fmt.Errorf("cuda: no kernel module %q: %w", module, err)
	}
	mod, ok := d.mods[module]
	if !ok {
		img, err := d.compile(module, devicePrelude+"#line 1\n"+src)
		if err != nil {
			return nil, err
		}
		cimg := C.CBytes(img)
		defer C.free(cimg)
		if err := check("cuModuleLoadData("+module+")", C.mcuModuleLoadData(&mod, cimg)); err != nil {
			return nil, err
		}
		d.mods[module] = mod
	}
	cfn := C.CString(fn)
	defer C.free(unsafe.Pointer(cfn))
	var f C.CUfunction
	if err := check("cuModuleGetFunction("+module+"/"+fn+")", C.mcuModuleGetFunction(&f, mod, cfn)); err != nil {
		return nil, err
	}
	fu := &Function{f: f, name: fn}
	d.funcs[key] = fu
	return fu, nil
}

type funcKey struct{ module, fn string }

// SetMaxDynamicShared lets f use up to bytes of dynamic shared memory (over
// the default 48 KiB).
func (d *Device) SetMaxDynamicShared(f *Function, bytes int) error {
	if err := d.cur(); err != nil {
		return err
	}
	return check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", C.mcuFuncSetAttribute(f.f, 8, C.int(bytes)))
}

// FuncResources is what ptxas gave f: registers a thread, bytes of local
// memory a thread (spilled registers and stack; 0 for a kernel that keeps
// everything in registers) and bytes of static shared memory a block.
func (d *Device) FuncResources(f *Function) (regs, local, static int, err error) {
	if err := d.cur(); err != nil {
		return 0, 0, 0, err
	}
	// CU_FUNC_ATTRIBUTE_NUM_REGS 4, LOCAL_SIZE_BYTES 3, SHARED_SIZE_BYTES 1.
	var v [3]C.int
	for i, a := range []int{4, 3, 1} {
		if err := check("cuFuncGetAttribute("+f.name+")", C.mcuFuncGetAttribute(&v[i], C.int(a), f.f)); err != nil {
			return 0, 0, 0, err
		}
	}
	return int(v[0]), int(v[1]), int(v[2]), nil
}

// ResidentBlocks is how many blocks of f, of block threads and shmem bytes
// of dynamic shared memory, a multiprocessor holds at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor): a grid of at most SMs
// times that many blocks is resident all at once on an idle device.
func (d *Device) ResidentBlocks(f *Function, block, shmem int) (int, error) {
	if err := d.cur(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor("+f.name+")", C.mcuOccupancy(&n, f.f, C.int(block), C.size_t(shmem))); err != nil {
		return 0, err
	}
	return int(n), nil
}
