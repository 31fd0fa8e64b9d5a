// async.cuh: shared-memory addresses, asynchronous copies from global to
// shared memory (cp.async, sm_80 and later) and the tensor cores' matrix
// loads from shared memory (ldmatrix), prepended to every kernel module
// that NVRTC compiles (nvrtc.go), after pdl.cuh. The CPU emulation
// (lib/cuda/cudaemu's prelude) defines cp_async16 as a plain copy, the
// group calls as no-ops (its copies land at once) and ldmatrix as the
// same fragments exchanged between its lanes.
//   smem_u32(p)                 the 32-bit shared-window address of p, for
//                               ldmatrix and cp.async operands;
//   ldmatrix_x4(r, p)           reads four 8×8 16-bit matrices, p this lane's
//                               row (lanes 8j … 8j+7 give the rows of matrix
//                               j), r[j] the two elements of matrix j this
//                               lane holds; ldmatrix_x4_trans the same, each
//                               matrix transposed;
//   cp_async16(dst, src, valid) queues a copy of 16 bytes (both 16-byte
//                               aligned), or 16 zero bytes when valid is
//                               false (src is not read then);
//   cp_async_commit()           closes the thread's group of queued copies;
//   cp_async_wait<N>()          waits until every group the thread
//                               committed but the last N has landed (its own
//                               copies: a thread that reads another's needs a
//                               barrier too).
__device__ __forceinline__ unsigned smem_u32(const void *p) {
	unsigned a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void ldmatrix_x4(unsigned *r, const void *p) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned *r, const void *p) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_u32(p)));
}
