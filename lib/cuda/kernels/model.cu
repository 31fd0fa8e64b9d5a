// model.cu: the fp32 elementwise, normalization, embedding, RoPE, SwiGLU and
// vocabulary kernels of mempo's CUDA backend. Compiled by NVRTC at first use
// (lib/cuda/nvrtc.go); self-contained, no headers.
// Element counts are 64-bit; loops are grid-stride so any grid size works.

#define MEMPO_INF __int_as_float(0x7f800000)
#define GRID_STRIDE(i, n) \
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

// to_bf16 rounds to bfloat16 bits, to nearest even (NaN stays NaN). Ops
// that feed a bf16 product write this rounding next to their fp32 output
// when given a non-null bf16 pointer (bf16 mode; lib/model's dual).
__device__ __forceinline__ unsigned short to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}
// block_sum/block_max: every thread gets the result. scratch holds 32 floats.
__device__ float block_sum(float v, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : 0.f;
	v = warp_sum(v);
	return v;
}
__device__ float block_max(float v, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : -MEMPO_INF;
	v = warp_max(v);
	return v;
}

extern "C" __global__ void fill_f32(float *p, long long n, float v) {
	GRID_STRIDE(i, n) p[i] = v;
}

extern "C" __global__ void add_f32(float *dst, const float *src, long long n) {
	GRID_STRIDE(i, n) dst[i] += src[i];
}

extern "C" __global__ void add_bias_f32(float *x, const float *b, long long n, int cols, unsigned short *x16) {
	GRID_STRIDE(i, n) {
		float v = x[i] + b[i % cols];
		x[i] = v;
		if (x16) x16[i] = to_bf16(v);
	}
}

// sum_rows_f32: dst[j] += Σ_r x[r, j]. Grid (column blocks, row chunks).
extern "C" __global__ void sum_rows_f32(float *dst, const float *x, int rows, int cols, int chunk) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= cols) return;
	int r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
	float acc = 0.f;
	for (int r = r0; r < r1; r++) acc += x[(long long)r * cols + j];
	atomicAdd(dst + j, acc);
}

// gather_rows_f32: dst row i = src row idx[i] (also the embedding lookup).
extern "C" __global__ void gather_rows_f32(float *dst, const float *src, const int *idx, int n, int cols) {
	for (int i = blockIdx.x; i < n; i += gridDim.x) {
		const float *s = src + (long long)idx[i] * cols;
		float *d = dst + (long long)i * cols;
		for (int j = threadIdx.x; j < cols; j += blockDim.x) d[j] = s[j];
	}
}

// scatter_rows_f32: dst row idx[i] = src row i (KV-cache appends).
extern "C" __global__ void scatter_rows_f32(float *dst, const float *src, const int *idx, int n, int cols) {
	for (int i = blockIdx.x; i < n; i += gridDim.x) {
		const float *s = src + (long long)i * cols;
		float *d = dst + (long long)idx[i] * cols;
		for (int j = threadIdx.x; j < cols; j += blockDim.x) d[j] = s[j];
	}
}

// Row runs: run i moves the starts[i+1] − starts[i] consecutive rows that
// begin at source row runs[2i+1] to the rows that begin at runs[2i]
// (starts[0] = 0, starts[nrun] = the rows in all). One warp a row, in
// 16-byte pieces when cols is a multiple of 4. A KV cache's shared prefixes
// (copy_runs_f32) and the rows an attention call reads, packed and rounded
// (cast_runs_bf16), each in one launch whatever the number of runs.
__device__ __forceinline__ int run_of(const int *starts, int nrun, long long r) {
	int lo = 0, hi = nrun - 1; // the last run with starts[run] <= r
	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;
		if (starts[mid] <= r) lo = mid; else hi = mid - 1;
	}
	return lo;
}

extern "C" __global__ void copy_runs_f32(float *t, const int *runs, const int *starts, int nrun, long long total, int cols) {
	int lane = threadIdx.x & 31;
	long long warps = (long long)gridDim.x * (blockDim.x >> 5);
	for (long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < total; r += warps) {
		int i = run_of(starts, nrun, r);
		long long off = r - starts[i];
		float *d = t + ((long long)runs[2 * i] + off) * cols;
		const float *s = t + ((long long)runs[2 * i + 1] + off) * cols;
		if ((cols & 3) == 0) {
			for (int j = 4 * lane; j < cols; j += 128) *(float4 *)(d + j) = *(const float4 *)(s + j);
		} else {
			for (int j = lane; j < cols; j += 32) d[j] = s[j];
		}
	}
}

