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
// of a BERT sublayer (y is the sublayer's GEMM output without its bias);
// bert_add_ln_h reads y in half (the fp16 mode's GEMMs write half, as
// transformers' fp16 Linear does). Grid: N rows; dynamic shared memory: H
// floats.
template <typename Y>
__device__ void add_ln(float *x, const Y *y, const float *bias, const float *lnw, const float *lnb, int H, float eps,
                       half_t *xh, float *v, double *red) {
	long long r = blockIdx.x;
	float *xr = x + r * H;
	for (int j = threadIdx.x; j < H; j += blockDim.x) v[j] = xr[j] + (ldv(y, r * H + j) + bias[j]);
	__syncthreads();
	ln_row(v, H, lnw, lnb, eps, xr, xh ? xh + r * H : 0, red);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_add_ln(float *x, const float *y, const float *bias, const float *lnw, const float *lnb, int H, float eps,
                half_t *xh) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	add_ln(x, y, bias, lnw, lnb, H, eps, xh, v, red);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_add_ln_h(float *x, const half_t *y, const float *bias, const float *lnw, const float *lnb, int H, float eps,
                  half_t *xh) {
	DYN_SMEM(float, v);
	__shared__ double red[RED_MAX];
	add_ln(x, y, bias, lnw, lnb, H, eps, xh, v, red);
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
template <typename X> __device__ void pool_rows(const X *x, const int *mask, int T, int H, int cls, float *out, double *red) {
	long long b = blockIdx.x;
	const int *m = mask + b * T;
	const X *xb = x + b * T * (long long)H;
	float *o = out + b * (long long)H;
	int n = 0;
	for (int t = 0; t < T; t++) n += m[t] != 0;
	double ss = 0;
	for (int j = threadIdx.x; j < H; j += blockDim.x) {
		float v;
		if (cls) {
			v = ldv(xb, j);
		} else {
			double acc = 0;
			for (int t = 0; t < T; t++)
				if (m[t] != 0) acc += ldv(xb, (long long)t * H + j);
			v = (float)(acc / (double)(n > 1 ? n : 1));
		}
		o[j] = v;
		ss += (double)v * v;
	}
	double nrm = sqrt(block_sum_d(ss, red));
	if (nrm < 1e-12) nrm = 1e-12;
	for (int j = threadIdx.x; j < H; j += blockDim.x) o[j] = (float)((double)o[j] / nrm);
}
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_pool(const float *x, const int *mask, int T, int H, int cls, float *out) {
	__shared__ double red[RED_MAX];
	pool_rows(x, mask, T, H, cls, out, red);
}
// bert_pool_h: the same over the half residual stream.
extern "C" __global__ void __launch_bounds__(RED_MAX)
    bert_pool_h(const half_t *x, const int *mask, int T, int H, int cls, float *out) {
	__shared__ double red[RED_MAX];
	pool_rows(x, mask, T, H, cls, out, red);
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

// ---- Fused attention (fp16 mode, head dim 64) ----
//
// bert_attn_f16: the whole self-attention of one tile of 64 query rows of
// one head of one sequence (bert_attn128_f16: 128 rows), flash style (the scores never leave the
// registers), from the fused QKV projection's half output qkv [B·T, 3H]
// (without its bias) to the merged heads ctx [B·T, H] in half: the output
// projection's operand. The query bias is added in fp32 and rounded to
// half as the query tile is staged (as bert_split_heads_f16 does). The key
// bias is left out: it adds q·b_k to every score of a query row, which the
// softmax cancels exactly. The value bias is added to the output in fp32
// (the weights of a row sum to 1). So keys and values are copied raw,
// with cp.async, the next key tile loading while the current one is
// computed. Bidirectional; keys j with mask[b·T + j] = 0 get weight exactly
// 0, and a sequence with no valid key weighs every key (as softmax_rows).
// Key tiles past the last valid key are skipped (right padding costs
// nothing). Products are mma.sync m16n8k16 with fp16 operands and fp32
// accumulation; softmax in fp32 with a running max, probabilities rounded
// to half for P·V (as the unfused path rounds them for its GEMM). T is at
// most FA_MAXT. Grid (ceil(T/64), heads, B), 128 threads: 4 warps of 16
// query rows (bert_attn128_f16: grid (ceil(T/128), heads, B), 4 warps of 32
// rows). Shared: two buffers of key and value tiles, [64][FA_LD] halves
// each (the query tile staged in the second first), and the keys' mask as
// 0 / -inf; see attn_rows.
//
// The fragment layouts are those of attnmma.cu: A (16×16) four registers
// (gr, 2t), (gr+8, 2t), (gr, 2t+8), (gr+8, 2t+8); B (16×8) two, (k 2t,
// n gr), (k 2t+8, n gr); C four floats (gr, 2t), (gr, 2t+1), (gr+8, 2t),
// (gr+8, 2t+1), lane = 4·gr + t. Under BERT_EMU the tensor-core and
// asynchronous-copy instructions (mma, ldmatrix, cp.async) are emulated
// (warp shuffles of the same fragments; plain copies), so the CPU tests
// run this code.
#define FA_TILE 64
#define FA_HD 64
#define FA_LD (FA_HD + 8) // halves per shared row: conflict-free ldmatrix
#define FA_MAXT 512

#ifndef BERT_EMU
__device__ __forceinline__ void fa_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) {
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#else
// The emulation (lib/cuda/cudaemu's prelude): the same fragments exchanged
// between the lanes, the fp32 sums in k order.
static void fa_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) { emu_mma16816<emu_f16>(c, a, b0, b1); }
#endif

__device__ __forceinline__ unsigned fa_pack(float lo, float hi) { return (unsigned)f2h(lo) | (unsigned)f2h(hi) << 16; }

// fa_stage queues the copy of rows [0, 64) of a half matrix (row stride
// ld) into shared memory (row stride FA_LD); rows ≥ rows become 0. NT:
// the block's threads.
template <int NT> __device__ __forceinline__ void fa_stage(half_t *dst, const half_t *src, long long ld, int rows) {
#pragma unroll
	for (int i = threadIdx.x; i < FA_TILE * (FA_HD / 8); i += NT) {
		int r = i / (FA_HD / 8), c = (i % (FA_HD / 8)) * 8;
		bool ok = r < rows;
		cp_async16(dst + r * FA_LD + c, src + (ok ? r : 0) * ld + c, ok);
	}
}

__device__ __forceinline__ float fa_quad_max(float v) {
	v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
	return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}
__device__ __forceinline__ float fa_quad_sum(float v) {
	v += __shfl_xor_sync(FULL_MASK, v, 1);
	return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

#ifndef BERT_EMU
__device__ __forceinline__ float fa_exp2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}
#else
static float fa_exp2(float x) { return exp2f(x); }
#endif

// attn_rows: NW warps of MT m16 tiles of query rows each, 16·MT·NW rows a
// block: bert_attn_f16 (4 × 1: 64 rows) and bert_attn128_f16 (4 × 2: 128
// rows; each key and value fragment read from shared memory feeds both
// tiles of a warp, and each key and value tile copied serves twice the
// rows). On the H200, for the 12 attentions of a base model's forward of
// 128 × 256 tokens: 2.12 ms (128 rows) against 2.17 (64 rows), and 2.76
// with 8 warps × 1 tile (128 rows, 256 threads; not kept). Shared: four [64][FA_LD] regions, K0 V0 K1 V1; the query tile
// (at most 128 rows) is staged in K1 V1
// first, moved to registers, and the two regions then take the second key
// and value tiles. Weights are exp2(s·scale·log2 e - running max), one fma
// and one ex2 each; the mask's 0 / -inf is added only in key
// tiles that have a masked key or a key past T (cbad: one flag per 32
// keys), so full tiles, every tile of an unpadded batch, skip it.
template <int MT, int NW>
__device__ __forceinline__ void attn_rows(const half_t *qkv, const float *bias, const int *mask, int T, int nh, float scale,
                                          half_t *ctx) {
	__shared__ uint4 sm4[4 * FA_TILE * FA_LD / 8];
	__shared__ float kb[FA_MAXT];
	__shared__ int wlast[NW];
	__shared__ int cbad[FA_MAXT / 32];
	half_t *const Sm = (half_t *)sm4;
	const int RS = FA_TILE * FA_LD; // halves per region
	const int H = nh * FA_HD, h = blockIdx.y, r0 = blockIdx.x * (16 * MT * NW);
	const long long b = blockIdx.z, ld = 3LL * H;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	const int *m = mask + b * T;
	const half_t *kbase = qkv + b * T * ld + H + h * FA_HD, *vbase = kbase + H;

	fa_stage<32 * NW>(Sm, kbase, ld, min(FA_TILE, T));
	fa_stage<32 * NW>(Sm + RS, vbase, ld, min(FA_TILE, T));
	cp_async_commit();
	// The query tile plus its bias, through registers, into K1 V1.
	{
		const half_t *qsrc = qkv + (b * T + r0) * ld + h * FA_HD;
		const int c = (threadIdx.x % (FA_HD / 8)) * 8, nq = min(16 * MT * NW, T - r0);
		float qb[8];
#pragma unroll
		for (int e = 0; e < 8; e++) qb[e] = bias[h * FA_HD + c + e];
		uint4 x[16 * MT * NW * (FA_HD / 8) / (32 * NW)];
#pragma unroll
		for (int k = 0; k < 16 * MT * NW * (FA_HD / 8) / (32 * NW); k++) {
			int r = (threadIdx.x + 32 * NW * k) / (FA_HD / 8);
			x[k] = r < nq ? *(const uint4 *)(qsrc + r * ld + c) : uint4{0, 0, 0, 0};
		}
#pragma unroll
		for (int k = 0; k < 16 * MT * NW * (FA_HD / 8) / (32 * NW); k++) {
			int r = (threadIdx.x + 32 * NW * k) / (FA_HD / 8);
			const unsigned xs[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
			unsigned us[4];
#pragma unroll
			for (int e = 0; e < 4; e++)
				us[e] = r < nq ? fa_pack(h2f(xs[e] & 0xffff) + qb[2 * e], h2f(xs[e] >> 16) + qb[2 * e + 1]) : 0u;
			*(uint4 *)(Sm + 2 * RS + r * FA_LD + c) = uint4{us[0], us[1], us[2], us[3]};
		}
	}
	// The keys' mask, which chunks of 32 keys have a key that does not
	// weigh, and 1 + the last valid key (0: none valid).
	int last = -1;
#pragma unroll
	for (int i = 0; i < FA_MAXT / (32 * NW); i++) {
		const int j = threadIdx.x + 32 * NW * i;
		const bool on = j < T && m[j] != 0;
		kb[j] = on ? 0.f : -BERT_INF;
		if (on) last = j;
		const unsigned off = __ballot_sync(FULL_MASK, !on);
		if (lane == 0) cbad[NW * i + w] = off != 0u;
	}
	for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(FULL_MASK, last, o));
	if (lane == 0) wlast[w] = last;
	__syncthreads();
	int klen0 = 0;
#pragma unroll
	for (int i = 0; i < NW; i++) klen0 = max(klen0, wlast[i] + 1);
	if (klen0 == 0) { // no valid key: every key weighs (every tile takes kb)
		for (int j = threadIdx.x; j < T; j += 32 * NW) kb[j] = 0.f;
	}
	const int klen = klen0 == 0 ? T : klen0, ntiles = (klen + FA_TILE - 1) / FA_TILE;

	unsigned qa[MT][FA_HD / 16][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int kk = 0; kk < FA_HD / 16; kk++)
			ldmatrix_x4(qa[mt][kk], Sm + 2 * RS + (16 * (MT * w + mt) + (lane & 15)) * FA_LD + 16 * kk + (lane >> 4) * 8);
	__syncthreads(); // K1 V1 are free for the second key and value tiles
	const float sl2 = scale * 1.44269504088896341f;
	float o[MT][FA_HD / 8][4];
	float mrow[MT][2], lrow[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int i = 0; i < FA_HD / 8; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
		mrow[mt][0] = mrow[mt][1] = -BERT_INF;
		lrow[mt][0] = lrow[mt][1] = 0.f;
	}
	for (int it = 0; it < ntiles; it++) {
		const int kt0 = it * FA_TILE, buf = it & 1;
		const half_t *Ks = Sm + 2 * buf * RS, *Vs = Ks + RS;
		if (it + 1 < ntiles) {
			const int nxt = kt0 + FA_TILE;
			fa_stage<32 * NW>(Sm + 2 * (1 - buf) * RS, kbase + nxt * ld, ld, min(FA_TILE, T - nxt));
			fa_stage<32 * NW>(Sm + (3 - 2 * buf) * RS, vbase + nxt * ld, ld, min(FA_TILE, T - nxt));
			cp_async_commit();
			cp_async_wait<1>();
		} else {
			cp_async_wait<0>();
		}
		__syncthreads();
		float s[MT][FA_TILE / 8][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int i = 0; i < FA_TILE / 8; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
		for (int kk = 0; kk < FA_HD / 16; kk++)
#pragma unroll
			for (int nt = 0; nt < FA_TILE / 8; nt += 2) {
				unsigned bb[4];
				ldmatrix_x4(bb, Ks + (8 * nt + (lane & 7) + ((lane >> 4) << 3)) * FA_LD + 16 * kk + ((lane >> 3) & 1) * 8);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					fa_mma(s[mt][nt], qa[mt][kk], bb[0], bb[1]);
					fa_mma(s[mt][nt + 1], qa[mt][kk], bb[2], bb[3]);
				}
			}
		const bool full = klen0 != 0 && cbad[2 * it] == 0 && cbad[2 * it + 1] == 0;
		unsigned pa[MT][FA_TILE / 16][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++) {
			float mx[2] = {-BERT_INF, -BERT_INF};
#pragma unroll
			for (int nt = 0; nt < FA_TILE / 8; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float x = s[mt][nt][e];
					if (!full) {
						x += kb[kt0 + 8 * nt + 2 * t + (e & 1)];
						s[mt][nt][e] = x;
					}
					mx[e >> 1] = fmaxf(mx[e >> 1], x);
				}
			// The running max in the base-2 domain (sl2 > 0 keeps the
			// order), each weight one fma and one ex2.
			float ref[2], corr[2], rs[2] = {0.f, 0.f};
#pragma unroll
			for (int r = 0; r < 2; r++) {
				float mn = fmaxf(mrow[mt][r], fa_quad_max(mx[r]) * sl2);
				ref[r] = mn == -BERT_INF ? 0.f : mn; // no valid key yet: exp2(-inf - 0) = 0, no NaN
				corr[r] = fa_exp2(mrow[mt][r] - ref[r]);
				mrow[mt][r] = mn;
			}
#pragma unroll
			for (int nt = 0; nt < FA_TILE / 8; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float p = fa_exp2(fmaf(s[mt][nt][e], sl2, -ref[e >> 1]));
					s[mt][nt][e] = p;
					rs[e >> 1] += p;
				}
#pragma unroll
			for (int r = 0; r < 2; r++) lrow[mt][r] = lrow[mt][r] * corr[r] + fa_quad_sum(rs[r]);
#pragma unroll
			for (int i = 0; i < FA_HD / 8; i++) {
				o[mt][i][0] *= corr[0];
				o[mt][i][1] *= corr[0];
				o[mt][i][2] *= corr[1];
				o[mt][i][3] *= corr[1];
			}
#pragma unroll
			for (int kk = 0; kk < FA_TILE / 16; kk++) {
				pa[mt][kk][0] = fa_pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
				pa[mt][kk][1] = fa_pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
				pa[mt][kk][2] = fa_pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
				pa[mt][kk][3] = fa_pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
			}
		}
#pragma unroll
		for (int kk = 0; kk < FA_TILE / 16; kk++)
#pragma unroll
			for (int dt = 0; dt < FA_HD / 8; dt += 2) {
				unsigned bb[4];
				ldmatrix_x4_trans(bb, Vs + (16 * kk + (lane & 15)) * FA_LD + 8 * dt + (lane >> 4) * 8);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					fa_mma(o[mt][dt], pa[mt][kk], bb[0], bb[1]);
					fa_mma(o[mt][dt + 1], pa[mt][kk], bb[2], bb[3]);
				}
			}
		__syncthreads(); // the buffer is refilled next iteration
	}
	const float *vb = bias + 2 * H + h * FA_HD;
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int r = 0; r < 2; r++) {
			int row = r0 + 16 * (MT * w + mt) + gr + 8 * r;
			if (row >= T) continue;
			float inv = lrow[mt][r] > 0.f ? 1.f / lrow[mt][r] : 0.f;
			half_t *dst = ctx + (b * T + row) * H + h * FA_HD;
#pragma unroll
			for (int dt = 0; dt < FA_HD / 8; dt++) {
				int d = 8 * dt + 2 * t;
				*(unsigned *)(dst + d) = fa_pack(o[mt][dt][2 * r] * inv + vb[d], o[mt][dt][2 * r + 1] * inv + vb[d + 1]);
			}
		}
}

