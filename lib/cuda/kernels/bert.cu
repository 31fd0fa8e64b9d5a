// bert.cu: the kernels of lib/encoder's GPU forward (BertModel: e5, bge,
// contriever), everything between its cuBLAS GEMMs: embeddings + LayerNorm,
// bias + residual + LayerNorm, the head split of Q/K/V, the masked softmax of
// the attention scores, the head merge, bias + erf GELU, and mean/CLS
// pooling with L2 normalization. Plus synth_unit_f16, random unit vectors
// made on the device for the dense-search benchmarks.
//
// Storage: the *_f32 kernels read and write fp32 activations/weights, the
// *_f16 ones IEEE half (carried as unsigned short bits; bert_split_heads_f16
// and bert_gelu_f16 read the half outputs of their GEMMs); statistics,
// softmax, GELU and pooling are computed in fp32 (LayerNorm and pooling
// sums in fp64, as lib/encoder's CPU forward does).
//
// Every kernel but bert_softmax_warp_* runs one block per row (of
// activations, scores, sequences or vectors); the block size is blockDim.x,
// a power of two of at most RED_MAX. Block reductions are warp shuffles,
// then one value per warp through shared memory; every thread gets the same
// result bit for bit. bert_softmax_warp_* runs a warp per score row (rows
// of at most SM_WARP_KEYS keys). lib/encoder's tests run this file on the
// CPU, compiled by g++ with BERT_EMU defined (lib/cuda/cudaemu,
// whose fibers emulate the warp intrinsics too). Counts and offsets are
// 64-bit where they can pass 2^31.

#define RED_MAX 256

