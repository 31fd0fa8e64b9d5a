// sample.cu: next-token choice on the device, one block (1024 threads) per
// row of logits. Greedy (invT = 0): the first maximum. Otherwise the plain
// temperature draw of lib/model's sampleRow by inverse CDF in id order with
// the row's uniform u, weights w_i = exp((z_i − max)·invT) in float64.
// Outputs the id, its log-prob under the temperature-1 softmax, and its
// log-prob under the distribution it was drawn from (0 for greedy).
// sample_filtered_f32 draws the rows with top-k or top-p (below).

#define NTH 1024

__device__ double dsum_block(double v, double *sc) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	__syncthreads();
	if (lane == 0) sc[w] = v;
	__syncthreads();
	v = lane < 32 ? sc[lane] : 0.0;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// block_scan: scan[t] = the inclusive prefix sum of the block's values v
// (Hillis–Steele; NTH threads).
__device__ void block_scan(double *scan, double v) {
	scan[threadIdx.x] = v;
	__syncthreads();
	for (int o = 1; o < NTH; o <<= 1) {
		double add = threadIdx.x >= o ? scan[threadIdx.x - o] : 0.0;
		__syncthreads();
		scan[threadIdx.x] += add;
		__syncthreads();
	}
}

// scan_pick: the draw after block_scan of the threads' weight sums cs over
// their ranges [lo, hi) of the row (weights exp((z − m)·it), mass base
// before the first): the thread whose range holds the cumulative target
// finds the first id whose running weight passes it; *pick is fallback when
// none does (rounding leaves the mass short).
__device__ void scan_pick(int *pick, const double *scan, const float *zr, float m, double it, long long lo,
                          long long hi, double cs, double base, double target, long long fallback) {
	if (threadIdx.x == 0) *pick = (int)fallback;
	__syncthreads();
	const double incl = base + scan[threadIdx.x], excl = incl - cs;
	if (lo < hi && excl <= target && incl > target) {
		double c = excl;
		long long id = hi - 1;
		for (long long j = lo; j < hi; j++) {
			c += exp((double)(zr[j] - m) * it);
			if (c > target) {
				id = j;
				break;
			}
		}
		*pick = (int)id;
	}
	__syncthreads();
}

// write_draw stores row r's draw id: its log-prob under temperature 1 and
// under the sampling temperature (1/it), whose weights sum to total.
__device__ void write_draw(int r, int id, const float *zr, float m, double it, float lse1, double total, int *ids,
                           float *lp, float *slp) {
	ids[r] = id;
	lp[r] = zr[id] - lse1;
	slp[r] = (float)log(exp((double)(zr[id] - m) * it) / total);
}

extern "C" __global__ void __launch_bounds__(NTH) sample_f32(int *ids, float *lp, float *slp, const float *z, long long V,
                                                             const double *invT, const double *u) {
	PDL_WAIT(); // kernels/pdl.cuh: launched overlapped in the decoding step
	PDL_RELEASE();
	__shared__ float smax[32];
	__shared__ int sarg[32];
	__shared__ double sc[32];
	__shared__ double scan[NTH];
	__shared__ int pick;
	const int r = blockIdx.x;
	const float *zr = z + (long long)r * V;
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	// First maximum: per thread over a contiguous chunk, then lowest index wins ties.
	const long long chunk = (V + NTH - 1) / NTH;
	const long long lo = threadIdx.x * chunk, hi = min(V, lo + chunk);
	float best = -__int_as_float(0x7f800000);
	int arg = 0x7fffffff;
	for (long long j = lo; j < hi; j++)
		if (zr[j] > best || arg == 0x7fffffff) {
			if (arg == 0x7fffffff || zr[j] > best) {
				best = zr[j];
				arg = (int)j;
			}
		}
	for (int o = 16; o > 0; o >>= 1) {
		float b2 = __shfl_xor_sync(0xffffffffu, best, o);
		int a2 = __shfl_xor_sync(0xffffffffu, arg, o);
		if (b2 > best || (b2 == best && a2 < arg)) {
			best = b2;
			arg = a2;
		}
	}
	if (lane == 0) {
		smax[w] = best;
		sarg[w] = arg;
	}
	__syncthreads();
	if (w == 0) {
		best = smax[lane];
		arg = sarg[lane];
		for (int o = 16; o > 0; o >>= 1) {
			float b2 = __shfl_xor_sync(0xffffffffu, best, o);
			int a2 = __shfl_xor_sync(0xffffffffu, arg, o);
			if (b2 > best || (b2 == best && a2 < arg)) {
				best = b2;
				arg = a2;
			}
		}
		if (lane == 0) {
			smax[0] = best;
			sarg[0] = arg;
		}
	}
	__syncthreads();
	const float m = smax[0];
	const int am = sarg[0];
	// Temperature-1 log-sum-exp (float64 sum, as the CPU backend).
	double s1 = 0.0;
	for (long long j = lo; j < hi; j++) s1 += exp((double)(zr[j] - m));
	s1 = dsum_block(s1, sc);
	const float lse1 = m + (float)log(s1);
	const double it = invT[r];
	if (it <= 0.0) {
		if (threadIdx.x == 0) {
			ids[r] = am;
			lp[r] = zr[am] - lse1;
			slp[r] = 0.f;
		}
		return;
	}
	double cs = 0.0;
	for (long long j = lo; j < hi; j++) cs += exp((double)(zr[j] - m) * it);
	block_scan(scan, cs);
	const double total = scan[NTH - 1];
	const double target = u[r] * total;
	scan_pick(&pick, scan, zr, m, it, lo, hi, cs, 0.0, target, V - 1);
	if (threadIdx.x == 0) write_draw(r, pick, zr, m, it, lse1, total, ids, lp, slp);
}

