package model

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/mempo/mempo/lib/tensor"
)

// CPU is the host backend: tensors are Go slices, matrix products go to
// OpenBLAS (tensor.Sgemm), elementwise work runs in Go over all cores.
type CPU struct {
	ropeMu sync.Mutex
	rope   map[ropeKey]*ropeTable

	// Buffers of freed tensors, by length, for Zeros to reuse. The model
	// frees its temporaries, so from the second step on a forward, backward
	// or decoding step allocates nothing: no garbage-collector work and no
	// first-touch page faults (which cost about 18 s per GiB on the 2-core
	// VM this was measured on).
	poolMu    sync.Mutex
	pool      map[int][][]float32
	poolBytes int64
}

// cpuPoolLimit bounds the bytes kept for reuse; beyond it freed buffers are
// left to the garbage collector.
const cpuPoolLimit = 4 << 30

// NewCPU returns the CPU backend.
func NewCPU() *CPU { return &CPU{rope: map[ropeKey]*ropeTable{}, pool: map[int][][]float32{}} }

type cpuTensor struct {
	d    []float32
	r, c int
	own  bool // d is this tensor's own buffer (not a view), returned to the pool by Free
}

func (t *cpuTensor) Rows() int { return t.r }
func (t *cpuTensor) Cols() int { return t.c }

func ct(t Tensor) *cpuTensor {
	c, ok := t.(*cpuTensor)
	if !ok {
		panic(fmt.Sprintf("model: CPU backend given a %T tensor", t))
	}
	return c
}

func sameShape(op string, a, b *cpuTensor) {
	if a.r != b.r || a.c != b.c {
		panic(fmt.Sprintf("model: %s: shapes %d×%d and %d×%d differ", op, a.r, a.c, b.r, b.c))
	}
}

// grain sizes for tensor.Parallel, in rows: enough work per goroutine.
func rowGrain(cols int) int { return max(1, 16384/max(cols, 1)) }

func (*CPU) Name() string { return "cpu" }

// Empty is Zeros on the CPU: clearing costs little next to the work that
// fills the tensor, and it keeps results independent of the pool's history.
func (c *CPU) Empty(rows, cols int) Tensor { return c.Zeros(rows, cols) }

func (c *CPU) Zeros(rows, cols int) Tensor {
	n := rows * cols
	c.poolMu.Lock()
	var d []float32
	if l := c.pool[n]; len(l) > 0 {
		d = l[len(l)-1]
		c.pool[n] = l[:len(l)-1]
		c.poolBytes -= 4 * int64(n)
	}
	c.poolMu.Unlock()
	if d == nil {
		d = make([]float32, n)
	} else {
		tensor.Parallel(n, 1<<16, func(lo, hi int) { clear(d[lo:hi]) })
	}
	return &cpuTensor{d: d, r: rows, c: cols, own: true}
}

func (*CPU) FromHost(data []float32, rows, cols int) Tensor {
	if len(data) != rows*cols {
		panic(fmt.Sprintf("model: FromHost: %d values for %d×%d", len(data), rows, cols))
	}
	return &cpuTensor{d: append([]float32(nil), data...), r: rows, c: cols}
}

func (*CPU) ToHost(t Tensor, dst []float32) []float32 {
	s := ct(t)
	n := s.r * s.c
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	copy(dst, s.d[:n])
	return dst
}

func (*CPU) View(t Tensor, row0, rows int) Tensor {
	s := ct(t)
	if row0 < 0 || rows < 0 || row0+rows > s.r {
		panic(fmt.Sprintf("model: View rows [%d,%d) of %d", row0, row0+rows, s.r))
	}
	return &cpuTensor{d: s.d[row0*s.c : (row0+rows)*s.c], r: rows, c: s.c}
}

func (*CPU) Reshape(t Tensor, rows, cols int) Tensor {
	s := ct(t)
	if rows*cols != s.r*s.c {
		panic(fmt.Sprintf("model: Reshape %d×%d to %d×%d", s.r, s.c, rows, cols))
	}
	return &cpuTensor{d: s.d[:rows*cols], r: rows, c: cols}
}