extern "C" __global__ void cast_runs_bf16(unsigned short *dst, const float *src, const int *runs, const int *starts, int nrun, long long total, int cols) {
	int lane = threadIdx.x & 31;
	long long warps = (long long)gridDim.x * (blockDim.x >> 5);
	for (long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < total; r += warps) {
		int i = run_of(starts, nrun, r);
		long long off = r - starts[i];
		unsigned short *d = dst + ((long long)runs[2 * i] + off) * cols;
		const float *s = src + ((long long)runs[2 * i + 1] + off) * cols;
		if ((cols & 3) == 0) {
			for (int j = 4 * lane; j < cols; j += 128) {
				float4 v = *(const float4 *)(s + j);
				uint2 o;
				o.x = (unsigned)to_bf16(v.x) | ((unsigned)to_bf16(v.y) << 16);
				o.y = (unsigned)to_bf16(v.z) | ((unsigned)to_bf16(v.w) << 16);
				*(uint2 *)(d + j) = o;
			}
		} else {
			for (int j = lane; j < cols; j += 32) d[j] = to_bf16(s[j]);
		}
	}
}

// embedding_bwd_f32: dT[ids[i]] += dO[i]; repeated ids add up (atomics).
extern "C" __global__ void embedding_bwd_f32(float *dT, const float *dO, const int *ids, int n, int cols) {
	for (int i = blockIdx.x; i < n; i += gridDim.x) {
		float *d = dT + (long long)ids[i] * cols;
		const float *s = dO + (long long)i * cols;
		for (int j = threadIdx.x; j < cols; j += blockDim.x) atomicAdd(d + j, s[j]);
	}
}

// The norms' row sums follow one block layout whatever the launch: vt =
// norm_vthreads(dim) virtual threads (lib/model's normBlock), virtual thread
// t adding elements t, t + vt, … in order, a warp sum per 32 of them, then
// a warp sum over those. A launch of vt/G threads (whole warps; lib/model's
// normLaunch) has each thread play G of them (virtual thread g·blockDim +
// tid), so that the sums, and every bit of the outputs, are the same as with
// vt threads, while four times the rows fit on a multiprocessor.
#define NORM_GMAX 8
__device__ __forceinline__ int norm_vthreads(int dim) { return min(1024, max(32, (dim + 31) / 32 * 32)); }

// norm_sum is block_sum over the virtual threads: part[g] is virtual thread
// g·blockDim + tid's value. Every thread gets the result.
__device__ float norm_sum(const float *part, int G, int vt, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wr = blockDim.x >> 5;
	float v[NORM_GMAX];
#pragma unroll
	for (int g = 0; g < NORM_GMAX; g++) v[g] = g < G ? warp_sum(part[g]) : 0.f;
	__syncthreads();
	if (lane == 0) {
#pragma unroll
		for (int g = 0; g < NORM_GMAX; g++)
			if (g < G) scratch[g * wr + w] = v[g];
	}
	__syncthreads();
	float t = lane < (vt >> 5) ? scratch[lane] : 0.f;
	return warp_sum(t);
}

// rmsnorm_rows: one block per row of dim elements, out = w·x·rstd. With d,
// the residual first, in the same pass over the row: x += d (stored; add_f32's
// sum), then the norm of the sums. out may be null when o16 is not (a
// ProductOnly output: only its bf16 rounding is written).
__device__ __forceinline__ void rmsnorm_rows(float *out, float *rstd, float *x, const float *d, const float *w, int n, int dim,
                                             float eps, unsigned short *o16) {
	__shared__ float scratch[32];
	const int vt = norm_vthreads(dim), G = vt / blockDim.x;
	for (int r = blockIdx.x; r < n; r += gridDim.x) {
		float *xr = x + (long long)r * dim;
		const float *dr = d ? d + (long long)r * dim : 0;
		float part[NORM_GMAX];
#pragma unroll
		for (int g = 0; g < NORM_GMAX; g++) {
			float ss = 0.f;
			if (g < G)
				for (int j = g * blockDim.x + threadIdx.x; j < dim; j += vt) {
					float v = xr[j];
					if (dr) {
						v = v + dr[j];
						xr[j] = v;
					}
					ss += v * v;
				}
			part[g] = ss;
		}
		// The loop below reads back only elements this thread wrote above
		// (both visit j ≡ threadIdx.x modulo blockDim.x).
		float ss = norm_sum(part, G, vt, scratch);
		float rs = 1.0f / sqrtf(ss / (float)dim + eps);
		if (threadIdx.x == 0) rstd[r] = rs;
		float *o = out + (long long)r * dim;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) {
			float v = w[j] * (xr[j] * rs);
			if (out) o[j] = v;
			if (o16) o16[(long long)r * dim + j] = to_bf16(v);
		}
	}
}

