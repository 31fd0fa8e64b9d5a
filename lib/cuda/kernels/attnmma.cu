// Flash attention on the tensor cores (bf16 mode): causal grouped-query
// attention forward and backward where the score matrix never leaves the
// registers. Products are mma.sync m16n8k16 with bf16 operands and fp32
// accumulation. q, k, v and dO come in bf16 copies (lib/model rounds them
// once per call) with the model's row layout; every output (O, lse, dQ, dK,
// dV) is fp32 in the model's tensors. The dQ kernel can apply RoPE's
// backward to its rows as it stores them (pos not null), and write their
// bf16 rounding (dq16) for the products that follow. Tiles are staged in shared memory with
// cp.async, the next tile loading while the current one is computed, and
// operands that a product needs transposed are read with ldmatrix.trans.
// Head dims 64 and 128.
//
// Work list: tiles[2i] = sequence, tiles[2i+1] = first row of a tile (128
// query rows in the forward, 64 in the backward); seqs[4s…] =
// (Q, N, K, Past) as in lib/model's AttnSeq. The forward and dQ take their
// tiles from the end of the list: the last rows of a sequence see the most
// keys, and starting them first leaves the short tiles for the tail.
//
// The softmax runs in base 2 (scale·log2 e folded into one multiply-add
// before ex2), the causal mask is applied only on the key tiles that cross
// the diagonal of a warp's rows, and probabilities are rounded to bf16 pairs
// with one cvt.rn.bf16x2 (the same round-to-nearest-even as f2bf).
//
// Fragments of m16n8k16 (lane = 4·gr + t): A (16×16, row-major) is four
// 32-bit registers, each two bf16 along k: (gr, 2t), (gr+8, 2t), (gr, 2t+8),
// (gr+8, 2t+8); B (16×8, k×n) is two: (k 2t, n gr), (k 2t+8, n gr); C (16×8,
// fp32) is four floats: (gr, 2t), (gr, 2t+1), (gr+8, 2t), (gr+8, 2t+1).
// The C fragments of two adjacent n-tiles of a product are, rounded to
// bf16, exactly the A fragment of the next product over the same 16 columns
// (P·V after Q·Kᵀ), which keeps probabilities in registers.

typedef unsigned short bf16;
#define MEMPO_INF __int_as_float(0x7f800000)
#define TILE 64 // query rows per tile and keys per key tile
#define PADB 8  // bf16 padding of shared rows: conflict-free fragment loads

__device__ __forceinline__ bf16 f2bf(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (bf16)(u >> 16);
}

#ifndef CUDA_EMU
// pack2 rounds two floats to bf16 (lo in the low half), as f2bf does.
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
	unsigned r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

// ex2 is 2^x (ex2.approx: 2 ulp; -inf gives 0).
__device__ __forceinline__ float ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

__device__ __forceinline__ void mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1) {
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#else
// The emulation (lib/cuda/cudaemu's prelude): the same roundings and
// fragments, the fragments exchanged between the lanes, 2^x exact.
static unsigned pack2(float lo, float hi) { return (unsigned)f2bf(lo) | (unsigned)f2bf(hi) << 16; }
static float ex2(float x) { return exp2f(x); }
static void mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1) { emu_mma16816<emu_bf16>(c, a, b0, b1); }
#endif

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

__device__ __forceinline__ unsigned ld32(const bf16 *p) { return *(const unsigned *)p; }

// ldsm4 reads four 8×8 bf16 matrices with one ldmatrix: the A fragment of
// rows [r0, r0+16) and columns [c0, c0+16) of a row-major matrix in shared
// memory (row stride ld), or, for B = Mᵀ with M row-major [n][k], the B
// fragments of two n-tiles: ldsm4B. Rows must be 16-byte aligned.
__device__ __forceinline__ void ldsm4(unsigned *r, const bf16 *m, int ld, int r0, int c0, int lane) {
	ldmatrix_x4(r, m + (r0 + (lane & 15)) * ld + c0 + (lane >> 4) * 8);
}