func (*CPU) Copy(dst, src Tensor) {
	d, s := ct(dst), ct(src)
	sameShape("Copy", d, s)
	copy(d.d[:d.r*d.c], s.d)
}

func (*CPU) Fill(t Tensor, v float32) {
	s := ct(t)
	x := s.d[:s.r*s.c]
	for i := range x {
		x[i] = v
	}
}

func (*CPU) GatherRows(dst, src Tensor, rows []int) {
	d, s := ct(dst), ct(src)
	if d.c != s.c || d.r != len(rows) {
		panic("model: GatherRows shape mismatch")
	}
	for i, r := range rows {
		copy(d.d[i*d.c:(i+1)*d.c], s.d[r*s.c:(r+1)*s.c])
	}
}

func (*CPU) ScatterRows(dst, src Tensor, rows []int) {
	d, s := ct(dst), ct(src)
	if d.c != s.c || s.r != len(rows) {
		panic("model: ScatterRows shape mismatch")
	}
	for i, r := range rows {
		if r < 0 || r >= d.r {
			panic(fmt.Sprintf("model: ScatterRows row %d of %d", r, d.r))
		}
		copy(d.d[r*d.c:(r+1)*d.c], s.d[i*s.c:(i+1)*s.c])
	}
}

// Free returns an owned buffer to the pool; views are not owned and free
// nothing. The tensor's slice is dropped, so a use after Free panics instead
// of reading a buffer that has been handed out again.
func (c *CPU) Free(t Tensor) {
	s := ct(t)
	if !s.own || s.d == nil {
		return
	}
	n := len(s.d)
	d := s.d
	s.d = nil
	c.poolMu.Lock()
	if c.poolBytes+4*int64(n) <= cpuPoolLimit {
		c.pool[n] = append(c.pool[n], d)
		c.poolBytes += 4 * int64(n)
	}
	c.poolMu.Unlock()
}

func (*CPU) MatMul(c, a, b Tensor, transA, transB bool, alpha, beta float32) {
	C, A, B := ct(c), ct(a), ct(b)
	m, k := A.r, A.c
	if transA {
		m, k = k, m
	}
	kb, n := B.r, B.c
	if transB {
		kb, n = n, kb
	}
	if kb != k || C.r != m || C.c != n {
		panic(fmt.Sprintf("model: MatMul %d×%d (t=%v) by %d×%d (t=%v) into %d×%d", A.r, A.c, transA, B.r, B.c, transB, C.r, C.c))
	}
	tensor.Sgemm(transA, transB, m, n, k, alpha, A.d, A.c, B.d, B.c, beta, C.d, C.c)
}

func (*CPU) Add(dst, src Tensor) {
	d, s := ct(dst), ct(src)
	sameShape("Add", d, s)
	tensor.Parallel(d.r*d.c, 1<<15, func(lo, hi int) {
		x, y := d.d[lo:hi], s.d[lo:hi]
		for i := range x {
			x[i] += y[i]
		}
	})
}

func (*CPU) AddBias(x, bias Tensor) {
	X, b := ct(x), ct(bias)
	if b.r*b.c != X.c {
		panic("model: AddBias width mismatch")
	}
	tensor.Parallel(X.r, rowGrain(X.c), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := X.d[r*X.c : (r+1)*X.c]
			for j, v := range b.d[:X.c] {
				row[j] += v
			}
		}
	})
}

func (*CPU) SumRows(dst, x Tensor) {
	d, X := ct(dst), ct(x)
	if d.r*d.c != X.c {
		panic("model: SumRows width mismatch")
	}
	// Column blocks in parallel: each goroutine owns its columns of dst.
	tensor.Parallel(X.c, 64, func(lo, hi int) {
		acc := d.d[lo:hi]
		for r := 0; r < X.r; r++ {
			row := X.d[r*X.c+lo : r*X.c+hi]
			for j, v := range row {
				acc[j] += v
			}
		}
	})
}

