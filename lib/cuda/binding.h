// binding.h: the few CUDA driver, NVRTC and cuBLAS declarations mempo uses,
// written by hand so that no CUDA header or toolkit is needed at build time.
// Every entry point is reached through dlopen/dlsym (binding.c).
#ifndef MEMPO_CUDA_BINDING_H
#define MEMPO_CUDA_BINDING_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmemoryPool;
typedef int nvrtcResult;
typedef void *nvrtcProgram;
typedef int cublasStatus_t;
typedef void *cublasHandle_t;

// Loading: each returns NULL on success or a static/strdup'd message naming
// the missing library symbol.
const char *mempo_load_driver(const char *path);
const char *mempo_load_nvrtc(const char *path, const char *builtins);
const char *mempo_load_cublas(const char *lt, const char *path);
const char *mempo_dlerror(void);
// MEMPO_DLSYM resolves var from the library handle h, or writes "symbol NAME
// not found" into the char array buf and returns it from the caller.
#define MEMPO_DLSYM(h, var, name, buf)                                        \
	do {                                                                  \
		*(void **)(&var) = dlsym(h, name);                            \
		if (!var) {                                                   \
			snprintf(buf, sizeof buf, "symbol %s not found", name); \
			return buf;                                           \
		}                                                             \
	} while (0)
// mempo_set_ctx registers the context that every later wrapper makes current
// before its call.
void mempo_set_ctx(CUcontext c);

// Driver API.
CUresult mcuInit(unsigned flags);
CUresult mcuDriverGetVersion(int *v);
CUresult mcuDeviceGetCount(int *n);
CUresult mcuDeviceGet(CUdevice *d, int ordinal);
CUresult mcuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult mcuDeviceGetName(char *name, int len, CUdevice d);
CUresult mcuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult mcuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult mcuCtxSetCurrent(CUcontext c);
CUresult mcuMemGetInfo(size_t *free_, size_t *total);
CUresult mcuMemAlloc(CUdeviceptr *p, size_t n);
CUresult mcuMemFree(CUdeviceptr p);
int mcuHasAsyncAlloc(void);
CUresult mcuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s);
CUresult mcuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult mcuSetPoolThresholdMax(CUdevice d);
CUresult mcuMemHostAlloc(void **p, size_t n, unsigned flags);
CUresult mcuMemFreeHost(void *p);
CUresult mcuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult mcuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult mcuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult mcuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream s);
CUresult mcuModuleLoadData(CUmodule *m, const void *image);
CUresult mcuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult mcuFuncSetAttribute(CUfunction f, int attr, int value);
CUresult mcuFuncGetAttribute(int *value, int attr, CUfunction f);
CUresult mcuOccupancy(int *blocks, CUfunction f, int block, size_t shmem);
CUresult mcuLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, CUstream s, int nargs, uint64_t *args);
int mcuHasLaunchEx(void);
CUresult mcuLaunchOverlap(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shmem, CUstream s, int nargs, uint64_t *args);
CUresult mcuStreamCreate(CUstream *s, unsigned flags);
CUresult mcuStreamSynchronize(CUstream s);
CUresult mcuEventCreate(CUevent *e, unsigned flags);
CUresult mcuEventDestroy(CUevent e);
CUresult mcuEventRecord(CUevent e, CUstream s);
CUresult mcuEventSynchronize(CUevent e);
CUresult mcuEventElapsedTime(float *ms, CUevent a, CUevent b);
const char *mcuErrorName(CUresult r);

// NVRTC.
nvrtcResult mnvrtcVersion(int *major, int *minor);
nvrtcResult mnvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name);
nvrtcResult mnvrtcCompileProgram(nvrtcProgram p, int nopts, const char **opts);
nvrtcResult mnvrtcGetCUBIN(nvrtcProgram p, char **out, size_t *n);
nvrtcResult mnvrtcGetPTX(nvrtcProgram p, char **out, size_t *n);
nvrtcResult mnvrtcGetProgramLog(nvrtcProgram p, char **out);
nvrtcResult mnvrtcDestroyProgram(nvrtcProgram *p);
const char *mnvrtcErrorString(nvrtcResult r);

// cuBLAS.
cublasStatus_t mcublasCreate(cublasHandle_t *h);
cublasStatus_t mcublasSetStream(cublasHandle_t h, CUstream s);
cublasStatus_t mcublasSetMathMode(cublasHandle_t h, int mode);
cublasStatus_t mcublasGetVersion(cublasHandle_t h, int *v);
cublasStatus_t mcublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                             CUdeviceptr A, int Atype, int lda, CUdeviceptr B, int Btype, int ldb,
                             float beta, CUdeviceptr C, int Ctype, int ldc, int computeType);
cublasStatus_t mcublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                           float alpha, CUdeviceptr A, int Atype, int lda, long long sA,
                                           CUdeviceptr B, int Btype, int ldb, long long sB, float beta,
                                           CUdeviceptr C, int Ctype, int ldc, long long sC, int batch,
                                           int computeType);
// CUDA graphs (stream capture), resolved at first use from the loaded driver;
// mcuHasGraphs is 0 when the driver lacks them.
typedef void *CUgraph;
typedef void *CUgraphExec;
int mcuHasGraphs(void);
CUresult mcuStreamBeginCapture(CUstream s, int mode);
CUresult mcuStreamEndCapture(CUstream s, CUgraph *g);
CUresult mcuGraphInstantiate(CUgraphExec *e, CUgraph g);
CUresult mcuGraphLaunch(CUgraphExec e, CUstream s);
CUresult mcuGraphExecDestroy(CUgraphExec e);
CUresult mcuGraphDestroy(CUgraph g);
#endif