extern "C" __global__ void __launch_bounds__(128)
    bert_attn_f16(const half_t *qkv, const float *bias, const int *mask, int T, int nh, float scale, half_t *ctx) {
	attn_rows<1, 4>(qkv, bias, mask, T, nh, scale, ctx);
}
extern "C" __global__ void __launch_bounds__(128)
    bert_attn128_f16(const half_t *qkv, const float *bias, const int *mask, int T, int nh, float scale, half_t *ctx) {
	attn_rows<2, 4>(qkv, bias, mask, T, nh, scale, ctx);
}

// ---- Half residual stream (fp16 mode) ----
//
// With the residual stream kept in half between kernels, as transformers'
// fp16 model keeps it, each LayerNorm reads and writes 2 bytes a value
// instead of fp32's 4 plus the GEMM operand's half copy. Values are fp32 in
// registers: one warp per row of at most LNW_MAX values, mean and variance
// in fp32, two passes over the registers. When H is a multiple of 8 (every
// BERT) lane l holds the 8 columns from 8·(l + 32·g), g = 0…3, read and
// written 16 bytes at a time; otherwise columns l, l + 32, … one by one.
// Block: 256 threads (8 rows); grid: ceil(rows / 8).
#define LNW_MAX 1024

// lnw_col: the column of register i of this lane.
__device__ __forceinline__ int lnw_col(int i, int lane, bool vec) {
	return vec ? 8 * (lane + 32 * (i >> 3)) + (i & 7) : i * 32 + lane;
}
__device__ __forceinline__ void lnw_ld8(const half_t *p, float *v) {
	uint4 x = *(const uint4 *)p;
	const unsigned xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
	for (int e = 0; e < 4; e++) v[2 * e] = h2f(xs[e] & 0xffff), v[2 * e + 1] = h2f(xs[e] >> 16);
}