// rmsnorm_f32: rmsnorm_rows without a residual.
extern "C" __global__ void rmsnorm_f32(float *out, float *rstd, const float *x, const float *w, int n, int dim, float eps, unsigned short *o16) {
	rmsnorm_rows(out, rstd, (float *)x, 0, w, n, dim, eps, o16);
}

// add_rmsnorm_f32: add_f32 (x += d) then rmsnorm_f32 on the sums in one
// launch, the same bits as the two (lib/model's AddRMSNorm): the forward's
// residual adds, each followed by the next norm, read the rows once.
extern "C" __global__ void add_rmsnorm_f32(float *out, float *rstd, float *x, const float *d, const float *w, int n, int dim, float eps,
                                           unsigned short *o16) {
	rmsnorm_rows(out, rstd, x, d, w, n, dim, eps, o16);
}

// rmsnorm_bwd_dw_f32: dw[j] += Σ_r dy[r,j]·x[r,j]·rstd[r]. Grid (column
// blocks, row chunks).
extern "C" __global__ void rmsnorm_bwd_dw_f32(float *dw, const float *dy, const float *x, const float *rstd, int n, int dim, int chunk) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= dim) return;
	int r0 = blockIdx.y * chunk, r1 = min(n, r0 + chunk);
	float acc = 0.f;
	for (int r = r0; r < r1; r++) acc += dy[(long long)r * dim + j] * x[(long long)r * dim + j] * rstd[r];
	atomicAdd(dw + j, acc);
}

// rmsnorm_bwd_dx_f32: dx = rstd·(dy·w − x̂·mean(dy·w·x̂)); dx may alias dy
// (each element is read and then written by the same thread). With res
// (not aliasing dx), the residual path's gradient is added in the same pass:
// dx = that + res, add_f32's sum (__fadd_rn: never contracted into the
// product before it, so the bits are the two launches'). With dx16, dx's
// bf16 rounding is written too: the products that read dx next (the
// down and o_proj backward, their weight gradients) need no cast of their own.
extern "C" __global__ void rmsnorm_bwd_dx_f32(float *dx, const float *dy, const float *x, const float *w, const float *rstd, int n, int dim,
                                              const float *res, unsigned short *dx16) {
	__shared__ float scratch[32];
	const int vt = norm_vthreads(dim), G = vt / blockDim.x;
	for (int r = blockIdx.x; r < n; r += gridDim.x) {
		const float *xr = x + (long long)r * dim;
		const float *gr = dy + (long long)r * dim;
		float rs = rstd[r];
		float part[NORM_GMAX];
#pragma unroll
		for (int g = 0; g < NORM_GMAX; g++) {
			float m = 0.f;
			if (g < G)
				for (int j = g * blockDim.x + threadIdx.x; j < dim; j += vt) m += gr[j] * w[j] * xr[j] * rs;
			part[g] = m;
		}
		float m = norm_sum(part, G, vt, scratch) / (float)dim;
		float *d = dx + (long long)r * dim;
		const float *rr = res ? res + (long long)r * dim : 0;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) {
			float v = rs * (gr[j] * w[j] - xr[j] * rs * m);
			if (rr) v = __fadd_rn(v, rr[j]);
			d[j] = v;
			if (dx16) dx16[(long long)r * dim + j] = to_bf16(v);
		}
	}
}