func (*CPU) Embedding(out, table Tensor, ids []int) {
	o, t := ct(out), ct(table)
	if o.r != len(ids) || o.c != t.c {
		panic("model: Embedding shape mismatch")
	}
	for i, id := range ids {
		copy(o.d[i*o.c:(i+1)*o.c], t.d[id*t.c:(id+1)*t.c])
	}
}

func (*CPU) EmbeddingBackward(dTable, dOut Tensor, ids []int) {
	t, o := ct(dTable), ct(dOut)
	// Split over columns so repeated ids never race.
	tensor.Parallel(t.c, 64, func(lo, hi int) {
		for i, id := range ids {
			tensor.Axpy(1, o.d[i*o.c+lo:i*o.c+hi], t.d[id*t.c+lo:id*t.c+hi])
		}
	})
}

func (*CPU) RMSNorm(out, rstd, x, w Tensor, eps float32) {
	o, s, X, W := ct(out), ct(rstd), ct(x), ct(w)
	dim := W.r * W.c
	n := X.r * X.c / dim
	if X.c%dim != 0 || s.r*s.c != n {
		panic(fmt.Sprintf("model: RMSNorm of %d×%d by %d with rstd %d×%d", X.r, X.c, dim, s.r, s.c))
	}
	sameShape("RMSNorm", o, X)
	tensor.Parallel(n, rowGrain(dim), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := X.d[r*dim : (r+1)*dim]
			ms := tensor.Dot(xr, xr) / float32(dim)
			rs := float32(1 / math.Sqrt(float64(ms+eps)))
			s.d[r] = rs
			or := o.d[r*dim : (r+1)*dim]
			for j, v := range xr {
				// HF multiplies x by rstd first, then by the weight.
				or[j] = W.d[j] * (v * rs)
			}
		}
	})
}

// RMSNormBackward: with x̂ = x·rstd and y = w·x̂, dx̂ = dy·w and, since
// rstd depends on every element of the row through mean(x²),
// dx = rstd·(dx̂ − x̂·mean(dx̂·x̂)); dw = Σ_rows dy·x̂.
func (*CPU) RMSNormBackward(dx, dw, dy, x, w, rstd Tensor) {
	DX, DW, DY, X, W, S := ct(dx), ct(dw), ct(dy), ct(x), ct(w), ct(rstd)
	dim := W.r * W.c
	n := X.r * X.c / dim
	sameShape("RMSNormBackward", DY, X)
	sameShape("RMSNormBackward", DX, X)
	// dw first (over column blocks), since dx may overwrite dy.
	tensor.Parallel(dim, 32, func(lo, hi int) {
		acc := DW.d[lo:hi]
		for r := 0; r < n; r++ {
			rs := S.d[r]
			xr, gr := X.d[r*dim+lo:r*dim+hi], DY.d[r*dim+lo:r*dim+hi]
			for j := range acc {
				acc[j] += gr[j] * xr[j] * rs
			}
		}
	})
	tensor.Parallel(n, rowGrain(dim), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rs := S.d[r]
			xr, gr, dr := X.d[r*dim:(r+1)*dim], DY.d[r*dim:(r+1)*dim], DX.d[r*dim:(r+1)*dim]
			var m float32
			for j, g := range gr {
				m += g * W.d[j] * xr[j] * rs
			}
			m /= float32(dim)
			for j, g := range gr {
				dr[j] = rs * (g*W.d[j] - xr[j]*rs*m)
			}
		}
	})
}

type ropeKey struct {
	headDim int
	theta   float64
}

type ropeTable struct {
	cos, sin [][]float32 // [pos][headDim/2]
}

