// decode.cu: the fused elementwise kernels of a decoding step (lib/model's
// cuda_decode.go, which runs the step from fixed buffers so that it can be
// captured in a CUDA graph). Each computes what a run of model.cu's kernels
// computes, with the same arithmetic in the same order, so that the step
// gives the same values as the model's op-by-op path:
//   dec_add_rmsnorm = add_f32 (the residual) then rmsnorm_f32;
//   dec_rope_kv     = add_bias_f32 on q, k, v, rope_f32 on q and k, and
//                     scatter_rows_f32 of k and v into the KV cache.
// Every kernel here begins with PDL_WAIT and PDL_RELEASE (pdl.cuh): the
// step launches them overlapped, each one's start hidden behind the tail of
// the kernel before it.

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
	PDL_WAIT();
	PDL_RELEASE();
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

// dec_rope_heads rotates nheads heads of hd values, src (plus bias, when
// not null) to dst, by position row p·(hd/2) of the tables: rope_f32's
// arithmetic, one pair (i, i+hd/2) per thread and step.
__device__ __forceinline__ void dec_rope_heads(float *dst, const float *src, const float *bias, int nheads, int hd, const float *cs,
                                               const float *sn, long long p) {
	const int half = hd / 2;
	for (int t = threadIdx.x; t < nheads * half; t += blockDim.x) {
		int h = t / half, i = t - h * half;
		int j1 = h * hd + i, j2 = j1 + half;
		float x1 = src[j1], x2 = src[j2];
		if (bias) {
			x1 = x1 + bias[j1];
			x2 = x2 + bias[j2];
		}
		float c = cs[p + i], s = sn[p + i];
		float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
		dst[j1] = y1;
		dst[j2] = y2;
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
	PDL_WAIT();
	PDL_RELEASE();
	const int r = blockIdx.x;
	const long long p = (long long)pos[r] * (hd / 2);
	const int cr = crow[r];
	const int qd = heads * hd, kvd = kvheads * hd;
	float *qr = q + (long long)r * qd;
	dec_rope_heads(qr, qr, bq, heads, hd, cs, sn, p);
	if (cr < 0) return;
	const float *vr = v + (long long)r * kvd;
	float *vd = vc + (long long)cr * kvd;
	dec_rope_heads(kc + (long long)cr * kvd, k + (long long)r * kvd, bk, kvheads, hd, cs, sn, p);
	for (int j = threadIdx.x; j < kvd; j += blockDim.x) {
		float x = vr[j];
		if (bv) x = x + bv[j];
		vd[j] = x;
	}
}

#define DEC_INF __int_as_float(0x7f800000)

__device__ __forceinline__ float dec_warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float dec_warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// split_chunk is the keys per split of a row of nkeys keys over nsp splits:
// an even share, rounded up to a multiple of minchunk. The plan (nsp) is
// fixed by the shapes, so that a captured graph keeps it; the chunk follows
// the row's keys, so that a short row in a long cache still spreads over
// the splits instead of leaving all but the first few idle.
__device__ __forceinline__ int split_chunk(int nkeys, int nsp, int minchunk) {
	int c = (nkeys + nsp - 1) / nsp;
	return max(minchunk, (c + minchunk - 1) / minchunk * minchunk);
}

// split_used is how many of the nsp splits hold keys.
__device__ __forceinline__ int split_used(int nkeys, int nsp, int minchunk) {
	int c = split_chunk(nkeys, nsp, minchunk);
	return max(1, min(nsp, (nkeys + c - 1) / c));
}

// attn_split: decode attention with the keys split across blocks, so that
// a step with few rows still spreads over the chip (attndecode.cu's kernel
// gives a row and kv head one block, 2 to 8 blocks for a whole batch-1
// step). Block (row, kv head, split) holds one warp per query head of the
// group (blockDim = 32·g); the warps read the same key and value rows
// (once from memory, then from L1), lane d of a warp holding dims d, d+32, …
// of q and of its output. Split s covers keys [s·chunk, (s+1)·chunk) of the
// row's nkeys (split_chunk), KU keys at a time with the loads of their keys
// and values issued together (one memory round trip per KU keys); online
// softmax. With one split in use the block writes out (and its bf16
// rounding o16, when not null: the output product's operand) and lse;
// otherwise each warp writes its partial (acc[hd], m, l) to
// part[((row·heads + h)·nsp + s)·(hd+2)] and attn_split_combine (or the last
// split, in attn_split_merged) merges the splits in use. rows as
// attn_decode's (dec_row).
__device__ void split_merge(float *out, unsigned short *o16, float *lse, const float *pp, int qrow, int h, int heads, int hd, int used, int lane);

// dec_row is query row i of the decoding attention kernels: rows[5·i …] =
// (query row, key row K, keys, prefix row P, prefix keys PN), as
// attndecode.cu's; key j is row P+j below PN (a prompt its request's
// samples share, read from one copy) and K+j from it (lib/model's
// AttnSeq.keyRow, decodeRowInts).
struct dec_row {
	int q, k, n, p, pn;
};

__device__ __forceinline__ dec_row dec_row_at(const int *rows, int i) {
	const int *r = rows + 5 * i;
	return dec_row{r[0], r[1], r[2], r[3], r[4]};
}

// dec_key_row is the cache row of key j of r.
__device__ __forceinline__ long long dec_key_row(const dec_row &r, int j) { return (long long)(j < r.pn ? r.p : r.k) + j; }

// attn_split_pass is one warp's pass over keys [k0, k1): NT values of q and
// of the output per lane (hd ≤ 32·NT), KU keys per round, the rounds step
// keys apart (KU: every key; S·KU: every S-th group of KU keys, the warp's
// share of a block that splits its keys S ways). Key j is row j of kp and
// vp, or with SEG row dec_key_row(r, j). CG: q was written earlier in the
// same launch (dec_persist), so it is read through L2.
template <int NT, int KU, bool CG, bool SEG>
__device__ __forceinline__ void attn_split_pass(float *acc, float &m, float &l, const float *qp, const float *kp, const float *vp, const dec_row &r,
                                                long long kld, int hd, float scale, int k0, int k1, int step, int lane) {
	float qv[NT];
#pragma unroll
	for (int i = 0; i < NT; i++) {
		int d = lane + 32 * i;
		qv[i] = d < hd ? (CG ? __ldcg(qp + d) : qp[d]) : 0.f;
		acc[i] = 0.f;
	}
	m = -DEC_INF, l = 0.f;
	for (int j = k0; j < k1; j += step) {
		float xk[KU][NT], xv[KU][NT], s[KU];
#pragma unroll
		for (int u = 0; u < KU; u++)
#pragma unroll
			for (int i = 0; i < NT; i++) {
				int d = lane + 32 * i;
				bool ok = j + u < k1 && d < hd;
				const long long at = (SEG ? dec_key_row(r, j + u) : (long long)(j + u)) * kld + d;
				xk[u][i] = ok ? kp[at] : 0.f;
				xv[u][i] = ok ? vp[at] : 0.f;
			}
		float mn = m;
#pragma unroll
		for (int u = 0; u < KU; u++) {
			float dot = 0.f;
#pragma unroll
			for (int i = 0; i < NT; i++) dot += qv[i] * xk[u][i];
			dot = dec_warp_sum(dot);
			s[u] = j + u < k1 ? dot * scale : -DEC_INF;
			mn = fmaxf(mn, s[u]); // finite: key j exists
		}
		float corr = __expf(m - mn); // 0 on the first keys (m = −inf)
		float ps = 0.f;
#pragma unroll
		for (int i = 0; i < NT; i++) acc[i] *= corr;
#pragma unroll
		for (int u = 0; u < KU; u++) {
			float p = __expf(s[u] - mn);
			ps += p;
#pragma unroll
			for (int i = 0; i < NT; i++) acc[i] += p * xv[u][i];
		}
		l = l * corr + ps;
		m = mn;
	}
}

// attn_split_keys is attn_split_pass over keys [k0, k1) of r (kp and vp the
// cache's columns of the kv head): where those keys lie on one side of the
// shared prefix's end (every pass without a prefix), from one base row,
// the loads as without prefixes; else key by key (dec_key_row; a select a
// key everywhere cost 2-3% of a 0.5B step at batch 32). The same sums
// either way.
template <int NT, int KU, bool CG = false>
__device__ __forceinline__ void attn_split_keys(float *acc, float &m, float &l, const float *qp, const float *kp, const float *vp, const dec_row &r,
                                                long long kld, int hd, float scale, int k0, int k1, int step, int lane) {
	if (k0 >= r.pn || k1 <= r.pn) {
		const long long base = (long long)(k0 >= r.pn ? r.k : r.p) * kld;
		attn_split_pass<NT, KU, CG, false>(acc, m, l, qp, kp + base, vp + base, r, kld, hd, scale, k0, k1, step, lane);
	} else {
		attn_split_pass<NT, KU, CG, true>(acc, m, l, qp, kp, vp, r, kld, hd, scale, k0, k1, step, lane);
	}
}

// put_partial stores one warp's partial of a head, (acc[hd], m, l), at p
// (lane d holding dims d, d+32, …).
template <int NT>
__device__ __forceinline__ void put_partial(float *p, const float *acc, float m, float l, int hd, int lane) {
#pragma unroll
	for (int i = 0; i < NT; i++) {
		int d = lane + 32 * i;
		if (d < hd) p[d] = acc[i];
	}
	if (lane == 0) {
		p[hd] = m;
		p[hd + 1] = l;
	}
}

// split_finish is what a warp does with its head's (acc, m, l) over split
// sp of a row: with one split in use, split 0 writes the output (and o16)
// and lse; otherwise each split in use writes its partial, and with
// counters the last of the nsp splits to count merges them (split_merge).
template <int NT>
__device__ __forceinline__ void split_finish(const float *acc, float m, float l, float *out, unsigned short *o16, float *lse, float *part,
                                             int *cnt, int row, int qrow, int h, int heads, int hd, int sp, int nsp, int used, int lane) {
	const long long qld = (long long)heads * hd;
	if (used == 1) {
		if (sp != 0) return;
		float inv = 1.f / l;
		const long long o = qrow * qld + (long long)h * hd;
#pragma unroll
		for (int i = 0; i < NT; i++) {
			int d = lane + 32 * i;
			if (d < hd) {
				out[o + d] = acc[i] * inv;
				if (o16) o16[o + d] = dec_to_bf16(acc[i] * inv);
			}
		}
		if (lane == 0) lse[(long long)qrow * heads + h] = m + __logf(l);
		return;
	}
	float *ph = part + (long long)(row * heads + h) * nsp * (hd + 2);
	if (sp < used) put_partial<NT>(ph + (long long)sp * (hd + 2), acc, m, l, hd, lane);
	if (!cnt) return;
	// The last warp of the nsp to finish head h merges the partials (the
	// threadFenceReduction pattern): each lane's partial is made visible
	// device-wide before lane 0 counts it; the merging warp reads them
	// through L2 and resets the counter for the next launch. Splits past
	// the row's keys count too, so the count is always nsp.
	__threadfence();
	__syncwarp();
	int last = 0;
	if (lane == 0) last = atomicAdd(&cnt[row * heads + h], 1) == nsp - 1;
	last = __shfl_sync(0xffffffffu, last, 0);
	if (!last) return;
	__threadfence();
	split_merge(out, o16, lse, ph, qrow, h, heads, hd, used, lane);
	if (lane == 0) cnt[row * heads + h] = 0;
}

template <int NT, int KU>
__device__ __forceinline__ void attn_split_run(float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k,
                                               const float *v, const int *rows, int heads, int kvheads, int hd, float scale, int minchunk,
                                               int *cnt) {
	const int g = heads / kvheads, row = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (w >= g) return;
	const dec_row r = dec_row_at(rows, row);
	const int qrow = r.q, nkeys = r.n;
	const int h = kh * g + w;
	const int chunk = split_chunk(nkeys, nsp, minchunk), used = split_used(nkeys, nsp, minchunk);
	const long long qld = (long long)heads * hd, kld = (long long)kvheads * hd;
	const int k0 = sp * chunk, k1 = min(nkeys, k0 + chunk);
	float acc[NT], m = -DEC_INF, l = 0.f;
	if (sp < used)
		attn_split_keys<NT, KU>(acc, m, l, q + qrow * qld + (long long)h * hd, k + (long long)kh * hd, v + (long long)kh * hd, r, kld, hd, scale,
		                        k0, k1, KU, lane);
	split_finish<NT>(acc, m, l, out, o16, lse, part, cnt, row, qrow, h, heads, hd, sp, nsp, used, lane);
}

// attn_split_dispatch picks the kernel body by head dim: NT = ⌈hd/32⌉
// values per lane, 8 keys a round up to hd 128, 4 beyond (registers).
__device__ __forceinline__ void attn_split_dispatch(float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k,
                                                    const float *v, const int *rows, int heads, int kvheads, int hd, float scale,
                                                    int minchunk, int *cnt) {
	const int nt = (hd + 31) >> 5;
	if (nt <= 1)
		attn_split_run<1, 8>(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt);
	else if (nt == 2)
		attn_split_run<2, 8>(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt);
	else if (nt <= 4)
		attn_split_run<4, 8>(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt);
	else
		attn_split_run<8, 4>(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt); // head dims up to 256
}

extern "C" __global__ void attn_split(float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k, const float *v,
                                      const int *rows, int heads, int kvheads, int hd, float scale, int minchunk) {
	PDL_WAIT();
	PDL_RELEASE();
	attn_split_dispatch(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, nullptr);
}

// attn_split_merged: attn_split with the merge done by the last split of
// each (row, query head) instead of attn_split_combine's launch. cnt holds
// rows·heads counters, zero before the launch and zero after it.
extern "C" __global__ void attn_split_merged(float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k,
                                             const float *v, const int *rows, int heads, int kvheads, int hd, float scale, int minchunk, int *cnt) {
	PDL_WAIT();
	PDL_RELEASE();
	attn_split_dispatch(out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt);
}

// attn_split_combine: one warp per (row, query head) merges the partials
// of attn_split's splits in use: out = Σ e^(m_s−M)·acc_s / Σ e^(m_s−M)·l_s
// with M the largest m_s, lse = M + log of the denominator; o16 as
// attn_split's. With one split in use attn_split wrote out itself.
extern "C" __global__ void attn_split_combine(float *out, unsigned short *o16, float *lse, const float *part, const int *rows, int heads, int hd,
                                              int nsp, int minchunk) {
	PDL_WAIT();
	PDL_RELEASE();
	const int row = blockIdx.x, h = blockIdx.y;
	const dec_row r = dec_row_at(rows, row);
	const int used = split_used(r.n, nsp, minchunk);
	if (used == 1) return;
	split_merge(out, o16, lse, part + (long long)(row * heads + h) * nsp * (hd + 2), r.q, h, heads, hd, used, threadIdx.x);
}

// split_merge is one warp's merge of head h's used partials pp (loads
// through L2: attn_split_merged's partials come from other blocks). The
// lanes take the splits' maxima and sums in parallel; each output dim then
// sums over the splits in order.
__device__ void split_merge(float *out, unsigned short *o16, float *lse, const float *pp, int qrow, int h, int heads, int hd, int used, int lane) {
	const int st = hd + 2;
	float M = -DEC_INF;
	for (int s = lane; s < used; s += 32) M = fmaxf(M, __ldcg(pp + s * st + hd));
	M = dec_warp_max(M);
	float L = 0.f;
	for (int s = lane; s < used; s += 32) L += __expf(__ldcg(pp + s * st + hd) - M) * __ldcg(pp + s * st + hd + 1);
	L = dec_warp_sum(L);
	float inv = 1.f / L;
	const long long o = (long long)qrow * heads * hd + (long long)h * hd;
	for (int d = lane; d < hd; d += 32) {
		float acc = 0.f;
#pragma unroll 4
		for (int s = 0; s < used; s++) acc += __expf(__ldcg(pp + s * st + hd) - M) * __ldcg(pp + s * st + d);
		out[o + d] = acc * inv;
		if (o16) o16[o + d] = dec_to_bf16(acc * inv);
	}
	if (lane == 0) lse[(long long)qrow * heads + h] = M + __logf(L);
}

// smem_merge merges head h's n partials in shared memory (partial s at
// sm + (s·g + h)·(hd + 2), put_partial's layout) into acc, m and l, in
// partial order; partials with no keys have m = −inf, l = 0.
template <int NT>
__device__ __forceinline__ void smem_merge(const float *sm, int n, int g, int h, int hd, int lane, float *acc, float &m, float &l) {
	const int st = hd + 2;
	float M = -DEC_INF;
	for (int s2 = 0; s2 < n; s2++) M = fmaxf(M, sm[(s2 * g + h) * st + hd]);
	l = 0.f;
#pragma unroll
	for (int i = 0; i < NT; i++) acc[i] = 0.f;
	for (int s2 = 0; s2 < n; s2++) {
		const float *p = sm + (s2 * g + h) * st;
		float c = __expf(p[hd] - M);
		l += c * p[hd + 1];
#pragma unroll
		for (int i = 0; i < NT; i++) {
			int d = lane + 32 * i;
			if (d < hd) acc[i] += c * p[d];
		}
	}
	m = M;
}

// attn_split_sub_run: attn_split_merged whose blocks split their keys again,
// S ways, among S warps per query head (blockDim = 32·g·S): warp w takes
// head w mod g and every S-th group of KU keys from group w / g of the
// block's chunk, so that a chunk of S·KU keys is one memory round trip; the
// S partials of a head merge in shared memory (4·S·g·(hd+2) bytes of
// dynamic shared memory), then the first warp of each head goes on as
// attn_split_merged's (the whole output when one split is in use, else a
// partial, the count, and the merge by the last split). minchunk is S·KU
// or a multiple of it.
template <int NT, int KU, int S, bool CG = false>
__device__ __forceinline__ void attn_split_sub_block(float *sub_sm, int row, int kh, int sp, int nsp, float *out, unsigned short *o16, float *lse,
                                                     float *part, const float *q, const float *k, const float *v, const int *rows, int heads,
                                                     int kvheads, int hd, float scale, int minchunk, int *cnt) {
	const int g = heads / kvheads;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, hw = w % g, sub = w / g;
	const dec_row r = dec_row_at(rows, row);
	const int qrow = r.q, nkeys = r.n;
	const int h = kh * g + hw;
	const int chunk = split_chunk(nkeys, nsp, minchunk), used = split_used(nkeys, nsp, minchunk);
	const long long qld = (long long)heads * hd, kld = (long long)kvheads * hd;
	const int k0 = sp * chunk, k1 = min(nkeys, k0 + chunk);
	const int st = hd + 2;
	float acc[NT], m = -DEC_INF, l = 0.f;
#pragma unroll
	for (int i = 0; i < NT; i++) acc[i] = 0.f;
	if (sp < used)
		attn_split_keys<NT, KU, CG>(acc, m, l, q + qrow * qld + (long long)h * hd, k + (long long)kh * hd, v + (long long)kh * hd, r, kld, hd,
		                            scale, k0 + sub * KU, k1, S * KU, lane);
	if (sp >= used) {
		if (sub != 0 || !cnt) return;
	} else {
		put_partial<NT>(sub_sm + (sub * g + hw) * st, acc, m, l, hd, lane);
		__syncthreads();
		if (sub != 0) return;
		smem_merge<NT>(sub_sm, S, g, hw, hd, lane, acc, m, l);
	}
	split_finish<NT>(acc, m, l, out, o16, lse, part, cnt, row, qrow, h, heads, hd, sp, nsp, used, lane);
}

// attn_split_sub_run is attn_split_sub_block for block (row, kv head,
// split) = (blockIdx.x, blockIdx.y, blockIdx.z).
template <int NT, int KU, int S>
__device__ __forceinline__ void attn_split_sub_run(float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k,
                                                   const float *v, const int *rows, int heads, int kvheads, int hd, float scale, int minchunk,
                                                   int *cnt) {
	extern __shared__ float sub_sm[];
	attn_split_sub_block<NT, KU, S>(sub_sm, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.z, out, o16, lse, part, q, k, v, rows, heads, kvheads, hd,
	                                scale, minchunk, cnt);
}

// attn_split_sub4/2/1: attn_split_sub_run with S = 4 warps a head (head
// dims up to 64), 2 (up to 128), 1 (up to 256), each kernel's launch bound
// the largest block it takes (g·S ≤ 32, 16, 8 warps), so that the compiler
// keeps a block's registers within a multiprocessor's. lib/model's
// attnSubWays picks the kernel by the same rule.
#define ATTN_SUB_ARGS                                                                                                              \
	float *out, unsigned short *o16, float *lse, float *part, const float *q, const float *k, const float *v, const int *rows, \
	    int heads, int kvheads, int hd, float scale, int minchunk, int *cnt
#define ATTN_SUB_PASS out, o16, lse, part, q, k, v, rows, heads, kvheads, hd, scale, minchunk, cnt
extern "C" __global__ void __launch_bounds__(1024) attn_split_sub4(ATTN_SUB_ARGS) {
	PDL_WAIT();
	PDL_RELEASE();
	if (hd <= 32)
		attn_split_sub_run<1, 8, 4>(ATTN_SUB_PASS);
	else
		attn_split_sub_run<2, 8, 4>(ATTN_SUB_PASS);
}
extern "C" __global__ void __launch_bounds__(512) attn_split_sub2(ATTN_SUB_ARGS) {
	PDL_WAIT();
	PDL_RELEASE();
	if (hd <= 64)
		attn_split_sub_run<2, 8, 2>(ATTN_SUB_PASS); // the same sums as <4, 8, 2>, half the registers
	else
		attn_split_sub_run<4, 8, 2>(ATTN_SUB_PASS);
}
extern "C" __global__ void __launch_bounds__(256) attn_split_sub1(ATTN_SUB_ARGS) {
	PDL_WAIT();
	PDL_RELEASE();
	attn_split_sub_run<8, 4, 1>(ATTN_SUB_PASS);
}

// attn_split_group: split decode attention for steps of many rows, where
// attn_split_sub's warp-per-query-head layout pays for every key with a
// five-shuffle sum in each of the group's g warps, all reading the same
// keys from L1. Here a block (row, kv head, split) has W warps, each taking
// every W-th tile of 32 keys of the block's chunk for all g query heads of
// the kv head at once: lane t scores key t of the tile against every head's
// q (the key's row read as 16-byte pieces, q · scale from shared memory), one
// warp maximum per head and tile for the online softmax (the sums stay
// per lane until the end); then the tile's weights go to shared memory and
// lane d accumulates dims d, d+32, … of every head's output over the tile's
// values, 8 keys' loads in flight. The W partials of a head merge in shared
// memory as attn_split_sub's; warp w then finishes heads w, w+W, … as
// attn_split_merged's warps do (the whole output with one split in use,
// else a partial, the count and the merge by the last split). Sums run in
// another order than attn_split's, so the bits differ from it in the last
// places. hd a multiple of 4 up to 128, g ≤ GRP_G; dynamic shared memory
// 4·(g·hd + W·g·32 + W·g·(hd+2)) bytes (lib/model's attnGroupShared).
#define GRP_G 8

template <int NT>
__device__ __forceinline__ void attn_split_group_run(float *out, unsigned short *o16, float *lse, float *part, const float *q,
                                                     const float *__restrict__ k, const float *__restrict__ v, const int *rows, int heads,
                                                     int kvheads, int hd, float scale, int minchunk, int *cnt) {
	extern __shared__ float grp_sm[];
	const int g = heads / kvheads, nw = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int row = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
	const dec_row r = dec_row_at(rows, row);
	const int qrow = r.q, nkeys = r.n;
	const int chunk = split_chunk(nkeys, nsp, minchunk), used = split_used(nkeys, nsp, minchunk);
	const long long qld = (long long)heads * hd, kld = (long long)kvheads * hd;
	const int k0 = sp * chunk, k1 = min(nkeys, k0 + chunk), st = hd + 2;
	float *qs = grp_sm, *ps = grp_sm + g * hd + w * g * 32, *mg = grp_sm + g * hd + nw * g * 32;
	for (int i = threadIdx.x; i < g * hd; i += blockDim.x) qs[i] = q[qrow * qld + (long long)kh * g * hd + i] * scale;
	__syncthreads();
	float acc[GRP_G][NT], m[GRP_G], l[GRP_G];
#pragma unroll
	for (int h = 0; h < GRP_G; h++) {
		m[h] = -DEC_INF, l[h] = 0.f;
#pragma unroll
		for (int i = 0; i < NT; i++) acc[h][i] = 0.f;
	}
	const float *kp = k + (long long)kh * hd, *vp = v + (long long)kh * hd; // key j at row dec_key_row(r, j)
	for (int j0 = (sp < used ? k0 : k1) + 32 * w; j0 < k1; j0 += 32 * nw) {
		// Scores: lane t, key j0 + t, every head.
		const int j = j0 + lane;
		const bool ok = j < k1;
		float s[GRP_G];
#pragma unroll
		for (int h = 0; h < GRP_G; h++) s[h] = 0.f;
		const float4 *kr = reinterpret_cast<const float4 *>(kp + dec_key_row(r, ok ? j : k0) * kld);
		for (int d4 = 0; d4 < hd / 4; d4 += 8) {
			float4 x[8];
#pragma unroll
			for (int c = 0; c < 8; c++) x[c] = d4 + c < hd / 4 ? kr[d4 + c] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
			for (int c = 0; c < 8; c++) {
				if (d4 + c >= hd / 4) break;
#pragma unroll
				for (int h = 0; h < GRP_G; h++) {
					if (h >= g) break;
					float4 qq = reinterpret_cast<const float4 *>(qs + h * hd)[d4 + c];
					s[h] += qq.x * x[c].x + qq.y * x[c].y + qq.z * x[c].z + qq.w * x[c].w;
				}
			}
		}
		// Online softmax, one maximum a head and tile; the weights to
		// shared memory, the per-lane sums rescaled with the outputs.
#pragma unroll
		for (int h = 0; h < GRP_G; h++) {
			if (h >= g) break;
			float sh = ok ? s[h] : -DEC_INF;
			float mn = fmaxf(m[h], dec_warp_max(sh)); // finite: key j0 exists
			float corr = __expf(m[h] - mn);
			float p = ok ? __expf(sh - mn) : 0.f;
			l[h] = l[h] * corr + p;
			m[h] = mn;
#pragma unroll
			for (int i = 0; i < NT; i++) acc[h][i] *= corr;
			ps[h * 32 + lane] = p;
		}
		__syncwarp();
		// Values: lane d, dims d, d+32, …; 8 keys' loads at a time.
		const int n = min(32, k1 - j0);
		for (int u0 = 0; u0 < n; u0 += 8) {
			float xv[8][NT];
#pragma unroll
			for (int u = 0; u < 8; u++)
#pragma unroll
				for (int i = 0; i < NT; i++) {
					int d = lane + 32 * i;
					xv[u][i] = u0 + u < n && d < hd ? vp[dec_key_row(r, j0 + u0 + u) * kld + d] : 0.f;
				}
#pragma unroll
			for (int h = 0; h < GRP_G; h++) {
				if (h >= g) break;
				float4 pa = *reinterpret_cast<const float4 *>(ps + h * 32 + u0);
				float4 pb = *reinterpret_cast<const float4 *>(ps + h * 32 + u0 + 4);
				float pw[8] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
				for (int u = 0; u < 8; u++)
#pragma unroll
					for (int i = 0; i < NT; i++) acc[h][i] += pw[u] * xv[u][i];
			}
		}
		__syncwarp();
	}
	// Each warp's partials (sums over the lanes first), then the heads'
	// merge over the warps; warps with no keys have m = −inf, l = 0.
#pragma unroll
	for (int h = 0; h < GRP_G; h++) {
		if (h >= g) break;
		float lh = dec_warp_sum(l[h]);
		put_partial<NT>(mg + (w * g + h) * st, acc[h], m[h], lh, hd, lane);
	}
	__syncthreads();
	for (int h = w; h < g; h += nw) {
		float a[NT] = {}, M = -DEC_INF, L = 0.f;
		if (sp < used) smem_merge<NT>(mg, nw, g, h, hd, lane, a, M, L); // (a split past the keys only counts)
		split_finish<NT>(a, M, L, out, o16, lse, part, cnt, row, qrow, kh * g + h, heads, hd, sp, nsp, used, lane);
	}
}

// Two blocks a multiprocessor (128 registers): without the bound, the
// shared prefix's key rows (dec_key_row) took NVRTC to 159 registers and
// one block; with it 48 bytes spill (NVRTC 11.8, sm_90; 228 before prefixes).
extern "C" __global__ void __launch_bounds__(256, 2) attn_split_group(ATTN_SUB_ARGS) {
	PDL_WAIT();
	PDL_RELEASE();
	const int nt = (hd + 31) >> 5;
	if (nt <= 1)
		attn_split_group_run<1>(ATTN_SUB_PASS);
	else if (nt == 2)
		attn_split_group_run<2>(ATTN_SUB_PASS);
	else if (nt == 3)
		attn_split_group_run<3>(ATTN_SUB_PASS);
	else
		attn_split_group_run<4>(ATTN_SUB_PASS);
}

// gemv_bf16: y[m×n] = x[m×k]·wᵀ for the few rows of a decoding step
// (m ≤ GEMV_MAXM): w [n×k] and x in bf16, products summed in fp32, y fp32.
// One warp per output column j (row j of w), lanes reading 16-byte pieces
// (8 values) of it, GEMV_UNROLL pieces in flight per lane; the rows of x come
// through L1/L2, being read by every warp. k must be a multiple of 8 and
// the buffers 16-byte aligned. Weight bytes are read once: the step is
// memory-bound, where cuBLAS's kernels for one or a few rows reach about
// two thirds of the copy bandwidth.
#define GEMV_MAXM 4
// GEMV_UNROLL pieces in flight per lane (each lane's pieces are summed in
// the same order whatever the unrolling).
#define GEMV_UNROLL 8

__device__ __forceinline__ void bf16x8(uint4 u, float *f) {
	unsigned int a[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		f[2 * i] = __uint_as_float(a[i] << 16);
		f[2 * i + 1] = __uint_as_float(a[i] & 0xffff0000u);
	}
}

// gemv_dot_rows adds weight rows w[0..C) times the m rows of x into
// acc[c] (lane partials), the C rows' loads in flight together. Lane l
// takes pieces l, l+32, … of every row in order, whatever U (pieces in
// flight a lane and row) and C, so a row's sums are the same bits either
// way. CG: x was written earlier in the same launch by other blocks
// (dec_persist), so it is read through L2 (L1 is not coherent); otherwise x
// may be in shared memory.
template <bool CG, int U, int C>
__device__ __forceinline__ void gemv_dot_rows(float (*acc)[GEMV_MAXM], const unsigned short *__restrict__ x, const unsigned short *const *w, int m,
                                              int k) {
	const int lane = threadIdx.x & 31;
	const int pieces = k >> 3;
	for (int p0 = lane; p0 < pieces; p0 += 32 * U) {
		uint4 wv[C][U];
#pragma unroll
		for (int c = 0; c < C; c++)
#pragma unroll
			for (int u = 0; u < U; u++) {
				int p = p0 + 32 * u;
				if (p < pieces) wv[c][u] = ((const uint4 *)w[c])[p];
				else wv[c][u].x = wv[c][u].y = wv[c][u].z = wv[c][u].w = 0u;
			}
#pragma unroll
		for (int u = 0; u < U; u++) {
			int p = p0 + 32 * u;
			if (p >= pieces) break;
			float wf[C][8];
#pragma unroll
			for (int c = 0; c < C; c++) bf16x8(wv[c][u], wf[c]);
#pragma unroll
			for (int r = 0; r < GEMV_MAXM; r++) {
				if (r >= m) break;
				float xf[8];
				const uint4 *xp = (const uint4 *)(x + (long long)r * k) + p;
				bf16x8(CG ? __ldcg(xp) : *xp, xf);
#pragma unroll
				for (int c = 0; c < C; c++)
#pragma unroll
					for (int e = 0; e < 8; e++) acc[c][r] += wf[c][e] * xf[e];
			}
		}
	}
#pragma unroll
	for (int c = 0; c < C; c++)
#pragma unroll
		for (int r = 0; r < GEMV_MAXM; r++) acc[c][r] = dec_warp_sum(acc[c][r]);
}

// gemv_dot adds row j of w times the m rows of x into acc (lane partials):
// gemv_dot_rows of one row.
template <bool CG = false, int U = GEMV_UNROLL>
__device__ __forceinline__ void gemv_dot(float *acc, const unsigned short *__restrict__ x, const unsigned short *__restrict__ w, long long j, int m, int k) {
	const unsigned short *wr[1] = {w + j * k};
	gemv_dot_rows<CG, U, 1>((float(*)[GEMV_MAXM])acc, x, wr, m, k);
}

// gemv_dot2 is gemv_dot of two weight rows, w0 into a[0] and w1 into a[1]:
// with TOG their loads in flight together, else one row after the other
// (the same sums either way).
template <int U, bool TOG>
__device__ __forceinline__ void gemv_dot2(float (*a)[GEMV_MAXM], const unsigned short *__restrict__ x, const unsigned short *w0,
                                          const unsigned short *w1, int m, int k) {
	const unsigned short *rows[2] = {w0, w1};
	if (TOG) {
		gemv_dot_rows<false, U, 2>(a, x, rows, m, k);
		return;
	}
	gemv_dot_rows<false, U, 1>(a, x, rows, m, k);
	gemv_dot_rows<false, U, 1>(a + 1, x, rows + 1, m, k);
}

extern "C" __global__ void gemv_bf16(float *__restrict__ y, const unsigned short *__restrict__ x, const unsigned short *__restrict__ w, int m, int n, int k) {
	PDL_WAIT();
	PDL_RELEASE();
	const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (j >= n) return;
	float acc[GEMV_MAXM] = {0.f, 0.f, 0.f, 0.f};
	gemv_dot(acc, x, w, j, m, k);
	if ((threadIdx.x & 31) == 0)
		for (int r = 0; r < m; r++) y[(long long)r * n + j] = acc[r];
}

// gemv3_bf16: three products of the same x in one launch (q, k and v):
// columns [0, n0) of the grid go to y0 = x·w0ᵀ, the next n1 to y1, the
// next n2 to y2.
extern "C" __global__ void gemv3_bf16(float *y0, const unsigned short *w0, int n0, float *y1, const unsigned short *w1, int n1, float *y2,
                                      const unsigned short *w2, int n2, const unsigned short *__restrict__ x, int m, int k) {
	PDL_WAIT();
	PDL_RELEASE();
	int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	float *y = y0;
	const unsigned short *w = w0;
	int n = n0;
	if (j >= n0) {
		j -= n0, y = y1, w = w1, n = n1;
		if (j >= n1) j -= n1, y = y2, w = w2, n = n2;
	}
	if (j >= n) return;
	float acc[GEMV_MAXM] = {0.f, 0.f, 0.f, 0.f};
	gemv_dot(acc, x, w, j, m, k);
	if ((threadIdx.x & 31) == 0)
		for (int r = 0; r < m; r++) y[(long long)r * n + j] = acc[r];
}

// dec_swiglu is swiglu_f32's arithmetic on a gate and an up sum.
__device__ __forceinline__ float dec_swiglu(float g, float u) { return g / (1.f + expf(-g)) * u; }

// swiglu_column is one warp's column j of gemv_swiglu_bf16: the gate row,
// then the up row, or with TOG both rows' loads in flight together (the
// same sums; dec_persist's, where two columns a warp, four rows with half
// the pieces each in flight, measured slower).
template <int U = GEMV_UNROLL, bool TOG = false>
__device__ __forceinline__ void swiglu_column(int j, unsigned short *act16, const unsigned short *__restrict__ x, const unsigned short *__restrict__ wg,
                                              const unsigned short *__restrict__ wu, int m, int n, int k) {
	float a[2][GEMV_MAXM] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
	gemv_dot2<U, TOG>(a, x, wg + (long long)j * k, wu + (long long)j * k, m, k);
	if ((threadIdx.x & 31) == 0)
#pragma unroll
		for (int r = 0; r < GEMV_MAXM; r++) {
			if (r >= m) break;
			act16[(long long)r * n + j] = dec_to_bf16(dec_swiglu(a[0][r], a[1][r]));
		}
}

// gemv_swiglu_bf16: the gate and up products and SwiGLU in one launch:
// act16[r, j] = bf16(silu(x_r·wg_j)·(x_r·wu_j)), swiglu_f32's arithmetic on
// the two sums.
extern "C" __global__ void gemv_swiglu_bf16(unsigned short *act16, const unsigned short *__restrict__ x, const unsigned short *__restrict__ wg,
                                            const unsigned short *__restrict__ wu, int m, int n, int k) {
	PDL_WAIT();
	PDL_RELEASE();
	const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (j < n) swiglu_column(j, act16, x, wg, wu, m, n, k);
}

// gemv_qkv_rope_bf16: gemv3_bf16 and dec_rope_kv in one launch, for models
// without per-head q/k norms. A warp takes a rotation pair (i, i+hd/2) of a
// q head or a k head (its two columns one after the other), or one v column:
// the sums of gemv3_bf16, then dec_rope_kv's arithmetic on them (bias, the
// rotation of position pos[r]), q written rotated in place of gemv3's
// output, k rotated and v with its bias straight to cache row crow[r] (none
// for a padding row, crow[r] < 0). Same values as the two kernels.
// qkv_rope_task is one warp's task t of gemv_qkv_rope_bf16; TOG: a
// rotation pair's two rows' loads in flight together (the same sums).
template <int U = GEMV_UNROLL, bool TOG = false>
__device__ __forceinline__ void qkv_rope_task(int t, float *q, float *kc, float *vc, const unsigned short *__restrict__ wq,
                                              const unsigned short *__restrict__ wk, const unsigned short *__restrict__ wv, const float *bq,
                                              const float *bk, const float *bv, const unsigned short *__restrict__ x, int m, int k,
                                              const int *pos, const int *crow, const float *cs, const float *sn, int heads, int kvheads,
                                              int hd) {
	const int half = hd / 2, nq = heads * half, nk = kvheads * half, qd = heads * hd, kvd = kvheads * hd;
	const bool lane0 = (threadIdx.x & 31) == 0;
	if (t < nq + nk) {
		const bool isq = t < nq;
		const int tt = isq ? t : t - nq, h = tt / half, i = tt - h * half;
		const int j1 = h * hd + i, j2 = j1 + half;
		const unsigned short *w = isq ? wq : wk;
		const float *bias = isq ? bq : bk;
		float a[2][GEMV_MAXM] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
		gemv_dot2<U, TOG>(a, x, w + (long long)j1 * k, w + (long long)j2 * k, m, k);
		if (!lane0) return;
#pragma unroll
		for (int r = 0; r < GEMV_MAXM; r++) {
			if (r >= m) break;
			float x1 = a[0][r], x2 = a[1][r];
			if (bias) {
				x1 = x1 + bias[j1];
				x2 = x2 + bias[j2];
			}
			const long long p = (long long)pos[r] * half;
			const float c = cs[p + i], s = sn[p + i];
			const float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
			if (isq) {
				q[(long long)r * qd + j1] = y1;
				q[(long long)r * qd + j2] = y2;
			} else if (crow[r] >= 0) {
				kc[(long long)crow[r] * kvd + j1] = y1;
				kc[(long long)crow[r] * kvd + j2] = y2;
			}
		}
		return;
	}
	t -= nq + nk;
	if (t >= kvd) return;
	float a[GEMV_MAXM] = {0.f, 0.f, 0.f, 0.f};
	gemv_dot<false, U>(a, x, wv, t, m, k);
	if (!lane0) return;
#pragma unroll
	for (int r = 0; r < GEMV_MAXM; r++) {
		if (r >= m) break;
		if (crow[r] < 0) continue;
		float v = a[r];
		if (bv) v = v + bv[t];
		vc[(long long)crow[r] * kvd + t] = v;
	}
}

extern "C" __global__ void gemv_qkv_rope_bf16(float *q, float *kc, float *vc, const unsigned short *wq, const unsigned short *wk,
                                              const unsigned short *wv, const float *bq, const float *bk, const float *bv,
                                              const unsigned short *__restrict__ x, int m, int k, const int *pos, const int *crow,
                                              const float *cs, const float *sn, int heads, int kvheads, int hd) {
	PDL_WAIT();
	PDL_RELEASE();
	qkv_rope_task(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), q, kc, vc, wq, wk, wv, bq, bk, bv, x, m, k, pos, crow, cs, sn, heads,
	              kvheads, hd);
}

