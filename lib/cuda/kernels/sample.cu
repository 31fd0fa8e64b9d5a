// sample.cu: next-token choice on the device, one block (1024 threads) per
// row of logits. Greedy (invT = 0): the first maximum. Otherwise the plain
// temperature draw of lib/model's sampleRow by inverse CDF in id order with
// the row's uniform u, weights w_i = exp((z_i − max)·invT) in float64.
// Outputs the id, its log-prob under the temperature-1 softmax, and its
// log-prob under the distribution it was drawn from (0 for greedy).
// (Top-k / top-p rows are drawn on the host: see lib/model/cuda.go.)

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

extern "C" __global__ void __launch_bounds__(NTH) sample_f32(int *ids, float *lp, float *slp, const float *z, long long V,
                                                             const double *invT, const double *u) {
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
	// Inclusive scan of the chunk sums (Hillis–Steele).
	scan[threadIdx.x] = cs;
	__syncthreads();
	for (int o = 1; o < NTH; o <<= 1) {
		double add = threadIdx.x >= o ? scan[threadIdx.x - o] : 0.0;
		__syncthreads();
		scan[threadIdx.x] += add;
		__syncthreads();
	}
	const double total = scan[NTH - 1];
	const double target = u[r] * total;
	if (threadIdx.x == 0) pick = (int)(V - 1);
	__syncthreads();
	const double incl = scan[threadIdx.x], excl = incl - cs;
	if (excl <= target && incl > target) {
		double c = excl;
		long long id = hi - 1;
		for (long long j = lo; j < hi; j++) {
			c += exp((double)(zr[j] - m) * it);
			if (c > target) {
				id = j;
				break;
			}
		}
		pick = (int)id;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		const int id = pick;
		ids[r] = id;
		lp[r] = zr[id] - lse1;
		slp[r] = (float)log(exp((double)(zr[id] - m) * it) / total);
	}
}
