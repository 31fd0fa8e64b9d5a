// skinny.cu: products of a few rows by a weight matrix, C[m×n] (fp32) =
// A[m×k] (bf16) · W[n×k]ᵀ (bf16), for decoding steps of 5 to 32 rows
// (lib/model/cuda_decode.go): there the weights are read once and the rows
// are few, so the product is a stream of the weights through the tensor
// cores. cuBLAS tiles such products by the output (at 7B, 3,584 columns of
// 32 rows make 28 to 56 tiles for 132 multiprocessors); here the iterations
// (a column tile of 64 × a chunk of 128 k) are shared evenly by the blocks
// (stream-K), so every product fills the chip.
//
// Block: 8 warps, 16 columns a warp (two m16n8k16 n-tiles) and half of each
// chunk's k (the two halves' sums added at the end of a tile, first half
// first), all m rows (MT tiles of 16, rows past m zero). Chunks of 128 k of
// the tile's 64 weight rows and of A's rows are copied to shared memory
// asynchronously (cp.async), SK_STAGES chunks deep, so a block keeps three
// chunks of weights in flight while it multiplies a fourth. Lane (gr, t) reads k 8t … 8t+7 of
// each 32 of its columns gr and 8+gr, 16 bytes at a time. The mma's k order
// inside 16 is a convention, not a constraint (a dot product does not care
// how k is numbered, as long as A and W agree), so those 8 values are the B
// fragments of two mma: logical k (2t, 2t+1 | 2t+8, 2t+9) of the first are
// physical 8t + (0, 1 | 2, 3), of the second 8t + (4, 5 | 6, 7); A's
// fragments are read the same way. The first chunks' weights are requested
// before PDL_WAIT (they depend on no earlier kernel), so they stream in while
// the kernel before it drains.
//
// A block's range of iterations may begin and end inside a tile: there it
// writes its partial sums to its slot in part (0 for its first tile, 1 for
// its last), and the last block of the tile to finish (a counter per tile,
// reset by that block) adds the slots in block order, so the result does
// not depend on which block ends last; the ranges depend on the product's
// shape and the grid only, so a row's sums do not depend on m.
//
// Under CUDA_EMU (lib/cuda/cudaemu) the mma is emulated with warp shuffles
// of the same fragments, sums in k order.

#define SK_KC 128          // k a chunk
#define SK_LD SK_KC        // halves a staged row (256 bytes; its 16-byte pieces swizzled, sk_sw)
#define SK_COLS 64         // columns a block
#define SK_THREADS 256    // 8 warps: 4 column groups of 16 × 2 halves of each chunk's k
#define SK_STAGES 4        // chunks in shared memory: three loading while one is multiplied

// sk_sw is where half h of staged row r lies: on odd rows the row's 64-byte
// quarters swap pairwise, so that the two rows a quarter warp reads (k 32j …
// 32j+31 of rows gr and gr+1: 64 bytes each) fall in distinct banks.
__device__ __forceinline__ int sk_sw(int r, int h) { return r * SK_LD + (h ^ ((r & 1) << 5)); }

#ifndef CUDA_EMU
#define SK_DYN(name) extern __shared__ __align__(16) unsigned short name[]
__device__ __forceinline__ void sk_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) {
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#else
#define SK_DYN(name) unsigned short *name = (unsigned short *)emu_dyn
// The emulation (lib/cuda/cudaemu's prelude): the fragments exchanged
// between the lanes, the fp32 sums in k order.
static void sk_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) { emu_mma16816<emu_bf16>(c, a, b0, b1); }
#endif

// SkProducts: up to three products sharing A (q, k and v; gate and up):
// product p has n_p columns (0: absent), weights w_p, output c_p.
struct SkProducts {
	float *c[3];
	const unsigned short *w[3];
	int n[3], tiles[3];
};

// sk_tile maps a column tile of the launch to its product and first column.
__device__ __forceinline__ int sk_tile(const SkProducts &P, int tile, int &col0) {
	int p = 0;
	while (p < 2 && tile >= P.tiles[p]) tile -= P.tiles[p++];
	col0 = tile * SK_COLS;
	return p;
}

// sk_block_of is the block whose range holds iteration i (ranges
// [floor(b·I/G), floor((b+1)·I/G)) for G blocks over I iterations).
__device__ __forceinline__ int sk_block_of(long long i, long long I, int G) { return (int)(((i + 1) * G + I - 1) / I) - 1; }