// ldsm4B: b[0], b[1] are the B fragment of n columns [n0, n0+8) and b[2],
// b[3] that of [n0+8, n0+16), over k rows [k0, k0+16), where B = Mᵀ and M
// is row-major [n][k] in shared memory.
__device__ __forceinline__ void ldsm4B(unsigned *b, const bf16 *m, int ld, int n0, int k0, int lane) {
	ldmatrix_x4(b, m + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k0 + ((lane >> 3) & 1) * 8);
}

// ldsm4T: like ldsm4B for B = M with M row-major [k][n] (transposing
// load): b[0], b[1] for n columns [n0, n0+8), b[2], b[3] for [n0+8, n0+16).
__device__ __forceinline__ void ldsm4T(unsigned *b, const bf16 *m, int ld, int k0, int n0, int lane) {
	ldmatrix_x4_trans(b, m + (k0 + (lane & 15)) * ld + n0 + (lane >> 4) * 8);
}

// stage queues the copy of rows [0, ROWS) of a bf16 matrix (row stride lds
// elements, HD columns) into shared memory (row stride ldd); rows ≥ valid
// become 0. The caller commits and waits.
template <int HD, int ROWS>
__device__ __forceinline__ void stage(bf16 *dst, int ldd, const bf16 *src, long long lds, int valid) {
	constexpr int CPR = HD / 8; // 16-byte chunks per row
	for (int i = threadIdx.x; i < ROWS * CPR; i += blockDim.x) {
		int r = i / CPR, c = (i - r * CPR) * 8;
		bool ok = r < valid;
		cp_async16(dst + r * ldd + c, src + (ok ? r : 0) * lds + c, ok);
	}
}

