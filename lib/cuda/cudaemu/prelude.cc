// prelude.cc: what the emulated modules of kernels/ (bert.cu, flatsearch.cu,
// decode.cu, sample.cu, attention2.cu, model.cu, ...) need of
// CUDA to run on the CPU, put before the source by cudaemu.go, which compiles
// both with g++ into a shared library. Every CUDA thread of a block is a
// fiber on its own stack; __syncthreads switches back to the scheduler,
// which resumes every thread of the block in turn, so shared memory and
// barriers mean what they mean on a GPU (blocks run one after another).
// Warp intrinsics (shuffles, ballot; full-mask only) are a barrier of the
// 32 threads of a warp: each thread leaves its value in a slot, the
// scheduler resumes the warp once all 32 are there, and each reads the
// slot it asked for. x86-64 only (the stack switch is written in assembly,
// a few nanoseconds instead of swapcontext's two system calls).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Programmatic dependent launch (kernels/pdl.cuh): the emulation runs one
// launch at a time, so there is nothing to wait for or release.
#define PDL_WAIT()
#define PDL_RELEASE()
#define __shared__ static
#define DYN_SMEM(type, name) type *name = (type *)emu_dyn
// Asynchronous copies to shared memory (kernels/async.cuh) land at once.
static inline void cp_async16(void *dst, const void *src, bool valid) {
	if (valid)
		memcpy(dst, src, 16);
	else
		memset(dst, 0, 16);
}
static inline void cp_async_commit() {}
template <int N> static inline void cp_async_wait() {}

struct emu_dim3 {
	unsigned x, y, z;
};
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
static unsigned char *emu_dyn;

static inline float __int_as_float(int i) {
	float f;
	memcpy(&f, &i, 4);
	return f;
}
static inline float __uint_as_float(unsigned u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static inline unsigned __float_as_uint(float f) {
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}
// The GPU's fast intrinsics as the exact functions (they differ by a few
// ulp; macros, since math.h declares glibc-internal functions of the names).
// The round-to-nearest intrinsics that keep NVRTC from contracting into an
// FMA: plain operations here (x86-64 g++ does not contract without -mfma).
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
struct uint2 {
	unsigned x, y;
};
struct uint4 {
	unsigned x, y, z, w;
};
struct alignas(8) float2 {
	float x, y;
};
static inline float2 make_float2(float x, float y) {
	float2 v = {x, y};
	return v;
}
struct alignas(16) float4 {
	float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) {
	float4 v = {x, y, z, w};
	return v;
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }

// IEEE half conversions, round to nearest even (as cvt.rn.f16.f32).
static inline unsigned short f2h(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
	int exp = (x >> 23) & 0xff;
	if (exp == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
	int e = exp - 127 + 15;
	if (e >= 0x1f) return sign | 0x7c00;
	if (e <= 0) {
		if (e < -10) return sign;
		mant |= 0x800000;
		int shift = 14 - e;
		uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1))) h++;
		return sign | h;
	}
	uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
	return sign | h;
}
static inline float h2f(unsigned short h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, mant = h & 0x3ff, x;
	int exp = (h >> 10) & 0x1f;
	if (exp == 0x1f) {
		x = sign | 0x7f800000 | (mant << 13);
	} else if (exp == 0) {
		float f = (float)mant * (1.f / 16777216.f);
		memcpy(&x, &f, 4);
		x |= sign;
	} else {
		x = sign | ((uint32_t)(exp - 15 + 127) << 23) | (mant << 13);
	}
	float f;
	memcpy(&f, &x, 4);
	return f;
}
extern "C" unsigned short emu_f2h(float f) { return f2h(f); }
extern "C" float emu_h2f(unsigned short h) { return h2f(h); }

// ---- fibers ----

extern "C" void emu_switch(void **save, void *to);
asm(R"(
	.text
	.globl emu_switch
	.type emu_switch, @function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_switch, .-emu_switch
)");