// lnw_ld8f: the 8 fp32 parameters at p (32-byte aligned: p is a device
// allocation plus a multiple of 8 columns) as two 16-byte loads.
__device__ __forceinline__ void lnw_ld8f(const float *p, float *v) {
	const float4 a = ((const float4 *)p)[0], c = ((const float4 *)p)[1];
	v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
}

// lnw_row: LayerNorm of this lane's values v into row out (half).
__device__ __forceinline__ void lnw_row(float *v, int H, bool vec, const float *w, const float *b, float eps, half_t *out) {
	const int lane = threadIdx.x & 31;
	float s = 0.f;
#pragma unroll
	for (int i = 0; i < LNW_MAX / 32; i++)
		if (lnw_col(i, lane, vec) < H) s += v[i];
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
	const float mean = s / H;
	float ss = 0.f;
#pragma unroll
	for (int i = 0; i < LNW_MAX / 32; i++)
		if (lnw_col(i, lane, vec) < H) {
			float d = v[i] - mean;
			ss += d * d;
		}
	for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(FULL_MASK, ss, o);
	const float inv = 1.f / sqrtf(ss / H + eps);
	if (vec) {
#pragma unroll
		for (int g = 0; g < LNW_MAX / 256; g++) {
			int c = 8 * (lane + 32 * g);
			if (c >= H) continue;
			unsigned us[4];
#pragma unroll
			for (int e = 0; e < 4; e++)
				us[e] = fa_pack((v[8 * g + 2 * e] - mean) * inv * w[c + 2 * e] + b[c + 2 * e],
				                (v[8 * g + 2 * e + 1] - mean) * inv * w[c + 2 * e + 1] + b[c + 2 * e + 1]);
			*(uint4 *)(out + c) = uint4{us[0], us[1], us[2], us[3]};
		}
	} else {
#pragma unroll
		for (int i = 0; i < LNW_MAX / 32; i++) {
			int j = i * 32 + lane;
			if (j < H) out[j] = f2h((v[i] - mean) * inv * w[j] + b[j]);
		}
	}
}

