// decode.cu: the fused elementwise kernels of a decoding step (lib/model's
// cuda_decode.go, which runs the step from fixed buffers so that it can be
// captured in a CUDA graph). Each computes what a run of model.cu's kernels
// computes, with the same arithmetic in the same order, so that the step
// gives the same values as the model's op-by-op path:
//   dec_add_rmsnorm = add_f32 (the residual) then rmsnorm_f32;
//   dec_rope_kv     = add_bias_f32 on q, k, v, rope_f32 on q and k, and
//                     scatter_rows_f32 of k and v into the KV cache.

// to_bf16 is model.cu's rounding to bfloat16 bits (nearest even, NaN kept).
__device__ __forceinline__ unsigned short dec_to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

// dec_block_sum is model.cu's block_sum (the same reduction order).
__device__ float dec_block_sum(float v, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : 0.f;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// dec_add_rmsnorm: one block per row of dim values (blockDim as
// rmsnorm_f32's). With d, the residual first: x += d (stored). Then
// out = w·x·rstd into o32 and/or o16 (either may be null).
extern "C" __global__ void dec_add_rmsnorm(float *x, const float *d, float *o32, unsigned short *o16, const float *w, int n, int dim, float eps) {
	__shared__ float scratch[32];
	for (int r = blockIdx.x; r < n; r += gridDim.x) {
		float *xr = x + (long long)r * dim;
		if (d) {
			const float *dr = d + (long long)r * dim;
			for (int j = threadIdx.x; j < dim; j += blockDim.x) xr[j] = dr[j] + xr[j];
		}
		float ss = 0.f;
		for (int j = threadIdx.x; j < dim; j += blockDim.x) ss += xr[j] * xr[j];
		ss = dec_block_sum(ss, scratch);
		float rs = 1.0f / sqrtf(ss / (float)dim + eps);
		for (int j = threadIdx.x; j < dim; j += blockDim.x) {
			float v = w[j] * (xr[j] * rs);
			long long o = (long long)r * dim + j;
			if (o32) o32[o] = v;
			if (o16) o16[o] = dec_to_bf16(v);
		}
	}
}

// dec_rope_kv: one block per row r. q (heads·hd columns) gets its bias and
// the rotation of position pos[r], in place; k gets the same and is written
// to row crow[r] of the cache kc, v gets its bias and goes to row crow[r] of
// vc. A row with crow[r] < 0 (padding of a batch bucket) writes no cache row.
// Biases may be null. cs/sn are rope_f32's tables [position][hd/2].
extern "C" __global__ void dec_rope_kv(float *q, const float *k, const float *v, const float *bq, const float *bk, const float *bv,
                                       float *kc, float *vc, const int *pos, const int *crow, const float *cs, const float *sn,
                                       int heads, int kvheads, int hd) {
	const int r = blockIdx.x, half = hd / 2;
	const long long p = (long long)pos[r] * half;
	const int cr = crow[r];
	const int qd = heads * hd, kvd = kvheads * hd;
	float *qr = q + (long long)r * qd;
	for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
		int h = t / half, i = t - h * half;
		int j1 = h * hd + i, j2 = j1 + half;
		float x1 = qr[j1], x2 = qr[j2];
		if (bq) {
			x1 = x1 + bq[j1];
			x2 = x2 + bq[j2];
		}
		float c = cs[p + i], s = sn[p + i];
		float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
		qr[j1] = y1;
		qr[j2] = y2;
	}
	if (cr < 0) return;
	const float *kr = k + (long long)r * kvd, *vr = v + (long long)r * kvd;
	float *kd = kc + (long long)cr * kvd, *vd = vc + (long long)cr * kvd;
	for (int t = threadIdx.x; t < kvheads * half; t += blockDim.x) {
		int h = t / half, i = t - h * half;
		int j1 = h * hd + i, j2 = j1 + half;
		float x1 = kr[j1], x2 = kr[j2];
		if (bk) {
			x1 = x1 + bk[j1];
			x2 = x2 + bk[j2];
		}
		float c = cs[p + i], s = sn[p + i];
		float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
		kd[j1] = y1;
		kd[j2] = y2;
	}
	for (int j = threadIdx.x; j < kvd; j += blockDim.x) {
		float x = vr[j];
		if (bv) x = x + bv[j];
		vd[j] = x;
	}
}
