// Command adamw8maps measures how far AdamW with 8-bit blockwise moments
// (block 256, absmax scale) strays from fp32 AdamW over 100 steps of a noisy
// least-squares problem, for several 8-bit value maps of m and v (FP8-like
// formats, bitsandbytes-style dynamic maps, linear), quantizing m only, v
// only, v or √v, and both. It printed the numbers that chose lib/optim's
// AdamW8 maps (docs/formats.md): `go run ./scripts/adamw8maps`.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

type codebook struct{ vals []float64 } // non-negative, ascending, last = 1

func (cb codebook) q(x float64) float64 {
	a := math.Abs(x)
	i := sort.SearchFloat64s(cb.vals, a)
	if i >= len(cb.vals) {
		i = len(cb.vals) - 1
	}
	if i > 0 && a-cb.vals[i-1] <= cb.vals[i]-a {
		i--
	}
	return math.Copysign(cb.vals[i], x)
}

func fp(e, m int, bias int) codebook {
	var v []float64
	for ex := 0; ex < 1<<e; ex++ {
		for mt := 0; mt < 1<<m; mt++ {
			var x float64
			if ex == 0 {
				x = float64(mt) / float64(int(1)<<m) * math.Ldexp(1, 1-bias)
			} else {
				x = (1 + float64(mt)/float64(int(1)<<m)) * math.Ldexp(1, ex-bias)
			}
			v = append(v, x)
		}
	}
	if e == 4 && m == 3 {
		v = v[:127]
	}
	mx := v[len(v)-1]
	for i := range v {
		v[i] /= mx
	}
	return codebook{v}
}

func dyn(signed bool) codebook {
	nsb := 7
	if !signed {
		nsb = 8
	}
	v := []float64{0}
	for i := 0; i < 7; i++ {
		k := 1<<(i+nsb-7) + 1
		for j := 0; j+1 < k; j++ {
			b0 := 0.1 + 0.9*float64(j)/float64(k-1)
			b1 := 0.1 + 0.9*float64(j+1)/float64(k-1)
			v = append(v, math.Pow(10, float64(-6+i))*(b0+b1)/2)
		}
	}
	v = append(v, 1)
	sort.Float64s(v)
	return codebook{v}
}

func linear(n int) codebook {
	var v []float64
	for i := 0; i < n; i++ {
		v = append(v, float64(i)/float64(n-1))
	}
	return codebook{v}
}

func quant(x []float64, cb codebook) {
	for b := 0; b < len(x); b += 256 {
		hi := min(b+256, len(x))
		amax := 0.0
		for _, v := range x[b:hi] {
			amax = math.Max(amax, math.Abs(v))
		}
		if amax == 0 {
			continue
		}
		for i := b; i < hi; i++ {
			x[i] = cb.q(x[i]/amax) * amax
		}
	}
}

func main() {
	const n, dim = 1024, 64
	r := rand.New(rand.NewPCG(5, 6))
	a := make([]float64, dim*n)
	for i := range a {
		a[i] = r.NormFloat64() / 8
	}
	tg := make([]float64, dim)
	for i := range tg {
		tg[i] = r.NormFloat64()
	}
	w0 := make([]float64, n)
	for i := range w0 {
		w0[i] = r.NormFloat64() / 10
	}
	grad := func(w, g []float64, step int) {
		res := make([]float64, dim)
		for j := 0; j < dim; j++ {
			s := 0.0
			for i := 0; i < n; i++ {
				s += a[j*n+i] * w[i]
			}
			res[j] = s - tg[j]
		}
		nr := rand.New(rand.NewPCG(uint64(step), 9))
		for i := range g {
			s := 0.0
			for j := 0; j < dim; j++ {
				s += res[j] * a[j*n+i]
			}
			g[i] = s + 0.01*nr.NormFloat64()
		}
	}
	run := func(mq, vq func([]float64), sqrtV bool, lr float64) []float64 {
		w := append([]float64(nil), w0...)
		m, v, g := make([]float64, n), make([]float64, n), make([]float64, n)
		for k := 1; k <= 100; k++ {
			grad(w, g, k)
			for i := range w {
				w[i] *= 1 - lr*0.01
				m[i] = 0.9*m[i] + 0.1*g[i]
				v[i] = 0.999*v[i] + 0.001*g[i]*g[i]
				bc1, bc2 := 1-math.Pow(0.9, float64(k)), 1-math.Pow(0.999, float64(k))
				w[i] -= lr / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + 1e-8)
			}
			if mq != nil {
				mq(m)
			}
			if vq != nil {
				if sqrtV {
					for i := range v {
						v[i] = math.Sqrt(v[i])
					}
					vq(v)
					for i := range v {
						v[i] *= v[i]
					}
				} else {
					vq(v)
				}
			}
		}
		return w
	}
	for _, lr := range []float64{1e-2, 1e-3} {
		ref := run(nil, nil, false, lr)
		rel := func(w []float64) float64 {
			var mv, d float64
			for i := range w {
				mv += (ref[i] - w0[i]) * (ref[i] - w0[i])
				d += (w[i] - ref[i]) * (w[i] - ref[i])
			}
			return math.Sqrt(d / mv)
		}
		// fp32 rounding baseline
		f32 := func(x []float64) {
			for i := range x {
				x[i] = float64(float32(x[i]))
			}
		}
		bf := func(x []float64) {
			for i := range x {
				b := math.Float32bits(float32(x[i]))
				b = (b + 0x7fff + (b>>16)&1) &^ 0xffff
				x[i] = float64(math.Float32frombits(b))
			}
		}
		cbq := func(cb codebook) func([]float64) { return func(x []float64) { quant(x, cb) } }
		fmt.Printf("  combos: dyn m + dynU v %.4f, dyn m + dynU sqrt %.4f, e3m4 m + e4m4u sqrt %.4f, e3m4 m + e4m4u v %.4f, dyn m + e4m4u sqrt %.4f e3m4 + e5m3u v %.4f\n",
			rel(run(cbq(dyn(true)), cbq(dyn(false)), false, lr)), rel(run(cbq(dyn(true)), cbq(dyn(false)), true, lr)),
			rel(run(cbq(fp(3, 4, 3)), cbq(fp(4, 4, 7)), true, lr)), rel(run(cbq(fp(3, 4, 3)), cbq(fp(4, 4, 7)), false, lr)), rel(run(cbq(dyn(true)), cbq(fp(4, 4, 7)), true, lr)), rel(run(cbq(fp(3, 4, 3)), cbq(fp(5, 3, 15)), false, lr)))
		fmt.Printf("lr %g: fp32 %.4f bf16 %.4f\n", lr, rel(run(f32, f32, false, lr)), rel(run(bf, bf, false, lr)))
		for _, c := range []struct {
			name string
			cb   codebook
		}{{"e4m3", fp(4, 3, 7)}, {"e3m4", fp(3, 4, 3)}, {"e2m5", fp(2, 5, 1)}, {"lin128", linear(128)}, {"dyn", dyn(true)}, {"dynU", dyn(false)}, {"e4m4u", fp(4, 4, 7)}, {"e5m3u", fp(5, 3, 15)}} {
			fmt.Printf("  %s: m only %.4f, v only %.4f, v-sqrt only %.4f, both(sqrt) %.4f\n", c.name,
				rel(run(cbq(c.cb), nil, false, lr)), rel(run(nil, cbq(c.cb), false, lr)), rel(run(nil, cbq(c.cb), true, lr)), rel(run(cbq(c.cb), cbq(c.cb), true, lr)))
		}
	}
}