enum { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
struct emu_fiber {
	void *sp;
	int state;
	char *stack;
};
static const size_t EMU_STACK = 32 << 10;
static std::vector<emu_fiber> emu_fibers;
static void *emu_sched_sp;
static int emu_cur;
static void (*emu_kernel)(uint64_t *);
static uint64_t *emu_args;

static void __syncthreads() {
	emu_fiber &f = emu_fibers[emu_cur];
	f.state = AT_BARRIER;
	emu_switch(&f.sp, emu_sched_sp);
}

// Warp exchange slots, two per thread: a thread's slot of warp operation n
// is [n & 1], so a thread already at operation n + 1 does not overwrite
// what a slower one of its warp is still to read of operation n.
static uint64_t emu_xchg[2][1024];
static unsigned emu_wop[1024];
static unsigned emu_nt; // threads of the block being run (its last warp may be partial)

// emu_warp leaves v for the warp, waits for the rest of it and returns the
// phase whose slots hold the warp's values.
static int emu_warp(uint64_t v) {
	int ph = emu_wop[emu_cur]++ & 1;
	emu_xchg[ph][emu_cur] = v;
	emu_fiber &f = emu_fibers[emu_cur];
	f.state = AT_WARP;
	emu_switch(&f.sp, emu_sched_sp);
	return ph;
}
template <typename T> static uint64_t emu_bits(T v) {
	uint64_t b = 0;
	memcpy(&b, &v, sizeof(T));
	return b;
}
template <typename T> static T emu_from(uint64_t b) {
	T v;
	memcpy(&v, &b, sizeof(T));
	return v;
}
template <typename T> static T emu_shfl_from(T v, int src) {
	int ph = emu_warp(emu_bits(v));
	int base = emu_cur & ~31;
	if (src < 0 || src > 31 || base + src >= (int)emu_nt) return v;
	return emu_from<T>(emu_xchg[ph][base + src]);
}
template <typename T> static T __shfl_sync(unsigned, T v, int src) { return emu_shfl_from(v, src & 31); }
template <typename T> static T __shfl_up_sync(unsigned, T v, unsigned d) {
	int l = emu_cur & 31;
	return emu_shfl_from(v, l - (int)d < 0 ? l : l - (int)d);
}
template <typename T> static T __shfl_down_sync(unsigned, T v, unsigned d) {
	int l = emu_cur & 31;
	return emu_shfl_from(v, l + (int)d > 31 ? l : l + (int)d);
}
template <typename T> static T __shfl_xor_sync(unsigned, T v, int m) { return emu_shfl_from(v, (emu_cur & 31) ^ (m & 31)); }
static unsigned __ballot_sync(unsigned, int pred) {
	int ph = emu_warp(pred != 0);
	int base = emu_cur & ~31;
	unsigned r = 0;
	for (int l = 0; l < 32 && base + l < (int)emu_nt; l++)
		if (emu_xchg[ph][base + l]) r |= 1u << l;
	return r;
}
static void __syncwarp(unsigned = 0xffffffffu) { emu_warp(0); }
static int __popc(unsigned x) { return __builtin_popcount(x); }
// Blocks run one after another and a fiber yields only at barriers and warp
// operations, so atomics are plain read-modify-writes and fences no-ops.
template <typename T> static T atomicAdd(T *p, T v) {
	T o = *p;
	*p = o + v;
	return o;
}
static void __threadfence() {}

// ---- tensor-core fragments ----
// mma.sync m16n8k16 (fp32 accumulate) and ldmatrix x4 as the warp exchanges
// they are: every lane fetches the fragment elements it is owed from the
// lanes that hold them (or the row addresses they gave), then computes its
// four outputs with the fp32 sums in k order. The modules (bert.cu,
// skinny.cu, attnmma.cu) call these in their CUDA_EMU branches; lane is the
// caller's lane in its warp (threadIdx.x & 31 in a one-dimensional block).
static inline float emu_bf16(unsigned h) { return __uint_as_float((h & 0xffffu) << 16); }
static inline float emu_f16(unsigned h) { return h2f(h & 0xffffu); }
// emu_mma16816 is c += A·B for a 16×16 A fragment a[4] and a 16×8 B fragment
// (b0, b1) of 16-bit elements that CVT widens (emu_bf16 or emu_f16).
template <float (*CVT)(unsigned)> static void emu_mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1) {
	const int lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
	float A0[16], A1[16], B[2][16];
	for (int tt = 0; tt < 4; tt++) {
		int src = 4 * gr + tt;
		unsigned x0 = __shfl_sync(0xffffffffu, a[0], src), x1 = __shfl_sync(0xffffffffu, a[1], src);
		unsigned x2 = __shfl_sync(0xffffffffu, a[2], src), x3 = __shfl_sync(0xffffffffu, a[3], src);
		A0[2 * tt] = CVT(x0), A0[2 * tt + 1] = CVT(x0 >> 16);
		A1[2 * tt] = CVT(x1), A1[2 * tt + 1] = CVT(x1 >> 16);
		A0[2 * tt + 8] = CVT(x2), A0[2 * tt + 9] = CVT(x2 >> 16);
		A1[2 * tt + 8] = CVT(x3), A1[2 * tt + 9] = CVT(x3 >> 16);
	}
	for (int nn = 0; nn < 2; nn++)
		for (int tt = 0; tt < 4; tt++) {
			int src = 4 * (2 * t + nn) + tt;
			unsigned y0 = __shfl_sync(0xffffffffu, b0, src), y1 = __shfl_sync(0xffffffffu, b1, src);
			B[nn][2 * tt] = CVT(y0), B[nn][2 * tt + 1] = CVT(y0 >> 16);
			B[nn][2 * tt + 8] = CVT(y1), B[nn][2 * tt + 9] = CVT(y1 >> 16);
		}
	for (int k = 0; k < 16; k++) {
		c[0] += A0[k] * B[0][k];
		c[1] += A0[k] * B[1][k];
		c[2] += A1[k] * B[0][k];
		c[3] += A1[k] * B[1][k];
	}
}
// ldmatrix_x4 is kernels/async.cuh's ldmatrix.sync.aligned.m8n8.x4.shared.b16:
// p is this lane's row address (lanes 8j … 8j+7 give the rows of matrix j),
// r[j] the two elements of matrix j this lane holds; ldmatrix_x4_trans the
// same with each matrix transposed.
static void ldmatrix_x4(unsigned *r, const void *p) {
	const int lane = threadIdx.x & 31;
	for (int j = 0; j < 4; j++) {
		const unsigned short *q = (const unsigned short *)__shfl_sync(0xffffffffu, p, 8 * j + (lane >> 2));
		r[j] = (unsigned)q[2 * (lane & 3)] | (unsigned)q[2 * (lane & 3) + 1] << 16;
	}
}
static void ldmatrix_x4_trans(unsigned *r, const void *p) {
	const int lane = threadIdx.x & 31;
	for (int j = 0; j < 4; j++) {
		const unsigned short *q0 = (const unsigned short *)__shfl_sync(0xffffffffu, p, 8 * j + 2 * (lane & 3));
		const unsigned short *q1 = (const unsigned short *)__shfl_sync(0xffffffffu, p, 8 * j + 2 * (lane & 3) + 1);
		r[j] = (unsigned)q0[lane >> 2] | (unsigned)q1[lane >> 2] << 16;
	}
}
template <typename T> static T __ldcg(const T *p) { return *p; }
static int __ffs(int x) { return __builtin_ffs(x); }

