// binding.c: dlopen/dlsym of libcuda, libnvrtc and libcublas. The function
// pointer types follow the CUDA 12/13 headers; where a header maps a name to a
// versioned symbol (cuMemAlloc -> cuMemAlloc_v2) the versioned one is used.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "binding.h"

static char errbuf[512];

// The context every driver and cuBLAS call runs in. A goroutine may move to
// another OS thread between two cgo calls, so each wrapper that needs a
// context makes it current itself, inside the same C call.
static CUcontext g_ctx;
static CUresult (*p_cuCtxSetCurrent_early)(CUcontext);
#define CTX()                                                           \
	do {                                                            \
		if (g_ctx) {                                            \
			CUresult r_ = p_cuCtxSetCurrent_early(g_ctx);   \
			if (r_) return r_;                              \
		}                                                       \
	} while (0)
void mempo_set_ctx(CUcontext c) { g_ctx = c; }

const char *mempo_dlerror(void) {
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}

#define SYM(h, var, name) MEMPO_DLSYM(h, var, name, errbuf)
#define SYM2(h, var, name, alt)                                                         \
	do {                                                                             \
		*(void **)(&var) = dlsym(h, name);                                       \
		if (!var) *(void **)(&var) = dlsym(h, alt);                              \
		if (!var) {                                                              \
			snprintf(errbuf, sizeof errbuf, "symbol %s not found", name);    \
			return errbuf;                                                   \
		}                                                                        \
	} while (0)
#define OPTSYM(h, var, name) (*(void **)(&var) = dlsym(h, name))

// ---- driver ----
static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_cuMemFreeAsync)(CUdeviceptr, CUstream);
static CUresult (*p_cuDeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
static CUresult (*p_cuMemPoolSetAttribute)(CUmemoryPool, int, void *);
static CUresult (*p_cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuFuncSetAttribute)(CUfunction, int, int);
static CUresult (*p_cuFuncGetAttribute)(int *, int, CUfunction);
static CUresult (*p_cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void **, void **);
/* cuLaunchKernelEx's configuration and one launch attribute, as cuda.h lays
   them out (CUDA 12+). */
typedef struct {
	unsigned id;
	char pad[4];
	union {
		char raw[64];
		int i;
	} value;
} mcuLaunchAttribute;
typedef struct {
	unsigned gx, gy, gz, bx, by, bz, shmem;
	CUstream stream;
	mcuLaunchAttribute *attrs;
	unsigned nattrs;
} mcuLaunchConfig;
static CUresult (*p_cuLaunchKernelEx)(const mcuLaunchConfig *, CUfunction, void **, void **);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);