// ---- dec_persist: every layer of a small bf16 step in one launch ----
//
// A decoding step of one to four rows is a chain of about eight short
// kernels a layer (0.5B: 190 in all, about 5 µs each, where a layer's
// weights stream in about 7 µs at the memory's bound): the chain's latency,
// not the bytes, bounds it (lib/model's cuda_persist.go says what the
// persistent launch measured). dec_persist runs the layers' kernels
// as phases of one grid whose blocks all stay resident, with a grid-wide
// barrier between phases. Five phases a layer, each the same arithmetic as
// the separate launch it replaces, in the same order, so the step gives the
// same bits:
//   0  dec_add_rmsnorm (input norm) and gemv_qkv_rope_bf16: every block
//      normalizes the rows itself (a few KB, from L2) into shared memory,
//      then its warps take the q/k/v tasks;
//   1  attn_split_sub: the (row, kv head, split) blocks over the grid;
//   2  gemv_bf16 of the output product, its bias, and the residual add
//      (x += o, the add dec_add_rmsnorm would do next);
//   3  the post-attention norm (every block, as in 0) and gemv_swiglu_bf16;
//   4  gemv_bf16 of the down product and the residual add.
// The host then runs the final norm (no add), the LM head and the sampler.
// Buffers written in the launch and read by other blocks (x, q, att16,
// act16, the attention partials) are read through L2 (__ldcg); the KV
// cache is read plainly, as attn_split_sub reads it: a layer's rows are
// read only after the phase that writes them, so no multiprocessor can hold
// a stale line of them. Phases [ph0, ph1) run (phase 5·l + p is phase p of
// layer l); a launch of one phase needs no barrier, which is how the CPU
// emulation runs it.
struct DecLayer {
	const unsigned short *wq, *wk, *wv, *wo, *wg, *wu, *wd;
	const float *ln1, *ln2, *bq, *bk, *bv, *bo;
	float *kc, *vc;
};

