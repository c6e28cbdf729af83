// copy_plain.cu - the same copy with plain 16-byte loads and stores: the baseline with no shared memory at all.
// judge: target=sm_90a features=
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/copy_plain.cu').sass)"
// Run: chapters/ch02_tma/run.py copy_speed(); persistent grid-stride loop, UNROLL loads in flight per thread.
#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" __global__ void __launch_bounds__(256) copy_plain(const float4* __restrict__ src,
                                                             float4* __restrict__ dst, long long n_vec) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < n_vec; i += UNROLL * stride) {
    float4 v[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) v[k] = src[i + k * stride];   // all loads first: UNROLL in flight
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) dst[i + k * stride] = v[k];
  }
  for (; i < n_vec; i += stride) dst[i] = src[i];
}
