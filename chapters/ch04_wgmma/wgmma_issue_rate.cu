// wgmma_issue_rate.cu - how fast can ONE warpgroup keep the tensor cores busy? A probe for Chapter 4's
// ping-pong question: rung 9 lets one consumer warpgroup issue at a time, rung 8 lets two.
// Every block (one per SM) fills its shared memory with random bf16 from `src`, then each of its WGS
// warpgroups runs `iters` k-slices of 64: per slice, for k16 = 0..3 and each of CHAINS independent
// accumulators, one m64nBNk16 wgmma (A and B from shared memory, 128B swizzle, as the ladder's tiles),
// then commit, then wgmma.wait_group LAG: the ladder's consumer loop without the TMA ring.
// Thread 0 reads clock64 around the loop (after a block barrier on both sides): SM cycles, so the
// figure is MACs per SM cycle, free of the clock the SM ran at. An SM's dense bf16 peak is 2048 MACs
// per cycle (4 tensor cores x 512; 989 TFLOPS = 2 x 2048 x 132 SMs x 1.83 GHz).
// issue_rate_fed (the second kernel) asks what the ladder's TMA ring adds: the same loop while one more
// warp streams bytes from global (L2) into a ring of shared-memory buffers with 1-D bulk copies (the TMA
// engine), as the producer of rungs 8 and 9 does: whether TMA's writes into shared memory slow wgmma's
// operand reads, and by how much at the bytes per cycle a ring must bring, is what it measures.
// Run: chapters/ch04_wgmma/issue_rate.py (measure, measure_fed), from chapters/ch04_wgmma.ipynb on the H200.
// judge: target=sm_90a features=wgmma,bulk.copy,mbarrier.wait
#include "wgmma.cuh"

#ifndef BN
#define BN 256       // wgmma N: 64, 128 or 256
#define CHAINS 1     // independent accumulators per warpgroup (CHAINS x BN / 2 <= 128 registers)
#define WGS 1        // warpgroups issuing at once
#define LAG 1        // wgmma groups left in flight at each wait (the ladder's RELEASE_LAG)
#endif
#ifndef FEED_SLOTS
#define FEED_SLOTS 4                  // issue_rate_fed: bulk copies in flight per SM (the feed's depth)
#endif
#define FEED_CHUNK 16384              // bytes per bulk copy (4 x 16 KiB in flight: a rung's ring holds 4-6 slots)
#define A_BYTES (64 * 128)            // one 64 x 64 bf16 A tile, 128-byte rows
#define B_BYTES (BN * 128)            // one BN x 64 bf16 B tile
#define SMEM_BYTES (WGS * CHAINS * A_BYTES + B_BYTES)

// The warpgroups' part: `iters` slices of 4 k16 steps x CHAINS wgmma (A and B from shared memory), then
// commit and wait_group LAG. Warpgroup w uses A tiles w * CHAINS .. w * CHAINS + CHAINS - 1.
__device__ __forceinline__ void wgmma_loop(unsigned char* base, int iters, float (&acc)[CHAINS][BN / 2]) {
  const int w = threadIdx.x / 128;
  unsigned char* sB = base + WGS * CHAINS * A_BYTES;
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
}

// Fill the operand tiles from src (random bf16); every block reads its own 16-byte vectors.
__device__ __forceinline__ void fill_operands(unsigned char* base, const uint4* src, int threads) {
  if (threadIdx.x >= threads) return;
  for (int i = threadIdx.x; i < SMEM_BYTES / 16; i += threads)
    ((uint4*)base)[i] = src[(blockIdx.x * 977 + i) % (1 << 16)];
  // RULE: shared memory written by ordinary stores and read by wgmma (the async proxy) needs
  // fence.proxy.async in each writing thread before the barrier.
  tma::fence_proxy_async();
}

__device__ __forceinline__ float acc_sum(const float (&acc)[CHAINS][BN / 2]) {
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) s += acc[c][i];
  return s;
}