// attn_bwd_dsum: D[row, h] = Σ_d dO·O, one warp per (row, head); it starts
// every attention backward, whichever kernels follow (attention2.cu's,
// attnmma.cu's or the cuBLAS path's). With do16 it also writes dO's bf16
// rounding, which attnmma.cu's backward reads, in the same pass over dO.
extern "C" __global__ void attn_bwd_dsum(float *D, const float *dout, const float *out, int rows, int heads, int hd,
                                         unsigned short *do16) {
	long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (w >= (long long)rows * heads) return;
	long long row = w / heads;
	int h = (int)(w % heads);
	const float *a = dout + row * heads * hd + h * hd, *b = out + row * heads * hd + h * hd;
	float s = 0.f;
	for (int d = lane; d < hd; d += 32) {
		float x = a[d];
		s += x * b[d];
		if (do16) do16[row * heads * hd + h * hd + d] = to_bf16(x);
	}
	s = warp_sum(s);
	if (lane == 0) D[w] = s;
}

// rope_f32: rotate pairs (i, i+half) of every head of row r by the angle of
// position pos[r]; cs/sn are [position][half] tables computed on the host
// exactly as the CPU backend computes them. With bias (1×cols), add_bias_f32
// first, in the same pass: x + bias, then the rotation (the same bits as the
// two launches).
extern "C" __global__ void rope_f32(float *x, const int *pos, const float *cs, const float *sn, int rows, int cols, int hd, int inverse,
                                    unsigned short *x16, const float *bias) {
	int half = hd / 2;
	long long pairs = (long long)rows * (cols / 2);
	GRID_STRIDE(t, pairs) {
		int r = (int)(t / (cols / 2));
		int rem = (int)(t % (cols / 2));
		int h = rem / half, i = rem % half;
		long long p = (long long)pos[r] * half + i;
		float c = cs[p], s = sn[p];
		if (inverse) s = -s;
		float *a = x + (long long)r * cols + h * hd;
		float x1 = a[i], x2 = a[i + half];
		if (bias) {
			x1 = x1 + bias[h * hd + i];
			x2 = x2 + bias[h * hd + i + half];
		}
		float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
		a[i] = y1;
		a[i + half] = y2;
		if (x16) {
			long long o = (long long)r * cols + h * hd + i;
			x16[o] = to_bf16(y1);
			x16[o + half] = to_bf16(y2);
		}
	}
}

// bf16 pairs: lo/hi are the two halves of a packed word as floats; pk packs
// two floats rounded.
__device__ __forceinline__ float bf_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ unsigned bf_pk(float lo, float hi) { return (unsigned)to_bf16(lo) | ((unsigned)to_bf16(hi) << 16); }

// in_f32 reads element i of an input given either as fp32 (x) or, when x16
// is not null, as the bf16 rounding a product wrote (a ProductOnly tensor).
__device__ __forceinline__ float in_f32(const float *x, const unsigned short *x16, long long i) {
	return x16 ? bf_lo(x16[i]) : x[i];
}

// swiglu and swiglu_grad are SwiGLU's arithmetic, shared by the scalar and
// the vectorized kernels so that both give the same bits: v = silu(x)·u; a =
// dv/du·d, b = dv/dx·d for an incoming gradient d.
__device__ __forceinline__ float swiglu(float x, float u) { return x / (1.f + expf(-x)) * u; }
__device__ __forceinline__ void swiglu_grad(float x, float u, float d, float *a, float *b) {
	float s = 1.f / (1.f + expf(-x));
	*a = d * x * s;
	*b = d * u * s * (1.f + x * (1.f - s));
}

// swiglu_f32: out = silu(g)·u. g and u come in fp32 or bf16 (g16, u16 not
// null: bf16 mode's gate and up products written only in bf16).
extern "C" __global__ void swiglu_f32(float *out, const float *g, const float *u, long long n, unsigned short *o16,
                                      const unsigned short *g16, const unsigned short *u16) {
	GRID_STRIDE(i, n) {
		float v = swiglu(in_f32(g, g16, i), in_f32(u, u16, i));
		if (out) out[i] = v;
		if (o16) o16[i] = to_bf16(v);
	}
}