__device__ __forceinline__ float quad_max(float v) {
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Forward: block = (tile of BM = 64·MW query rows, head), 4 warps of 16·MW
// rows each (MW row blocks of 16: a K or V fragment read from shared memory
// serves MW products). Shared: Qs [BM][HD+8], then two buffers of Ks and Vs,
// each [64][HD+8]. Scores and the running max are in base 2.
template <int HD, int MW>
__device__ void mma_fwd(float *out, bf16 *o16, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, const int *tiles, const int *seqs, int heads, int kvheads, float scale) {
	constexpr int BM = 64 * MW, WR = 16 * MW; // rows of the block, of a warp
	extern __shared__ __align__(16) bf16 sm[];
	const int LQ = HD + PADB;
	bf16 *Qs = sm, *KV = sm + BM * LQ; // KV: Ks0, Ks1, Vs0, Vs1
	const int bx = gridDim.x - 1 - blockIdx.x;
	const int si = tiles[2 * bx], r0 = tiles[2 * bx + 1], h = blockIdx.y;
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2], past = seqs[4 * si + 3];
	const int kvh = h / (heads / kvheads), nq = min(BM, N - r0);
	const long long qld = (long long)heads * HD, kld = (long long)kvheads * HD;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	const bf16 *kbase = k + (long long)K0 * kld + kvh * HD, *vbase = v + (long long)K0 * kld + kvh * HD;
	const int keys = past + N;
	const int wq0 = past + r0 + WR * w;      // key index of the warp's first row
	const int qp0 = wq0 + gr;                // of this lane's first row in block m: + 16m; the second row: + 8
	const int kend = past + r0 + nq;         // the tile's rows see keys [0, kend)
	const int ntiles = (kend + TILE - 1) / TILE;
	const float sl2 = scale * LOG2E;

	stage<HD, BM>(Qs, LQ, q + (long long)(Q0 + r0) * qld + h * HD, qld, nq);
	stage<HD, TILE>(KV, LQ, kbase, kld, min(TILE, keys));
	stage<HD, TILE>(KV + 2 * TILE * LQ, LQ, vbase, kld, min(TILE, keys));
	cp_async_commit();

	// The warp's q fragments stay in registers where they fit (head dim
	// 64); at 128 they are read from shared memory for every key tile.
	constexpr bool QREG = HD <= 64;
	unsigned qa[MW][QREG ? HD / 16 : 1][4];
	float o[MW][HD / 8][4];
#pragma unroll
	for (int m = 0; m < MW; m++)
#pragma unroll
		for (int i = 0; i < HD / 8; i++) o[m][i][0] = o[m][i][1] = o[m][i][2] = o[m][i][3] = 0.f;
	float mrow[MW][2], lrow[MW][2];
#pragma unroll
	for (int m = 0; m < MW; m++) mrow[m][0] = mrow[m][1] = -MEMPO_INF, lrow[m][0] = lrow[m][1] = 0.f;
	for (int it = 0; it < ntiles; it++) {
		const int kt0 = it * TILE, buf = it & 1;
		const bf16 *Ks = KV + buf * TILE * LQ, *Vs = KV + (2 + buf) * TILE * LQ;
		if (it + 1 < ntiles) {
			int nxt = kt0 + TILE;
			stage<HD, TILE>(KV + (1 - buf) * TILE * LQ, LQ, kbase + nxt * kld, kld, min(TILE, keys - nxt));
			stage<HD, TILE>(KV + (3 - buf) * TILE * LQ, LQ, vbase + nxt * kld, kld, min(TILE, keys - nxt));
			cp_async_commit();
			cp_async_wait<1>();
		} else {
			cp_async_wait<0>();
		}
		__syncthreads();
		if (QREG && it == 0) {
#pragma unroll
			for (int m = 0; m < MW; m++)
#pragma unroll
				for (int kk = 0; kk < (QREG ? HD / 16 : 0); kk++) ldsm4(qa[m][kk], Qs, LQ, WR * w + 16 * m, 16 * kk, lane);
		}
		if (wq0 + WR - 1 >= kt0) { // else every row of this warp is before the tile
			float s[MW][TILE / 8][4];
#pragma unroll
			for (int m = 0; m < MW; m++)
#pragma unroll
				for (int i = 0; i < TILE / 8; i++) s[m][i][0] = s[m][i][1] = s[m][i][2] = s[m][i][3] = 0.f;
#pragma unroll
			for (int kk = 0; kk < HD / 16; kk++) {
				unsigned aq[MW][4];
#pragma unroll
				for (int m = 0; m < MW; m++) {
					if (QREG) {
#pragma unroll
						for (int j = 0; j < 4; j++) aq[m][j] = qa[m][QREG ? kk : 0][j];
					} else {
						ldsm4(aq[m], Qs, LQ, WR * w + 16 * m, 16 * kk, lane);
					}
				}
#pragma unroll
				for (int nt = 0; nt < TILE / 8; nt += 2) {
					unsigned bb[4];
					ldsm4B(bb, Ks, LQ, 8 * nt, 16 * kk, lane);
#pragma unroll
					for (int m = 0; m < MW; m++) {
						mma16816(s[m][nt], aq[m], bb[0], bb[1]);
						mma16816(s[m][nt + 1], aq[m], bb[2], bb[3]);
					}
				}
			}
			// Keys past a row are masked only where the tile crosses the
			// diagonal of the warp's rows (a warp-uniform branch). Keys
			// past the sequence (zero rows) are past every row.
			if (kt0 + TILE - 1 > wq0) {
#pragma unroll
				for (int m = 0; m < MW; m++)
#pragma unroll
					for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
						for (int e = 0; e < 4; e++)
							if (kt0 + 8 * nt + 2 * t + (e & 1) > qp0 + 16 * m + 8 * (e >> 1)) s[m][nt][e] = -MEMPO_INF;
			}
#pragma unroll
			for (int m = 0; m < MW; m++) {
				float mx[2] = {-MEMPO_INF, -MEMPO_INF};
#pragma unroll
				for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
					for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[m][nt][e]);
				// Key 0 is in the first tile and before every row, so the
				// running max is finite from then on.
				float corr[2], mn[2], rs[2] = {0.f, 0.f};
#pragma unroll
				for (int r = 0; r < 2; r++) {
					mn[r] = fmaxf(mrow[m][r], quad_max(mx[r]) * sl2);
					corr[r] = ex2(mrow[m][r] - mn[r]);
				}
#pragma unroll
				for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float p = ex2(fmaf(s[m][nt][e], sl2, -mn[e >> 1]));
						s[m][nt][e] = p;
						rs[e >> 1] += p;
					}
#pragma unroll
				for (int r = 0; r < 2; r++) {
					lrow[m][r] = lrow[m][r] * corr[r] + quad_sum(rs[r]);
					mrow[m][r] = mn[r];
				}
#pragma unroll
				for (int i = 0; i < HD / 8; i++) {
					o[m][i][0] *= corr[0];
					o[m][i][1] *= corr[0];
					o[m][i][2] *= corr[1];
					o[m][i][3] *= corr[1];
				}
			}
#pragma unroll
			for (int kk = 0; kk < TILE / 16; kk++) {
				unsigned a[MW][4];
#pragma unroll
				for (int m = 0; m < MW; m++) {
					a[m][0] = pack2(s[m][2 * kk][0], s[m][2 * kk][1]);
					a[m][1] = pack2(s[m][2 * kk][2], s[m][2 * kk][3]);
					a[m][2] = pack2(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
					a[m][3] = pack2(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
				}
#pragma unroll
				for (int dt = 0; dt < HD / 8; dt += 2) {
					unsigned bb[4];
					ldsm4T(bb, Vs, LQ, 16 * kk, 8 * dt, lane);
#pragma unroll
					for (int m = 0; m < MW; m++) {
						mma16816(o[m][dt], a[m], bb[0], bb[1]);
						mma16816(o[m][dt + 1], a[m], bb[2], bb[3]);
					}
				}
			}
		}
		__syncthreads(); // the buffer is refilled next iteration
	}
#pragma unroll
	for (int m = 0; m < MW; m++)
#pragma unroll
		for (int r = 0; r < 2; r++) {
			int row = WR * w + 16 * m + gr + 8 * r;
			if (row >= nq) continue;
			float inv = 1.f / lrow[m][r];
			long long ob = (long long)(Q0 + r0 + row) * qld + h * HD;
#pragma unroll
			for (int dt = 0; dt < HD / 8; dt++) {
				float a = o[m][dt][2 * r] * inv, c = o[m][dt][2 * r + 1] * inv;
				*(float2 *)(out + ob + 8 * dt + 2 * t) = make_float2(a, c);
				if (o16) *(unsigned *)(o16 + ob + 8 * dt + 2 * t) = pack2(a, c);
			}
			if (t == 0) lse[(long long)(Q0 + r0 + row) * heads + h] = mrow[m][r] * LN2 + __logf(lrow[m][r]);
		}
}

