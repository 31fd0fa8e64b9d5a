// lora.cu: the dropout of lib/model's LoRA adapters. The mask is
// counter-based: element i of a call with seed s is kept when the top 24
// bits of splitmix64(s + i), as a fraction of 2^24, are ≥ p, exactly as
// lib/model's dropoutKeep computes it on the CPU.

#define GRID_STRIDE(i, n) \
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

// dropout_f32: dst[i] = keep(i) ? src[i]·inv : 0 (dst may be src).
extern "C" __global__ void dropout_f32(float *dst, const float *src, long long n, float p, float inv, unsigned long long seed) {
	GRID_STRIDE(i, n) {
		float u = (float)(splitmix64(seed + (unsigned long long)i) >> 40) * (1.0f / 16777216.0f);
		dst[i] = u >= p ? src[i] * inv : 0.0f;
	}
}