// bert_embed_ln_hw: row r = b·T + t of xh is LayerNorm(word[ids[r]] +
// pos[t] + type[0]), half tables, half out.
extern "C" __global__ void __launch_bounds__(256)
    bert_embed_ln_hw(const int *ids, const half_t *word, const half_t *pos, const half_t *typ, const float *lnw,
                     const float *lnb, long long rows, int T, int H, float eps, half_t *xh) {
	const int lane = threadIdx.x & 31;
	const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= rows) return; // the whole warp
	const long long t = r % T, id = ids[r];
	const bool vec = H % 8 == 0;
	float v[LNW_MAX / 32];
	if (vec) {
#pragma unroll
		for (int g = 0; g < LNW_MAX / 256; g++) {
			int c = 8 * (lane + 32 * g);
			float a[8], p[8], y[8];
			if (c < H) {
				lnw_ld8(word + id * H + c, a);
				lnw_ld8(pos + t * H + c, p);
				lnw_ld8(typ + c, y);
			}
#pragma unroll
			for (int e = 0; e < 8; e++) v[8 * g + e] = c < H ? (a[e] + p[e]) + y[e] : 0.f;
		}
	} else {
#pragma unroll
		for (int i = 0; i < LNW_MAX / 32; i++) {
			int j = i * 32 + lane;
			v[i] = j < H ? (h2f(word[id * H + j]) + h2f(pos[t * H + j])) + h2f(typ[j]) : 0.f;
		}
	}
	lnw_row(v, H, vec, lnw, lnb, eps, xh + r * H);
}