// dec_norm_block: every thread of the block writes its share of
// xs[r·dim + j] = bf16(w[j]·(x[r,j]·rstd_r)) for the m rows (x read
// through L2), with
// dec_add_rmsnorm's sums: vt = normBlock(dim) virtual threads (thread t
// plays t, t + blockDim, …), virtual thread i adding elements i, i + vt, …,
// a warp sum per 32 of them, then a warp sum over those.
__device__ void dec_norm_block(unsigned short *xs, const float *x, const float *w, int m, int dim, float eps, float *scratch) {
	const int vt = min(1024, max(32, (dim + 31) / 32 * 32));
	const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, nwp = blockDim.x >> 5, nvw = vt >> 5;
	for (int r = 0; r < m; r++) {
		const float *xr = x + (long long)r * dim;
		__syncthreads(); // scratch is free again
		for (int vw = wp; vw < nvw; vw += nwp) {
			float ss = 0.f;
			for (int j = vw * 32 + lane; j < dim; j += vt) {
				float v = __ldcg(xr + j);
				ss += v * v;
			}
			ss = dec_warp_sum(ss);
			if (lane == 0) scratch[vw] = ss;
		}
		__syncthreads();
		float ss = dec_warp_sum(lane < nvw ? scratch[lane] : 0.f);
		float rs = 1.0f / sqrtf(ss / (float)dim + eps);
		for (int j = threadIdx.x; j < dim; j += blockDim.x) xs[(long long)r * dim + j] = dec_to_bf16(w[j] * (__ldcg(xr + j) * rs));
	}
	__syncthreads();
}