// sample_filtered_f32: the top-k / top-p draw of lib/model's sampleRow, for
// the rows listed in rows[] (one block each), with the CPU's exact
// semantics: weights w = exp((z − max)·invT) in float64; a candidate set of
// the tokens with w ≥ τ, τ = 1e-4, 1e-7, … lowered by the CPU's rule until
// it holds k tokens (top-k) or mass p·total (top-p); the candidates sorted by
// weight, ties by lower id; the first k kept; then the shortest prefix whose
// mass reaches p times the kept mass; the draw by inverse CDF in that sorted
// order. Sums over the kept tokens run in that order on one thread, as the
// CPU's loops do. When the candidate set is over SF_CAP tokens (a flat
// distribution), ids[r] is −1 and the host draws the row.

#define SF_CAP 2048

__device__ __forceinline__ bool sf_before(double wa, int ia, double wb, int ib) {
	return wa > wb || (wa == wb && ia < ib);
}

extern "C" __global__ void __launch_bounds__(NTH) sample_filtered_f32(int *ids, float *lp, float *slp, const float *z, long long V,
                                                                      const int *rows, const double *invT, const int *topK,
                                                                      const double *topP, const double *u) {
	__shared__ double sc[32];
	__shared__ float smax[32];
	__shared__ double cw[SF_CAP];
	__shared__ int cid[SF_CAP];
	__shared__ int ncand;
	const int r = rows[blockIdx.x];
	const float *zr = z + (long long)r * V;
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	// Row maximum (its position does not matter here).
	float best = -__int_as_float(0x7f800000);
	for (long long j = threadIdx.x; j < V; j += NTH) best = fmaxf(best, zr[j]);
	for (int o = 16; o > 0; o >>= 1) best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, o));
	if (lane == 0) smax[w] = best;
	__syncthreads();
	if (w == 0) {
		best = smax[lane];
		for (int o = 16; o > 0; o >>= 1) best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, o));
		if (lane == 0) smax[0] = best;
	}
	__syncthreads();
	const float m = smax[0];
	double s1 = 0.0, tot = 0.0;
	const double it = invT[r];
	for (long long j = threadIdx.x; j < V; j += NTH) {
		s1 += exp((double)(zr[j] - m));
		tot += exp((double)(zr[j] - m) * it);
	}
	s1 = dsum_block(s1, sc);
	tot = dsum_block(tot, sc);
	const float lse1 = m + (float)log(s1);
	const int k = topK[r];
	const double pp = topP[r];
	const bool useK = k > 0 && k < V, useP = pp > 0 && pp < 1;
	// The CPU's candidate threshold.
	double tau = 1e-4;
	for (;;) {
		double cnt = 0.0, mass = 0.0;
		for (long long j = threadIdx.x; j < V; j += NTH) {
			double x = exp((double)(zr[j] - m) * it);
			if (x >= tau) {
				cnt += 1.0;
				mass += x;
			}
		}
		cnt = dsum_block(cnt, sc);
		mass = dsum_block(mass, sc);
		if ((useK && cnt >= k) || (useP && mass >= pp * tot) || tau < 1e-300 || cnt == (double)V) {
			if (cnt > SF_CAP) {
				if (threadIdx.x == 0) ids[r] = -1;
				return;
			}
			break;
		}
		tau *= 1e-3;
	}
	if (threadIdx.x == 0) ncand = 0;
	__syncthreads();
	for (long long j = threadIdx.x; j < V; j += NTH) {
		double x = exp((double)(zr[j] - m) * it);
		if (x >= tau) {
			int at = atomicAdd(&ncand, 1);
			cw[at] = x;
			cid[at] = (int)j;
		}
	}
	__syncthreads();
	const int n = ncand;
	int size = 1;
	while (size < n) size <<= 1;
	for (int i = n + threadIdx.x; i < size; i += NTH) {
		cw[i] = -1.0; // after every real weight (weights are ≥ 0)
		cid[i] = 0x7fffffff;
	}
	__syncthreads();
	// Bitonic sort, best first.
	for (int sz = 2; sz <= size; sz <<= 1) {
		for (int st = sz >> 1; st > 0; st >>= 1) {
			for (int t = threadIdx.x; t < size / 2; t += NTH) {
				int lo = 2 * t - (t & (st - 1)), hi = lo + st;
				bool up = (lo & sz) == 0;
				bool sw = up ? sf_before(cw[hi], cid[hi], cw[lo], cid[lo]) : sf_before(cw[lo], cid[lo], cw[hi], cid[hi]);
				if (sw) {
					double tw = cw[lo];
					cw[lo] = cw[hi];
					cw[hi] = tw;
					int ti = cid[lo];
					cid[lo] = cid[hi];
					cid[hi] = ti;
				}
			}
			__syncthreads();
		}
	}
	if (threadIdx.x != 0) return;
	int keep = n;
	if (useK && keep > k) keep = k;
	double mass = 0.0;
	for (int i = 0; i < keep; i++) mass += cw[i];
	if (useP) {
		double limit = pp * mass, cum = 0.0;
		int c = 0;
		while (c < keep && (c == 0 || cum < limit)) {
			cum += cw[c];
			c++;
		}
		keep = c;
		mass = cum;
	}
	const double target = u[r] * mass;
	double cum = 0.0;
	int pick = keep - 1;
	for (int i = 0; i < keep; i++) {
		cum += cw[i];
		if (cum > target) {
			pick = i;
			break;
		}
	}
	const int id = cid[pick];
	ids[r] = id;
	lp[r] = zr[id] - lse1;
	slp[r] = (float)log(cw[pick] / mass);
}