// bert_add_ln_hw: xh[r] = LayerNorm(xh[r] + (y[r] + bias)), all half in
// memory (bert_add_ln_h with the residual stream in half), any H up to
// LNW_MAX; where H is a multiple of 8 the forward takes bert_add_ln_hw4_g*
// (the same values), which on the H200 takes half the time (2.11 against
// 1.03 ms for the 24 of a base model's forward of 128 × 256 tokens; 74
// against 54 registers, so more rows resident).
extern "C" __global__ void __launch_bounds__(256)
    bert_add_ln_hw(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb, long long rows,
                   int H, float eps) {
	const int lane = threadIdx.x & 31;
	const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= rows) return; // the whole warp
	half_t *xr = xh + r * H;
	const half_t *yr = y + r * H;
	const bool vec = H % 8 == 0;
	float v[LNW_MAX / 32];
	if (vec) {
#pragma unroll
		for (int g = 0; g < LNW_MAX / 256; g++) {
			int c = 8 * (lane + 32 * g);
			float a[8], u[8];
			if (c < H) {
				lnw_ld8(xr + c, a);
				lnw_ld8(yr + c, u);
			}
#pragma unroll
			for (int e = 0; e < 8; e++) v[8 * g + e] = c < H ? a[e] + (u[e] + bias[c + e]) : 0.f;
		}
	} else {
#pragma unroll
		for (int i = 0; i < LNW_MAX / 32; i++) {
			int j = i * 32 + lane;
			v[i] = j < H ? h2f(xr[j]) + (h2f(yr[j]) + bias[j]) : 0.f;
		}
	}
	lnw_row(v, H, vec, lnw, lnb, eps, xr);
}

