// wgmma_issue_rate.cu - how fast can ONE warpgroup keep the tensor cores busy? A probe for Chapter 4's
// ping-pong question: rung 9 lets one consumer warpgroup issue at a time, rung 8 lets two.
// Every block (one per SM) fills its shared memory with random bf16 from `src`, then each of its WGS
// warpgroups runs `iters` k-slices of 64: per slice, for k16 = 0..3 and each of CHAINS independent
// accumulators, one m64nBNk16 wgmma (A and B from shared memory, 128B swizzle, as the ladder's tiles),
// then commit, then wgmma.wait_group LAG: the ladder's consumer loop without the TMA ring.
// Thread 0 reads clock64 around the loop (after a block barrier on both sides): SM cycles, so the
// figure is MACs per SM cycle, free of the clock the SM ran at. An SM's dense bf16 peak is 2048 MACs
// per cycle (4 tensor cores x 512; 989 TFLOPS = 2 x 2048 x 132 SMs x 1.83 GHz).
// Run: chapters/04_wgmma/explore_h200.py round3 (on the H200); it builds every configuration.
// judge: target=sm_90a features=wgmma
#include "wgmma.cuh"

#ifndef BN
#define BN 256       // wgmma N: 64, 128 or 256
#define CHAINS 1     // independent accumulators per warpgroup (CHAINS x BN / 2 <= 128 registers)
#define WGS 1        // warpgroups issuing at once
#define LAG 1        // wgmma groups left in flight at each wait (the ladder's RELEASE_LAG)
#endif
#define A_BYTES (64 * 128)            // one 64 x 64 bf16 A tile, 128-byte rows
#define B_BYTES (BN * 128)            // one BN x 64 bf16 B tile
#define SMEM_BYTES (WGS * CHAINS * A_BYTES + B_BYTES)

extern "C" __global__ void __launch_bounds__(128 * WGS, 1)
issue_rate(const uint4* __restrict__ src, int iters, long long* cycles, float* sink) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  for (int i = threadIdx.x; i < SMEM_BYTES / 16; i += blockDim.x)
    ((uint4*)base)[i] = src[(blockIdx.x * 977 + i) % (1 << 16)];
  // RULE: shared memory written by ordinary stores and read by wgmma (the async proxy) needs
  // fence.proxy.async in each writing thread before the barrier.
  tma::fence_proxy_async();
  __syncthreads();
  const int w = threadIdx.x / 128;
  unsigned char* sB = base + WGS * CHAINS * A_BYTES;
  float acc[CHAINS][BN / 2];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[c][i] = 0.f;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    wg::fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int c = 0; c < CHAINS; ++c)
        wg::mma_k16(acc[c], wg::desc_kmajor<128>(base + (w * CHAINS + c) * A_BYTES + k * 32),
                    wg::desc_kmajor<128>(sB + k * 32), 1);
    wg::commit();
    wg::wait<LAG>();
  }
  wg::wait<0>();
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) s += acc[c][i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;     // keeps the wgmma live
}