// ropeRows returns cos/sin rows for positions up to maxPos, computed as HF
// does in float32: inv_freq = 1/θ^(2i/d), angle = float32(pos)·inv_freq.
func (c *CPU) ropeRows(headDim int, theta float64, maxPos int) *ropeTable {
	c.ropeMu.Lock()
	defer c.ropeMu.Unlock()
	k := ropeKey{headDim, theta}
	t := c.rope[k]
	if t == nil {
		t = &ropeTable{}
		c.rope[k] = t
	}
	half := headDim / 2
	if len(t.cos) > maxPos {
		return t
	}
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(headDim)
		inv[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	// Copy-on-grow so readers holding the old table are unaffected.
	n := max(maxPos+1, 2*len(t.cos))
	cos := append(make([][]float32, 0, n), t.cos...)
	sin := append(make([][]float32, 0, n), t.sin...)
	for p := len(t.cos); p < n; p++ {
		cr, sr := make([]float32, half), make([]float32, half)
		for i, f := range inv {
			a := float32(p) * f
			cr[i] = float32(math.Cos(float64(a)))
			sr[i] = float32(math.Sin(float64(a)))
		}
		cos, sin = append(cos, cr), append(sin, sr)
	}
	nt := &ropeTable{cos: cos, sin: sin}
	c.rope[k] = nt
	return nt
}

func (c *CPU) RoPE(x Tensor, pos []int, headDim int, theta float64, inverse bool) {
	X := ct(x)
	if len(pos) != X.r || X.c%headDim != 0 {
		panic("model: RoPE shape mismatch")
	}
	maxPos := 0
	for _, p := range pos {
		maxPos = max(maxPos, p)
	}
	tab := c.ropeRows(headDim, theta, maxPos)
	half := headDim / 2
	tensor.Parallel(X.r, rowGrain(X.c), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			cs, sn := tab.cos[pos[r]], tab.sin[pos[r]]
			for h := 0; h < X.c; h += headDim {
				a := X.d[r*X.c+h : r*X.c+h+half]
				b := X.d[r*X.c+h+half : r*X.c+h+headDim]
				for i := range a {
					s := sn[i]
					if inverse {
						s = -s
					}
					x1, x2 := a[i], b[i]
					a[i] = x1*cs[i] - x2*s
					b[i] = x2*cs[i] + x1*s
				}
			}
		}
	})
}

func (*CPU) SwiGLU(out, gate, up Tensor) {
	o, g, u := ct(out), ct(gate), ct(up)
	sameShape("SwiGLU", o, g)
	sameShape("SwiGLU", o, u)
	tensor.Parallel(len(o.d), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := g.d[i]
			o.d[i] = x / (1 + float32(math.Exp(float64(-x)))) * u.d[i]
		}
	})
}

// SwiGLUBackward: silu(g) = g·σ(g), silu'(g) = σ(g)·(1 + g·(1−σ(g))).
func (*CPU) SwiGLUBackward(dgate, dup, dout, gate, up Tensor) {
	dg, du, do, g, u := ct(dgate), ct(dup), ct(dout), ct(gate), ct(up)
	sameShape("SwiGLUBackward", dg, g)
	sameShape("SwiGLUBackward", du, u)
	tensor.Parallel(len(g.d), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x, d := g.d[i], do.d[i]
			s := 1 / (1 + float32(math.Exp(float64(-x))))
			uu := u.d[i]
			du.d[i] = d * x * s
			dg.d[i] = d * uu * s * (1 + x*(1-s))
		}
	})
}

func (*CPU) TokenLogProbs(lp, lse, logits Tensor, targets []int) {
	L, S, Z := ct(lp), ct(lse), ct(logits)
	if len(targets) != Z.r || L.r*L.c != Z.r || S.r*S.c != Z.r {
		panic("model: TokenLogProbs shape mismatch")
	}
	tensor.Parallel(Z.r, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := Z.d[r*Z.c : (r+1)*Z.c]
			m := tensor.LogSumExp(row)
			S.d[r] = m
			if t := targets[r]; t >= 0 {
				L.d[r] = row[t] - m
			} else {
				L.d[r] = 0
			}
		}
	})
}

func (*CPU) TokenLogProbsBackward(dlogits, logits, lse Tensor, targets []int, dlp []float32) {
	D, Z, S := ct(dlogits), ct(logits), ct(lse)
	sameShape("TokenLogProbsBackward", D, Z)
	tensor.Parallel(Z.r, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, out := Z.d[r*Z.c:(r+1)*Z.c], D.d[r*D.c:(r+1)*D.c]
			g := dlp[r]
			if targets[r] < 0 || g == 0 {
				for j := range out {
					out[j] = 0
				}
				continue
			}
			m := S.d[r]
			for j, z := range row {
				out[j] = -g * float32(math.Exp(float64(z-m)))
			}
			out[targets[r]] += g
		}
	})
}

