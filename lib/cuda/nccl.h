// nccl.h: the few NCCL declarations mempo uses (nccl.h of NCCL 2.x, written
// by hand: no NCCL header is needed at build time). Reached through
// dlopen/dlsym of libnccl.so.2 (nccl.c).
#ifndef MEMPO_NCCL_H
#define MEMPO_NCCL_H
#include "binding.h"

typedef int ncclResult_t;
typedef void *ncclComm_t;
#define MNCCL_ID_BYTES 128
typedef struct { char internal[MNCCL_ID_BYTES]; } mncclUniqueId;

// ncclDataType_t and ncclRedOp_t values used here.
#define MNCCL_FLOAT32 7
#define MNCCL_SUM 0

const char *mempo_load_nccl(const char *path);
ncclResult_t mncclGetVersion(int *v);
const char *mncclGetErrorString(ncclResult_t r);
ncclResult_t mncclGetUniqueId(char *id);
// The wrappers that touch a device make ctx current first, in the same C call.
ncclResult_t mncclCommInitRank(CUcontext ctx, ncclComm_t *comm, int nranks, const char *id, int rank);
ncclResult_t mncclCommDestroy(CUcontext ctx, ncclComm_t comm);
ncclResult_t mncclAllReduce(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t count, ncclComm_t comm, CUstream s);
ncclResult_t mncclReduceScatter(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t recvcount, ncclComm_t comm, CUstream s);
ncclResult_t mncclAllGather(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t sendcount, ncclComm_t comm, CUstream s);
ncclResult_t mncclBroadcast(CUcontext ctx, CUdeviceptr send, CUdeviceptr recv, size_t count, int root, ncclComm_t comm, CUstream s);
ncclResult_t mncclGroupStart(void);
ncclResult_t mncclGroupEnd(void);
#endif
