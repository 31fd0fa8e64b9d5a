package cuda

import (
	"os"
	"reflect"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/testenv"
)

// ncclOrSkip is the device and NCCL, or a skip that says which is missing
// (MEMPO_REQUIRE_NCCL=1 makes a missing NCCL a failure on the GPU machine).
func ncclOrSkip(t *testing.T) *Device {
	d := devOrSkip(t)
	testenv.NeedNCCL(t, LoadNCCL())
	return d
}

// One rank: the communicator comes up from a unique id, and the collectives
// on a device buffer are the identity (a sum of one); NVLS is off.
func TestNCCLOneRank(t *testing.T) {
	d := ncclOrSkip(t)
	if v := os.Getenv("NCCL_NVLS_ENABLE"); v != "0" {
		t.Errorf("NCCL_NVLS_ENABLE=%q after LoadNCCL, want 0", v)
	}
	ver, err := NCCLVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NCCL %d from %s", ver, LibPaths()["nccl"])
	id, err := NCCLUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNCCL(d, id, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	host := []float32{1.5, -2, 3.25, 1e-30, 7}
	p, err := d.Alloc(4 * len(host))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	if err := d.HtoD(p, unsafe.Pointer(&host[0]), 4*len(host)); err != nil {
		t.Fatal(err)
	}
	if err := GroupStart(); err != nil {
		t.Fatal(err)
	}
	if err := n.AllReduce(p, p, len(host)); err != nil {
		t.Fatal(err)
	}
	if err := GroupEnd(); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(host))
	if err := d.DtoH(unsafe.Pointer(&got[0]), p, 4*len(got)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, host) {
		t.Errorf("1-rank all-reduce on the device: %v, want %v", got, host)
	}

	// The dist.Comm over NCCL, host buffers staged through the device.
	c, err := JoinNCCL(d, dist.Single{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := append([]float32(nil), host...)
	if err := c.AllReduce(buf); err != nil || !reflect.DeepEqual(buf, host) {
		t.Errorf("all-reduce %v %v", buf, err)
	}
	out := make([]float32, len(host))
	if err := c.ReduceScatter(host, out); err != nil || !reflect.DeepEqual(out, host) {
		t.Errorf("reduce-scatter %v %v", out, err)
	}
	out = make([]float32, len(host))
	if err := c.AllGather(host, out); err != nil || !reflect.DeepEqual(out, host) {
		t.Errorf("all-gather %v %v", out, err)
	}
	buf = append([]float32(nil), host...)
	if err := c.Broadcast(buf, 0); err != nil || !reflect.DeepEqual(buf, host) {
		t.Errorf("broadcast %v %v", buf, err)
	}
}