template <int MT>
__device__ __forceinline__ void skinny(const SkProducts &P, float *part, int *cnt, const unsigned short *a, int m, int k) {
	SK_DYN(sm); // SK_STAGES × (weights [64][SK_LD], then A [MT·16][SK_LD])
	constexpr int STAGE = (SK_COLS + MT * 16) * SK_LD;
	__shared__ int last;
	const int warp = (threadIdx.x >> 5) & 3, kh = threadIdx.x >> 7, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	float *red = (float *)(sm + SK_STAGES * STAGE); // [4 warps][32 lanes][MT·8]: the second k half's sums
	const int G = gridDim.x, b = blockIdx.x, CH = (k + SK_KC - 1) / SK_KC;
	const int I = (P.tiles[0] + P.tiles[1] + P.tiles[2]) * CH;
	const int it0 = (int)((long long)b * I / G), end = (int)((long long)(b + 1) * I / G);
	// Copies: 16 lanes a row of a chunk (16 bytes each), 16 rows a pass.
	const int cr = threadIdx.x >> 4, cv = 8 * (threadIdx.x & 15);
	// stage queues chunk c of column tile tl into stage st (weights,
	// and A's rows when withA); columns past n read the last one (in bounds,
	// never stored), rows of A past m are zeros.
	auto stage = [&](int st, int tl, int c, bool withW, bool withA) {
		unsigned short *ws = sm + st * STAGE;
		const int kc = c * SK_KC;
		const bool in = cv < k - kc; // a partial last chunk copies its first k − kc only
		if (withW) {
			int col0;
			const int p = sk_tile(P, tl, col0);
			const unsigned short *w = P.w[p] + kc + cv;
			const int n = P.n[p];
#pragma unroll
			for (int u = 0; u < SK_COLS / 16; u++) {
				const int r = cr + 16 * u;
				if (in) cp_async16(ws + sk_sw(r, cv), w + (long long)min(col0 + r, n - 1) * k, true);
			}
		}
		if (withA) {
			unsigned short *as = ws + SK_COLS * SK_LD;
#pragma unroll
			for (int u = 0; u < MT; u++) {
				const int r = cr + 16 * u;
				if (in) cp_async16(as + sk_sw(r, cv), a + (long long)(r < m ? r : 0) * k + kc + cv, r < m);
			}
		}
	};
	// Prologue: the weights of the first SK_STAGES − 1 iterations, then
	// (after the kernels before this one are done) A's; one group an
	// iteration, the first also holding every prologue weight copy.
	const int tile0 = it0 / CH, ch0 = it0 - tile0 * CH;
	for (int q = 0, tl = tile0, c = ch0; q < SK_STAGES - 1; q++) {
		if (it0 + q < end) stage(q, tl, c, true, false);
		if (++c == CH) c = 0, tl++;
	}
	PDL_WAIT();
	PDL_RELEASE();
	for (int q = 0, tl = tile0, c = ch0; q < SK_STAGES - 1; q++) {
		if (it0 + q < end) stage(q, tl, c, false, true);
		cp_async_commit();
		if (++c == CH) c = 0, tl++;
	}
	float acc[MT][2][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int x = 0; x < 8; x++) acc[mt][x >> 2][x & 3] = 0.f;
	// (tile, ch): this iteration's; (ptile, pch): the one SK_STAGES − 1 on,
	// whose chunk is queued now; cs, ps: their stages.
	int tile = tile0, ch = ch0, ptile = tile0, pch = ch0 + SK_STAGES - 1, cs = 0;
	while (pch >= CH) pch -= CH, ptile++;
	for (int i = it0; i < end; i++) {
		cp_async_wait<SK_STAGES - 2>();       // iteration i's chunk is in shared memory (this thread's copies)
		__syncthreads(); // everyone's copies; and iteration i − 1's stage is free
		const int ps = cs == 0 ? SK_STAGES - 1 : cs - 1;
		if (i + SK_STAGES - 1 < end) stage(ps, ptile, pch, true, true);
		cp_async_commit(); // empty near the end: the count stays one an iteration
		if (++pch == CH) pch = 0, ptile++;
		const unsigned short *ws = sm + cs * STAGE, *as = ws + SK_COLS * SK_LD;
		const int ctile = tile, cch = ch, len = min(SK_KC, k - ch * SK_KC);
		cs = cs == SK_STAGES - 1 ? 0 : cs + 1;
		if (++ch == CH) ch = 0, tile++;
#pragma unroll
		for (int jj = 0; jj < SK_KC / 64; jj++) {
			const int j = 2 * kh + jj;
			if (32 * j < len) {
				const uint4 w0 = *(const uint4 *)(ws + sk_sw(16 * warp + gr, 32 * j + 8 * t));
				const uint4 w1 = *(const uint4 *)(ws + sk_sw(16 * warp + 8 + gr, 32 * j + 8 * t));
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					const uint4 lo = *(const uint4 *)(as + sk_sw(16 * mt + gr, 32 * j + 8 * t));
					const uint4 hi = *(const uint4 *)(as + sk_sw(16 * mt + 8 + gr, 32 * j + 8 * t));
					const unsigned a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
					sk_mma(acc[mt][0], a0, w0.x, w0.y);
					sk_mma(acc[mt][0], a1, w0.z, w0.w);
					sk_mma(acc[mt][1], a0, w1.x, w1.y);
					sk_mma(acc[mt][1], a1, w1.z, w1.w);
				}
			}
		}
		if (cch != CH - 1 && i != end - 1) continue;
		// The end of this block's segment of the tile: the whole tile goes
		// to the output; a part to this block's slot (0: the block's first
		// tile, 1: its last), and the tile's last segment to finish adds the
		// slots in block order.
		// The second k half's warps hand their sums to the first's.
		if (kh == 1) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int x = 0; x < 8; x++) {
					red[((warp * 32 + lane) * MT + mt) * 8 + x] = acc[mt][x >> 2][x & 3];
					acc[mt][x >> 2][x & 3] = 0.f;
				}
		}
		__syncthreads();
		if (kh == 0) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int x = 0; x < 8; x++) acc[mt][x >> 2][x & 3] += red[((warp * 32 + lane) * MT + mt) * 8 + x];
		}
		int col0;
		const int p = sk_tile(P, ctile, col0), n = P.n[p];
		const long long t0 = (long long)ctile * CH;
		const bool whole = it0 <= t0 && cch == CH - 1;
		const int slot = t0 < it0 ? 0 : 1;
		float *dst = whole ? P.c[p] + col0 : part + (long long)(2 * b + slot) * m * SK_COLS;
		const int ld = whole ? n : SK_COLS;
		const int wc = 16 * warp;
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int nt = 0; nt < 2; nt++) {
				const int col = wc + 8 * nt + 2 * t;
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const int row = 16 * mt + 8 * h + gr;
					if (kh == 0 && row < m && col0 + col < n) {
						dst[(long long)row * ld + col] = acc[mt][nt][2 * h];
						if (col0 + col + 1 < n) dst[(long long)row * ld + col + 1] = acc[mt][nt][2 * h + 1];
					}
					acc[mt][nt][2 * h] = acc[mt][nt][2 * h + 1] = 0.f;
				}
			}
		if (whole) continue;
		const int bf = sk_block_of(t0, I, G), bl = sk_block_of(t0 + CH - 1, I, G);
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0) {
			const int done = atomicAdd(cnt + ctile, 1);
			last = done == bl - bf;
			if (last) cnt[ctile] = 0; // ready for the next product
		}
		__syncthreads();
		if (!last) continue;
		__threadfence();
		// Each thread sums its outputs over the segments in block order,
		// 8 segments' loads in flight at a time: 4 columns at once where
		// the tile is whole and the rows 16-byte aligned.
		const int cols = min(SK_COLS, n - col0);
		const bool vec = cols == SK_COLS && (n & 3) == 0;
		const int W = vec ? 4 : 1, per = cols / W;
		for (int x = threadIdx.x; x < m * per; x += SK_THREADS) {
			const int r = x / per, col = (x - r * per) * W;
			float4 sum = {0.f, 0.f, 0.f, 0.f};
			for (int q0 = bf; q0 <= bl; q0 += 8) {
				float4 v[8];
#pragma unroll
				for (int q = 0; q < 8; q++) {
					const int bb = q0 + q;
					// bb's slot of this tile: 0 when the tile is bb's first.
					const int sl = bb <= bl && (long long)bb * I / G > t0 ? 0 : 1;
					const float *src = part + ((long long)(2 * bb + sl) * m + r) * SK_COLS + col;
					v[q] = bb > bl ? make_float4(0.f, 0.f, 0.f, 0.f) : vec ? __ldcg((const float4 *)src) : make_float4(__ldcg(src), 0.f, 0.f, 0.f);
				}
#pragma unroll
				for (int q = 0; q < 8; q++)
					if (q0 + q <= bl) sum.x += v[q].x, sum.y += v[q].y, sum.z += v[q].z, sum.w += v[q].w;
			}
			float *dst = P.c[p] + (long long)r * n + col0 + col;
			if (vec)
				*(float4 *)dst = sum;
			else
				*dst = sum.x;
		}
	}
}