// gemv_residual_columns is one warp's C columns js of gemv_bf16 over x16
// (in shared memory; the C rows' loads in flight together), plus bias[j]
// (when not null), added to the residual stream: xres[r, j] = o + xres[r,
// j], dec_add_rmsnorm's add.
template <int U, int C>
__device__ __forceinline__ void gemv_residual_columns(const int *js, float *xres, const unsigned short *x16, const unsigned short *__restrict__ w,
                                                      const float *bias, int m, int n, int k) {
	float acc[C][GEMV_MAXM];
	const unsigned short *rows[C];
#pragma unroll
	for (int c = 0; c < C; c++) {
		rows[c] = w + (long long)js[c] * k;
#pragma unroll
		for (int r = 0; r < GEMV_MAXM; r++) acc[c][r] = 0.f;
	}
	gemv_dot_rows<false, U, C>(acc, x16, rows, m, k);
	if ((threadIdx.x & 31) != 0) return;
#pragma unroll
	for (int c = 0; c < C; c++)
#pragma unroll
		for (int r = 0; r < GEMV_MAXM; r++) {
			if (r >= m) break;
			float o = acc[c][r];
			if (bias) o = o + bias[js[c]];
			const long long i = (long long)r * n + js[c];
			xres[i] = o + __ldcg(xres + i);
		}
}