const char *mempo_load_driver(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(errbuf, sizeof errbuf, "%s", mempo_dlerror());
		return errbuf;
	}
	SYM(h, p_cuInit, "cuInit");
	SYM(h, p_cuDriverGetVersion, "cuDriverGetVersion");
	SYM(h, p_cuDeviceGetCount, "cuDeviceGetCount");
	SYM(h, p_cuDeviceGet, "cuDeviceGet");
	SYM(h, p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(h, p_cuDeviceGetName, "cuDeviceGetName");
	SYM(h, p_cuDeviceTotalMem, "cuDeviceTotalMem_v2");
	SYM(h, p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(h, p_cuCtxSetCurrent, "cuCtxSetCurrent");
	p_cuCtxSetCurrent_early = p_cuCtxSetCurrent;
	SYM(h, p_cuMemGetInfo, "cuMemGetInfo_v2");
	SYM(h, p_cuMemAlloc, "cuMemAlloc_v2");
	SYM(h, p_cuMemFree, "cuMemFree_v2");
	OPTSYM(h, p_cuMemAllocAsync, "cuMemAllocAsync");
	OPTSYM(h, p_cuMemFreeAsync, "cuMemFreeAsync");
	OPTSYM(h, p_cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
	OPTSYM(h, p_cuMemPoolSetAttribute, "cuMemPoolSetAttribute");
	SYM(h, p_cuMemHostAlloc, "cuMemHostAlloc");
	SYM(h, p_cuMemFreeHost, "cuMemFreeHost");
	SYM(h, p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(h, p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	SYM(h, p_cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
	SYM(h, p_cuMemsetD32Async, "cuMemsetD32Async");
	SYM(h, p_cuModuleLoadData, "cuModuleLoadData");
	SYM(h, p_cuModuleGetFunction, "cuModuleGetFunction");
	SYM(h, p_cuFuncSetAttribute, "cuFuncSetAttribute");
	SYM(h, p_cuFuncGetAttribute, "cuFuncGetAttribute");
	OPTSYM(h, p_cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
	SYM(h, p_cuLaunchKernel, "cuLaunchKernel");
	OPTSYM(h, p_cuLaunchKernelEx, "cuLaunchKernelEx");
	SYM(h, p_cuStreamCreate, "cuStreamCreate");
	SYM(h, p_cuStreamSynchronize, "cuStreamSynchronize");
	SYM(h, p_cuEventCreate, "cuEventCreate");
	SYM(h, p_cuEventDestroy, "cuEventDestroy_v2");
	SYM(h, p_cuEventRecord, "cuEventRecord");
	SYM(h, p_cuEventSynchronize, "cuEventSynchronize");
	SYM2(h, p_cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
	SYM(h, p_cuGetErrorName, "cuGetErrorName");
	return NULL;
}

CUresult mcuInit(unsigned f) { return p_cuInit(f); }
CUresult mcuDriverGetVersion(int *v) { return p_cuDriverGetVersion(v); }
CUresult mcuDeviceGetCount(int *n) { return p_cuDeviceGetCount(n); }
CUresult mcuDeviceGet(CUdevice *d, int o) { return p_cuDeviceGet(d, o); }
CUresult mcuDeviceGetAttribute(int *v, int a, CUdevice d) { return p_cuDeviceGetAttribute(v, a, d); }
CUresult mcuDeviceGetName(char *n, int l, CUdevice d) { return p_cuDeviceGetName(n, l, d); }
CUresult mcuDeviceTotalMem(size_t *b, CUdevice d) { return p_cuDeviceTotalMem(b, d); }
CUresult mcuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
CUresult mcuCtxSetCurrent(CUcontext c) { return p_cuCtxSetCurrent(c); }
CUresult mcuMemGetInfo(size_t *f, size_t *t) {
	CTX();
	return p_cuMemGetInfo(f, t);
}
CUresult mcuMemAlloc(CUdeviceptr *p, size_t n) {
	CTX();
	return p_cuMemAlloc(p, n);
}
CUresult mcuMemFree(CUdeviceptr p) {
	CTX();
	return p_cuMemFree(p);
}
int mcuHasAsyncAlloc(void) { return p_cuMemAllocAsync && p_cuMemFreeAsync; }
CUresult mcuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
	CTX();
	return p_cuMemAllocAsync(p, n, s);
}
CUresult mcuMemFreeAsync(CUdeviceptr p, CUstream s) {
	CTX();
	return p_cuMemFreeAsync(p, s);
}
CUresult mcuSetPoolThresholdMax(CUdevice d) {
	CTX();
	if (!p_cuDeviceGetDefaultMemPool || !p_cuMemPoolSetAttribute) return 0;
	CUmemoryPool pool;
	CUresult r = p_cuDeviceGetDefaultMemPool(&pool, d);
	if (r) return r;
	uint64_t v = ~(uint64_t)0;
	return p_cuMemPoolSetAttribute(pool, 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */, &v);
}
CUresult mcuMemHostAlloc(void **p, size_t n, unsigned f) {
	CTX();
	return p_cuMemHostAlloc(p, n, f);
}
CUresult mcuMemFreeHost(void *p) {
	CTX();
	return p_cuMemFreeHost(p);
}
CUresult mcuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st) {
	CTX();
	return p_cuMemcpyHtoDAsync(d, s, n, st);
}
CUresult mcuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, CUstream st) {
	CTX();
	return p_cuMemcpyDtoHAsync(d, s, n, st);
}
CUresult mcuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
	CTX();
	return p_cuMemcpyDtoDAsync(d, s, n, st);
}
CUresult mcuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream s) {
	CTX();
	return p_cuMemsetD32Async(p, v, n, s);
}
CUresult mcuModuleLoadData(CUmodule *m, const void *img) {
	CTX();
	return p_cuModuleLoadData(m, img);
}
CUresult mcuModuleGetFunction(CUfunction *f, CUmodule m, const char *n) {
	CTX();
	return p_cuModuleGetFunction(f, m, n);
}
CUresult mcuFuncSetAttribute(CUfunction f, int a, int v) {
	CTX();
	return p_cuFuncSetAttribute(f, a, v);
}
CUresult mcuFuncGetAttribute(int *v, int a, CUfunction f) {
	CTX();
	return p_cuFuncGetAttribute(v, a, f);
}
CUresult mcuOccupancy(int *blocks, CUfunction f, int block, size_t shmem) {
	CTX();
	if (!p_cuOccupancyMaxActiveBlocksPerMultiprocessor) return 500; /* CUDA_ERROR_NOT_FOUND */
	return p_cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block, shmem);
}

// mcuLaunch passes each kernel argument from a 64-bit slot: the driver copies
// sizeof(parameter) bytes from the slot's address, so 32-bit values sit in the
// low half (little-endian).
CUresult mcuLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, CUstream s, int nargs, uint64_t *args) {
	CTX();
	void *params[32];
	if (nargs > 32) return 1; /* CUDA_ERROR_INVALID_VALUE */
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	return p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}
int mcuHasLaunchEx(void) { return p_cuLaunchKernelEx != NULL; }
/* mcuLaunchOverlap is mcuLaunch with programmatic stream serialization
   (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6): the grid may
   start before the previous kernel in the stream has finished, once every
   block of that kernel has run griddepcontrol.launch_dependents (or exited);
   the kernel waits for it with griddepcontrol.wait. */