func (*CPU) Attention(out, lse, q, k, v Tensor, seqs []AttnSeq, sh AttnShape) {
	O, LSE, Q, K, V := ct(out), ct(lse), ct(q), ct(k), ct(v)
	hd := sh.HeadDim
	group := sh.Heads / sh.KVHeads
	if Q.c != sh.Heads*hd || K.c != sh.KVHeads*hd || V.c != K.c || O.c != Q.c || LSE.c != sh.Heads {
		panic("model: Attention shape mismatch")
	}
	// Single-query rows (decoding) are many tiny dot products: one goroutine
	// per (sequence, head) with Go loops beats a cgo call per head. Longer
	// sequences use sgemm per head and let OpenBLAS use the cores.
	var small, big []AttnSeq
	for _, s := range seqs {
		s.checkPrefix()
		if s.N <= 4 {
			small = append(small, s)
		} else {
			big = append(big, s)
		}
	}
	tensor.Parallel(len(small)*sh.Heads, 4, func(lo, hi int) {
		var sc []float32
		for t := lo; t < hi; t++ {
			s, h := small[t/sh.Heads], t%sh.Heads
			kh := h / group
			for i := 0; i < s.N; i++ {
				L := s.Past + i + 1
				if cap(sc) < L {
					sc = make([]float32, L)
				}
				sc = sc[:L]
				qr := Q.d[(s.Q+i)*Q.c+h*hd : (s.Q+i)*Q.c+(h+1)*hd]
				for j := 0; j < L; j++ {
					r := s.keyRow(j)
					sc[j] = sh.Scale * tensor.Dot(qr, K.d[r*K.c+kh*hd:r*K.c+(kh+1)*hd])
				}
				m := softmaxInPlace(sc)
				LSE.d[(s.Q+i)*LSE.c+h] = m
				or := O.d[(s.Q+i)*O.c+h*hd : (s.Q+i)*O.c+(h+1)*hd]
				for d := range or {
					or[d] = 0
				}
				for j, p := range sc {
					r := s.keyRow(j)
					tensor.Axpy(p, V.d[r*V.c+kh*hd:r*V.c+(kh+1)*hd], or)
				}
			}
		}
	})
	// Longer sequences go by blocks of attnBlock query rows, each against
	// only the keys it can see (Past + its last row + 1): the masked upper
	// triangle is never computed, about half the work of a full square.
	var sc []float32
	for _, s := range big {
		kd, vd, kb := K.d, V.d, s.K // key j at row kb+j of kd and vd
		if s.PN > 0 {
			// A shared prefix: the sequence's keys gathered into one run
			// (keyRuns), so that the products below read them as without one.
			L := s.Past + s.N
			kd, vd, kb = make([]float32, L*K.c), make([]float32, L*V.c), 0
			for _, c := range keyRuns(s, 0) {
				copy(kd[c.dst*K.c:(c.dst+c.n)*K.c], K.d[c.src*K.c:(c.src+c.n)*K.c])
				copy(vd[c.dst*V.c:(c.dst+c.n)*V.c], V.d[c.src*V.c:(c.src+c.n)*V.c])
			}
		}
		for h := 0; h < sh.Heads; h++ {
			kh := h / group
			for i0 := 0; i0 < s.N; i0 += attnBlock {
				nb := min(attnBlock, s.N-i0)
				L := s.Past + i0 + nb // keys this block sees
				if cap(sc) < nb*L {
					sc = make([]float32, nb*L)
				}
				sc = sc[:nb*L]
				q0 := s.Q + i0
				tensor.Sgemm(false, true, nb, L, hd, sh.Scale, Q.d[q0*Q.c+h*hd:], Q.c, kd[kb*K.c+kh*hd:], K.c, 0, sc, L)
				tensor.Parallel(nb, max(1, 4096/L), func(lo, hi int) {
					for r := lo; r < hi; r++ {
						row := sc[r*L : (r+1)*L]
						n := s.Past + i0 + r + 1
						LSE.d[(q0+r)*LSE.c+h] = softmaxInPlace(row[:n])
						clear(row[n:])
					}
				})
				tensor.Sgemm(false, false, nb, hd, L, 1, sc, L, vd[kb*V.c+kh*hd:], V.c, 0, O.d[q0*O.c+h*hd:], O.c)
			}
		}
	}
}