#ifdef CUDA_EMU
// The emulation runs a launch of several phases only with one block, whose
// barrier is the block's.
__device__ void dec_grid_sync(unsigned long long *cnt, unsigned long long target, unsigned *flag, unsigned long long timeout) { __syncthreads(); }
__device__ unsigned long long dec_ld_acquire64(const unsigned long long *p) { return *p; }
__device__ unsigned long long dec_clock_ns() { return 0; }
#else
__device__ __forceinline__ unsigned long long dec_ld_acquire64(const unsigned long long *p) {
	unsigned long long v;
	asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ unsigned long long dec_clock_ns() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// dec_grid_sync is a barrier of the whole grid on a counter that only
// grows: each block adds one (a release), then waits until the count
// reaches target, the count every block has added by this barrier (an
// acquire). One memory round trip to arrive, one to see the last arrival.
// A block that waits longer than timeout ns sets *flag and goes on, and so
// does every later barrier once *flag is set: where the blocks are not all
// resident (another process on the device) the launch then ends with wrong
// values instead of hanging, and the host, which reads *flag back with the
// sampled ids, runs the step again with separate launches.
__device__ void dec_grid_sync(unsigned long long *cnt, unsigned long long target, unsigned *flag, unsigned long long timeout) {
	__syncthreads();
	if (threadIdx.x == 0) {
		asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(cnt) : "memory");
		if (!*(volatile unsigned *)flag) {
			const unsigned long long t0 = dec_clock_ns();
			for (unsigned i = 1; dec_ld_acquire64(cnt) < target; i++)
				if ((i & 63) == 0 && (*(volatile unsigned *)flag || dec_clock_ns() - t0 > timeout)) {
					atomicExch(flag, 1u);
					break;
				}
		}
	}
	__syncthreads();
}
#endif