// Backward, dQ: block = (tile of 64 query rows, head), 4 warps of 16 rows.
// p = exp(scale·q·k − lse), dp = dO·v, ds = p·(dp − D), dQ = scale·Σ ds·k.
// At head dim 64 the warp's q and dO fragments stay in registers; at 128
// they are read from shared memory for every key tile.
// Shared: Qs, dOs, then two buffers of Ks and Vs, each [64][HD+8].
template <int HD>
__device__ void mma_bwd_dq(float *dq, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v, const float *lse, const float *D, const int *tiles, const int *seqs, int heads, int kvheads, float scale,
                           const int *pos, const float *cs, const float *sn, bf16 *dq16) {
	constexpr bool QREG = HD <= 64;
	extern __shared__ __align__(16) bf16 sm[];
	const int LQ = HD + PADB;
	bf16 *Qs = sm, *dOs = sm + TILE * LQ;
	const int bx = gridDim.x - 1 - blockIdx.x;
	const int si = tiles[2 * bx], r0 = tiles[2 * bx + 1], h = blockIdx.y;
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2];
	const int kvh = h / (heads / kvheads), nq = min(TILE, N - r0);
	const long long qld = (long long)heads * HD, kld = (long long)kvheads * HD;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	const bf16 *kbase = k + (long long)K0 * kld + kvh * HD, *vbase = v + (long long)K0 * kld + kvh * HD;
	const int kend = r0 + nq, ntiles = (kend + TILE - 1) / TILE;
	const float sl2 = scale * LOG2E;
	stage<HD, TILE>(Qs, LQ, q + (long long)(Q0 + r0) * qld + h * HD, qld, nq);
	stage<HD, TILE>(dOs, LQ, dout + (long long)(Q0 + r0) * qld + h * HD, qld, nq);
	stage<HD, TILE>(sm + 2 * TILE * LQ, LQ, kbase, kld, min(TILE, N));
	stage<HD, TILE>(sm + 4 * TILE * LQ, LQ, vbase, kld, min(TILE, N));
	cp_async_commit();
	float lr[2], dr[2]; // lse in base 2, D