// swiglu_f32x4 is swiglu_f32 where gate and up are fp32 (the products of
// passes that score and generate), four elements a thread in 16-byte loads:
// the scalar kernel reached a fifth of the memory's bandwidth there. Same
// arithmetic, same bits. n4 = n/4; the buffers are 16-byte aligned; out or
// o16 may be null.
extern "C" __global__ void swiglu_f32x4(float4 *out, const float4 *g, const float4 *u, long long n4, uint2 *o16) {
	GRID_STRIDE(i, n4) {
		float4 a = g[i], b = u[i], v;
		v.x = swiglu(a.x, b.x);
		v.y = swiglu(a.y, b.y);
		v.z = swiglu(a.z, b.z);
		v.w = swiglu(a.w, b.w);
		if (out) out[i] = v;
		if (o16) {
			uint2 o;
			o.x = (unsigned)to_bf16(v.x) | ((unsigned)to_bf16(v.y) << 16);
			o.y = (unsigned)to_bf16(v.z) | ((unsigned)to_bf16(v.w) << 16);
			o16[i] = o;
		}
	}
}

// swiglu_bwd_f32: dgate and dup from dout; the inputs in fp32 or bf16 as in
// swiglu_f32.
extern "C" __global__ void swiglu_bwd_f32(float *dg, float *du, const float *dout, const float *g, const float *u, long long n,
                                          unsigned short *dg16, unsigned short *du16, const unsigned short *dout16,
                                          const unsigned short *g16, const unsigned short *u16) {
	GRID_STRIDE(i, n) {
		float a, b;
		swiglu_grad(in_f32(g, g16, i), in_f32(u, u16, i), in_f32(dout, dout16, i), &a, &b);
		if (du) du[i] = a;
		if (dg) dg[i] = b;
		if (du16) du16[i] = to_bf16(a);
		if (dg16) dg16[i] = to_bf16(b);
	}
}

// swiglu_bf16x8 is swiglu_f32 where gate, up and the output are all bf16
// only (ProductOnly), eight elements a thread in 16-byte loads and stores:
// the scalar kernel reached about a third of the memory's bandwidth there.
// Same arithmetic, same bits. n8 = n/8; the buffers are 16-byte aligned.
extern "C" __global__ void swiglu_bf16x8(uint4 *o16, const uint4 *g16, const uint4 *u16, long long n8) {
	GRID_STRIDE(i, n8) {
		uint4 g = g16[i], u = u16[i], o;
		const unsigned *gw = (const unsigned *)&g, *uw = (const unsigned *)&u;
		unsigned *ow = (unsigned *)&o;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			ow[j] = bf_pk(swiglu(bf_lo(gw[j]), bf_lo(uw[j])), swiglu(bf_hi(gw[j]), bf_hi(uw[j])));
		}
		o16[i] = o;
	}
}

// swiglu_bwd_bf16x8 is swiglu_bwd_f32 with every input and output bf16 only,
// as swiglu_bf16x8.
extern "C" __global__ void swiglu_bwd_bf16x8(uint4 *dg16, uint4 *du16, const uint4 *dout16, const uint4 *g16, const uint4 *u16, long long n8) {
	GRID_STRIDE(i, n8) {
		uint4 g = g16[i], u = u16[i], d = dout16[i], dg, du;
		const unsigned *gw = (const unsigned *)&g, *uw = (const unsigned *)&u, *dw = (const unsigned *)&d;
		unsigned *gow = (unsigned *)&dg, *uow = (unsigned *)&du;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float a0, b0, a1, b1;
			swiglu_grad(bf_lo(gw[j]), bf_lo(uw[j]), bf_lo(dw[j]), &a0, &b0);
			swiglu_grad(bf_hi(gw[j]), bf_hi(uw[j]), bf_hi(dw[j]), &a1, &b1);
			uow[j] = bf_pk(a0, a1);
			gow[j] = bf_pk(b0, b1);
		}
		dg16[i] = dg;
		du16[i] = du;
	}
}

// online_add folds x into a running maximum m and sum s of exp(· − m).
__device__ __forceinline__ void online_add(float &m, float &s, float x) {
	if (x > m) {
		s = __fmul_rn(s, expf(m - x)); // expf(−inf) = 0 when m is still −inf
		m = x;
	}
	if (x != -MEMPO_INF) s += expf(x - m);
}