// The phases of dec_persist_run.
template <int U>
__device__ __forceinline__ void dp_qkv(const DecLayer *L, unsigned short *xs, const float *x, float *q, const int *pos, const int *crow,
                                    const float *cs, const float *sn, int m, int H, int heads, int kvheads, int hd, float eps, float *scratch) {
	dec_norm_block(xs, x, L->ln1, m, H, eps, scratch);
	const int nw = blockDim.x >> 5, gw = blockIdx.x * nw + (threadIdx.x >> 5), gws = gridDim.x * nw;
	const int tasks = (heads + kvheads) * hd / 2 + kvheads * hd;
	for (int t = gw; t < tasks; t += gws)
		qkv_rope_task<U, true>(t, q, L->kc, L->vc, L->wq, L->wk, L->wv, L->bq, L->bk, L->bv, xs, m, H, pos, crow, cs, sn, heads, kvheads, hd);
}

template <int NT, int KU, int S>
__device__ __forceinline__ void dp_attn(const DecLayer *L, float *sm, float *att, unsigned short *att16, float *lse, float *part, int *cnt,
                                     const float *q, const int *rows, int m, int heads, int kvheads, int hd, float scale, int nsp,
                                     int minchunk) {
	const int nvb = m * kvheads * nsp;
	for (int vb = blockIdx.x; vb < nvb; vb += gridDim.x) {
		attn_split_sub_block<NT, KU, S, true>(sm, vb % m, vb / m % kvheads, vb / (m * kvheads), nsp, att, att16, lse, part, q, L->kc, L->vc,
		                                      rows, heads, kvheads, hd, scale, minchunk, cnt);
		__syncthreads(); // the block's partials in shared memory are free again
	}
}

