// flatsearch.cu: the top-k half of GPU flat inner-product search (the scores
// come from a cuBLAS fp16 GEMM with fp32 accumulation, see flatsearch.go).
//
// Order everywhere: higher score first, lower id first on equal scores
// (numpy's stable argsort of -scores, FAISS's order for a Flat index); NaN
// scores count as -inf; padding is (-inf, LLONG_MAX), after every real
// entry. A kernel reduces each chunk of a row to its best k entries, best
// first; repeated over the k-entry outputs, passes shrink a row until one
// chunk is left: the row's top k.
//
// topk_warpE (k ≤ 32·E, E = 1, 2, 4, 8): the selection, what flatsearch.go
// runs for k ≤ 256. One warp per chunk keeps the chunk's best k so far as a
// sorted list in registers (entry e·32 + lane in slot e of that lane) and
// the k-th of them as a threshold. The warp streams the chunk 256 scores a
// step (8 coalesced loads per lane in flight); a step without any score
// that beats the threshold costs one ballot; a score that does is inserted
// (its rank by ballots, the entries after it moved one place by shuffles)
// and the threshold moves up. On scores in random order that is k·ln(chunk/k)
// insertions per chunk, a few dozen for k = 10.
//
// topk_chunks (any k ≤ 1024): one block per chunk of TK_CHUNK entries,
// bitonic-sorted in shared memory, its first k written out. For k > 256.

#define TK_CHUNK 2048
#define TK_THREADS 1024
#define TK_NOID 0x7fffffffffffffffLL

__device__ __forceinline__ bool tk_before(float sa, long long ia, float sb, long long ib) {
	return sa > sb || (sa == sb && ia < ib);
}

// scores: rows of rowLen values at rowStride; ids: the same layout, or null
// when entry j's id is idBase + j; out: k entries per chunk, rows at outStride.
extern "C" __global__ void __launch_bounds__(TK_THREADS)
    topk_chunks(const float *scores, const long long *ids, long long rowLen, long long rowStride, long long idBase, int k,
                float *outS, long long *outI, long long outStride) {
	__shared__ float s[TK_CHUNK];
	__shared__ long long ix[TK_CHUNK];
	const long long row = blockIdx.y;
	const long long c0 = (long long)blockIdx.x * TK_CHUNK;
	const float *sr = scores + row * rowStride;
	const long long *ir = ids ? ids + row * rowStride : 0;
	const float ninf = -__int_as_float(0x7f800000);
	for (int t = threadIdx.x; t < TK_CHUNK; t += blockDim.x) {
		long long j = c0 + t;
		if (j < rowLen) {
			float v = sr[j];
			s[t] = v != v ? ninf : v;
			ix[t] = ir ? ir[j] : idBase + j;
		} else {
			s[t] = ninf;
			ix[t] = TK_NOID;
		}
	}
	__syncthreads();
	for (int size = 2; size <= TK_CHUNK; size <<= 1) {
		for (int stride = size >> 1; stride > 0; stride >>= 1) {
			for (int t = threadIdx.x; t < TK_CHUNK / 2; t += blockDim.x) {
				int lo = 2 * t - (t & (stride - 1));
				int hi = lo + stride;
				float sl = s[lo], sh = s[hi];
				long long il = ix[lo], ih = ix[hi];
				bool first = (lo & size) == 0; // this run is sorted best-first
				bool swap = first ? tk_before(sh, ih, sl, il) : tk_before(sl, il, sh, ih);
				if (swap) {
					s[lo] = sh;
					s[hi] = sl;
					ix[lo] = ih;
					ix[hi] = il;
				}
			}
			__syncthreads();
		}
	}
	float *os = outS + row * outStride + (long long)blockIdx.x * k;
	long long *oi = outI + row * outStride + (long long)blockIdx.x * k;
	for (int t = threadIdx.x; t < k; t += blockDim.x) {
		os[t] = s[t];
		oi[t] = ix[t];
	}
}


#define TK_WARPS 8  // warps (chunks) per block of the warp kernels
#define TK_UNROLL 8 // loads per lane per step
#define TK_FULL 0xffffffffu

