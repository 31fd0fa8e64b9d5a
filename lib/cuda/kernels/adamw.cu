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