// ---- the same draw split over blocks (steps of few rows) ----
//
// sample_f32 gives a row one block, which at a batch-1 decoding step reads
// the 151,936 logits of Qwen's vocabulary from one multiprocessor (about
// 70 µs on the H200). The three kernels below make the same choice with nc
// blocks per row, each over a contiguous chunk of ch ids (chunk c: ids
// [c·ch, min(V, (c+1)·ch))): sample_split_max finds each chunk's first
// maximum; sample_split_sum, the global maximum m from those, sums each
// chunk's exp(z − m) and exp((z − m)·invT) (float64, the same terms as
// sample_f32); sample_split_pick merges (the first maximum of the lowest
// chunk holding m; log-sum-exp) and, for temperature rows, picks the chunk
// where the inverse CDF crosses u·total, then the id inside it as
// sample_f32 does. Only the order of the float64 sums differs from
// sample_f32. part holds 4 doubles per (row, chunk): max, arg, Σ, Σ_T.

// split_dsum is a block sum of doubles (any multiple of 32 threads up to
// 1024), the result in every thread.
__device__ double split_dsum(double v, double *sc) {
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	if (lane == 0) sc[w] = v;
	__syncthreads();
	v = lane < nw ? sc[lane] : 0.0;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ void split_first_max(float &best, int &arg, float b2, int a2) {
	if (b2 > best || (b2 == best && a2 < arg)) {
		best = b2;
		arg = a2;
	}
}

extern "C" __global__ void __launch_bounds__(256) sample_split_max(double *part, const float *z, long long V, int ch) {
	PDL_WAIT(); // kernels/pdl.cuh: launched overlapped in the decoding step
	PDL_RELEASE();
	__shared__ float smax[32];
	__shared__ int sarg[32];
	const int r = blockIdx.y, c = blockIdx.x, nc = gridDim.x;
	const float *zr = z + (long long)r * V;
	const long long lo = (long long)c * ch, hi = min(V, lo + ch);
	float best = -__int_as_float(0x7f800000);
	int arg = 0x7fffffff;
	for (long long j = lo + threadIdx.x; j < hi; j += blockDim.x) split_first_max(best, arg, zr[j], (int)j);
	for (int o = 16; o > 0; o >>= 1) split_first_max(best, arg, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, arg, o));
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	if (lane == 0) {
		smax[w] = best;
		sarg[w] = arg;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int i = 1; i < nw; i++) split_first_max(best, arg, smax[i], sarg[i]);
		double *p = part + ((long long)r * nc + c) * 4;
		p[0] = best;
		p[1] = arg; // 0x7fffffff for an empty chunk (with best = −inf)
	}
}

