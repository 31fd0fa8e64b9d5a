// attention2.cu: causal grouped-query attention, fp32, flash-style: keys and
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
// A warp handles 4 (consecutive) query rows — or, in the dk/dv kernel, 4
// keys — together, so each key (query) row read from shared memory serves
// all 4. In the score phase lane j scores key j of the tile; in the
// accumulate phase lane l owns output dimensions l, l+32, … (NT =
// ceil(hd/32) registers per row). Rows sit in shared memory with hd4 = hd
// rounded up to a multiple of 4 floats, the tail zero, and are read as
// float4; K/Q tiles are padded by 4 more floats so a quarter warp's 16-byte
// loads hit distinct banks.

#define MEMPO_INF __int_as_float(0x7f800000)
#define BQ 16
#define BK 32

__device__ __forceinline__ float wsum2(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float wmax2(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}
__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

template <int NT>
__device__ void attn2_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const int *tiles,
                          const int *seqs, int heads, int kvheads, int hd, float scale) {
	extern __shared__ float4 sm4[];
	float *sm = (float *)sm4;
	const int hd4 = (hd + 3) & ~3, hdp = hd4 + 4;
	float *sq = sm;             // BQ × hd4
	float *sk = sq + BQ * hd4;  // BK × hdp
	float *sv = sk + BK * hdp;  // BK × hd4
	const int tile = blockIdx.x, h = blockIdx.y;
	const int si = tiles[2 * tile], i0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2], past = seqs[4 * si + 3];
	const int kh = h / (heads / kvheads);
	const int qs = heads * hd, ks = kvheads * hd;
	const int nrows = min(BQ, N - i0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int idx = threadIdx.x; idx < BQ * hd4; idx += blockDim.x) {
		int r = idx / hd4, d = idx - r * hd4;
		sq[idx] = r < nrows && d < hd ? q[(long long)(Q0 + i0 + r) * qs + h * hd + d] : 0.f;
	}
	int last[4];
	float m[4], l[4], o[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
		last[rr] = r < nrows ? past + i0 + r : -1;
		m[rr] = -MEMPO_INF;
		l[rr] = 0.f;
#pragma unroll
		for (int t = 0; t < NT; t++) o[rr][t] = 0.f;
	}
	const int wlast = max(max(last[0], last[1]), max(last[2], last[3]));
	const int kend = past + i0 + nrows;
	for (int j0 = 0; j0 < kend; j0 += BK) {
		__syncthreads();
		for (int idx = threadIdx.x; idx < BK * hd4; idx += blockDim.x) {
			int j = idx / hd4, d = idx - j * hd4;
			bool ok = j0 + j < kend && d < hd;
			long long a = (long long)(K0 + j0 + j) * ks + kh * hd + d;
			sk[j * hdp + d] = ok ? k[a] : 0.f;
			sv[j * hd4 + d] = ok ? v[a] : 0.f;
		}
		__syncthreads();
		if (j0 > wlast) continue;  // warp-uniform
		float s[4] = {0.f, 0.f, 0.f, 0.f};
		const float4 *kr = (const float4 *)(sk + lane * hdp);
		for (int d4 = 0; d4 < hd4 / 4; d4++) {
			const float4 kv = kr[d4];
#pragma unroll
			for (int rr = 0; rr < 4; rr++) s[rr] += dot4(((const float4 *)(sq + (warp * 4 + rr) * hd4))[d4], kv);
		}
		const int j = j0 + lane;
		float p[4];
#pragma unroll
		for (int rr = 0; rr < 4; rr++) {
			const bool ok = j <= last[rr];
			const float sc = ok ? scale * s[rr] : -MEMPO_INF;
			const float mnew = fmaxf(m[rr], wmax2(sc));
			p[rr] = ok ? expf(sc - mnew) : 0.f;
			const float corr = mnew == -MEMPO_INF ? 1.f : expf(m[rr] - mnew);
			l[rr] = l[rr] * corr + wsum2(p[rr]);
			m[rr] = mnew;
#pragma unroll
			for (int t = 0; t < NT; t++) o[rr][t] *= corr;
		}
		const int jn = min(BK, wlast - j0 + 1);
		for (int jj = 0; jj < jn; jj++) {
			float pj[4];
#pragma unroll
			for (int rr = 0; rr < 4; rr++) pj[rr] = __shfl_sync(0xffffffffu, p[rr], jj);
#pragma unroll
			for (int t = 0; t < NT; t++) {
				const int d = lane + 32 * t;
				if (d < hd) {
					const float vv = sv[jj * hd4 + d];
#pragma unroll
					for (int rr = 0; rr < 4; rr++) o[rr][t] += pj[rr] * vv;
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
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

#define FWD2(NT)                                                                                          \
	extern "C" __global__ void __launch_bounds__(128) attn2_fwd_##NT(float *out, float *lse, const float *q, \
	    const float *k, const float *v, const int *tiles, const int *seqs, int heads, int kvheads, int hd,  \
	    float scale) {                                                                                    \
		attn2_fwd<NT>(out, lse, q, k, v, tiles, seqs, heads, kvheads, hd, scale);                     \
	}
FWD2(1)
FWD2(2)
FWD2(4)
FWD2(8)

template <int NT>
__device__ void attn2_bwd_dq(float *dq, const float *dout, const float *q, const float *k, const float *v,
                             const float *lse, const float *D, const int *tiles, const int *seqs, int heads,
                             int kvheads, int hd, float scale) {
	extern __shared__ float4 sm4[];
	float *sm = (float *)sm4;
	const int hd4 = (hd + 3) & ~3, hdp = hd4 + 4;
	float *sq = sm;              // BQ × hd4
	float *sdo = sq + BQ * hd4;  // BQ × hd4
	float *sk = sdo + BQ * hd4;  // BK × hdp
	float *sv = sk + BK * hdp;   // BK × hdp
	const int tile = blockIdx.x, h = blockIdx.y;
	const int si = tiles[2 * tile], i0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2], past = seqs[4 * si + 3];
	const int kh = h / (heads / kvheads);
	const int qs = heads * hd, ks = kvheads * hd;
	const int nrows = min(BQ, N - i0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int idx = threadIdx.x; idx < BQ * hd4; idx += blockDim.x) {
		int r = idx / hd4, d = idx - r * hd4;
		bool ok = r < nrows && d < hd;
		long long a = (long long)(Q0 + i0 + r) * qs + h * hd + d;
		sq[idx] = ok ? q[a] : 0.f;
		sdo[idx] = ok ? dout[a] : 0.f;
	}
	int last[4];
	float lr[4], Dr[4], acc[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
		const long long row = Q0 + i0 + r;
		last[rr] = r < nrows ? past + i0 + r : -1;
		lr[rr] = r < nrows ? lse[row * heads + h] : 0.f;
		Dr[rr] = r < nrows ? D[row * heads + h] : 0.f;
#pragma unroll
		for (int t = 0; t < NT; t++) acc[rr][t] = 0.f;
	}
	const int wlast = max(max(last[0], last[1]), max(last[2], last[3]));
	const int kend = past + i0 + nrows;
	for (int j0 = 0; j0 < kend; j0 += BK) {
		__syncthreads();
		for (int idx = threadIdx.x; idx < BK * hd4; idx += blockDim.x) {
			int j = idx / hd4, d = idx - j * hd4;
			bool ok = j0 + j < kend && d < hd;
			long long a = (long long)(K0 + j0 + j) * ks + kh * hd + d;
			sk[j * hdp + d] = ok ? k[a] : 0.f;
			sv[j * hdp + d] = ok ? v[a] : 0.f;
		}
		__syncthreads();
		if (j0 > wlast) continue;
		float s[4] = {0.f, 0.f, 0.f, 0.f}, dp[4] = {0.f, 0.f, 0.f, 0.f};
		const float4 *kr = (const float4 *)(sk + lane * hdp), *vr = (const float4 *)(sv + lane * hdp);
		for (int d4 = 0; d4 < hd4 / 4; d4++) {
			const float4 kk = kr[d4], vv = vr[d4];
#pragma unroll
			for (int rr = 0; rr < 4; rr++) {
				s[rr] += dot4(((const float4 *)(sq + (warp * 4 + rr) * hd4))[d4], kk);
				dp[rr] += dot4(((const float4 *)(sdo + (warp * 4 + rr) * hd4))[d4], vv);
			}
		}
		const int j = j0 + lane;
		float ds[4];
#pragma unroll
		for (int rr = 0; rr < 4; rr++) {
			float p = j <= last[rr] ? expf(scale * s[rr] - lr[rr]) : 0.f;
			ds[rr] = p * (dp[rr] - Dr[rr]);
		}
		const int jn = min(BK, wlast - j0 + 1);
		for (int jj = 0; jj < jn; jj++) {
			float dj[4];
#pragma unroll
			for (int rr = 0; rr < 4; rr++) dj[rr] = __shfl_sync(0xffffffffu, ds[rr], jj);
#pragma unroll
			for (int t = 0; t < NT; t++) {
				const int d = lane + 32 * t;
				if (d < hd) {
					const float kk = sk[jj * hdp + d];
#pragma unroll
					for (int rr = 0; rr < 4; rr++) acc[rr][t] += dj[rr] * kk;
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
		if (r >= nrows) continue;
		const long long row = Q0 + i0 + r;
#pragma unroll
		for (int t = 0; t < NT; t++) {
			const int d = lane + 32 * t;
			if (d < hd) dq[row * qs + h * hd + d] = scale * acc[rr][t];
		}
	}
}

#define BWDQ2(NT)                                                                                            \
	extern "C" __global__ void __launch_bounds__(128) attn2_bwd_dq_##NT(float *dq, const float *dout,         \
	    const float *q, const float *k, const float *v, const float *lse, const float *D, const int *tiles, \
	    const int *seqs, int heads, int kvheads, int hd, float scale) {                                     \
		attn2_bwd_dq<NT>(dq, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, hd, scale);            \
	}
BWDQ2(1)
BWDQ2(2)
BWDQ2(4)
BWDQ2(8)

template <int NT>
__device__ void attn2_bwd_dkv(float *dk, float *dv, const float *dout, const float *q, const float *k,
                              const float *v, const float *lse, const float *D, const int *tiles, const int *seqs,
                              int heads, int kvheads, int hd, float scale) {
	extern __shared__ float4 sm4[];
	float *sm = (float *)sm4;
	const int hd4 = (hd + 3) & ~3, hdp = hd4 + 4;
	float *sk = sm;               // BQ × hd4 (this block's keys)
	float *sv = sk + BQ * hd4;    // BQ × hd4
	float *sq = sv + BQ * hd4;    // BK × hdp (a tile of queries)
	float *sdo = sq + BK * hdp;   // BK × hdp
	float *sl = sdo + BK * hdp;   // BK
	float *sD = sl + BK;          // BK
	const int tile = blockIdx.x, kh = blockIdx.y;
	const int si = tiles[2 * tile], j0 = tiles[2 * tile + 1];
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2];
	const int group = heads / kvheads;
	const int qs = heads * hd, ks = kvheads * hd;
	const int nkeys = min(BQ, N - j0);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int idx = threadIdx.x; idx < BQ * hd4; idx += blockDim.x) {
		int r = idx / hd4, d = idx - r * hd4;
		bool ok = r < nkeys && d < hd;
		long long a = (long long)(K0 + j0 + r) * ks + kh * hd + d;
		sk[idx] = ok ? k[a] : 0.f;
		sv[idx] = ok ? v[a] : 0.f;
	}
	int key[4];
	float gk[4][NT], gv[4][NT];
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
		key[rr] = r < nkeys ? j0 + r : 0x7fffffff;  // an absent key is seen by no query
#pragma unroll
		for (int t = 0; t < NT; t++) gk[rr][t] = gv[rr][t] = 0.f;
	}
	const bool any = warp * 4 < nkeys;
	const int wfirst = j0 + warp * 4;  // the warp's first key: queries before it see none
	for (int g = 0; g < group; g++) {
		const int h = kh * group + g;
		for (int i0 = j0; i0 < N; i0 += BK) {
			__syncthreads();
			for (int idx = threadIdx.x; idx < BK * hd4; idx += blockDim.x) {
				int i = idx / hd4, d = idx - i * hd4;
				bool ok = i0 + i < N && d < hd;
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
			if (!any || i0 + BK <= wfirst) continue;  // warp-uniform
			const int i = i0 + lane;
			float s[4] = {0.f, 0.f, 0.f, 0.f}, dp[4] = {0.f, 0.f, 0.f, 0.f};
			const float4 *qr = (const float4 *)(sq + lane * hdp), *gr = (const float4 *)(sdo + lane * hdp);
			for (int d4 = 0; d4 < hd4 / 4; d4++) {
				const float4 qq = qr[d4], gg = gr[d4];
#pragma unroll
				for (int rr = 0; rr < 4; rr++) {
					s[rr] += dot4(qq, ((const float4 *)(sk + (warp * 4 + rr) * hd4))[d4]);
					dp[rr] += dot4(gg, ((const float4 *)(sv + (warp * 4 + rr) * hd4))[d4]);
				}
			}
			float p[4], ds[4];
#pragma unroll
			for (int rr = 0; rr < 4; rr++) {
				const bool ok = i < N && i >= key[rr];
				p[rr] = ok ? expf(scale * s[rr] - sl[lane]) : 0.f;
				ds[rr] = p[rr] * (dp[rr] - sD[lane]);
			}
			const int in = min(BK, N - i0);
			for (int ii = 0; ii < in; ii++) {
				float pi[4], di[4];
#pragma unroll
				for (int rr = 0; rr < 4; rr++) {
					pi[rr] = __shfl_sync(0xffffffffu, p[rr], ii);
					di[rr] = __shfl_sync(0xffffffffu, ds[rr], ii);
				}
#pragma unroll
				for (int t = 0; t < NT; t++) {
					const int d = lane + 32 * t;
					if (d < hd) {
						const float gq = sdo[ii * hdp + d], qq = sq[ii * hdp + d];
#pragma unroll
						for (int rr = 0; rr < 4; rr++) {
							gv[rr][t] += pi[rr] * gq;
							gk[rr][t] += di[rr] * qq;
						}
					}
				}
			}
		}
	}
#pragma unroll
	for (int rr = 0; rr < 4; rr++) {
		const int r = warp * 4 + rr;
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

#define BWDKV2(NT)                                                                                          \
	extern "C" __global__ void __launch_bounds__(128) attn2_bwd_dkv_##NT(float *dk, float *dv,               \
	    const float *dout, const float *q, const float *k, const float *v, const float *lse, const float *D, \
	    const int *tiles, const int *seqs, int heads, int kvheads, int hd, float scale) {                   \
		attn2_bwd_dkv<NT>(dk, dv, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, hd, scale);       \
	}
BWDKV2(1)
BWDKV2(2)
BWDKV2(4)
BWDKV2(8)