// attnBlock is the number of query rows per block of the CPU attention
// (a variable so the tests can make blocks smaller than their sequences).
var attnBlock = 64

// softmaxInPlace turns x into softmax(x) in float32 (as HF's eager attention
// does, with the exponentials summed in float64) and returns logsumexp(x).
func softmaxInPlace(x []float32) float32 {
	m, _ := tensor.Max(x)
	var s float64
	for j, v := range x {
		e := math.Exp(float64(v - m))
		x[j] = float32(e)
		s += e
	}
	inv := float32(1 / s)
	for j := range x {
		x[j] *= inv
	}
	return m + float32(math.Log(s))
}

// AttentionBackward rebuilds P = exp(S − lse) per head and uses
// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dO∘O)), dQ = scale·dS·K,
// dK = scale·dSᵀ·Q. Query heads of one group add into the same dK, dV head.
func (*CPU) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, sh AttnShape) {
	DQ, DK, DV, DO, Q, K, V, O, LSE := ct(dq), ct(dk), ct(dv), ct(dout), ct(q), ct(k), ct(v), ct(out), ct(lse)
	hd := sh.HeadDim
	group := sh.Heads / sh.KVHeads
	var sc, dp []float32
	for _, s := range seqs {
		if s.Past != 0 {
			panic("model: AttentionBackward with a KV cache")
		}
		for r := s.K; r < s.K+s.N; r++ {
			clear(DK.d[r*DK.c : (r+1)*DK.c])
			clear(DV.d[r*DV.c : (r+1)*DV.c])
		}
		for h := 0; h < sh.Heads; h++ {
			kh := h / group
			// By blocks of query rows, each against the keys it sees.
			for i0 := 0; i0 < s.N; i0 += attnBlock {
				nb := min(attnBlock, s.N-i0)
				L := i0 + nb
				if cap(sc) < nb*L {
					sc, dp = make([]float32, nb*L), make([]float32, nb*L)
				}
				sc, dp = sc[:nb*L], dp[:nb*L]
				q0 := s.Q + i0
				tensor.Sgemm(false, true, nb, L, hd, sh.Scale, Q.d[q0*Q.c+h*hd:], Q.c, K.d[s.K*K.c+kh*hd:], K.c, 0, sc, L)
				tensor.Sgemm(false, true, nb, L, hd, 1, DO.d[q0*DO.c+h*hd:], DO.c, V.d[s.K*V.c+kh*hd:], V.c, 0, dp, L)
				tensor.Parallel(nb, max(1, 4096/L), func(lo, hi int) {
					for r := lo; r < hi; r++ {
						qi := q0 + r
						dsum := tensor.Dot(DO.d[qi*DO.c+h*hd:qi*DO.c+(h+1)*hd], O.d[qi*O.c+h*hd:qi*O.c+(h+1)*hd])
						m := LSE.d[qi*LSE.c+h]
						row, drow := sc[r*L:(r+1)*L], dp[r*L:(r+1)*L]
						n := i0 + r + 1
						for j := 0; j < n; j++ {
							p := float32(math.Exp(float64(row[j] - m)))
							row[j] = p
							drow[j] = p * (drow[j] - dsum)
						}
						clear(row[n:])
						clear(drow[n:])
					}
				})
				// sc now holds P, dp holds dS, for this block's rows.
				tensor.Sgemm(true, false, L, hd, nb, 1, sc, L, DO.d[q0*DO.c+h*hd:], DO.c, 1, DV.d[s.K*DV.c+kh*hd:], DV.c)
				tensor.Sgemm(false, false, nb, hd, L, sh.Scale, dp, L, K.d[s.K*K.c+kh*hd:], K.c, 0, DQ.d[q0*DQ.c+h*hd:], DQ.c)
				tensor.Sgemm(true, false, L, hd, nb, sh.Scale, dp, L, Q.d[q0*Q.c+h*hd:], Q.c, 1, DK.d[s.K*DK.c+kh*hd:], DK.c)
			}
		}
	}
}

