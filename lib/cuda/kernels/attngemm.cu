// Attention on the tensor cores, for long sequences in bf16 mode: the
// products Q·Kᵀ, P·V and their backward are strided-batched bf16 GEMMs of
// cuBLAS (lib/model/cuda_attn.go), and these kernels do what lies between:
// packing each kv head's group of query heads into one matrix, the causal
// softmax, and its backward. Queries are taken in chunks of rows, so the
// score matrix held at once is heads × chunk × keys, never keys × keys.
//
// Packed layout: for kv head kh, the g = heads/kvHeads query heads that
// read it are kh·g … kh·g+g−1, which sit next to each other in a row of q.
// The packed matrix of kv head kh has one row per (token t, group member j),
// row index t·g + j, and headDim columns; the chunk's matrices are stacked
// kv head after kv head: element (kh, t, j, d) is at ((kh·n + t)·g + j)·hd + d,
// that is (kh·n + t)·(g·hd) + e with e = j·hd + d, the same e as in the row
// of q (column kh·g·hd + e).

typedef unsigned short bf16;
#define MEMPO_INF __int_as_float(0x7f800000)

__device__ __forceinline__ bf16 to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (bf16)(u >> 16);
}

// attg_pack: dst (bf16, packed) ← rows [0, n) of src (fp32, row stride
// ld = heads·hd), for kvh kv heads of group width gw = g·hd.
extern "C" __global__ void attg_pack(bf16 *dst, const float *src, int n, int ld, int kvh, int gw) {
	long long total = (long long)kvh * n * gw;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		int e = (int)(i % gw);
		long long r = i / gw; // kh·n + t
		int t = (int)(r % n), kh = (int)(r / n);
		dst[i] = to_bf16(src[(long long)t * ld + (long long)kh * gw + e]);
	}
}

// attg_unpack: rows [0, n) of dst (fp32, row stride ld) ← src (fp32, packed).
extern "C" __global__ void attg_unpack(float *dst, const float *src, int n, int ld, int kvh, int gw) {
	long long total = (long long)kvh * n * gw;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		int e = (int)(i % gw);
		long long r = i / gw;
		int t = (int)(r % n), kh = (int)(r / n);
		dst[(long long)t * ld + (long long)kh * gw + e] = src[i];
	}
}

__device__ __forceinline__ float block_max(float v, float *sh) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
	__syncthreads();
	if (l == 0) sh[w] = v;
	__syncthreads();
	v = l < nw ? sh[l] : -MEMPO_INF;
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float block_sum(float v, float *sh) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
	__syncthreads();
	if (l == 0) sh[w] = v;
	__syncthreads();
	v = l < nw ? sh[l] : 0.f;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// Row ρ of a chunk's score matrix (n·g rows per kv head, kvh·n·g rows in
// all) is query token t = (ρ mod n·g) / g of the chunk, head kh·g + j; it
// sees keys 0 … first + t, where first = past + c0 is the key index of the
// chunk's first query. ldS is the row stride of S and P (keys rounded up to
// a multiple of 8, the padding written as 0 in P).

// attg_softmax (forward): P = softmax of the row's visible scores (S is
// already scaled), in bf16; lse[(qrow0 + t)·heads + h] = log Σ exp.
extern "C" __global__ void attg_softmax(bf16 *P, float *lse, const float *S, int n, int g, int keys, int ldS, int first, int qrow0, int heads) {
	__shared__ float sh[32];
	long long rho = blockIdx.x;
	int ng = n * g;
	int kh = (int)(rho / ng), r = (int)(rho % ng), t = r / g, j = r % g;
	int last = min(first + t, keys - 1);
	const float *s = S + rho * ldS;
	bf16 *p = P + rho * ldS;
	float m = -MEMPO_INF;
	for (int k = threadIdx.x; k <= last; k += blockDim.x) m = fmaxf(m, s[k]);
	m = block_max(m, sh);
	float z = 0.f;
	for (int k = threadIdx.x; k <= last; k += blockDim.x) z += __expf(s[k] - m);
	z = block_sum(z, sh);
	float l = m + __logf(z);
	for (int k = threadIdx.x; k < ldS; k += blockDim.x) p[k] = k <= last ? to_bf16(__expf(s[k] - l)) : (bf16)0;
	if (threadIdx.x == 0) lse[(long long)(qrow0 + t) * heads + kh * g + j] = l;
}

// attg_probs (backward): P = exp(S − lse) from the forward's lse, in bf16.
extern "C" __global__ void attg_probs(bf16 *P, const float *lse, const float *S, int n, int g, int keys, int ldS, int first, int qrow0, int heads) {
	long long rho = blockIdx.x;
	int ng = n * g;
	int kh = (int)(rho / ng), r = (int)(rho % ng), t = r / g, j = r % g;
	int last = min(first + t, keys - 1);
	float l = lse[(long long)(qrow0 + t) * heads + kh * g + j];
	const float *s = S + rho * ldS;
	bf16 *p = P + rho * ldS;
	for (int k = threadIdx.x; k < ldS; k += blockDim.x) p[k] = k <= last ? to_bf16(__expf(s[k] - l)) : (bf16)0;
}

// attg_dsoftmax (backward): dS = scale · p · (dP − D) with p = exp(S − lse)
// recomputed in fp32, written in bf16 over P.
extern "C" __global__ void attg_dsoftmax(bf16 *dS, const float *S, const float *dP, const float *lse, const float *D, int n, int g, int keys, int ldS, int first, int qrow0, int heads, float scale) {
	long long rho = blockIdx.x;
	int ng = n * g;
	int kh = (int)(rho / ng), r = (int)(rho % ng), t = r / g, j = r % g;
	int last = min(first + t, keys - 1);
	long long row = (long long)(qrow0 + t) * heads + kh * g + j;
	float l = lse[row], d = D[row];
	const float *s = S + rho * ldS, *dp = dP + rho * ldS;
	bf16 *o = dS + rho * ldS;
	for (int k = threadIdx.x; k < ldS; k += blockDim.x) o[k] = k <= last ? to_bf16(scale * __expf(s[k] - l) * (dp[k] - d)) : (bf16)0;
}
