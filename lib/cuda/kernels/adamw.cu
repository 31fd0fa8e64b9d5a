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