#pragma unroll
	for (int r = 0; r < 2; r++) {
		int row = 16 * w + gr + 8 * r;
		long long i = (long long)(Q0 + r0 + min(row, nq - 1)) * heads + h;
		lr[r] = lse[i] * LOG2E;
		dr[r] = D[i];
	}
	float acc[HD / 8][4];
#pragma unroll
	for (int i = 0; i < HD / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
	unsigned qa[QREG ? HD / 16 : 1][4], da[QREG ? HD / 16 : 1][4];
	const int wq0 = r0 + 16 * w, qp0 = wq0 + gr;
	for (int it = 0; it < ntiles; it++) {
		const int kt0 = it * TILE, buf = it & 1;
		const bf16 *Ks = sm + (2 + buf) * TILE * LQ, *Vs = sm + (4 + buf) * TILE * LQ;
		if (it + 1 < ntiles) {
			int nxt = kt0 + TILE;
			stage<HD, TILE>(sm + (3 - buf) * TILE * LQ, LQ, kbase + nxt * kld, kld, min(TILE, N - nxt));
			stage<HD, TILE>(sm + (5 - buf) * TILE * LQ, LQ, vbase + nxt * kld, kld, min(TILE, N - nxt));
			cp_async_commit();
			cp_async_wait<1>();
		} else {
			cp_async_wait<0>();
		}
		__syncthreads();
		if (QREG && it == 0) {
#pragma unroll
			for (int kk = 0; kk < (QREG ? HD / 16 : 0); kk++) {
				ldsm4(qa[kk], Qs, LQ, 16 * w, 16 * kk, lane);
				ldsm4(da[kk], dOs, LQ, 16 * w, 16 * kk, lane);
			}
		}
		if (wq0 + 15 >= kt0) {
			float s[TILE / 8][4], dp[TILE / 8][4];
#pragma unroll
			for (int i = 0; i < TILE / 8; i++)
#pragma unroll
				for (int e = 0; e < 4; e++) s[i][e] = dp[i][e] = 0.f;
#pragma unroll
			for (int kk = 0; kk < HD / 16; kk++) {
				unsigned a[4], ad[4];
				const unsigned *pa = a, *pd = ad;
				if (QREG) {
					pa = qa[QREG ? kk : 0], pd = da[QREG ? kk : 0];
				} else {
					ldsm4(a, Qs, LQ, 16 * w, 16 * kk, lane);
					ldsm4(ad, dOs, LQ, 16 * w, 16 * kk, lane);
				}
#pragma unroll
				for (int nt = 0; nt < TILE / 8; nt += 2) {
					unsigned bb[4];
					ldsm4B(bb, Ks, LQ, 8 * nt, 16 * kk, lane);
					mma16816(s[nt], pa, bb[0], bb[1]);
					mma16816(s[nt + 1], pa, bb[2], bb[3]);
					ldsm4B(bb, Vs, LQ, 8 * nt, 16 * kk, lane);
					mma16816(dp[nt], pd, bb[0], bb[1]);
					mma16816(dp[nt + 1], pd, bb[2], bb[3]);
				}
			}
			// As in the forward, the mask only where the tile crosses the
			// warp's diagonal (keys past the sequence are past every row).
			const bool diag = kt0 + TILE - 1 > wq0;
#pragma unroll
			for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int r = e >> 1;
					float p = ex2(fmaf(s[nt][e], sl2, -lr[r]));
					if (diag && kt0 + 8 * nt + 2 * t + (e & 1) > qp0 + 8 * r) p = 0.f;
					s[nt][e] = p * (dp[nt][e] - dr[r]);
				}
#pragma unroll
			for (int kk = 0; kk < TILE / 16; kk++) {
				unsigned a[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
				                 pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
				for (int dt = 0; dt < HD / 8; dt += 2) {
					unsigned bb[4];
					ldsm4T(bb, Ks, LQ, 16 * kk, 8 * dt, lane);
					mma16816(acc[dt], a, bb[0], bb[1]);
					mma16816(acc[dt + 1], a, bb[2], bb[3]);
				}
			}
		}
		__syncthreads();
	}
#pragma unroll
	for (int r = 0; r < 2; r++) {
		int row = 16 * w + gr + 8 * r;
		if (row >= nq) continue;
		const long long gi = Q0 + r0 + row;
		float *op = dq + gi * qld + h * HD;
		if (!pos) {
#pragma unroll
			for (int dt = 0; dt < HD / 8; dt++)
				*(float2 *)(op + 8 * dt + 2 * t) = make_float2(acc[dt][2 * r] * scale, acc[dt][2 * r + 1] * scale);
			continue;
		}
		// RoPE's backward (the rotation by the opposite angle, rope_f32's
		// arithmetic): column i pairs with i + HD/2, which this thread holds
		// too (n-tile dt + HD/16); with dq16, dq's bf16 rounding beside it.
		const int half = HD / 2;
		const long long pb = (long long)pos[gi] * half;
		bf16 *o16 = dq16 ? dq16 + gi * qld + h * HD : 0;
#pragma unroll
		for (int dt = 0; dt < HD / 16; dt++) {
			float y1[2], y2[2];
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int i = 8 * dt + 2 * t + e;
				const float c = cs[pb + i], sn_ = -sn[pb + i];
				const float x1 = acc[dt][2 * r + e] * scale, x2 = acc[dt + HD / 16][2 * r + e] * scale;
				y1[e] = x1 * c - x2 * sn_;
				y2[e] = x2 * c + x1 * sn_;
			}
			*(float2 *)(op + 8 * dt + 2 * t) = make_float2(y1[0], y1[1]);
			*(float2 *)(op + half + 8 * dt + 2 * t) = make_float2(y2[0], y2[1]);
			if (o16) {
				*(unsigned *)(o16 + 8 * dt + 2 * t) = pack2(y1[0], y1[1]);
				*(unsigned *)(o16 + half + 8 * dt + 2 * t) = pack2(y2[0], y2[1]);
			}
		}
	}
}

