// nccl.c: dlopen/dlsym of libnccl.so.2 (NCCL 2.x C API). Float32 sums only:
// the gradients and parameters of a data-parallel update.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "nccl.h"

static char ncclerr[512];

static ncclResult_t (*p_ncclGetVersion)(int *);
static const char *(*p_ncclGetErrorString)(ncclResult_t);
static ncclResult_t (*p_ncclGetUniqueId)(mncclUniqueId *);
static ncclResult_t (*p_ncclCommInitRank)(ncclComm_t *, int, mncclUniqueId, int);
static ncclResult_t (*p_ncclCommDestroy)(ncclComm_t);
static ncclResult_t (*p_ncclAllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
static ncclResult_t (*p_ncclReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
static ncclResult_t (*p_ncclAllGather)(const void *, void *, size_t, int, ncclComm_t, CUstream);
static ncclResult_t (*p_ncclBroadcast)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
static ncclResult_t (*p_ncclGroupStart)(void);
static ncclResult_t (*p_ncclGroupEnd)(void);

#define NSYM(h, var, name) MEMPO_DLSYM(h, var, name, ncclerr)

const char *mempo_load_nccl(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) return mempo_dlerror();
	NSYM(h, p_ncclGetVersion, "ncclGetVersion");
	NSYM(h, p_ncclGetErrorString, "ncclGetErrorString");
	NSYM(h, p_ncclGetUniqueId, "ncclGetUniqueId");
	NSYM(h, p_ncclCommInitRank, "ncclCommInitRank");
	NSYM(h, p_ncclCommDestroy, "ncclCommDestroy");
	NSYM(h, p_ncclAllReduce, "ncclAllReduce");
	NSYM(h, p_ncclReduceScatter, "ncclReduceScatter");
	NSYM(h, p_ncclAllGather, "ncclAllGather");
	NSYM(h, p_ncclBroadcast, "ncclBroadcast");
	NSYM(h, p_ncclGroupStart, "ncclGroupStart");
	NSYM(h, p_ncclGroupEnd, "ncclGroupEnd");
	return NULL;
}

// A failed cuCtxSetCurrent is reported as ncclUnhandledCudaError (1).
#define NCTX(ctx) \
	do { \
		if (mcuCtxSetCurrent(ctx)) return 1; \
	} while (0)

ncclResult_t mncclGetVersion(int *v) { return p_ncclGetVersion(v); }
const char *mncclGetErrorString(ncclResult_t r) { return p_ncclGetErrorString(r); }
ncclResult_t mncclGetUniqueId(char *id) {
	mncclUniqueId u;
	ncclResult_t r = p_ncclGetUniqueId(&u);
	memcpy(id, u.internal, MNCCL_ID_BYTES);
	return r;
}
ncclResult_t mncclCommInitRank(CUcontext ctx, ncclComm_t *comm, int nranks, const char *id, int rank) {
	NCTX(ctx);
	mncclUniqueId u;
	memcpy(u.internal, id, MNCCL_ID_BYTES);
	return p_ncclCommInitRank(comm, nranks, u, rank);
}
ncclResult_t mncclCommDestroy(CUcontext ctx, ncclComm_t comm) {
	NCTX(ctx);
	return p_ncclCommDestroy(comm);
}
ncclResult_t mncclAllReduce(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t count, ncclComm_t comm, CUstream s) {
	NCTX(ctx);
	return p_ncclAllReduce((const void *)send, (void *)recv, count, MNCCL_FLOAT32, MNCCL_SUM, comm, s);
}
ncclResult_t mncclReduceScatter(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t recvcount, ncclComm_t comm, CUstream s) {
	NCTX(ctx);
	return p_ncclReduceScatter((const void *)send, (void *)recv, recvcount, MNCCL_FLOAT32, MNCCL_SUM, comm, s);
}
ncclResult_t mncclAllGather(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t sendcount, ncclComm_t comm, CUstream s) {
	NCTX(ctx);
	return p_ncclAllGather((const void *)send, (void *)recv, sendcount, MNCCL_FLOAT32, comm, s);
}
ncclResult_t mncclBroadcast(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t count, int root, ncclComm_t comm, CUstream s) {
	NCTX(ctx);
	return p_ncclBroadcast((const void *)send, (void *)recv, count, MNCCL_FLOAT32, root, comm, s);
}
ncclResult_t mncclGroupStart(void) { return p_ncclGroupStart(); }
ncclResult_t mncclGroupEnd(void) { return p_ncclGroupEnd(); }