// dp_residual: the block first copies the product's m rows of x16 (written
// in the phase before, by other blocks) to shared memory, xs, where every
// warp then reads them: read piece by piece from L2 inside the products,
// each piece was a round trip the warp waited for.
template <int U>
__device__ __forceinline__ void dp_residual(float *x, unsigned short *xs, const unsigned short *x16, const unsigned short *w, const float *bias,
                                            int m, int n, int k) {
	for (int i = threadIdx.x; i < m * k / 8; i += blockDim.x) ((uint4 *)xs)[i] = __ldcg((const uint4 *)x16 + i);
	__syncthreads();
	const int nw = blockDim.x >> 5, gw = blockIdx.x * nw + (threadIdx.x >> 5), gws = gridDim.x * nw;
	for (int j = gw; j < n; j += 2 * gws) { // two columns a round where there are
		const int js[2] = {j, j + gws};
		if (js[1] < n) gemv_residual_columns<U, 2>(js, x, xs, w, bias, m, n, k);
		else gemv_residual_columns<2 * U, 1>(js, x, xs, w, bias, m, n, k); // one row: twice the pieces in flight
	}
}

template <int U>
__device__ __forceinline__ void dp_swiglu(const DecLayer *L, unsigned short *xs, const float *x, unsigned short *act16, int m, int H, int I,
                                       float eps, float *scratch) {
	dec_norm_block(xs, x, L->ln2, m, H, eps, scratch);
	const int nw = blockDim.x >> 5, gw = blockIdx.x * nw + (threadIdx.x >> 5), gws = gridDim.x * nw;
	for (int j = gw; j < I; j += gws) swiglu_column<U, true>(j, act16, xs, L->wg, L->wu, m, I, H);
}

