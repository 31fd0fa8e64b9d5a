package cuda

/*
#include <stdlib.h>
#include "nccl.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/envconfig"
)

// NCCL through dlopen of libnccl.so.2 (nccl.c), as PyTorch's nvidia-nccl
// wheel installs it: the collectives of a data-parallel run on GPUs, queued
// on the device's stream. NVLink multicast (NVLS) stays off in every process
// that loads NCCL (NCCL_NVLS_ENABLE=0, set before the library is opened), and
// nothing here calls cuMulticastCreate: multicast objects can take a shared
// host's GPUs out of service.

// NCCLIDBytes is the size of an NCCL unique id.
const NCCLIDBytes = C.MNCCL_ID_BYTES

var (
	ncclOnce sync.Once
	ncclErr  error
)

// ncclPath finds libnccl.so.2: MEMPO_NCCL_LIB, then the CUDA library
// folders and the pip nvidia/*/lib folders (nvidia/nccl/lib among them),
// then the dynamic loader.
func ncclPath() string {
	if p := envconfig.NCCLLib.Get(); p != "" {
		return p
	}
	return findLib(libDirs(), "libnccl.so.2", "libnccl.so")
}

// LoadNCCL opens NCCL once; the error says which file failed and why.
func LoadNCCL() error {
	ncclOnce.Do(func() {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
		if err := load(); err != nil {
			ncclErr = err
			return
		}
		path := ncclPath()
		p := C.CString(path)
		defer C.free(unsafe.Pointer(p))
		if e := C.mempo_load_nccl(p); e != nil {
			ncclErr = fmt.Errorf("no NCCL (%s: %s); set %s to libnccl.so.2 (pip's nvidia-nccl-cu* wheel has it under nvidia/nccl/lib)", path, C.GoString(e), envconfig.NCCLLib.Name)
			return
		}
		libPaths["nccl"] = path
	})
	return ncclErr
}

func checkNCCL(call string, r C.ncclResult_t) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: C.GoString(C.mncclGetErrorString(r))}
}

// NCCLVersion is the loaded library's version code (e.g. 22703 for 2.27.3).
func NCCLVersion() (int, error) {
	if err := LoadNCCL(); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), checkNCCL("ncclGetVersion", C.mncclGetVersion(&v))
}

// NCCLUniqueID makes the id rank 0 hands to every rank (through the
// rendezvous) before NewNCCL.
func NCCLUniqueID() ([]byte, error) {
	if err := LoadNCCL(); err != nil {
		return nil, err
	}
	id := make([]byte, NCCLIDBytes)
	return id, checkNCCL("ncclGetUniqueId", C.mncclGetUniqueId((*C.char)(unsafe.Pointer(&id[0]))))
}

// NCCL is one rank's communicator on a device. Its collectives are float32,
// queued on the device's stream (stream-ordered with the model's kernels).
type NCCL struct {
	d          *Device
	comm       C.ncclComm_t
	rank, size int
}

