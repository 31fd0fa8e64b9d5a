// Shim over the FAISS C++ API: Debian's libfaiss.a ships the C API headers but
// not their objects, so the few calls mempo needs are wrapped here.
#include "shim.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <faiss/AutoTune.h>
#include <faiss/Index.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <omp.h>

extern "C" {
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
}

static char* dup_msg(const char* s) {
    size_t n = strlen(s);
    char* m = (char*)malloc(n + 1);
    memcpy(m, s, n + 1);
    return m;
}

#define GUARD(body)                                   \
    try {                                             \
        body;                                         \
    } catch (const std::exception& e) {               \
        return dup_msg(e.what());                     \
    } catch (...) {                                   \
        return dup_msg("unknown C++ exception");      \
    }                                                 \
    return nullptr;

static faiss::Index* IX(mfaiss_index p) { return static_cast<faiss::Index*>(p); }

extern "C" {

char* mfaiss_index_factory(int d, const char* description, int metric, mfaiss_index* out) {
    GUARD(*out = faiss::index_factory(d, description, static_cast<faiss::MetricType>(metric)));
}

char* mfaiss_read_index(const char* path, mfaiss_index* out) { GUARD(*out = faiss::read_index(path, 0)); }

char* mfaiss_write_index(mfaiss_index idx, const char* path) { GUARD(faiss::write_index(IX(idx), path)); }

char* mfaiss_train(mfaiss_index idx, int64_t n, const float* x) { GUARD(IX(idx)->train(n, x)); }

char* mfaiss_add(mfaiss_index idx, int64_t n, const float* x) { GUARD(IX(idx)->add(n, x)); }

char* mfaiss_search(mfaiss_index idx, int64_t n, const float* x, int64_t k, float* distances, int64_t* labels) {
    GUARD(IX(idx)->search(n, x, k, distances, labels));
}

char* mfaiss_set_param(mfaiss_index idx, const char* name, double value) {
    GUARD(faiss::ParameterSpace().set_index_parameter(IX(idx), name, value));
}

int64_t mfaiss_ntotal(mfaiss_index idx) { return IX(idx)->ntotal; }
int mfaiss_d(mfaiss_index idx) { return IX(idx)->d; }
int mfaiss_is_trained(mfaiss_index idx) { return IX(idx)->is_trained ? 1 : 0; }
int mfaiss_metric(mfaiss_index idx) { return static_cast<int>(IX(idx)->metric_type); }
void mfaiss_free(mfaiss_index idx) { delete IX(idx); }
void mfaiss_set_threads(int n) { omp_set_num_threads(n); }

void mfaiss_sgemm_ip(int64_t nq, int64_t nb, int d, const float* q, const float* b, float* out) {
    // out[nq, nb] = q[nq, d] · b[nb, d]^T  (row-major: 101, no-trans 111, trans 112)
    cblas_sgemm(101, 111, 112, (int)nq, (int)nb, d, 1.0f, q, d, b, d, 0.0f, out, (int)nb);
}
}