#ifndef BERT_EMU
#define DYN_SMEM(type, name) extern __shared__ type name[]
__device__ __forceinline__ unsigned short f2h(float f) {
	unsigned short h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
__device__ __forceinline__ float h2f(unsigned short h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
#endif

#define BERT_INF __int_as_float(0x7f800000)

typedef unsigned short half_t;

__device__ __forceinline__ float ldv(const float *p, long long i) { return p[i]; }
__device__ __forceinline__ float ldv(const half_t *p, long long i) { return h2f(p[i]); }
__device__ __forceinline__ void stv(float *p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void stv(half_t *p, long long i, float v) { p[i] = f2h(v); }

// Block-wide sum and max: every thread of the block gets the result (the
// same bits: a butterfly of shuffles gives every lane the same sums, and
// every thread adds the warps' values in the same order). red holds
// RED_MAX/32 values of shared memory; it is free again on return. A block
// smaller than a warp (the emulation's tests) shuffles within its lanes.
#define FULL_MASK 0xffffffffu
__device__ __forceinline__ int red_lanes() { return blockDim.x < 32 ? (int)blockDim.x : 32; }
__device__ __forceinline__ unsigned red_mask() { return blockDim.x < 32 ? (1u << blockDim.x) - 1 : FULL_MASK; }
__device__ double block_sum_d(double v, double *red) {
	for (int o = red_lanes() >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(red_mask(), v, o);
	int nw = (blockDim.x + 31) >> 5;
	if (nw == 1) return v;
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
	__syncthreads();
	double r = red[0];
	for (int w = 1; w < nw; w++) r += red[w];
	__syncthreads();
	return r;
}
__device__ float block_sum_f(float v, float *red) {
	for (int o = red_lanes() >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(red_mask(), v, o);
	int nw = (blockDim.x + 31) >> 5;
	if (nw == 1) return v;
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
	__syncthreads();
	float r = red[0];
	for (int w = 1; w < nw; w++) r += red[w];
	__syncthreads();
	return r;
}
__device__ float block_max_f(float v, float *red) {
	for (int o = red_lanes() >> 1; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(red_mask(), v, o));
	int nw = (blockDim.x + 31) >> 5;
	if (nw == 1) return v;
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
	__syncthreads();
	float r = red[0];
	for (int w = 1; w < nw; w++) r = fmaxf(r, red[w]);
	__syncthreads();
	return r;
}

// ln_row: LayerNorm of the H values v (shared memory, written by this
// block) into x (fp32) and, when xh is not null, its fp16 copy (the next
// GEMM's operand). Mean and variance in fp64, two passes, as the CPU.
__device__ void ln_row(const float *v, int H, const float *w, const float *b, float eps, float *x, half_t *xh,
                       double *red) {
	double s = 0;
	for (int j = threadIdx.x; j < H; j += blockDim.x) s += v[j];
	double mean = block_sum_d(s, red) / H;
	double ss = 0;
	for (int j = threadIdx.x; j < H; j += blockDim.x) {
		double d = (double)v[j] - mean;
		ss += d * d;
	}
	double inv = 1.0 / sqrt(block_sum_d(ss, red) / H + (double)eps);
	for (int j = threadIdx.x; j < H; j += blockDim.x) {
		float y = (float)(((double)v[j] - mean) * inv) * w[j] + b[j];
		x[j] = y;
		if (xh) xh[j] = f2h(y);
	}
}

// embed_ln: row r = b·T + t of x is LayerNorm(word[ids[r]] + pos[t] +
// type[0]) (token type ids are 0). Grid: N rows; dynamic shared memory: H
// floats.
template <typename W>
__device__ void embed_ln(const int *ids, const W *word, const W *pos, const W *typ, const float *lnw, const float *lnb,
                         int T, int H, float eps, float *x, half_t *xh, float *v, double *red) {
	long long r = blockIdx.x;
	long long t = r % T;
	long long id = ids[r];
	for (int j = threadIdx.x; j < H; j += blockDim.x) v[j] = (ldv(word, id * H + j) + ldv(pos, t * H + j)) + ldv(typ, j);
	__syncthreads();
	ln_row(v, H, lnw, lnb, eps, x + r * H, xh ? xh + r * H : 0, red);
}

extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_embed_ln_f32(const int *ids, const float *word, const float *pos, const float *typ, const float *lnw,
                      const float *lnb, int T, int H, float eps, float *x, half_t *xh) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	embed_ln(ids, word, pos, typ, lnw, lnb, T, H, eps, x, xh, v, red);
}

extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_embed_ln_f16(const int *ids, const half_t *word, const half_t *pos, const half_t *typ, const float *lnw,
                      const float *lnb, int T, int H, float eps, float *x, half_t *xh) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	embed_ln(ids, word, pos, typ, lnw, lnb, T, H, eps, x, xh, v, red);
}

// bert_add_ln: x[r] = LayerNorm(x[r] + (y[r] + bias)), the post-LayerNorm
// of a BERT sublayer (y is the sublayer's GEMM output without its bias).
// Grid: N rows; dynamic shared memory: H floats.
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_add_ln(float *x, const float *y, const float *bias, const float *lnw, const float *lnb, int H, float eps,
                half_t *xh) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	long long r = blockIdx.x;
	float *xr = x + r * H;
	const float *yr = y + r * H;
	for (int j = threadIdx.x; j < H; j += blockDim.x) v[j] = xr[j] + (yr[j] + bias[j]);
	__syncthreads();
	ln_row(v, H, lnw, lnb, eps, xr, xh ? xh + r * H : 0, red);
}

// split_heads: row r = b·T + t of qkv [N, 3H] (the fused projection
// without its bias) plus bias into q, k, v, each [B, nh, T, hd] (one
// contiguous T×hd matrix per sequence and head, for the strided-batched
// GEMMs). One block per row; 32-bit column arithmetic.
template <typename R, typename W>
__device__ void split_heads(const R *qkv, const float *bias, int T, int nh, int hd, W *q, W *k, W *v) {
	int H = nh * hd;
	long long r = blockIdx.x;
	long long b = r / T, t = r - b * T;
	const R *src = qkv + r * 3 * H;
	for (int c = threadIdx.x; c < 3 * H; c += blockDim.x) {
		int which = c / H, rem = c - which * H;
		int h = rem / hd, d = rem - h * hd;
		long long dst = ((b * nh + h) * T + t) * hd + d;
		W *o = which == 0 ? q : (which == 1 ? k : v);
		stv(o, dst, ldv(src, c) + bias[c]);
	}
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_split_heads_f32(const float *qkv, const float *bias, int T, int nh, int hd, float *q, float *k, float *v) {
	split_heads(qkv, bias, T, nh, hd, q, k, v);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_split_heads_f16(const half_t *qkv, const float *bias, int T, int nh, int hd, half_t *q, half_t *k, half_t *v) {
	split_heads(qkv, bias, T, nh, hd, q, k, v);
}

// softmax: one block per score row (b, h, i) of s [nb, nh, T, T] (scaled
// already); keys j with mask[b·T + j] = 0 get weight exactly 0 (HF adds
// finfo.min to them); a sequence with no valid key at all weighs every key
// (as lib/encoder's CPU forward). p may be s itself (fp32).
template <typename W>
__device__ void softmax_rows(const float *s, const int *mask, int T, int nh, W *p, float *red) {
	long long row = blockIdx.x;
	long long b = row / ((long long)nh * T);
	const int *m = mask + b * T;
	const float *sr = s + row * T;
	float cnt = 0;
	for (int j = threadIdx.x; j < T; j += blockDim.x) cnt += m[j] != 0 ? 1.f : 0.f;
	bool all = block_sum_f(cnt, red) == 0.f;
	float mx = -BERT_INF;
	for (int j = threadIdx.x; j < T; j += blockDim.x)
		if (all || m[j] != 0) mx = fmaxf(mx, sr[j]);
	mx = block_max_f(mx, red);
	float sum = 0;
	for (int j = threadIdx.x; j < T; j += blockDim.x)
		if (all || m[j] != 0) sum += expf(sr[j] - mx);
	float inv = 1.f / block_sum_f(sum, red);
	for (int j = threadIdx.x; j < T; j += blockDim.x) {
		float e = (all || m[j] != 0) ? expf(sr[j] - mx) * inv : 0.f;
		stv(p, row * T + j, e);
	}
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_softmax_f32(const float *s, const int *mask, int T, int nh, float *p) {
	__shared__ float red[RED_MAX];
	softmax_rows(s, mask, T, nh, p, red);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_softmax_f16(const float *s, const int *mask, int T, int nh, half_t *p) {
	__shared__ float red[RED_MAX];
	softmax_rows(s, mask, T, nh, p, red);
}

// softmax_warp: softmax_rows' result with one warp per row (row = block ·
// warps per block + warp, of rows in all) for T ≤ SM_WARP_KEYS: the row's
// scores stay in registers (key i·32 + lane in slot i), max and sum are
// shuffle butterflies. 4.7M score rows per 128 passages of 256 tokens in a
// base model make the block-per-row kernel's barriers the cost; here a row
// is one read and one write.
#define SM_WARP_KEYS 512
template <typename W>
__device__ void softmax_warp(const float *s, const int *mask, long long rows, int T, int nh, W *p) {
	const int lane = threadIdx.x & 31;
	const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (row >= rows) return; // the whole warp
	const long long b = row / ((long long)nh * T);
	const int *m = mask + b * T;
	const float *sr = s + row * T;
	float v[SM_WARP_KEYS / 32];
	unsigned on = 0, in = 0; // slots with a valid key, slots inside the row
#pragma unroll
	for (int i = 0; i < SM_WARP_KEYS / 32; i++) {
		int j = i * 32 + lane;
		v[i] = 0.f;
		if (j < T) {
			v[i] = sr[j];
			in |= 1u << i;
			if (m[j] != 0) on |= 1u << i;
		}
	}
	if (__ballot_sync(FULL_MASK, on != 0) == 0) on = in; // no valid key: weigh them all
	float mx = -BERT_INF;
#pragma unroll
	for (int i = 0; i < SM_WARP_KEYS / 32; i++)
		if (on >> i & 1) mx = fmaxf(mx, v[i]);
	for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, o));
	float sum = 0;
#pragma unroll
	for (int i = 0; i < SM_WARP_KEYS / 32; i++) {
		v[i] = (on >> i & 1) ? expf(v[i] - mx) : 0.f;
		sum += v[i];
	}
	for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, o);
	float inv = 1.f / sum;
#pragma unroll
	for (int i = 0; i < SM_WARP_KEYS / 32; i++)
		if (in >> i & 1) stv(p, row * T + i * 32 + lane, v[i] * inv);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_softmax_warp_f32(const float *s, const int *mask, long long rows, int T, int nh, float *p) {
	softmax_warp(s, mask, rows, T, nh, p);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_softmax_warp_f16(const float *s, const int *mask, long long rows, int T, int nh, half_t *p) {
	softmax_warp(s, mask, rows, T, nh, p);
}

// merge_heads: o [B, nh, T, hd] (the attention output per head) into row
// r = b·T + t of ctx [N, H], columns h·hd … h·hd + hd - 1. One block per
// row.
template <typename W>
__device__ void merge_heads(const float *o, int T, int nh, int hd, W *ctx) {
	int H = nh * hd;
	long long r = blockIdx.x;
	long long b = r / T, t = r - b * T;
	for (int c = threadIdx.x; c < H; c += blockDim.x) {
		int h = c / hd, d = c - h * hd;
		stv(ctx, r * H + c, o[((b * nh + h) * T + t) * hd + d]);
	}
}
extern "C" __global__ void __launch_bounds__(RED_MAX) bert_merge_heads_f32(const float *o, int T, int nh, int hd, float *ctx) {
	merge_heads(o, T, nh, hd, ctx);
}
extern "C" __global__ void __launch_bounds__(RED_MAX) bert_merge_heads_f16(const float *o, int T, int nh, int hd, half_t *ctx) {
	merge_heads(o, T, nh, hd, ctx);
}

// gelu: row r of out [N, cols] = GELU(u[r] + bias) with erf (BERT's
// "gelu"). out may be u itself (fp32). One block per row.
template <typename R, typename W>
__device__ void gelu_bias(const R *u, const float *bias, int cols, W *out) {
	long long base = (long long)blockIdx.x * cols;
	for (int j = threadIdx.x; j < cols; j += blockDim.x) {
		float x = ldv(u, base + j) + bias[j];
		stv(out, base + j, 0.5f * x * (1.f + erff(x * 0.707106781186547524f)));
	}
}
extern "C" __global__ void __launch_bounds__(RED_MAX) bert_gelu_f32(const float *u, const float *bias, int cols, float *out) {
	gelu_bias(u, bias, cols, out);
}
extern "C" __global__ void __launch_bounds__(RED_MAX) bert_gelu_f16(const half_t *u, const float *bias, int cols, half_t *out) {
	gelu_bias(u, bias, cols, out);
}

// bert_pool: one block per sequence b of x [B, T, H]: the mean of the rows
// whose mask is 1 (cls = 0; sums in fp64) or row 0 (cls = 1), divided by
// max(‖v‖, 1e-12) (F.normalize), into out [B, H].
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_pool(const float *x, const int *mask, int T, int H, int cls, float *out) {
	__shared__ double red[RED_MAX];
	long long b = blockIdx.x;
	const int *m = mask + b * T;
	const float *xb = x + b * T * (long long)H;
	float *o = out + b * (long long)H;
	int n = 0;
	for (int t = 0; t < T; t++) n += m[t] != 0;
	double ss = 0;
	for (int j = threadIdx.x; j < H; j += blockDim.x) {
		float v;
		if (cls) {
			v = xb[j];
		} else {
			double acc = 0;
			for (int t = 0; t < T; t++)
				if (m[t] != 0) acc += xb[(long long)t * H + j];
			v = (float)(acc / (double)(n > 1 ? n : 1));
		}
		o[j] = v;
		ss += (double)v * v;
	}
	double nrm = sqrt(block_sum_d(ss, red));
	if (nrm < 1e-12) nrm = 1e-12;
	for (int j = threadIdx.x; j < H; j += blockDim.x) o[j] = (float)((double)o[j] / nrm);
}

// synth_unit_f16: rows of dim values, each a standard normal drawn from a
// counter-based hash of (seed, row·dim + j) by Box-Muller, scaled to unit
// L2 norm and stored as fp16: synthetic passage vectors made on the device
// (benchmarks). One block per row, grid-stride over rows; dynamic shared
// memory: dim floats.
__device__ __forceinline__ float synth_normal(unsigned long long seed, unsigned long long i) {
	unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	float u1 = (float)((z >> 40) + 1) * (1.f / 16777216.f); // (0, 1]
	float u2 = (float)((z >> 8) & 0xFFFFFF) * (1.f / 16777216.f);
	return sqrtf(-2.f * logf(u1)) * cosf(6.28318530717958648f * u2);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    synth_unit_f16(half_t *out, long long rows, int dim, unsigned long long seed) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
		double ss = 0;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) {
			float g = synth_normal(seed, (unsigned long long)(r * dim + j));
			v[j] = g;
			ss += (double)g * g;
		}
		float inv = (float)(1.0 / sqrt(block_sum_d(ss, red)));
		for (int j = threadIdx.x; j < dim; j += blockDim.x) out[r * dim + j] = f2h(v[j] * inv);
	}
}