func (*CPU) Sample(logits Tensor, params []SampleParams, u []float64) []Sampled {
	Z := ct(logits)
	out := make([]Sampled, Z.r)
	tensor.Parallel(Z.r, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out[r] = sampleRow(Z.d[r*Z.c:(r+1)*Z.c], params[r], u[r])
		}
	})
	return out
}

// sampleRow applies, in Hugging Face's order, temperature, then top-k, then
// top-p on the distribution renormalized over what top-k kept, and draws by
// inverse CDF with u. Top-k keeps exactly k tokens (ties broken by lower id);
// top-p keeps the shortest prefix, in descending probability, whose mass
// before the last kept token is below p (so at least one token).
func sampleRow(z []float32, p SampleParams, u float64) Sampled {
	lse1 := tensor.LogSumExp(z)
	if p.Temperature <= 0 {
		_, id := tensor.Max(z)
		return Sampled{ID: id, LogProb: z[id] - lse1}
	}
	invT := 1 / p.Temperature
	zmax, _ := tensor.Max(z)
	w := make([]float64, len(z)) // unnormalized probabilities at temperature T
	var total float64
	for i, v := range z {
		w[i] = math.Exp(float64(v-zmax) * invT)
		total += w[i]
	}
	useK := p.TopK > 0 && p.TopK < len(z)
	useP := p.TopP > 0 && p.TopP < 1
	pick := func(ids []int, mass float64) Sampled {
		target := u * mass
		var cum float64
		id := ids[len(ids)-1]
		for _, i := range ids {
			cum += w[i]
			if cum > target {
				id = i
				break
			}
		}
		return Sampled{ID: id, LogProb: z[id] - lse1, SampleLogProb: float32(math.Log(w[id] / mass))}
	}
	if !useK && !useP {
		all := make([]int, len(z))
		for i := range all {
			all[i] = i
		}
		return pick(all, total)
	}
	// Sort only a candidate set that must contain every kept token: all
	// tokens with weight ≥ τ, where τ is lowered until the set holds k tokens
	// (top-k) or mass p (top-p) — everything outside is smaller than
	// everything inside, so the kept prefix of the full sort lies within it.
	type cw struct {
		w  float64
		id int
	}
	var cs []cw
	for tau := 1e-4; ; tau *= 1e-3 {
		cs = cs[:0]
		var mass float64
		for i, x := range w {
			if x >= tau {
				cs = append(cs, cw{x, i})
				mass += x
			}
		}
		if (useK && len(cs) >= p.TopK) || (useP && mass >= p.TopP*total) || tau < 1e-300 || len(cs) == len(z) {
			break
		}
	}
	// Descending weight, ties by lower id: the order of a stable sort.
	slices.SortFunc(cs, func(a, b cw) int {
		switch {
		case a.w > b.w:
			return -1
		case a.w < b.w:
			return 1
		}
		return a.id - b.id
	})
	cand := make([]int, len(cs))
	for i, c := range cs {
		cand[i] = c.id
	}
	if useK && len(cand) > p.TopK {
		cand = cand[:p.TopK]
	}
	var mass float64
	for _, i := range cand {
		mass += w[i]
	}
	if useP {
		limit := p.TopP * mass
		var cum float64
		n := 0
		for n < len(cand) && (n == 0 || cum < limit) {
			cum += w[cand[n]]
			n++
		}
		cand = cand[:n]
		mass = cum
	}
	return pick(cand, mass)
}

func (*CPU) Dropout(dst, src Tensor, p float32, seed uint64) {
	d, s := ct(dst), ct(src)
	sameShape("Dropout", d, s)
	inv := 1 / (1 - p)
	tensor.Parallel(d.r*d.c, 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if dropoutKeep(seed, int64(i), p) {
				d.d[i] = s.d[i] * inv
			} else {
				d.d[i] = 0
			}
		}
	})
}
