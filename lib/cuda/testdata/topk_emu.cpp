// Runs kernels/flatsearch.cu's topk_chunks on the CPU (one thread per block:
// every loop of the kernel strides by blockDim.x and its phases are separated
// by __syncthreads, so a serial run computes what the GPU does) through the
// same pass structure as flatsearch.go, on rows full of ties, and compares
// with a stable sort. Built and run by TestTopKKernelOnCPU with g++.
#include <cstring>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include <climits>
struct D3 { int x, y, z; };
D3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __shared__ static
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
void __syncthreads() {}
#include "../kernels/flatsearch.cu"
// host driver mirroring flatsearch.go's reduce
void launch(const float* s, const long long* ids, long long n, long long stride, long long base, int k, float* oS, long long* oI, long long oStride, int nq) {
  long long nch = (n + TK_CHUNK - 1) / TK_CHUNK;
  blockDim.x = 1; threadIdx.x = 0;
  for (int r = 0; r < nq; r++) for (long long c = 0; c < nch; c++) { blockIdx.x = c; blockIdx.y = r; topk_chunks(s, ids, n, stride, base, k, oS, oI, oStride); }
}
int main() {
  std::mt19937 g(1);
  for (int trial = 0; trial < 6; trial++) {
    int nq = 3; long long n = trial < 3 ? 5000 + trial * 7919 : 100000 + trial; int k = trial == 1 ? 1000 : (trial == 4 ? 100 : 10);
    std::vector<float> sc(nq * n);
    std::uniform_int_distribution<int> u(0, 2000); // many ties
    for (auto& v : sc) v = u(g) / 100.0f;
    // reduce
    std::vector<float> A, B; std::vector<long long> AI, BI;
    const float* inS = sc.data(); const long long* inI = nullptr; long long len = n; long long base = 7;
    std::vector<float> outS(nq * k); std::vector<long long> outI(nq * k);
    int which = 0; std::vector<float> T[2]; std::vector<long long> TI[2];
    while (true) {
      long long nch = (len + TK_CHUNK - 1) / TK_CHUNK;
      if (nch == 1) { launch(inS, inI, len, len, base, k, outS.data(), outI.data(), k, nq); break; }
      T[which].assign(nq * nch * k, 0); TI[which].assign(nq * nch * k, 0);
      launch(inS, inI, len, len, base, k, T[which].data(), TI[which].data(), nch * k, nq);
      inS = T[which].data(); inI = TI[which].data(); len = nch * k; base = 0; which ^= 1;
    }
    int bad = 0;
    for (int r = 0; r < nq; r++) {
      std::vector<long long> idx(n); for (long long j = 0; j < n; j++) idx[j] = j;
      std::stable_sort(idx.begin(), idx.end(), [&](long long a, long long b) { return sc[r * n + a] > sc[r * n + b]; });
      for (int j = 0; j < k; j++) { long long want = j < n ? idx[j] + 7 : LLONG_MAX; if (outI[r * k + j] != want) bad++; }
    }
    printf("n=%lld k=%d mismatches=%d\n", n, k, bad);
  }
}