CUresult mcuLaunchOverlap(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shmem, CUstream s, int nargs, uint64_t *args) {
	CTX();
	void *params[32];
	if (nargs > 32 || !p_cuLaunchKernelEx) return 1; /* CUDA_ERROR_INVALID_VALUE */
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	mcuLaunchAttribute a;
	memset(&a, 0, sizeof a);
	a.id = 6;
	a.value.i = 1;
	mcuLaunchConfig c = {gx, gy, gz, bx, by, bz, shmem, s, &a, 1};
	return p_cuLaunchKernelEx(&c, f, params, NULL);
}
CUresult mcuStreamCreate(CUstream *s, unsigned f) {
	CTX();
	return p_cuStreamCreate(s, f);
}
CUresult mcuStreamSynchronize(CUstream s) {
	CTX();
	return p_cuStreamSynchronize(s);
}
CUresult mcuEventCreate(CUevent *e, unsigned f) {
	CTX();
	return p_cuEventCreate(e, f);
}
CUresult mcuEventDestroy(CUevent e) {
	CTX();
	return p_cuEventDestroy(e);
}
CUresult mcuEventRecord(CUevent e, CUstream s) {
	CTX();
	return p_cuEventRecord(e, s);
}
CUresult mcuEventSynchronize(CUevent e) {
	CTX();
	return p_cuEventSynchronize(e);
}
CUresult mcuEventElapsedTime(float *ms, CUevent a, CUevent b) {
	CTX();
	return p_cuEventElapsedTime(ms, a, b);
}
const char *mcuErrorName(CUresult r) {
	const char *s = NULL;
	if (!p_cuGetErrorName || p_cuGetErrorName(r, &s) != 0 || !s) return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}

