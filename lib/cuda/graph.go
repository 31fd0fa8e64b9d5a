package cuda

/*
#include "binding.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

// Graph is an instantiated CUDA graph: work captured once from the device's
// stream (BeginCapture … EndCapture) and replayed by Launch with one driver
// call. Every address the captured work used is baked in, so the buffers it
// reads and writes must stay allocated, at the same addresses, while the
// graph lives; values in them may change between replays.
type Graph struct {
	d    *Device
	exec C.CUgraphExec
}

// GraphsAvailable reports whether the driver has stream capture and graphs.
func (d *Device) GraphsAvailable() bool { return C.mcuHasGraphs() != 0 }

// Capturing reports whether the stream is being captured (between
// BeginCapture and EndCapture): launches are then recorded, not run, and
// nothing may synchronize the stream.
func (d *Device) Capturing() bool { return d.capturing }

// BeginCapture starts recording the work queued on the device's stream into
// a graph instead of running it. The calling goroutine stays on its OS
// thread until EndCapture. Mode relaxed: calls on other threads that are not
// stream work (allocation, module loads) stay legal.
func (d *Device) BeginCapture() error {
	if !d.GraphsAvailable() {
		return errors.New("cuda: the driver has no CUDA graphs")
	}
	runtime.LockOSThread()
	if err := check("cuStreamBeginCapture", C.mcuStreamBeginCapture(d.stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	d.capturing = true
	return nil
}

// EndCapture stops recording and instantiates what was recorded. The
// capture always ends, even when it returns an error (a call inside the
// capture that the driver refused invalidates it).
func (d *Device) EndCapture() (*Graph, error) {
	defer runtime.UnlockOSThread()
	d.capturing = false
	var g C.CUgraph
	if err := check("cuStreamEndCapture", C.mcuStreamEndCapture(d.stream, &g)); err != nil {
		if g != nil {
			C.mcuGraphDestroy(g)
		}
		return nil, err
	}
	defer C.mcuGraphDestroy(g)
	gr := &Graph{d: d}
	if err := check("cuGraphInstantiate", C.mcuGraphInstantiate(&gr.exec, g)); err != nil {
		return nil, err
	}
	return gr, nil
}

// Launch queues one replay of the graph on the device's stream.
func (g *Graph) Launch() error {
	if err := check("cuGraphLaunch", C.mcuGraphLaunch(g.exec, g.d.stream)); err != nil {
		return err
	}
	if Debug {
		return check("cuStreamSynchronize after cuGraphLaunch", C.mcuStreamSynchronize(g.d.stream))
	}
	return nil
}

// Destroy releases the graph (after the replays queued so far).
func (g *Graph) Destroy() {
	if g.exec != nil {
		C.mcuGraphExecDestroy(g.exec)
		g.exec = nil
	}
}

// Pinned is page-locked host memory, which the device reads and writes
// directly: a copy from or to it is queued without a staging step.
type Pinned struct {
	p unsafe.Pointer
	n int
}

// PinnedAlloc returns bytes of page-locked host memory.
func (d *Device) PinnedAlloc(bytes int) (*Pinned, error) {
	p := &Pinned{n: max(bytes, 8)}
	if err := check("cuMemHostAlloc", C.mcuMemHostAlloc(&p.p, C.size_t(p.n), 0)); err != nil {
		return nil, err
	}
	return p, nil
}

// Bytes is the memory as a byte slice (valid until Free).
func (p *Pinned) Bytes() []byte { return unsafe.Slice((*byte)(p.p), p.n) }

// Free releases the memory; nothing queued may still use it.
func (p *Pinned) Free() {
	if p.p != nil {
		C.mcuMemFreeHost(p.p)
		p.p = nil
	}
}

// CopyIn queues a copy of the first bytes of p to dst: p must not change
// until the copy is done (a later Sync).
func (d *Device) CopyIn(dst Ptr, p *Pinned, bytes int) error {
	if bytes > p.n {
		return errors.New("cuda: CopyIn beyond the pinned buffer")
	}
	return check("cuMemcpyHtoDAsync", C.mcuMemcpyHtoDAsync(C.CUdeviceptr(dst), p.p, C.size_t(bytes), d.stream))
}

// CopyOut queues a copy of bytes at src into the start of p, readable after
// a Sync.
func (d *Device) CopyOut(p *Pinned, src Ptr, bytes int) error {
	if bytes > p.n {
		return errors.New("cuda: CopyOut beyond the pinned buffer")
	}
	return check("cuMemcpyDtoHAsync", C.mcuMemcpyDtoHAsync(p.p, C.CUdeviceptr(src), C.size_t(bytes), d.stream))
}
