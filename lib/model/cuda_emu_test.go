package model

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/cuda/cudaemu"
)

// The CUDA backend on lib/cuda/cudaemu's CPU emulation of the kernels: where
// there is no GPU, the per-op tests of cuda_test.go (newOpPairOrEmu) run the
// backend's own launchers (module choice, work lists, grid and shared-memory
// sizes, argument order) with the kernels' source compiled by g++, against
// the CPU backend, on every `go test`.

// emuOps runs the CUDA backend's ops on the emulation: memory and GEMMs on
// the emulation of model.cu, every other module compiled at its first
// kernel, its kernels run on the same memory and the red zones of every
// allocation checked after each.
type emuOps struct {
	*cudaemu.Device // model.cu's: the memory
	dir             string
	mods            map[string]*cudaemu.Device
	freeMu          sync.Mutex
	pending         []cuda.Ptr
}

func (e *emuOps) kernel(module, name string, grid, block cuda.Dim3, shmem int, args ...any) error {
	d := e.mods[module]
	if d == nil {
		var err error
		if d, err = cudaemu.NewModule(e.dir, module, 0); err != nil {
			return err
		}
		e.mods[module] = d
	}
	if err := d.Kernel(name, grid, block, shmem, args...); err != nil {
		return err
	}
	if d != e.Device {
		if err := e.Check(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// FreeLater queues p for the next Alloc or Sync, as lib/cuda does: the
// backend calls it from finalizers.
func (e *emuOps) FreeLater(p cuda.Ptr) {
	e.freeMu.Lock()
	e.pending = append(e.pending, p)
	e.freeMu.Unlock()
}

func (e *emuOps) drain() error {
	e.freeMu.Lock()
	ps := e.pending
	e.pending = nil
	e.freeMu.Unlock()
	for _, p := range ps {
		if err := e.Device.Free(p); err != nil {
			return err
		}
	}
	return nil
}

func (e *emuOps) Alloc(bytes int) (cuda.Ptr, error) {
	if err := e.drain(); err != nil {
		return 0, err
	}
	return e.Device.Alloc(bytes)
}

func (e *emuOps) Sync() error { return e.drain() }

// UploadGen is constant: the emulation's uploads live until the device goes.
func (e *emuOps) UploadGen() uint64 { return 1 }

func (e *emuOps) DtoD(dst, src cuda.Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	tmp := make([]byte, bytes)
	if err := e.DtoH(unsafe.Pointer(&tmp[0]), src, bytes); err != nil {
		return err
	}
	return e.HtoD(dst, unsafe.Pointer(&tmp[0]), bytes)
}

func (e *emuOps) Memset32(p cuda.Ptr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	tmp := make([]uint32, n)
	for i := range tmp {
		tmp[i] = v
	}
	return e.HtoD(p, unsafe.Pointer(&tmp[0]), 4*n)
}

var (
	emuOnce sync.Once
	emuBe   *emuOps
	emuErr  error
)

// emuCUDA is a CUDA backend whose ops run on the emulation (one for the
// test binary: the modules compile once), or a skip saying why there is
// none. Only the op-by-op paths run there, in fp32 and bf16 mode: no CUDA
// graphs, no profiling, no device optimizer.
func emuCUDA(t testing.TB) *CUDA {
	t.Helper()
	if ok, why := cudaemu.Available(); !ok {
		t.Skipf("no CUDA and no kernel emulation: %s", why)
	}
	emuOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mempo-model-emu-")
		if err != nil {
			emuErr = err
			return
		}
		d, err := cudaemu.NewModule(dir, "model", 0)
		if err != nil {
			emuErr = err
			return
		}
		emuBe = &emuOps{Device: d, dir: dir, mods: map[string]*cudaemu.Device{"model": d}}
	})
	if emuErr != nil {
		t.Fatal(emuErr)
	}
	return &CUDA{ops: emuBe, kernel: emuBe.kernel, sms: 132, cpu: NewCPU(), rope: map[ropeKey]*cudaRope{}, gcTrigger: 1 << 40, decode: decodeGeneric}
}