// NewNCCL joins the communicator of size ranks named by id as rank.
func NewNCCL(d *Device, id []byte, rank, size int) (*NCCL, error) {
	if err := LoadNCCL(); err != nil {
		return nil, err
	}
	if len(id) != NCCLIDBytes {
		return nil, fmt.Errorf("cuda: NCCL unique id of %d bytes, want %d", len(id), NCCLIDBytes)
	}
	n := &NCCL{d: d, rank: rank, size: size}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := checkNCCL("ncclCommInitRank", C.mncclCommInitRank(d.ctx, &n.comm, C.int(size), (*C.char)(unsafe.Pointer(&id[0])), C.int(rank)))
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (n *NCCL) Rank() int { return n.rank }
func (n *NCCL) Size() int { return n.size }

// Close destroys the communicator.
func (n *NCCL) Close() error {
	if n.comm == nil {
		return nil
	}
	err := checkNCCL("ncclCommDestroy", C.mncclCommDestroy(n.d.ctx, n.comm))
	n.comm = nil
	return err
}

// AllReduce sums count floats of send over the ranks into recv (may be send).
func (n *NCCL) AllReduce(send, recv Ptr, count int) error {
	return checkNCCL("ncclAllReduce", C.mncclAllReduce(n.d.ctx, C.CUdeviceptr(send), C.CUdeviceptr(recv), C.size_t(count), n.comm, n.d.stream))
}

// ReduceScatter sums size×recvCount floats of send and leaves this rank's
// slice in recv.
func (n *NCCL) ReduceScatter(send, recv Ptr, recvCount int) error {
	return checkNCCL("ncclReduceScatter", C.mncclReduceScatter(n.d.ctx, C.CUdeviceptr(send), C.CUdeviceptr(recv), C.size_t(recvCount), n.comm, n.d.stream))
}

// AllGather fills recv (size×sendCount floats) with every rank's send.
func (n *NCCL) AllGather(send, recv Ptr, sendCount int) error {
	return checkNCCL("ncclAllGather", C.mncclAllGather(n.d.ctx, C.CUdeviceptr(send), C.CUdeviceptr(recv), C.size_t(sendCount), n.comm, n.d.stream))
}

// Broadcast copies root's send into every rank's recv.
func (n *NCCL) Broadcast(send, recv Ptr, count, root int) error {
	return checkNCCL("ncclBroadcast", C.mncclBroadcast(n.d.ctx, C.CUdeviceptr(send), C.CUdeviceptr(recv), C.size_t(count), C.int(root), n.comm, n.d.stream))
}

// GroupStart and GroupEnd bracket several collectives launched as one
// (e.g. the per-tensor broadcasts of the parameters).
func GroupStart() error { return checkNCCL("ncclGroupStart", C.mncclGroupStart()) }
func GroupEnd() error   { return checkNCCL("ncclGroupEnd", C.mncclGroupEnd()) }

// NCCLComm is a dist.Comm whose float collectives run through NCCL on the
// device (host buffers staged through device memory) and whose small
// exchanges and barriers go over the control comm that did the rendezvous.
type NCCLComm struct {
	*NCCL
	ctl  dist.Comm
	buf  Ptr
	size int // bytes of buf
}

// JoinNCCL makes the NCCL communicator of the ranks of ctl on device d: rank
// 0 makes the unique id, ctl carries it to the others.
func JoinNCCL(d *Device, ctl dist.Comm) (*NCCLComm, error) {
	var id []byte
	var err error
	if ctl.Rank() == 0 {
		if id, err = NCCLUniqueID(); err != nil {
			id = nil
		}
	}
	parts, xerr := ctl.Exchange(id)
	if xerr != nil {
		return nil, xerr
	}
	if err != nil {
		return nil, err
	}
	if len(parts[0]) != NCCLIDBytes {
		return nil, fmt.Errorf("cuda: rank 0 could not make an NCCL id (see its log)")
	}
	n, err := NewNCCL(d, parts[0], ctl.Rank(), ctl.Size())
	if err != nil {
		return nil, err
	}
	return &NCCLComm{NCCL: n, ctl: ctl}, nil
}

func (c *NCCLComm) Rank() int { return c.ctl.Rank() }
func (c *NCCLComm) Size() int { return c.ctl.Size() }

// staging returns a device buffer of at least bytes.
func (c *NCCLComm) staging(bytes int) (Ptr, error) {
	if bytes <= c.size {
		return c.buf, nil
	}
	if c.buf != 0 {
		if err := c.d.Free(c.buf); err != nil {
			return 0, err
		}
		c.buf, c.size = 0, 0
	}
	p, err := c.d.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	c.buf, c.size = p, bytes
	return p, nil
}

func f32ptr(v []float32) unsafe.Pointer { return unsafe.Pointer(&v[0]) }

// run stages in (host) into the device, runs op there and copies out
// elements of the result (at device offset outOff floats) back to out.
func (c *NCCLComm) run(in []float32, total int, out []float32, outOff int, op func(p Ptr) error) error {
	if total == 0 {
		return nil
	}
	p, err := c.staging(4 * total)
	if err != nil {
		return err
	}
	if len(in) > 0 {
		if err := c.d.HtoD(p, f32ptr(in), 4*len(in)); err != nil {
			return err
		}
	}
	if err := op(p); err != nil {
		return err
	}
	if err := c.d.Sync(); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	return c.d.DtoH(f32ptr(out), Ptr(uint64(p)+4*uint64(outOff)), 4*len(out))
}

func (c *NCCLComm) AllReduce(buf []float32) error {
	return c.run(buf, len(buf), buf, 0, func(p Ptr) error { return c.NCCL.AllReduce(p, p, len(buf)) })
}

func (c *NCCLComm) ReduceScatter(in, out []float32) error {
	if len(in) != c.Size()*len(out) {
		return fmt.Errorf("cuda: reduce-scatter of %d values into %d on %d ranks", len(in), len(out), c.Size())
	}
	return c.run(in, len(in)+len(out), out, len(in), func(p Ptr) error {
		return c.NCCL.ReduceScatter(p, Ptr(uint64(p)+4*uint64(len(in))), len(out))
	})
}

func (c *NCCLComm) AllGather(in, out []float32) error {
	if len(out) != c.Size()*len(in) {
		return fmt.Errorf("cuda: all-gather of %d values into %d on %d ranks", len(in), len(out), c.Size())
	}
	return c.run(in, len(in)+len(out), out, len(in), func(p Ptr) error {
		return c.NCCL.AllGather(p, Ptr(uint64(p)+4*uint64(len(in))), len(in))
	})
}

func (c *NCCLComm) Broadcast(buf []float32, root int) error {
	return c.run(buf, len(buf), buf, 0, func(p Ptr) error { return c.NCCL.Broadcast(p, p, len(buf), root) })
}

func (c *NCCLComm) Exchange(b []byte) ([][]byte, error) { return c.ctl.Exchange(b) }
func (c *NCCLComm) Barrier() error                      { return c.ctl.Barrier() }

// Close destroys the communicator and frees the staging buffer (the
// control comm is the caller's).
func (c *NCCLComm) Close() error {
	if c.buf != 0 {
		c.d.Free(c.buf)
		c.buf, c.size = 0, 0
	}
	return c.NCCL.Close()
}