// dp_trace records, when trace is not null, thread 0's clock at the end of
// each phase, trace[ph·gridDim.x + block], and block 0's as each phase
// begins (after its barrier; the first at the start), trace[ph1·gridDim.x
// + ph]: the benchmarks' split of a step into the phases' work and the
// barriers' waits.
__device__ __forceinline__ void dp_trace(unsigned long long *trace, long long at) {
	if (trace && threadIdx.x == 0) trace[at] = dec_clock_ns();
}

// dec_persist_run: phases [ph0, ph1) with attention's S warps a head (as
// attn_split_sub<S>) and U pieces in flight a lane in the products.
// blockDim = 32·g·S (the attention block); dynamic shared memory:
// attention's S·g·(hd+2) floats, then the products' operand rows xs, m·max(H,
// heads·hd, I) bf16 values.
template <int NT, int KU, int S, int U>
__device__ __forceinline__ void dec_persist_run(const DecLayer *tab, int ph0, int ph1, float *x, float *q, float *att, unsigned short *att16,
                                                float *lse, float *part, int *cnt, unsigned short *act16, const int *pos, const int *crow,
                                                const int *rows, const float *cs, const float *sn, int m, int H, int I, int heads,
                                                int kvheads, int hd, float eps, float scale, int nsp, int minchunk, unsigned *bar,
                                                unsigned long long timeout, unsigned long long *trace) {
	extern __shared__ float dp_sm[];
	__shared__ float scratch[32];
	const int g = heads / kvheads;
	unsigned short *xs = (unsigned short *)(dp_sm + (S * g * (hd + 2) + 3) / 4 * 4);
	// The barrier count (bar[0..1]) grows by gridDim.x a barrier and by
	// per = gridDim.x times the barriers a launch; this launch's starts at
	// a multiple of per, which every block reads back (before it arrives
	// at the first barrier, no block can pass it, so the count is then
	// below base + gridDim.x).
	unsigned long long *bcount = (unsigned long long *)bar, base = 0;
	const unsigned long long per = (unsigned long long)max(1, ph1 - ph0 - 1) * gridDim.x;
	if (threadIdx.x == 0 && ph1 - ph0 > 1) base = dec_ld_acquire64(bcount) / per * per;
	const long long tr = (long long)ph1 * gridDim.x;
	if (blockIdx.x == 0) dp_trace(trace, tr);
	for (int ph = ph0; ph < ph1; ph++) {
		if (ph > ph0) {
			if (trace) __syncthreads();
			dp_trace(trace, (long long)(ph - 1) * gridDim.x + blockIdx.x);
			dec_grid_sync(bcount, base + (unsigned long long)(ph - ph0) * gridDim.x, bar + 2, timeout);
			if (blockIdx.x == 0) dp_trace(trace, tr + ph);
		}
		const DecLayer *L = tab + ph / 5;
		switch (ph % 5) {
		case 0:
			dp_qkv<U>(L, xs, x, q, pos, crow, cs, sn, m, H, heads, kvheads, hd, eps, scratch);
			break;
		case 1:
			dp_attn<NT, KU, S>(L, dp_sm, att, att16, lse, part, cnt, q, rows, m, heads, kvheads, hd, scale, nsp, minchunk);
			break;
		case 2:
			dp_residual<U>(x, xs, att16, L->wo, L->bo, m, H, heads * hd);
			break;
		case 3:
			dp_swiglu<U>(L, xs, x, act16, m, H, I, eps, scratch);
			break;
		case 4:
			dp_residual<U>(x, xs, act16, L->wd, nullptr, m, H, I);
			break;
		}
	}
	__syncthreads();
	dp_trace(trace, (long long)(ph1 - 1) * gridDim.x + blockIdx.x);
}

// dec_persist_<S>_<hd>: dec_persist_run with attn_split_sub<S>'s head split
// and launch bound, for head dims up to hd (lib/model's cudaStepper.persist
// picks it; small steps take no attn_split_sub4, whose 64 registers a thread
// would spill here), U pieces in flight a lane and row in the products.
// One kernel per head-dim class: the three in one kernel spilled.
#define DEC_PERSIST_ARGS                                                                                                                     \
	const DecLayer *tab, int ph0, int ph1, float *x, float *q, float *att, unsigned short *att16, float *lse, float *part, int *cnt,      \
	    unsigned short *act16, const int *pos, const int *crow, const int *rows, const float *cs, const float *sn, int m, int H, int I, \
	    int heads, int kvheads, int hd, float eps, float scale, int nsp, int minchunk, unsigned *bar, unsigned long long timeout, \
	    unsigned long long *trace
#define DEC_PERSIST_PASS                                                                                                                  \
	tab, ph0, ph1, x, q, att, att16, lse, part, cnt, act16, pos, crow, rows, cs, sn, m, H, I, heads, kvheads, hd, eps, scale, nsp, minchunk, \
	    bar, timeout, trace
#define DEC_PERSIST_KERNEL(name, bound, NT, KU, S, U)                                              \
	extern "C" __global__ void __launch_bounds__(bound) name(DEC_PERSIST_ARGS) {            \
		PDL_WAIT();                                                                       \
		PDL_RELEASE();                                                                    \
		dec_persist_run<NT, KU, S, U>(DEC_PERSIST_PASS);                                  \
	}
DEC_PERSIST_KERNEL(dec_persist_2_64, 512, 2, 8, 2, GEMV_UNROLL)
DEC_PERSIST_KERNEL(dec_persist_2_128, 512, 4, 8, 2, GEMV_UNROLL)
DEC_PERSIST_KERNEL(dec_persist_1_256, 256, 8, 4, 1, 4) // 4 pieces in flight: 8 spilled