// One kernel per number of 16-row tiles (two blocks a multiprocessor fit
// with up to 32 rows; with more, one, and the grid of lib/model's
// skinnyGrid would run in two waves): C_p = A·W_pᵀ for up to three
// products (n_p = 0: absent). Grid G blocks (G ≤ the iterations: column
// tiles of 64 × chunks of 128 k), 256 threads,
// SK_STAGES·(64 + MT·16)·SK_LD·2 + MT·4096 bytes of dynamic shared memory
// (over 48 KB: the launcher raises the limit); k a multiple of 32; part holds 2·G·m·64
// floats; cnt one zero a column tile.
#define SK_ARGS                                                                                                              \
	float *c0, float *c1, float *c2, const unsigned short *w0, const unsigned short *w1, const unsigned short *w2, int n0, \
	    int n1, int n2, float *part, int *cnt, const unsigned short *a, int m, int k
#define SK_CALL(MT)                                                                                                     \
	SkProducts P = {{c0, c1, c2}, {w0, w1, w2}, {n0, n1, n2}, {(n0 + SK_COLS - 1) / SK_COLS, (n1 + SK_COLS - 1) / SK_COLS, (n2 + SK_COLS - 1) / SK_COLS}}; \
	skinny<MT>(P, part, cnt, a, m, k)
extern "C" __global__ void __launch_bounds__(SK_THREADS) skinny_bf16_m16(SK_ARGS) { SK_CALL(1); }
extern "C" __global__ void __launch_bounds__(SK_THREADS) skinny_bf16_m32(SK_ARGS) { SK_CALL(2); }
