package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/optim"
)

// TestAdamW8KernelMatchesOptim runs the 8-bit AdamW kernel for five steps
// on fp32 master weights and on split ones (bf16 weight + remainder), with
// gradients spanning several orders of magnitude and a block of zeros, and
// requires lib/optim's Step8 bit for bit: weights, codes and scales.
func TestAdamW8KernelMatchesOptim(t *testing.T) {
	d := devOrSkip(t)
	r := rand.New(rand.NewPCG(5, 6))
	n := 40*optim.Block8 + 77
	nb := optim.Blocks8(n)
	theta := make([]float32, n)
	for i := range theta {
		theta[i] = float32(r.NormFloat64() * 0.05)
	}
	cfg := optim.DefaultAdamW()
	tabs := append(append(append(append([]float32(nil), optim.CodeExpAvg.Vals...), optim.CodeExpAvg.Mids...), optim.CodeExpAvgSq.Vals...), optim.CodeExpAvgSq.Mids...)
	if len(tabs) != 766 {
		t.Fatalf("codebooks of %d floats, the kernel reads 766", len(tabs))
	}
	ptabs := upload(t, d, tabs)
	alloc := func(bytes int) Ptr {
		words := (bytes + 3) / 4
		p, err := d.Alloc(4 * words)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Memset32(p, 0, words); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, split := range []bool{false, true} {
		cpu := append([]float32(nil), theta...)
		mq, vq := make([]uint8, n), make([]uint8, n)
		ms, vs := make([]float32, nb), make([]float32, nb)
		var p32, hi, lo Ptr
		if split {
			h, l := make([]uint16, n), make([]int16, n)
			for i, x := range theta {
				h[i], l[i] = optim.SplitMaster(x)
			}
			hi, lo = alloc(2*n), alloc(2*n)
			d.HtoD(hi, unsafe.Pointer(&h[0]), 2*n)
			d.HtoD(lo, unsafe.Pointer(&l[0]), 2*n)
		} else {
			p32 = upload(t, d, theta)
		}
		dmq, dvq, dms, dvs := alloc(n), alloc(n), alloc(4*nb), alloc(4*nb)
		for step := int64(1); step <= 5; step++ {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(r.NormFloat64() * math.Exp(2*r.NormFloat64()))
			}
			for i := 3 * optim.Block8; i < 4*optim.Block8; i++ {
				g[i] = 0
			}
			lr := 1e-3
			optim.Step8(cpu, g, mq, ms, vq, vs, optim.Scalars8(cfg, lr, step))
			pg := upload(t, d, g)
			s := AdamWScalars(cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, lr, int(step))
			if err := d.AdamW8(p32, hi, lo, pg, dmq, dms, dvq, dvs, n, ptabs, optim.CodeExpAvg.Max, optim.CodeExpAvgSq.Max, s); err != nil {
				t.Fatal(err)
			}
			d.Free(pg)
		}
		var got []float32
		if split {
			h, l := make([]uint16, n), make([]int16, n)
			d.DtoH(unsafe.Pointer(&h[0]), hi, 2*n)
			d.DtoH(unsafe.Pointer(&l[0]), lo, 2*n)
			got = make([]float32, n)
			for i := range got {
				got[i] = optim.JoinMaster(h[i], l[i])
			}
		} else {
			got = download(t, d, p32, n)
		}
		gq, gv := make([]uint8, n), make([]uint8, n)
		d.DtoH(unsafe.Pointer(&gq[0]), dmq, n)
		d.DtoH(unsafe.Pointer(&gv[0]), dvq, n)
		gms, gvs := download(t, d, dms, nb), download(t, d, dvs, nb)
		bad := 0
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(cpu[i]) || gq[i] != mq[i] || gv[i] != vq[i] {
				if bad < 5 {
					t.Errorf("split %v: [%d] weight %v / %v, codes %#x %#x / %#x %#x", split, i, got[i], cpu[i], gq[i], gv[i], mq[i], vq[i])
				}
				bad++
			}
		}
		for b := range gms {
			if gms[b] != ms[b] || gvs[b] != vs[b] {
				t.Fatalf("split %v: scales of block %d: %v %v, lib/optim %v %v", split, b, gms[b], gvs[b], ms[b], vs[b])
			}
		}
		if bad > 0 {
			t.Errorf("split %v: %d of %d values differ from lib/optim's Step8", split, bad, n)
		}
	}
	// SplitMaster on the device is optim.SplitMaster, and with a saved
	// remainder it restores the master exactly.
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	px, hi, lo := upload(t, d, x), alloc(2000), alloc(2000)
	if err := d.SplitMaster(px, hi, lo, 0, 1000); err != nil {
		t.Fatal(err)
	}
	h, l := make([]uint16, 1000), make([]int16, 1000)
	d.DtoH(unsafe.Pointer(&h[0]), hi, 2000)
	d.DtoH(unsafe.Pointer(&l[0]), lo, 2000)
	h0, l0 := append([]uint16(nil), h...), append([]int16(nil), l...)
	for i, v := range x {
		wh, wl := optim.SplitMaster(v)
		if h[i] != wh || l[i] != wl {
			t.Fatalf("split of %v: %#x %d on the device, %#x %d on the host", v, h[i], l[i], wh, wl)
		}
		x[i] = math.Float32frombits(uint32(wh) << 16) // the bf16 checkpoint's weight
	}
	d.HtoD(px, unsafe.Pointer(&x[0]), 4000)
	if err := d.SplitMaster(px, hi, lo, lo, 1000); err != nil {
		t.Fatal(err)
	}
	d.DtoH(unsafe.Pointer(&l[0]), lo, 2000)
	d.DtoH(unsafe.Pointer(&h[0]), hi, 2000)
	for i := range x {
		if h[i] != h0[i] || l[i] != l0[i] {
			t.Fatalf("[%d]: bf16 weight + saved remainder split to %#x %d, the master was %#x %d", i, h[i], l[i], h0[i], l0[i])
		}
	}
}
