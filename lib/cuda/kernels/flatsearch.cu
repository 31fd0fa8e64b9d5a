// flatsearch.cu: the top-k half of GPU flat inner-product search (the scores
// come from a cuBLAS fp16 GEMM with fp32 accumulation, see flatsearch.go).
//
// topk_chunks: one block per (chunk of TK_CHUNK entries of a row, row). The
// chunk is loaded into shared memory with its global ids, bitonic-sorted in
// the order "higher score first, lower id first on equal scores" (numpy's
// stable argsort of -scores, FAISS's order for a Flat index), and its first
// k entries are written out. Repeated over the k-entry outputs, each pass
// shrinks a row by TK_CHUNK/k until one chunk is left: the row's top k.
// Padding is (-inf, LLONG_MAX), after every real entry; NaN scores count as
// -inf.

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