// ---- NVRTC ----
static nvrtcResult (*p_nvrtcVersion)(int *, int *);
static nvrtcResult (*p_nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                           const char *const *, const char *const *);
static nvrtcResult (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
static nvrtcResult (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
static nvrtcResult (*p_nvrtcGetCUBIN)(nvrtcProgram, char *);
static nvrtcResult (*p_nvrtcGetPTXSize)(nvrtcProgram, size_t *);
static nvrtcResult (*p_nvrtcGetPTX)(nvrtcProgram, char *);
static nvrtcResult (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
static nvrtcResult (*p_nvrtcGetProgramLog)(nvrtcProgram, char *);
static nvrtcResult (*p_nvrtcDestroyProgram)(nvrtcProgram *);
static const char *(*p_nvrtcGetErrorString)(nvrtcResult);

const char *mempo_load_nvrtc(const char *path, const char *builtins) {
	// Loading the builtins library first (globally) lets libnvrtc find it
	// by its soname wherever it lives.
	if (builtins && builtins[0]) dlopen(builtins, RTLD_NOW | RTLD_GLOBAL);
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(errbuf, sizeof errbuf, "%s", mempo_dlerror());
		return errbuf;
	}
	SYM(h, p_nvrtcVersion, "nvrtcVersion");
	SYM(h, p_nvrtcCreateProgram, "nvrtcCreateProgram");
	SYM(h, p_nvrtcCompileProgram, "nvrtcCompileProgram");
	SYM(h, p_nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
	SYM(h, p_nvrtcGetCUBIN, "nvrtcGetCUBIN");
	SYM(h, p_nvrtcGetPTXSize, "nvrtcGetPTXSize");
	SYM(h, p_nvrtcGetPTX, "nvrtcGetPTX");
	SYM(h, p_nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
	SYM(h, p_nvrtcGetProgramLog, "nvrtcGetProgramLog");
	SYM(h, p_nvrtcDestroyProgram, "nvrtcDestroyProgram");
	SYM(h, p_nvrtcGetErrorString, "nvrtcGetErrorString");
	return NULL;
}

nvrtcResult mnvrtcVersion(int *a, int *b) { return p_nvrtcVersion(a, b); }
nvrtcResult mnvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name) {
	return p_nvrtcCreateProgram(p, src, name, 0, NULL, NULL);
}
nvrtcResult mnvrtcCompileProgram(nvrtcProgram p, int n, const char **o) {
	return p_nvrtcCompileProgram(p, n, (const char *const *)o);
}
// The outputs are malloc'd; the caller frees them.
nvrtcResult mnvrtcGetCUBIN(nvrtcProgram p, char **out, size_t *n) {
	nvrtcResult r = p_nvrtcGetCUBINSize(p, n);
	if (r) return r;
	*out = malloc(*n ? *n : 1);
	return p_nvrtcGetCUBIN(p, *out);
}
nvrtcResult mnvrtcGetPTX(nvrtcProgram p, char **out, size_t *n) {
	nvrtcResult r = p_nvrtcGetPTXSize(p, n);
	if (r) return r;
	*out = malloc(*n ? *n : 1);
	return p_nvrtcGetPTX(p, *out);
}
nvrtcResult mnvrtcGetProgramLog(nvrtcProgram p, char **out) {
	size_t n = 0;
	nvrtcResult r = p_nvrtcGetProgramLogSize(p, &n);
	if (r) return r;
	*out = malloc(n + 1);
	(*out)[n] = 0;
	return p_nvrtcGetProgramLog(p, *out);
}
nvrtcResult mnvrtcDestroyProgram(nvrtcProgram *p) { return p_nvrtcDestroyProgram(p); }
const char *mnvrtcErrorString(nvrtcResult r) { return p_nvrtcGetErrorString ? p_nvrtcGetErrorString(r) : "NVRTC_ERROR"; }

// ---- cuBLAS ----
static cublasStatus_t (*p_cublasCreate)(cublasHandle_t *);
static cublasStatus_t (*p_cublasSetStream)(cublasHandle_t, CUstream);
static cublasStatus_t (*p_cublasSetMathMode)(cublasHandle_t, int);
static cublasStatus_t (*p_cublasGetVersion)(cublasHandle_t, int *);
static cublasStatus_t (*p_cublasGemmEx)(cublasHandle_t, int, int, int, int, int, const void *,
                                        const void *, int, int, const void *, int, int, const void *,
                                        void *, int, int, int, int);
static cublasStatus_t (*p_cublasGemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int,
                                                      const void *, const void *, int, int, long long,
                                                      const void *, int, int, long long, const void *,
                                                      void *, int, int, long long, int, int, int);

const char *mempo_load_cublas(const char *lt, const char *path) {
	if (lt && lt[0]) dlopen(lt, RTLD_NOW | RTLD_GLOBAL);
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(errbuf, sizeof errbuf, "%s", mempo_dlerror());
		return errbuf;
	}
	SYM(h, p_cublasCreate, "cublasCreate_v2");
	SYM(h, p_cublasSetStream, "cublasSetStream_v2");
	SYM(h, p_cublasSetMathMode, "cublasSetMathMode");
	SYM(h, p_cublasGetVersion, "cublasGetVersion_v2");
	SYM(h, p_cublasGemmEx, "cublasGemmEx");
	SYM(h, p_cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
	return NULL;
}

#define CTXB()                                                          \
	do {                                                            \
		if (g_ctx && p_cuCtxSetCurrent_early(g_ctx)) return 14; \
	} while (0)
cublasStatus_t mcublasCreate(cublasHandle_t *h) {
	CTXB();
	return p_cublasCreate(h);
}
cublasStatus_t mcublasSetStream(cublasHandle_t h, CUstream s) { return p_cublasSetStream(h, s); }
cublasStatus_t mcublasSetMathMode(cublasHandle_t h, int m) { return p_cublasSetMathMode(h, m); }
cublasStatus_t mcublasGetVersion(cublasHandle_t h, int *v) { return p_cublasGetVersion(h, v); }
cublasStatus_t mcublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                             CUdeviceptr A, int At, int lda, CUdeviceptr B, int Bt, int ldb, float beta,
                             CUdeviceptr C, int Ct, int ldc, int ct) {
	CTXB();
	return p_cublasGemmEx(h, ta, tb, m, n, k, &alpha, (const void *)A, At, lda, (const void *)B, Bt, ldb,
	                      &beta, (void *)C, Ct, ldc, ct, -1 /* CUBLAS_GEMM_DEFAULT */);
}
cublasStatus_t mcublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                           float alpha, CUdeviceptr A, int At, int lda, long long sA,
                                           CUdeviceptr B, int Bt, int ldb, long long sB, float beta,
                                           CUdeviceptr C, int Ct, int ldc, long long sC, int batch, int ct) {
	CTXB();
	return p_cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, (const void *)A, At, lda, sA,
	                                    (const void *)B, Bt, ldb, sB, &beta, (void *)C, Ct, ldc, sC, batch,
	                                    ct, -1);
}

