// model.cu: the fp32 elementwise, normalization, embedding, RoPE, SwiGLU and
// vocabulary kernels of mempo's CUDA backend. Compiled by NVRTC at first use
// (lib/cuda/nvrtc.go); self-contained, no headers.
// Element counts are 64-bit; loops are grid-stride so any grid size works.

#define MEMPO_INF __int_as_float(0x7f800000)
#define GRID_STRIDE(i, n) \
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

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

extern "C" __global__ void add_bias_f32(float *x, const float *b, long long n, int cols) {
	GRID_STRIDE(i, n) x[i] += b[i % cols];
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

// embedding_bwd_f32: dT[ids[i]] += dO[i]; repeated ids add up (atomics).
extern "C" __global__ void embedding_bwd_f32(float *dT, const float *dO, const int *ids, int n, int cols) {
	for (int i = blockIdx.x; i < n; i += gridDim.x) {
		float *d = dT + (long long)ids[i] * cols;
		const float *s = dO + (long long)i * cols;
		for (int j = threadIdx.x; j < cols; j += blockDim.x) atomicAdd(d + j, s[j]);
	}
}

// rmsnorm_f32: one block per row of dim elements.
extern "C" __global__ void rmsnorm_f32(float *out, float *rstd, const float *x, const float *w, int n, int dim, float eps) {
	__shared__ float scratch[32];
	for (int r = blockIdx.x; r < n; r += gridDim.x) {
		const float *xr = x + (long long)r * dim;
		float ss = 0.f;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) ss += xr[j] * xr[j];
		ss = block_sum(ss, scratch);
		float rs = 1.0f / sqrtf(ss / (float)dim + eps);
		if (threadIdx.x == 0) rstd[r] = rs;
		float *o = out + (long long)r * dim;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) o[j] = w[j] * (xr[j] * rs);
	}
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
// (each element is read and then written by the same thread).
extern "C" __global__ void rmsnorm_bwd_dx_f32(float *dx, const float *dy, const float *x, const float *w, const float *rstd, int n, int dim) {
	__shared__ float scratch[32];
	for (int r = blockIdx.x; r < n; r += gridDim.x) {
		const float *xr = x + (long long)r * dim;
		const float *gr = dy + (long long)r * dim;
		float rs = rstd[r];
		float m = 0.f;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) m += gr[j] * w[j] * xr[j] * rs;
		m = block_sum(m, scratch) / (float)dim;
		float *d = dx + (long long)r * dim;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) d[j] = rs * (gr[j] * w[j] - xr[j] * rs * m);
	}
}

// rope_f32: rotate pairs (i, i+half) of every head of row r by the angle of
// position pos[r]; cs/sn are [position][half] tables computed on the host
// exactly as the CPU backend computes them.
extern "C" __global__ void rope_f32(float *x, const int *pos, const float *cs, const float *sn, int rows, int cols, int hd, int inverse) {
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
		a[i] = x1 * c - x2 * s;
		a[i + half] = x2 * c + x1 * s;
	}
}

extern "C" __global__ void swiglu_f32(float *out, const float *g, const float *u, long long n) {
	GRID_STRIDE(i, n) {
		float x = g[i];
		out[i] = x / (1.f + expf(-x)) * u[i];
	}
}

extern "C" __global__ void swiglu_bwd_f32(float *dg, float *du, const float *dout, const float *g, const float *u, long long n) {
	GRID_STRIDE(i, n) {
		float x = g[i], d = dout[i], uu = u[i];
		float s = 1.f / (1.f + expf(-x));
		du[i] = d * x * s;
		dg[i] = d * uu * s * (1.f + x * (1.f - s));
	}
}

// token_logprobs_f32: one block per row of V logits: lse and the target's
// log-probability (0 for a negative target).
extern "C" __global__ void token_logprobs_f32(float *lp, float *lse, const float *z, const int *tg, int rows, long long V) {
	__shared__ float scratch[32];
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *zr = z + (long long)r * V;
		float m = -MEMPO_INF;
		for (long long j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, zr[j]);
		m = block_max(m, scratch);
		float s = 0.f;
		for (long long j = threadIdx.x; j < V; j += blockDim.x) s += expf(zr[j] - m);
		s = block_sum(s, scratch);
		if (threadIdx.x == 0) {
			float l = m + logf(s);
			lse[r] = l;
			int t = tg[r];
			lp[r] = t >= 0 ? zr[t] - l : 0.f;
		}
		__syncthreads();
	}
}

// token_logprobs_bwd_f32: d = dlp·(onehot − softmax(z)); d may alias z.
extern "C" __global__ void token_logprobs_bwd_f32(float *d, const float *z, const float *lse, const int *tg, const float *dlp, int rows, long long V) {
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		float *dr = d + (long long)r * V;
		const float *zr = z + (long long)r * V;
		float g = dlp[r];
		int t = tg[r];
		if (t < 0 || g == 0.f) {
			for (long long j = threadIdx.x; j < V; j += blockDim.x) dr[j] = 0.f;
		} else {
			float m = lse[r];
			for (long long j = threadIdx.x; j < V; j += blockDim.x) dr[j] = -g * expf(zr[j] - m);
			__syncthreads();
			if (threadIdx.x == 0) dr[t] += g;
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
