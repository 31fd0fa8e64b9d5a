// C declarations of the project's shim over the FAISS C++ API (shim.cpp).
#ifndef MEMPO_FAISS_SHIM_H
#define MEMPO_FAISS_SHIM_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef void* mfaiss_index;

// Every function that can fail returns NULL on success or a malloc'd error
// message the caller frees.
char* mfaiss_index_factory(int d, const char* description, int metric, mfaiss_index* out);
char* mfaiss_read_index(const char* path, mfaiss_index* out);
char* mfaiss_write_index(mfaiss_index idx, const char* path);
char* mfaiss_train(mfaiss_index idx, int64_t n, const float* x);
char* mfaiss_add(mfaiss_index idx, int64_t n, const float* x);
char* mfaiss_search(mfaiss_index idx, int64_t n, const float* x, int64_t k, float* distances, int64_t* labels);
char* mfaiss_set_param(mfaiss_index idx, const char* name, double value);
int64_t mfaiss_ntotal(mfaiss_index idx);
int mfaiss_d(mfaiss_index idx);
int mfaiss_is_trained(mfaiss_index idx);
int mfaiss_metric(mfaiss_index idx);
void mfaiss_free(mfaiss_index idx);
void mfaiss_set_threads(int n);

// cblas_sgemm-based exact inner-product top-k (reference for benchmarks and tests).
void mfaiss_sgemm_ip(int64_t nq, int64_t nb, int d, const float* q, const float* b, float* out);

#ifdef __cplusplus
}
#endif
#endif
