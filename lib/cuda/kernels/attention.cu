// attention.cu: causal grouped-query attention, fp32, flash-style: keys and
// values stream through shared memory in tiles of 32, each query row keeps an
// online softmax (running max m and sum l) in registers, and only the
// log-sum-exp per (row, head) is saved for the backward. No T×T matrix is
// ever stored.
//
// Layout (see lib/model/backend.go, AttnSeq/AttnShape): q/out rows have
// heads·hd columns, k/v rows kvheads·hd; seqs is [nseq][4] = {Q, N, K, Past};
// query i of a sequence is row Q+i and sees key rows K .. K+Past+i.
// Work lists: tiles is [ntiles][2] = {sequence, first query (or key) index}.
//
// A warp owns query rows; in the score phase lane j scores key j of the tile
// (a full dot product over hd from shared memory, K rows padded to hd+1 to
// avoid bank conflicts); in the accumulate phase lane l owns output
// dimensions l, l+32, … (NT = ceil(hd/32) registers per row).

#define MEMPO_INF __int_as_float(0x7f800000)
#define BQ 16  // query rows per block (4 warps × 4 rows)
#define BK 32  // keys per tile (one per lane)

__device__ __forceinline__ float wsum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float wmax(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

template <int NT>
__device__ void attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const int *tiles,
                         const int *seqs, int heads, int kvheads, int hd, float scale) {
	extern __shared__ float sm[];
	const int hdp = hd + 1;
	float *sq = sm;              // BQ × hd
	float *sk = sq + BQ * hd;    // BK × hdp
	float *sv = sk + BK * hdp;   // BK × hd
	const int tile = blockIdx.x, h = blockIdx.y;
	const int si = tiles[2 * tile], i0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2], past = seqs[4 * si + 3];
	const int kh = h / (heads / kvheads);
	const int qs = heads * hd, ks = kvheads * hd;
	const int nrows = min(BQ, N - i0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	for (int idx = threadIdx.x; idx < BQ * hd; idx += blockDim.x) {
		int r = idx / hd, d = idx - r * hd;
		sq[idx] = r < nrows ? q[(long long)(Q0 + i0 + r) * qs + h * hd + d] : 0.f;
	}
	float m[4], l[4], o[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		m[rr] = -MEMPO_INF;
		l[rr] = 0.f;
#pragma unroll
		for (int t = 0; t < NT; t++) o[rr][t] = 0.f;
	}
	const int kend = past + i0 + nrows;  // keys [0, kend) are seen by some row
	for (int j0 = 0; j0 < kend; j0 += BK) {
		__syncthreads();
		for (int idx = threadIdx.x; idx < BK * hd; idx += blockDim.x) {
			int j = idx / hd, d = idx - j * hd;
			bool ok = j0 + j < kend;
			long long row = (long long)(K0 + j0 + j) * ks + kh * hd + d;
			sk[j * hdp + d] = ok ? k[row] : 0.f;
			sv[j * hd + d] = ok ? v[row] : 0.f;
		}
		__syncthreads();
#pragma unroll
		for (int rr = 0; rr < 4; rr++) {
			const int r = warp + 4 * rr;
			if (r >= nrows) continue;
			const int last = past + i0 + r;  // last key this row sees
			if (j0 > last) continue;
			const int j = j0 + lane;
			float s = -MEMPO_INF;
			if (j <= last) {
				const float *qr = sq + r * hd, *kr = sk + lane * hdp;
				float dot = 0.f;
				for (int d = 0; d < hd; d++) dot += qr[d] * kr[d];
				s = scale * dot;
			}
			const float mnew = fmaxf(m[rr], wmax(s));
			const float p = j <= last ? expf(s - mnew) : 0.f;
			const float corr = expf(m[rr] - mnew);
			l[rr] = l[rr] * corr + wsum(p);
			m[rr] = mnew;
#pragma unroll
			for (int t = 0; t < NT; t++) o[rr][t] *= corr;
			const int jn = min(BK, last - j0 + 1);
			for (int jj = 0; jj < jn; jj++) {
				const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
				for (int t = 0; t < NT; t++) {
					const int d = lane + 32 * t;
					if (d < hd) o[rr][t] += pj * sv[jj * hd + d];
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp + 4 * rr;
		if (r >= nrows) continue;
		const long long row = Q0 + i0 + r;
		const float inv = 1.f / l[rr];
#pragma unroll
		for (int t = 0; t < NT; t++) {
			const int d = lane + 32 * t;
			if (d < hd) out[row * qs + h * hd + d] = o[rr][t] * inv;
		}
		if (lane == 0) lse[row * heads + h] = m[rr] + logf(l[rr]);
	}
}

#define FWD(NT)                                                                                          \
	extern "C" __global__ void __launch_bounds__(128) attn_fwd_##NT(float *out, float *lse, const float *q, \
	    const float *k, const float *v, const int *tiles, const int *seqs, int heads, int kvheads, int hd, \
	    float scale) {                                                                                   \
		attn_fwd<NT>(out, lse, q, k, v, tiles, seqs, heads, kvheads, hd, scale);                     \
	}
FWD(1)
FWD(2)
FWD(4)
FWD(8)

// attn_bwd_dsum: D[row, h] = Σ_d dO·O, one warp per (row, head).
extern "C" __global__ void attn_bwd_dsum(float *D, const float *dout, const float *out, int rows, int heads, int hd) {
	long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (w >= (long long)rows * heads) return;
	long long row = w / heads;
	int h = (int)(w % heads);
	const float *a = dout + row * heads * hd + h * hd, *b = out + row * heads * hd + h * hd;
	float s = 0.f;
	for (int d = lane; d < hd; d += 32) s += a[d] * b[d];
	s = wsum(s);
	if (lane == 0) D[w] = s;
}

// dq: per query row (as the forward), lane j over the tile's keys:
// p = exp(scale·q·k − lse), dp = dO·v, ds = p·(dp − D), dq += scale·Σ ds·k.
template <int NT>
__device__ void attn_bwd_dq(float *dq, const float *dout, const float *q, const float *k, const float *v,
                            const float *lse, const float *D, const int *tiles, const int *seqs, int heads,
                            int kvheads, int hd, float scale) {
	extern __shared__ float sm[];
	const int hdp = hd + 1;
	float *sq = sm;               // BQ × hd
	float *sdo = sq + BQ * hd;    // BQ × hd
	float *sk = sdo + BQ * hd;    // BK × hdp
	float *sv = sk + BK * hdp;    // BK × hdp
	const int tile = blockIdx.x, h = blockIdx.y;
	const int si = tiles[2 * tile], i0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2], past = seqs[4 * si + 3];
	const int kh = h / (heads / kvheads);
	const int qs = heads * hd, ks = kvheads * hd;
	const int nrows = min(BQ, N - i0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int idx = threadIdx.x; idx < BQ * hd; idx += blockDim.x) {
		int r = idx / hd, d = idx - r * hd;
		long long a = (long long)(Q0 + i0 + r) * qs + h * hd + d;
		sq[idx] = r < nrows ? q[a] : 0.f;
		sdo[idx] = r < nrows ? dout[a] : 0.f;
	}
	float lr[4], Dr[4], acc[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp + 4 * rr;
		const long long row = Q0 + i0 + r;
		lr[rr] = r < nrows ? lse[row * heads + h] : 0.f;
		Dr[rr] = r < nrows ? D[row * heads + h] : 0.f;
#pragma unroll
		for (int t = 0; t < NT; t++) acc[rr][t] = 0.f;
	}
	const int kend = past + i0 + nrows;
	for (int j0 = 0; j0 < kend; j0 += BK) {
		__syncthreads();
		for (int idx = threadIdx.x; idx < BK * hd; idx += blockDim.x) {
			int j = idx / hd, d = idx - j * hd;
			bool ok = j0 + j < kend;
			long long a = (long long)(K0 + j0 + j) * ks + kh * hd + d;
			sk[j * hdp + d] = ok ? k[a] : 0.f;
			sv[j * hdp + d] = ok ? v[a] : 0.f;
		}
		__syncthreads();
#pragma unroll
		for (int rr = 0; rr < 4; rr++) {
			const int r = warp + 4 * rr;
			if (r >= nrows) continue;
			const int last = past + i0 + r;
			if (j0 > last) continue;
			const int j = j0 + lane;
			float ds = 0.f;
			if (j <= last) {
				const float *qr = sq + r * hd, *gr = sdo + r * hd, *kr = sk + lane * hdp, *vr = sv + lane * hdp;
				float s = 0.f, dp = 0.f;
				for (int d = 0; d < hd; d++) {
					s += qr[d] * kr[d];
					dp += gr[d] * vr[d];
				}
				const float p = expf(scale * s - lr[rr]);
				ds = p * (dp - Dr[rr]);
			}
			const int jn = min(BK, last - j0 + 1);
			for (int jj = 0; jj < jn; jj++) {
				const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
				for (int t = 0; t < NT; t++) {
					const int d = lane + 32 * t;
					if (d < hd) acc[rr][t] += dsj * sk[jj * hdp + d];
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp + 4 * rr;
		if (r >= nrows) continue;
		const long long row = Q0 + i0 + r;
#pragma unroll
		for (int t = 0; t < NT; t++) {
			const int d = lane + 32 * t;
			if (d < hd) dq[row * qs + h * hd + d] = scale * acc[rr][t];
		}
	}
}

#define BWDQ(NT)                                                                                             \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_##NT(float *dq, const float *dout,          \
	    const float *q, const float *k, const float *v, const float *lse, const float *D, const int *tiles, \
	    const int *seqs, int heads, int kvheads, int hd, float scale) {                                     \
		attn_bwd_dq<NT>(dq, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, hd, scale);             \
	}
BWDQ(1)
BWDQ(2)
BWDQ(4)
BWDQ(8)

// dk, dv: a block owns BQ keys of one kv head (a warp 4 of them) and walks
// the queries that see them in tiles of 32 (lane i = query i of the tile),
// for every query head of the group: dv += Σ_i p·dO_i, dk += scale·Σ_i ds·q_i.
// Each (key row, kv head) is written once: no atomics. Past must be 0.
template <int NT>
__device__ void attn_bwd_dkv(float *dk, float *dv, const float *dout, const float *q, const float *k,
                             const float *v, const float *lse, const float *D, const int *tiles, const int *seqs,
                             int heads, int kvheads, int hd, float scale) {
	extern __shared__ float sm[];
	const int hdp = hd + 1;
	float *sk = sm;                // BQ × hd (this block's keys)
	float *sv = sk + BQ * hd;      // BQ × hd
	float *sq = sv + BQ * hd;      // BK × hdp (a tile of queries)
	float *sdo = sq + BK * hdp;    // BK × hdp
	float *sl = sdo + BK * hdp;    // BK
	float *sD = sl + BK;           // BK
	const int tile = blockIdx.x, kh = blockIdx.y;
	const int si = tiles[2 * tile], j0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2];
	const int group = heads / kvheads;
	const int qs = heads * hd, ks = kvheads * hd;
	const int nkeys = min(BQ, N - j0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int idx = threadIdx.x; idx < BQ * hd; idx += blockDim.x) {
		int r = idx / hd, d = idx - r * hd;
		long long a = (long long)(K0 + j0 + r) * ks + kh * hd + d;
		sk[idx] = r < nkeys ? k[a] : 0.f;
		sv[idx] = r < nkeys ? v[a] : 0.f;
	}
	float gk[4][NT], gv[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++)
#pragma unroll
		for (int t = 0; t < NT; t++) gk[rr][t] = gv[rr][t] = 0.f;
	for (int g = 0; g < group; g++) {
		const int h = kh * group + g;
		for (int i0 = j0; i0 < N; i0 += BK) {  // queries before j0 see none of these keys
			__syncthreads();
			for (int idx = threadIdx.x; idx < BK * hd; idx += blockDim.x) {
				int i = idx / hd, d = idx - i * hd;
				bool ok = i0 + i < N;
				long long a = (long long)(Q0 + i0 + i) * qs + h * hd + d;
				sq[i * hdp + d] = ok ? q[a] : 0.f;
				sdo[i * hdp + d] = ok ? dout[a] : 0.f;
			}
			for (int i = threadIdx.x; i < BK; i += blockDim.x) {
				bool ok = i0 + i < N;
				long long row = Q0 + i0 + i;
				sl[i] = ok ? lse[row * heads + h] : 0.f;
				sD[i] = ok ? D[row * heads + h] : 0.f;
			}
			__syncthreads();
#pragma unroll
			for (int rr = 0; rr < 4; rr++) {
				const int r = warp + 4 * rr;
				if (r >= nkeys) continue;
				const int j = j0 + r;
				const int i = i0 + lane;
				float p = 0.f, ds = 0.f;
				if (i < N && i >= j) {
					const float *kr = sk + r * hd, *vr = sv + r * hd, *qr = sq + lane * hdp, *gr = sdo + lane * hdp;
					float s = 0.f, dp = 0.f;
					for (int d = 0; d < hd; d++) {
						s += qr[d] * kr[d];
						dp += gr[d] * vr[d];
					}
					p = expf(scale * s - sl[lane]);
					ds = p * (dp - sD[lane]);
				}
				const int in = min(BK, N - i0);
				for (int ii = 0; ii < in; ii++) {
					const float pi = __shfl_sync(0xffffffffu, p, ii);
					const float dsi = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
					for (int t = 0; t < NT; t++) {
						const int d = lane + 32 * t;
						if (d < hd) {
							gv[rr][t] += pi * sdo[ii * hdp + d];
							gk[rr][t] += dsi * sq[ii * hdp + d];
						}
					}
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp + 4 * rr;
		if (r >= nkeys) continue;
		const long long row = K0 + j0 + r;
#pragma unroll
		for (int t = 0; t < NT; t++) {
			const int d = lane + 32 * t;
			if (d < hd) {
				dk[row * ks + kh * hd + d] = scale * gk[rr][t];
				dv[row * ks + kh * hd + d] = gv[rr][t];
			}
		}
	}
}

#define BWDKV(NT)                                                                                           \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkv_##NT(float *dk, float *dv,                \
	    const float *dout, const float *q, const float *k, const float *v, const float *lse, const float *D, \
	    const int *tiles, const int *seqs, int heads, int kvheads, int hd, float scale) {                   \
		attn_bwd_dkv<NT>(dk, dv, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, hd, scale);        \
	}
BWDKV(1)
BWDKV(2)
BWDKV(4)
BWDKV(8)