// Backward, dK and dV: block = (tile of 64 keys, kv head, hper query heads
// of its group), 4 warps of 16 keys, over those heads and the query tiles at
// or after the keys (causal). Transposed products: sᵀ = k·qᵀ, pᵀ =
// exp(scale·sᵀ − lse), dV += pᵀ·dO, dpᵀ = v·dOᵀ, dsᵀ = pᵀ·(dpᵀ − D), dK +=
// scale·dsᵀ·q. With hper the whole group a block sums its heads in registers
// and stores dK and dV; with fewer, the blocks of a group add into them with
// atomics (zeroed by the caller).
// Queries go in tiles of QT; at head dim 64 the warp's k and v fragments
// stay in registers.
// Shared: Ks, Vs [64][HD+8]; two buffers of Qs, dOs [QT][HD+8]; two of
// lse (base 2) and D [QT].
template <int HD, int QT>
__device__ void mma_bwd_dkv(float *dk, float *dv, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v, const float *lse, const float *D, const int *tiles, const int *seqs, int heads, int kvheads, float scale, int hper) {
	constexpr bool KREG = HD <= 64;
	extern __shared__ __align__(16) bf16 sm[];
	const int LQ = HD + PADB;
	bf16 *Ks = sm, *Vs = Ks + TILE * LQ, *qbuf = Vs + TILE * LQ; // qbuf: Qs0, Qs1, dOs0, dOs1
	float *fl = (float *)(qbuf + 4 * QT * LQ);                   // lse0, lse1, D0, D1
	const int si = tiles[2 * blockIdx.x], k0 = tiles[2 * blockIdx.x + 1], kvh = blockIdx.y;
	const int g = heads / kvheads, h0 = kvh * g + blockIdx.z * hper;
	const int Q0 = seqs[4 * si], N = seqs[4 * si + 1], K0 = seqs[4 * si + 2];
	const int nk = min(TILE, N - k0);
	const long long qld = (long long)heads * HD, kld = (long long)kvheads * HD;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	const int ntiles = (N - k0 + QT - 1) / QT, nsteps = ntiles * hper;
	const float sl2 = scale * LOG2E;
	stage<HD, TILE>(Ks, LQ, k + (long long)(K0 + k0) * kld + kvh * HD, kld, nk);
	stage<HD, TILE>(Vs, LQ, v + (long long)(K0 + k0) * kld + kvh * HD, kld, nk);
	// Step j is query tile j % ntiles of head h0 + j / ntiles, in buffer j & 1.
	auto fill = [&](int j) {
		int h = h0 + j / ntiles, qt0 = k0 + (j % ntiles) * QT, nq = min(QT, N - qt0), b = j & 1;
		long long qo = (long long)(Q0 + qt0) * qld + h * HD;
		stage<HD, QT>(qbuf + b * QT * LQ, LQ, q + qo, qld, nq);
		stage<HD, QT>(qbuf + (2 + b) * QT * LQ, LQ, dout + qo, qld, nq);
		for (int i = threadIdx.x; i < QT; i += blockDim.x) {
			long long j = (long long)(Q0 + qt0 + min(i, nq - 1)) * heads + h;
			fl[b * QT + i] = lse[j] * LOG2E;
			fl[(2 + b) * QT + i] = D[j];
		}
	};
	fill(0);
	cp_async_commit();
	float adk[HD / 8][4], adv[HD / 8][4];
#pragma unroll
	for (int i = 0; i < HD / 8; i++)
#pragma unroll
		for (int e = 0; e < 4; e++) adk[i][e] = adv[i][e] = 0.f;
	unsigned ka[KREG ? HD / 16 : 1][4], va[KREG ? HD / 16 : 1][4];
	const int wk0 = k0 + 16 * w, kr0 = wk0 + gr; // this lane's first key; the second is +8
	for (int j = 0; j < nsteps; j++) {
		const int qt0 = k0 + (j % ntiles) * QT, nq = min(QT, N - qt0), buf = j & 1;
		const bf16 *Qs = qbuf + buf * QT * LQ, *dOs = qbuf + (2 + buf) * QT * LQ;
		const float *ls = fl + buf * QT, *ds_ = fl + (2 + buf) * QT;
		if (j + 1 < nsteps) {
			fill(j + 1);
			cp_async_commit();
			cp_async_wait<1>();
		} else {
			cp_async_wait<0>();
		}
		__syncthreads();
		if (KREG && j == 0) {
#pragma unroll
			for (int kk = 0; kk < (KREG ? HD / 16 : 0); kk++) {
				ldsm4(ka[kk], Ks, LQ, 16 * w, 16 * kk, lane);
				ldsm4(va[kk], Vs, LQ, 16 * w, 16 * kk, lane);
			}
		}
		if (wk0 <= qt0 + QT - 1) { // else every key of this warp is after the tile's queries
			float s[QT / 8][4], dp[QT / 8][4];
#pragma unroll
			for (int i = 0; i < QT / 8; i++)
#pragma unroll
				for (int e = 0; e < 4; e++) s[i][e] = dp[i][e] = 0.f;
#pragma unroll
			for (int kk = 0; kk < HD / 16; kk++) {
				unsigned a[4], av[4];
				const unsigned *pa = a, *pv = av;
				if (KREG) {
					pa = ka[KREG ? kk : 0], pv = va[KREG ? kk : 0];
				} else {
					ldsm4(a, Ks, LQ, 16 * w, 16 * kk, lane);
					ldsm4(av, Vs, LQ, 16 * w, 16 * kk, lane);
				}
#pragma unroll
				for (int nt = 0; nt < QT / 8; nt += 2) {
					unsigned bb[4];
					ldsm4B(bb, Qs, LQ, 8 * nt, 16 * kk, lane);
					mma16816(s[nt], pa, bb[0], bb[1]);
					mma16816(s[nt + 1], pa, bb[2], bb[3]);
					ldsm4B(bb, dOs, LQ, 8 * nt, 16 * kk, lane);
					mma16816(dp[nt], pv, bb[0], bb[1]);
					mma16816(dp[nt + 1], pv, bb[2], bb[3]);
				}
			}
			// pᵀ (kept in s) and dsᵀ (in dp). The mask (queries before a
			// key, padding queries of the last tile) only where needed: a
			// warp-uniform branch.
			const bool edge = qt0 < wk0 + 15 || nq < QT;
#pragma unroll
			for (int nt = 0; nt < QT / 8; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int qi = 8 * nt + 2 * t + (e & 1); // query within the tile
					float p = ex2(fmaf(s[nt][e], sl2, -ls[qi]));
					if (edge && (qi >= nq || qt0 + qi < kr0 + 8 * (e >> 1))) p = 0.f;
					s[nt][e] = p;
					dp[nt][e] = p * (dp[nt][e] - ds_[qi]);
				}
#pragma unroll
			for (int kk = 0; kk < QT / 16; kk++) {
				unsigned ap[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
				                  pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
				unsigned as[4] = {pack2(dp[2 * kk][0], dp[2 * kk][1]), pack2(dp[2 * kk][2], dp[2 * kk][3]),
				                  pack2(dp[2 * kk + 1][0], dp[2 * kk + 1][1]), pack2(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
				for (int dt = 0; dt < HD / 8; dt += 2) {
					unsigned bb[4];
					ldsm4T(bb, dOs, LQ, 16 * kk, 8 * dt, lane);
					mma16816(adv[dt], ap, bb[0], bb[1]);
					mma16816(adv[dt + 1], ap, bb[2], bb[3]);
					ldsm4T(bb, Qs, LQ, 16 * kk, 8 * dt, lane);
					mma16816(adk[dt], as, bb[0], bb[1]);
					mma16816(adk[dt + 1], as, bb[2], bb[3]);
				}
			}
		}
		__syncthreads();
	}
#pragma unroll
	for (int r = 0; r < 2; r++) {
		int key = 16 * w + gr + 8 * r;
		if (key >= nk) continue;
		long long base = (long long)(K0 + k0 + key) * kld + kvh * HD;
#pragma unroll
		for (int dt = 0; dt < HD / 8; dt++) {
			float2 a = make_float2(adk[dt][2 * r] * scale, adk[dt][2 * r + 1] * scale), c = make_float2(adv[dt][2 * r], adv[dt][2 * r + 1]);
			if (hper == g) {
				*(float2 *)(dk + base + 8 * dt + 2 * t) = a;
				*(float2 *)(dv + base + 8 * dt + 2 * t) = c;
			} else {
				atomicAdd(dk + base + 8 * dt + 2 * t, a.x);
				atomicAdd(dk + base + 8 * dt + 2 * t + 1, a.y);
				atomicAdd(dv + base + 8 * dt + 2 * t, c.x);
				atomicAdd(dv + base + 8 * dt + 2 * t + 1, c.y);
			}
		}
	}
}

#define MMA_KERNELS(HD, MW, QT)                                                                                               \
	extern "C" __global__ void __launch_bounds__(128) attn_mma_fwd_##HD(float *out, bf16 *o16, float *lse, const bf16 *q, const bf16 *k, \
	                                                                    const bf16 *v, const int *tiles, const int *seqs,      \
	                                                                    int heads, int kvheads, float scale) {                \
		mma_fwd<HD, MW>(out, o16, lse, q, k, v, tiles, seqs, heads, kvheads, scale);                                             \
	}                                                                                                                        \
	extern "C" __global__ void __launch_bounds__(128)                                                                        \
	    attn_mma_bwd_dq_##HD(float *dq, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v, const float *lse,     \
	                         const float *D, const int *tiles, const int *seqs, int heads, int kvheads, float scale,         \
	                         const int *pos, const float *cs, const float *sn, bf16 *dq16) {                                 \
		mma_bwd_dq<HD>(dq, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, scale, pos, cs, sn, dq16);                 \
	}                                                                                                                        \
	extern "C" __global__ void __launch_bounds__(128)                                                                        \
	    attn_mma_bwd_dkv_##HD(float *dk, float *dv, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,          \
	                          const float *lse, const float *D, const int *tiles, const int *seqs, int heads, int kvheads,    \
	                          float scale, int hper) {                                                                       \
		mma_bwd_dkv<HD, QT>(dk, dv, dout, q, k, v, lse, D, tiles, seqs, heads, kvheads, scale, hper);                     \
	}

// 128-row forward tiles (lib/model's mmaFwdRows; at head dim 128, 255
// registers without spills for sm_90) and dK/dV query tiles of 64 and 32
// (mmaKVQueries: 64 at head dim 128 fits too, but measured 7% slower).
MMA_KERNELS(64, 2, 64)
MMA_KERNELS(128, 2, 32)