// token_logprobs_f32: one block per row of V logits: lse and the target's
// log-probability (0 for a negative target). One pass over the row: each
// thread keeps a running maximum and the sum of exp(z − max) rescaled when
// the maximum grows (the logits are read from DRAM once, not twice: at a
// vocabulary of 152k a row is 600 KB, far more than a block's L1 keeps), the
// threads' pairs are then brought to the block's maximum and summed. Rows
// of a multiple of 4 floats at 16-byte addresses are read as float4.
extern "C" __global__ void token_logprobs_f32(float *lp, float *lse, const float *z, const int *tg, int rows, long long V) {
	__shared__ float scratch[32];
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *zr = z + (long long)r * V;
		float m = -MEMPO_INF, s = 0.f;
		if ((V & 3) == 0 && ((unsigned long long)zr & 15) == 0) {
			const float4 *z4 = (const float4 *)zr;
			for (long long j = threadIdx.x; j < V / 4; j += blockDim.x) {
				float4 v = z4[j];
				online_add(m, s, v.x);
				online_add(m, s, v.y);
				online_add(m, s, v.z);
				online_add(m, s, v.w);
			}
		} else {
			for (long long j = threadIdx.x; j < V; j += blockDim.x) online_add(m, s, zr[j]);
		}
		float M = block_max(m, scratch);
		s = m == -MEMPO_INF ? 0.f : __fmul_rn(s, expf(m - M));
		s = block_sum(s, scratch);
		if (threadIdx.x == 0) {
			float l = M + logf(s);
			lse[r] = l;
			int t = tg[r];
			lp[r] = t >= 0 ? zr[t] - l : 0.f;
		}
		__syncthreads();
	}
}

// logprob_grad is one element of token_logprobs_bwd_f32's d: −g·exp(z − lse),
// plus g at the target.
__device__ __forceinline__ float logprob_grad(float z, float g, float lse, bool target) {
	float v = __fmul_rn(-g, expf(z - lse));
	return target ? __fadd_rn(v, g) : v;
}

// token_logprobs_bwd_f32: d = dlp·(onehot − softmax(z)); d may alias z.
// Rows of a multiple of 4 at 16-byte addresses (d, z, and 8 bytes for d16)
// go 4 elements a thread at a time, with the same arithmetic per element.
extern "C" __global__ void token_logprobs_bwd_f32(float *d, const float *z, const float *lse, const int *tg, const float *dlp, int rows, long long V, unsigned short *d16) {
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		float *dr = d ? d + (long long)r * V : 0;
		unsigned short *dr16 = d16 ? d16 + (long long)r * V : 0;
		const float *zr = z + (long long)r * V;
		float g = dlp[r];
		int t = tg[r];
		bool wide = (V & 3) == 0 && ((unsigned long long)zr & 15) == 0 && ((unsigned long long)dr & 15) == 0 &&
			((unsigned long long)dr16 & 7) == 0;
		if (t < 0 || g == 0.f) {
			for (long long j = threadIdx.x; j < V; j += blockDim.x) {
				if (dr) dr[j] = 0.f;
				if (dr16) dr16[j] = 0;
			}
		} else if (wide) {
			float m = lse[r];
			for (long long j = threadIdx.x; j < V / 4; j += blockDim.x) {
				float4 v = ((const float4 *)zr)[j];
				long long e = 4 * j;
				v.x = logprob_grad(v.x, g, m, e == t);
				v.y = logprob_grad(v.y, g, m, e + 1 == t);
				v.z = logprob_grad(v.z, g, m, e + 2 == t);
				v.w = logprob_grad(v.w, g, m, e + 3 == t);
				if (dr) ((float4 *)dr)[j] = v;
				if (dr16) {
					uint2 h;
					h.x = (unsigned)to_bf16(v.x) | (unsigned)to_bf16(v.y) << 16;
					h.y = (unsigned)to_bf16(v.z) | (unsigned)to_bf16(v.w) << 16;
					((uint2 *)dr16)[j] = h;
				}
			}
		} else {
			float m = lse[r];
			for (long long j = threadIdx.x; j < V; j += blockDim.x) {
				float v = logprob_grad(zr[j], g, m, j == t);
				if (dr) dr[j] = v;
				if (dr16) dr16[j] = to_bf16(v);
			}
		}
		__syncthreads();
	}
}

// cast_bf16: float32 → bfloat16 bits, round to nearest even (NaN stays NaN).
extern "C" __global__ void cast_bf16(unsigned short *dst, const float *src, long long n) {
	GRID_STRIDE(i, n) {
		unsigned u = __float_as_uint(src[i]);
		if ((u & 0x7fffffffu) > 0x7f800000u) {
			dst[i] = 0x7fc0;
		} else {
			u += 0x7fffu + ((u >> 16) & 1u);
			dst[i] = (unsigned short)(u >> 16);
		}
	}
}