// bert_add_ln_hw4_g<NG>: bert_add_ln_hw for H a multiple of 8 of at most
// 256·NG (g3: BERT-base's 768), the same values bit for bit; a lane holds
// only its 8·NG values (no register slots past H, so fewer registers and
// more warps resident) and reads the fp32 parameters 16 bytes at a time.
template <int NG>
__device__ __forceinline__ void add_ln_g(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb,
                                         long long rows, int H, float eps) {
	const int lane = threadIdx.x & 31;
	const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= rows) return; // the whole warp
	half_t *xr = xh + r * H;
	const half_t *yr = y + r * H;
	float v[8 * NG];
#pragma unroll
	for (int g = 0; g < NG; g++) {
		const int c = 8 * (lane + 32 * g);
		float a[8], u[8], bv[8];
		if (c < H) {
			lnw_ld8(xr + c, a);
			lnw_ld8(yr + c, u);
			lnw_ld8f(bias + c, bv);
		}
#pragma unroll
		for (int e = 0; e < 8; e++) v[8 * g + e] = c < H ? a[e] + (u[e] + bv[e]) : 0.f;
	}
	float s = 0.f;
#pragma unroll
	for (int g = 0; g < NG; g++) {
		if (8 * (lane + 32 * g) >= H) continue;
#pragma unroll
		for (int e = 0; e < 8; e++) s += v[8 * g + e];
	}
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
	const float mean = s / H;
	float ss = 0.f;