// ---- CUDA graphs ----
// Resolved from the driver already loaded (RTLD_GLOBAL) at first use, so
// that a driver without them still loads.
static CUresult (*p_cuStreamBeginCapture)(CUstream, int);
static CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph *);
static CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream);
static CUresult (*p_cuGraphExecDestroy)(CUgraphExec);
static CUresult (*p_cuGraphDestroy)(CUgraph);
static int g_graphs = -1;

int mcuHasGraphs(void) {
	if (g_graphs < 0) {
		void *h = dlopen(NULL, RTLD_NOW); // searches the libraries loaded RTLD_GLOBAL
		OPTSYM(h, p_cuStreamBeginCapture, "cuStreamBeginCapture_v2");
		OPTSYM(h, p_cuStreamEndCapture, "cuStreamEndCapture");
		OPTSYM(h, p_cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
		OPTSYM(h, p_cuGraphLaunch, "cuGraphLaunch");
		OPTSYM(h, p_cuGraphExecDestroy, "cuGraphExecDestroy");
		OPTSYM(h, p_cuGraphDestroy, "cuGraphDestroy");
		g_graphs = p_cuStreamBeginCapture && p_cuStreamEndCapture && p_cuGraphInstantiateWithFlags && p_cuGraphLaunch &&
		           p_cuGraphExecDestroy && p_cuGraphDestroy;
	}
	return g_graphs;
}
CUresult mcuStreamBeginCapture(CUstream s, int mode) {
	CTX();
	return p_cuStreamBeginCapture(s, mode);
}
CUresult mcuStreamEndCapture(CUstream s, CUgraph *g) {
	CTX();
	return p_cuStreamEndCapture(s, g);
}
CUresult mcuGraphInstantiate(CUgraphExec *e, CUgraph g) {
	CTX();
	return p_cuGraphInstantiateWithFlags(e, g, 0);
}
CUresult mcuGraphLaunch(CUgraphExec e, CUstream s) {
	CTX();
	return p_cuGraphLaunch(e, s);
}
CUresult mcuGraphExecDestroy(CUgraphExec e) {
	CTX();
	return p_cuGraphExecDestroy(e);
}
CUresult mcuGraphDestroy(CUgraph g) {
	CTX();
	return p_cuGraphDestroy(g);
}