static void emu_fiber_entry() {
	emu_kernel(emu_args);
	emu_fibers[emu_cur].state = DONE;
	emu_switch(&emu_fibers[emu_cur].sp, emu_sched_sp);
	__builtin_trap(); // never resumed
}

static void emu_fiber_init(emu_fiber &f) {
	uintptr_t top = ((uintptr_t)f.stack + EMU_STACK) & ~(uintptr_t)15;
	uint64_t *sp = (uint64_t *)top;
	*--sp = 0; // return address of emu_fiber_entry (it never returns)
	*--sp = (uint64_t)(uintptr_t)emu_fiber_entry;
	for (int i = 0; i < 6; i++) *--sp = 0; // rbp rbx r12 r13 r14 r15
	f.sp = sp;
	f.state = RUNNABLE;
}

// emu_launch runs kernel k (a generated wrapper that unpacks the argument
// slots) over the grid; it returns NULL or a message.
extern "C" const char *emu_launch(void (*k)(uint64_t *), unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, uint64_t *args) {
	unsigned nt = bx * by * bz;
	if (nt == 0 || nt > 1024 || gx == 0 || gy == 0 || gz == 0) return "invalid launch configuration";
	if (gy > 65535 || gz > 65535) return "grid y/z over 65535";
	if (shmem > (227u << 10)) return "dynamic shared memory over 227 KiB";
	while (emu_fibers.size() < nt) {
		emu_fiber f;
		f.stack = (char *)malloc(EMU_STACK);
		if (!f.stack) return "out of memory for fiber stacks";
		emu_fibers.push_back(f);
	}
	// Dynamic shared memory: NaN until written, then a red zone (0xFE
	// bytes, as the device allocations') that a write past the launch's
	// shmem bytes damages, reported when the block ends.
	static std::vector<unsigned char> dyn;
	const unsigned red = 256;
	dyn.assign(shmem + red, 0xfe);
	emu_dyn = dyn.data();
	emu_kernel = k;
	emu_args = args;
	emu_nt = nt;
	gridDim = {gx, gy, gz};
	blockDim = {bx, by, bz};
	for (unsigned z = 0; z < gz; z++)
		for (unsigned y = 0; y < gy; y++)
			for (unsigned x = 0; x < gx; x++) {
				blockIdx = {x, y, z};
				memset(emu_dyn, 0xff, shmem);
				for (unsigned i = 0; i < nt; i++) {
					emu_fiber_init(emu_fibers[i]);
					emu_wop[i] = 0;
				}
				for (;;) {
					for (unsigned i = 0; i < nt; i++) {
						emu_fiber &f = emu_fibers[i];
						if (f.state != RUNNABLE) continue;
						threadIdx = {i % bx, (i / bx) % by, i / (bx * by)};
						emu_cur = (int)i;
						emu_switch(&emu_sched_sp, f.sp);
					}
					// Every thread now waits at a barrier or is done. Warps
					// whose threads all wait at a warp operation go on.
					bool released = false;
					for (unsigned w = 0; w < nt; w += 32) {
						unsigned end = w + 32 < nt ? w + 32 : nt, at = 0;
						for (unsigned i = w; i < end; i++) at += emu_fibers[i].state == AT_WARP;
						if (at == 0) continue;
						if (at != end - w) return "warp operation reached by only part of a warp";
						if (emu_wop[w] != emu_wop[end - 1]) return "warp operation reached by only part of a warp";
						for (unsigned i = w; i < end; i++) emu_fibers[i].state = RUNNABLE;
						released = true;
					}
					if (released) continue;
					unsigned done = 0;
					for (unsigned i = 0; i < nt; i++) done += emu_fibers[i].state == DONE;
					if (done == nt) break;
					if (done > 0) return "__syncthreads reached by only part of a block";
					for (unsigned i = 0; i < nt; i++) emu_fibers[i].state = RUNNABLE;
				}
				for (unsigned i = shmem; i < shmem + red; i++)
					if (dyn[i] != 0xfe) return "a write past the launch's dynamic shared memory";
			}
	return 0;
}