#pragma unroll
	for (int g = 0; g < NG; g++) {
		if (8 * (lane + 32 * g) >= H) continue;
#pragma unroll
		for (int e = 0; e < 8; e++) {
			float d = v[8 * g + e] - mean;
			ss += d * d;
		}
	}
	for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(FULL_MASK, ss, o);
	const float inv = 1.f / sqrtf(ss / H + eps);
#pragma unroll
	for (int g = 0; g < NG; g++) {
		const int c = 8 * (lane + 32 * g);
		if (c >= H) continue;
		float wv[8], bv[8];
		lnw_ld8f(lnw + c, wv);
		lnw_ld8f(lnb + c, bv);
		unsigned us[4];
#pragma unroll
		for (int e = 0; e < 4; e++)
			us[e] = fa_pack((v[8 * g + 2 * e] - mean) * inv * wv[2 * e] + bv[2 * e],
			                (v[8 * g + 2 * e + 1] - mean) * inv * wv[2 * e + 1] + bv[2 * e + 1]);
		*(uint4 *)(xr + c) = uint4{us[0], us[1], us[2], us[3]};
	}
}
extern "C" __global__ void __launch_bounds__(256)
    bert_add_ln_hw4_g1(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb, long long rows,
                       int H, float eps) {
	add_ln_g<1>(xh, y, bias, lnw, lnb, rows, H, eps);
}
extern "C" __global__ void __launch_bounds__(256)
    bert_add_ln_hw4_g2(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb, long long rows,
                       int H, float eps) {
	add_ln_g<2>(xh, y, bias, lnw, lnb, rows, H, eps);
}
extern "C" __global__ void __launch_bounds__(256)
    bert_add_ln_hw4_g3(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb, long long rows,
                       int H, float eps) {
	add_ln_g<3>(xh, y, bias, lnw, lnb, rows, H, eps);
}
extern "C" __global__ void __launch_bounds__(256)
    bert_add_ln_hw4_g4(half_t *xh, const half_t *y, const float *bias, const float *lnw, const float *lnb, long long rows,
                       int H, float eps) {
	add_ln_g<4>(xh, y, bias, lnw, lnb, rows, H, eps);
}

// bert_gelu_v16_f16: GELU(u + bias) of n values (rows of cols, cols a
// multiple of 8), the values of bert_gelu_f16 at memory speed: two
// 16-byte vectors a thread (v and v + 256 of its block's 512, both loads in
// flight before either is computed), the fp32 bias read 16 bytes at a
// time. Grid: ceil(n / 8 / 512) blocks of 256. (One vector a thread with
// scalar bias loads took 1.74 ms for the 12 of a base model's forward of
// 128 × 256 tokens on the H200, this 1.56.)
__device__ __forceinline__ uint4 gelu8(uint4 x, const float *bias) {
	float bv[8];
	lnw_ld8f(bias, bv);
	const unsigned xs[4] = {x.x, x.y, x.z, x.w};
	unsigned ys[4];
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float a = h2f(xs[e] & 0xffff) + bv[2 * e], b = h2f(xs[e] >> 16) + bv[2 * e + 1];
		a = 0.5f * a * (1.f + erff(a * 0.707106781186547524f));
		b = 0.5f * b * (1.f + erff(b * 0.707106781186547524f));
		ys[e] = fa_pack(a, b);
	}
	return uint4{ys[0], ys[1], ys[2], ys[3]};
}
extern "C" __global__ void __launch_bounds__(256)
    bert_gelu_v16_f16(const half_t *u, const float *bias, int cols, long long n, half_t *out) {
	const unsigned v0 = blockIdx.x * 512u + threadIdx.x, v1 = v0 + 256u; // 32-bit: n / 8 < 2^31 (the launcher checks)
	const unsigned nv = (unsigned)(n / 8), cv = (unsigned)(cols / 8);
	const bool ok0 = v0 < nv, ok1 = v1 < nv;
	uint4 x0 = uint4{0, 0, 0, 0}, x1 = uint4{0, 0, 0, 0};
	if (ok0) x0 = *(const uint4 *)(u + (long long)v0 * 8);
	if (ok1) x1 = *(const uint4 *)(u + (long long)v1 * 8);
	if (ok0) *(uint4 *)(out + (long long)v0 * 8) = gelu8(x0, bias + (v0 % cv) * 8);
	if (ok1) *(uint4 *)(out + (long long)v1 * 8) = gelu8(x1, bias + (v1 % cv) * 8);
}