// split_row_max is the row's maximum over the chunks' maxima.
__device__ __forceinline__ float split_row_max(const double *pr, int nc) {
	float m = -__int_as_float(0x7f800000);
	for (int i = 0; i < nc; i++) m = fmaxf(m, (float)pr[4 * i]);
	return m;
}

extern "C" __global__ void __launch_bounds__(256) sample_split_sum(double *part, const float *z, long long V, int ch, const double *invT) {
	PDL_WAIT(); // kernels/pdl.cuh: launched overlapped in the decoding step
	PDL_RELEASE();
	__shared__ double sc[32];
	const int r = blockIdx.y, c = blockIdx.x, nc = gridDim.x;
	const float *zr = z + (long long)r * V;
	const double *pr = part + (long long)r * nc * 4;
	const float m = split_row_max(pr, nc);
	const double it = invT[r];
	const long long lo = (long long)c * ch, hi = min(V, lo + ch);
	double s1 = 0.0, st = 0.0;
	for (long long j = lo + threadIdx.x; j < hi; j += blockDim.x) {
		s1 += exp((double)(zr[j] - m));
		if (it > 0.0) st += exp((double)(zr[j] - m) * it);
	}
	s1 = split_dsum(s1, sc);
	st = split_dsum(st, sc);
	if (threadIdx.x == 0) {
		double *p = part + ((long long)r * nc + c) * 4;
		p[2] = s1;
		p[3] = st;
	}
}

extern "C" __global__ void __launch_bounds__(NTH) sample_split_pick(int *ids, float *lp, float *slp, const double *part, const float *z, long long V,
                                                                    int ch, int nc, const double *invT, const double *u) {
	PDL_WAIT(); // kernels/pdl.cuh: launched overlapped in the decoding step
	PDL_RELEASE();
	__shared__ double scan[NTH];
	__shared__ int pick;
	const int r = blockIdx.x;
	const float *zr = z + (long long)r * V;
	const double *pr = part + (long long)r * nc * 4;
	const float m = split_row_max(pr, nc);
	const double it = invT[r];
	// Every thread merges the nc chunk records (nc is small) in chunk order.
	int am = 0x7fffffff;
	double s1 = 0.0, total = 0.0;
	for (int i = 0; i < nc; i++) {
		if (am == 0x7fffffff && (float)pr[4 * i] == m) am = (int)pr[4 * i + 1];
		s1 += pr[4 * i + 2];
		total += pr[4 * i + 3];
	}
	const float lse1 = m + (float)log(s1);
	if (it <= 0.0) {
		if (threadIdx.x == 0) {
			ids[r] = am;
			lp[r] = zr[am] - lse1;
			slp[r] = 0.f;
		}
		return;
	}
	const double target = u[r] * total;
	// The chunk where the cumulative mass crosses the target (the last
	// chunk when rounding leaves it short), and the mass before it.
	int cstar = -1;
	double before = 0.0;
	for (int i = 0; i < nc; i++) {
		if (before + pr[4 * i + 3] > target) {
			cstar = i;
			break;
		}
		before += pr[4 * i + 3];
	}
	if (cstar < 0) cstar = nc - 1, before -= pr[4 * (nc - 1) + 3];
	// Inside chunk cstar: sample_f32's per-thread ranges and scan.
	const long long clo = (long long)cstar * ch, chi = min(V, clo + ch);
	const long long per = (chi - clo + NTH - 1) / NTH;
	const long long lo = min(chi, clo + threadIdx.x * per), hi = min(chi, lo + per);
	double cs = 0.0;
	for (long long j = lo; j < hi; j++) cs += exp((double)(zr[j] - m) * it);
	block_scan(scan, cs);
	scan_pick(&pick, scan, zr, m, it, lo, hi, cs, before, target, chi - 1);
	if (threadIdx.x == 0) write_draw(r, pick, zr, m, it, lse1, total, ids, lp, slp);
}