// warp_topk: warp w of block (x, row) reduces chunk c = x·TK_WARPS + w,
// entries [c·chunk, min((c+1)·chunk, rowLen)) of the row, to its best k
// (k ≤ 32·E), written at out + row·outStride + c·k. Arguments as
// topk_chunks', plus the chunk length.
template <int E>
__device__ void warp_topk(const float *scores, const long long *ids, long long rowLen, long long rowStride,
                          long long idBase, int k, long long chunk, float *outS, long long *outI, long long outStride) {
	const int lane = threadIdx.x & 31;
	const long long c = (long long)blockIdx.x * TK_WARPS + (threadIdx.x >> 5);
	const long long row = blockIdx.y;
	const long long c0 = c * chunk;
	if (c0 >= rowLen) return; // the whole warp
	const long long c1 = c0 + chunk < rowLen ? c0 + chunk : rowLen;
	const float *sr = scores + row * rowStride;
	const long long *ir = ids ? ids + row * rowStride : 0;
	const float ninf = -__int_as_float(0x7f800000);
	float ls[E];
	long long li[E];
#pragma unroll
	for (int e = 0; e < E; e++) {
		ls[e] = ninf;
		li[e] = TK_NOID;
	}
	const int ke = (k - 1) >> 5, kl = (k - 1) & 31; // where the k-th entry is
	float ts = ninf;                                // the threshold: the k-th entry, the same in every lane
	long long ti = TK_NOID;
	for (long long j0 = c0; j0 < c1; j0 += 32 * TK_UNROLL) {
		float v[TK_UNROLL];
		long long id[TK_UNROLL];
		bool any = false;
#pragma unroll
		for (int u = 0; u < TK_UNROLL; u++) {
			long long j = j0 + u * 32 + lane;
			if (j < c1) {
				float x = sr[j];
				v[u] = x != x ? ninf : x;
				id[u] = ir ? ir[j] : idBase + j;
			} else {
				v[u] = ninf;
				id[u] = TK_NOID;
			}
			any |= tk_before(v[u], id[u], ts, ti);
		}
		if (__ballot_sync(TK_FULL, any) == 0) continue;
#pragma unroll
		for (int u = 0; u < TK_UNROLL; u++) {
			unsigned m = __ballot_sync(TK_FULL, tk_before(v[u], id[u], ts, ti));
			while (m != 0) {
				int src = __ffs(m) - 1;
				m &= m - 1;
				float xs = __shfl_sync(TK_FULL, v[u], src);
				long long xi = __shfl_sync(TK_FULL, id[u], src);
				if (!tk_before(xs, xi, ts, ti)) continue; // the threshold moved past it (uniform)
				int pos = 0;                              // x's rank in the list
#pragma unroll
				for (int e = 0; e < E; e++) pos += __popc(__ballot_sync(TK_FULL, tk_before(ls[e], li[e], xs, xi)));
				// Entries at pos and after move one place down (from the
				// previous lane, or from lane 31 of the previous slot).
#pragma unroll
				for (int e = E - 1; e >= 0; e--) {
					float us = __shfl_up_sync(TK_FULL, ls[e], 1);
					long long ui = __shfl_up_sync(TK_FULL, li[e], 1);
					if (e > 0) {
						float ws = __shfl_sync(TK_FULL, ls[e - 1], 31);
						long long wi = __shfl_sync(TK_FULL, li[e - 1], 31);
						if (lane == 0) {
							us = ws;
							ui = wi;
						}
					}
					int p = e * 32 + lane;
					if (p == pos) {
						ls[e] = xs;
						li[e] = xi;
					} else if (p > pos) {
						ls[e] = us;
						li[e] = ui;
					}
				}
				float ks = ls[0];
				long long ki = li[0];
#pragma unroll
				for (int e = 1; e < E; e++)
					if (e == ke) {
						ks = ls[e];
						ki = li[e];
					}
				ts = __shfl_sync(TK_FULL, ks, kl);
				ti = __shfl_sync(TK_FULL, ki, kl);
			}
		}
	}
	float *os = outS + row * outStride + c * k;
	long long *oi = outI + row * outStride + c * k;
#pragma unroll
	for (int e = 0; e < E; e++) {
		int p = e * 32 + lane;
		if (p < k) {
			os[p] = ls[e];
			oi[p] = li[e];
		}
	}
}

extern "C" __global__ void __launch_bounds__(32 * TK_WARPS)
    topk_warp1(const float *scores, const long long *ids, long long rowLen, long long rowStride, long long idBase, int k,
               long long chunk, float *outS, long long *outI, long long outStride) {
	warp_topk<1>(scores, ids, rowLen, rowStride, idBase, k, chunk, outS, outI, outStride);
}
extern "C" __global__ void __launch_bounds__(32 * TK_WARPS)
    topk_warp2(const float *scores, const long long *ids, long long rowLen, long long rowStride, long long idBase, int k,
               long long chunk, float *outS, long long *outI, long long outStride) {
	warp_topk<2>(scores, ids, rowLen, rowStride, idBase, k, chunk, outS, outI, outStride);
}
extern "C" __global__ void __launch_bounds__(32 * TK_WARPS)
    topk_warp4(const float *scores, const long long *ids, long long rowLen, long long rowStride, long long idBase, int k,
               long long chunk, float *outS, long long *outI, long long outStride) {
	warp_topk<4>(scores, ids, rowLen, rowStride, idBase, k, chunk, outS, outI, outStride);
}
extern "C" __global__ void __launch_bounds__(32 * TK_WARPS)
    topk_warp8(const float *scores, const long long *ids, long long rowLen, long long rowStride, long long idBase, int k,
               long long chunk, float *outS, long long *outI, long long outStride) {
	warp_topk<8>(scores, ids, rowLen, rowStride, idBase, k, chunk, outS, outI, outStride);
}

