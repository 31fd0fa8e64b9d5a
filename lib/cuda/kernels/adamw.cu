// adamw.cu: fused AdamW over flat fp32 arrays (master weights θ, gradients g,
// moments m, v), in lib/optim's (torch 2.11 CPU AdamW's) order and roundings:
// θ ← θ·decay; m ← fma(w1, g − m, m); v ← v·β2; v ← fma(w2·g, g, v);
// θ ← θ + (negStep·m)/(√v/√bc2 + ε). The scalars (decay = 1 − lr·λ, w1 = 1−β1,
// w2 = 1−β2, negStep = −lr/bc1, √bc2) are computed on the host in float64 and
// rounded to float32 once. Explicit _rn intrinsics keep the compiler from
// fusing products that torch rounds on their own.
extern "C" __global__ void adamw_f32(float *p, const float *g, float *m, float *v, long long n, float decay, int doDecay,
                                     float w1, float b2, float w2, float bc2sqrt, float eps, float negStep) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
		float th = p[i], gi = g[i];
		if (doDecay) th = __fmul_rn(th, decay);
		float mi = fmaf(w1, __fsub_rn(gi, m[i]), m[i]);
		float vi = __fmul_rn(v[i], b2);
		vi = fmaf(__fmul_rn(w2, gi), gi, vi);
		m[i] = mi;
		v[i] = vi;
		float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2sqrt), eps);
		p[i] = __fadd_rn(th, __fdiv_rn(__fmul_rn(negStep, mi), den));
	}
}

// sumsq_f64: *out += Σ x_i² in float64 (each block adds its partial sum).
// The order of the sum differs from the host's, so norms agree to rounding.
extern "C" __global__ void sumsq_f64(double *out, const float *x, long long n) {
	__shared__ double sc[32];
	double s = 0.0;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
		double v = (double)x[i];
		s += v * v;
	}
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	if (lane == 0) sc[w] = s;
	__syncthreads();
	if (w == 0) {
		s = lane < (int)(blockDim.x >> 5) ? sc[lane] : 0.0;
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0) atomicAdd(out, s);
	}
}

// scale_f32: x *= c (gradient clipping, one rounding per element as torch).
extern "C" __global__ void scale_f32(float *x, long long n, float c) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) x[i] = __fmul_rn(x[i], c);
}

// adamw8_step: AdamW with 8-bit blockwise moments (lib/optim's Step8, bit for
// bit): one block of 256 threads per block of 256 values sharing a scale. The
// moments are decoded (code value × scale), AdamW's float32 arithmetic as in
// adamw_f32 updates θ, m and v, and the block's new m and v are encoded again
// with scale = absmax / max code. θ is fp32 (p32) or, when p32 is null, split
// into the bf16 weight hi and the 16-bit remainder lo of its bit pattern
// (bits = hi<<16 + lo; hi rounds to nearest, ties away from zero). tabs holds
// the codebooks: exp_avg's 128 values and 127 midpoints, then exp_avg_sq's
// 256 values and 255 midpoints (optim.CodeExpAvg, optim.CodeExpAvgSq).
__device__ __forceinline__ int adamw8_count_below(const float *mids, int n, float a) {
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) >> 1;
		if (mids[mid] < a) lo = mid + 1;
		else hi = mid;
	}
	return lo;
}

__device__ __forceinline__ float adamw8_block_max(float x, float *sc) {
	for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	__syncthreads();
	if (lane == 0) sc[w] = x;
	__syncthreads();
	x = sc[0];
	for (int k = 1; k < (int)(blockDim.x >> 5); k++) x = fmaxf(x, sc[k]);
	return x;
}

extern "C" __global__ void adamw8_step(float *p32, unsigned short *hi, short *lo, const float *g, unsigned char *mq,
                                       float *ms, unsigned char *vq, float *vs, long long n, const float *tabs, float mMax,
                                       float vMax, float decay, int doDecay, float w1, float b2, float w2, float bc2sqrt,
                                       float eps, float negStep) {
	__shared__ float t[128 + 127 + 256 + 255];
	__shared__ float red[32];
	for (int k = threadIdx.x; k < 766; k += blockDim.x) t[k] = tabs[k];
	__syncthreads();
	const float *mVals = t, *mMids = t + 128, *vVals = t + 255, *vMids = t + 511;
	long long b = blockIdx.x, i = b * 256 + threadIdx.x;
	bool in = i < n;
	float m = 0.f, v = 0.f;
	if (in) {
		float th = p32 ? p32[i] : __uint_as_float(((unsigned)hi[i] << 16) + (unsigned)(int)lo[i]);
		unsigned char c = mq[i];
		float mv = mVals[c & 0x7f];
		if (c & 0x80) mv = -mv;
		m = __fmul_rn(mv, ms[b]);
		v = __fmul_rn(vVals[vq[i]], vs[b]);
		if (doDecay) th = __fmul_rn(th, decay);
		float gi = g[i];
		m = fmaf(w1, __fsub_rn(gi, m), m);
		v = __fmul_rn(v, b2);
		v = fmaf(__fmul_rn(w2, gi), gi, v);
		float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), bc2sqrt), eps);
		th = __fadd_rn(th, __fdiv_rn(__fmul_rn(negStep, m), den));
		if (p32) {
			p32[i] = th;
		} else {
			unsigned bits = __float_as_uint(th), h = (bits + 0x8000u) >> 16;
			hi[i] = (unsigned short)h;
			lo[i] = (short)(int)(bits - (h << 16));
		}
	}
	float am = adamw8_block_max(in ? fabsf(m) : 0.f, red);
	float av = adamw8_block_max(in ? v : 0.f, red);
	float sm = __fdiv_rn(am, mMax), sv = __fdiv_rn(av, vMax);
	if (threadIdx.x == 0) {
		ms[b] = sm;
		vs[b] = sv;
	}
	if (!in) return;
	unsigned char cm = 0, cv = 0;
	if (sm != 0.f) {
		float x = __fdiv_rn(m, sm);
		cm = (unsigned char)adamw8_count_below(mMids, 127, fabsf(x));
		if (x < 0.f && cm != 0) cm |= 0x80;
	}
	if (sv != 0.f) {
		float x = __fdiv_rn(v, sv);
		int k = adamw8_count_below(vMids, 255, x);
		if (k == 0 && x > 0.f) k = 1;
		cv = (unsigned char)k;
	}
	mq[i] = cm;
	vq[i] = cv;
}

// split_master: θ (fp32) as the bf16 weight hi and the remainder lo (see
// adamw8_step); with loIn, θ's low 16 bits are replaced by the saved remainder
// first (θ is then a bf16 checkpoint's weight and loIn the optimizer file's).
extern "C" __global__ void split_master(const float *p, unsigned short *hi, short *lo, const short *loIn, long long n) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
		unsigned bits = __float_as_uint(p[i]);
		if (loIn) bits = (bits & 0xffff0000u) + (unsigned)(int)loIn[i];
		unsigned h = (bits + 0x8000u) >> 16;
		hi[i] = (unsigned short)h;
		lo[i] = (short)(int)(bits - (h << 16));
	}
}

// gather_rows_bf16: dst row i = src row idx[i] widened from bf16 (the
// embedding lookup of a weight kept in bf16 only).
extern "C" __global__ void gather_rows_bf16(float *dst, const unsigned short *src, const int *idx, int rows, int cols) {
	long long n = (long long)rows * cols;
	for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)blockDim.x * gridDim.x) {
		int r = (int)(k / cols), c = (int)(k % cols);
		dst[k] = __uint_as_float((unsigned)src[(long long)idx[r] * cols + c] << 16);
	}
}