extern "C" __global__ void __launch_bounds__(128 * WGS, 1)
issue_rate(const uint4* __restrict__ src, int iters, long long* cycles, float* sink) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  fill_operands(base, src, blockDim.x);
  __syncthreads();
  float acc[CHAINS][BN / 2];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[c][i] = 0.f;
  __syncthreads();
  const long long t0 = clock64();
  wgmma_loop(base, iters, acc);
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc_sum(acc);     // keeps the wgmma live
}

// 1-D bulk copy global -> this block's shared memory, completion counted in bytes on `bar` (the TMA
// engine's form without a tensor map). RULES (PTX ISA, cp.async.bulk): size and both addresses are
// multiples of 16.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(tma::smem(dst)), "l"(src), "r"(bytes), "r"(tma::smem(bar)) : "memory");
}

// The same loop with a feeder: warp WGS * 4 (after the warpgroups), its lane 0 copying `feeds` chunks of
// FEED_CHUNK bytes of src into a ring of FEED_SLOTS shared buffers, each as soon as its slot's previous
// copy has landed. Nobody reads the ring: only the writes matter. Per block: cycles[b] = the warpgroups'
// loop, feed_cycles[b] = the feeder's whole run, fed_during[b] = chunks landed while the loop ran
// (sampled by thread 0 when its loop ends).
extern "C" __global__ void __launch_bounds__(128 * WGS + 32, 1)
issue_rate_fed(const uint4* __restrict__ src, int iters, long long* cycles, float* sink, int feeds,
               long long* feed_cycles, int* fed_during) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  unsigned char* ring = base + ((SMEM_BYTES + 1023) & ~1023);
  __shared__ __align__(8) unsigned long long landed[FEED_SLOTS];
  __shared__ volatile int chunks_landed;
  fill_operands(base, src, 128 * WGS);             // the feeder warp fills nothing
  if (threadIdx.x == 0) {
    for (int s = 0; s < FEED_SLOTS; ++s) tma::mbar_init(&landed[s], 1);
    chunks_landed = 0;
    tma::fence_proxy_async();                      // the inits before the bulk copies signal them
  }
  __syncthreads();
  if (threadIdx.x >= 128 * WGS) {
    // ------------------------------------------------------------ the feeder
    if (threadIdx.x == 128 * WGS) {
      const unsigned char* from = (const unsigned char*)src;
      const long long f0 = clock64();
      for (int i = 0; i < feeds; ++i) {
        const int s = i % FEED_SLOTS, round = i / FEED_SLOTS;
        if (round > 0) {
          tma::wait(&landed[s], (round - 1) & 1);  // the slot's previous copy has landed
          chunks_landed = i - FEED_SLOTS + 1;
        }
        tma::arrive_expect_tx(&landed[s], FEED_CHUNK);
        const unsigned off = (unsigned)((blockIdx.x * 7 + i) % ((16 << 16) / FEED_CHUNK)) * FEED_CHUNK;
        bulk_load(ring + s * FEED_CHUNK, from + off, FEED_CHUNK, &landed[s]);
      }
      for (int i = max(feeds - FEED_SLOTS, 0); i < feeds; ++i)   // the last copies land before exit
        tma::wait(&landed[i % FEED_SLOTS], (i / FEED_SLOTS) & 1);
      feed_cycles[blockIdx.x] = clock64() - f0;
    }
    return;
  }
  // -------------------------------------------------------------- the warpgroups
  float acc[CHAINS][BN / 2];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[c][i] = 0.f;
  wg::named_sync(1, 128 * WGS);
  const long long t0 = clock64();
  wgmma_loop(base, iters, acc);
  wg::named_sync(1, 128 * WGS);                    // the warpgroups only: the feeder may still run
  const long long t1 = clock64();
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = t1 - t0;
    fed_during[blockIdx.x] = chunks_landed;
  }
  sink[blockIdx.x * (128 * WGS) + threadIdx.x] = acc_sum(acc);   // the warpgroups' threads only
}
