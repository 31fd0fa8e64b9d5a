// Attention for decoding: few query rows per sequence over a long KV cache.
// One block per (query row, kv head) holds the g query heads that share the
// kv head, one warp each, so every key and value tile is read from memory
// once for the whole group (the flash-style kernels of attention2.cu give
// each head its own block and tile 16 query rows, 15 of them idle when a
// sequence decodes one token). Within a warp, lane j scores key j of a tile
// of 32; the softmax is online (running max and sum), and each lane keeps
// headDim/32 of the output.

#define MEMPO_INF __int_as_float(0x7f800000)
#define DEC_TILE 32
#define DEC_MAXNT 8 // head dims up to 256

__device__ __forceinline__ float dec_wmax(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float dec_wsum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// attn_decode: rows[5·i …] = (query row, key row K, number of keys, prefix
// row P, prefix keys PN) of decode row i (blockIdx.x): key j is row P+j
// below PN (a prompt its request's samples share), K+j from it;
// blockIdx.y is the kv head; blockDim.x = 32·g.
// Shared memory: K tile [32][hd+1], V tile [32][hd], q [g][hd].
extern "C" __global__ void attn_decode(float *out, float *lse, const float *q, const float *k, const float *v, const int *rows, int heads, int kvheads, int hd, float scale) {
	extern __shared__ float sm[];
	const int g = heads / kvheads;
	float *kt = sm, *vt = kt + DEC_TILE * (hd + 1), *qs = vt + DEC_TILE * hd;
	const int *rw = rows + 5 * blockIdx.x;
	const int qrow = rw[0], kbase = rw[1], nkeys = rw[2], pbase = rw[3], plen = rw[4];
	const int kh = blockIdx.y, w = threadIdx.x >> 5, lane = threadIdx.x & 31, nthreads = blockDim.x;
	const long long qld = (long long)heads * hd, kld = (long long)kvheads * hd;
	// The group's query heads are kh·g … kh·g+g−1: g·hd contiguous floats.
	for (int i = threadIdx.x; i < g * hd; i += nthreads) qs[i] = q[qrow * qld + (long long)kh * g * hd + i];
	const int nt = (hd + 31) >> 5;
	float acc[DEC_MAXNT];
#pragma unroll
	for (int i = 0; i < DEC_MAXNT; i++) acc[i] = 0.f;
	float m = -MEMPO_INF, l = 0.f;
	for (int t0 = 0; t0 < nkeys; t0 += DEC_TILE) {
		int n = min(DEC_TILE, nkeys - t0);
		__syncthreads(); // the previous tile is consumed (and qs is written)
		for (int i = threadIdx.x; i < n * hd; i += nthreads) {
			int j = i / hd, d = i - j * hd;
			const int key = t0 + j;
			long long src = (long long)((key < plen ? pbase : kbase) + key) * kld + (long long)kh * hd + d;
			kt[j * (hd + 1) + d] = k[src];
			vt[j * hd + d] = v[src];
		}
		__syncthreads();
		if (w < g) {
			const float *qq = qs + w * hd;
			float s = -MEMPO_INF;
			if (lane < n) {
				const float *kr = kt + lane * (hd + 1);
				float dot = 0.f;
				for (int d = 0; d < hd; d++) dot += qq[d] * kr[d];
				s = dot * scale;
			}
			float mn = fmaxf(m, dec_wmax(s));
			float p = lane < n ? __expf(s - mn) : 0.f;
			float corr = __expf(m - mn); // 0 on the first tile (m = −inf)
			l = l * corr + dec_wsum(p);
#pragma unroll
			for (int i = 0; i < DEC_MAXNT; i++) acc[i] *= corr;
			for (int j = 0; j < n; j++) {
				float pj = __shfl_sync(0xffffffffu, p, j);
				const float *vr = vt + j * hd;
#pragma unroll
				for (int i = 0; i < DEC_MAXNT; i++) {
					int d = lane + 32 * i;
					if (i < nt && d < hd) acc[i] += pj * vr[d];
				}
			}
			m = mn;
		}
	}
	if (w < g) {
		int h = kh * g + w;
		float inv = 1.f / l;
		float *o = out + qrow * qld + (long long)h * hd;
#pragma unroll
		for (int i = 0; i < DEC_MAXNT; i++) {
			int d = lane + 32 * i;
			if (i < nt && d < hd) o[d] = acc[i] * inv;
		}
		if (lane == 0) lse[(long long)qrow * heads + h] = m + __logf(l);
	}
}
