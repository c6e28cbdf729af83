// prefetch_map.cu - what prefetch.tensormap buys: the latency of a block's first TMA load with and without the descriptor prefetched.
// judge: target=sm_90a features=tma.load,mbarrier.wait defines=PREFETCH=1
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/prefetch_map.cu').sass)"
// Run: chapters/ch02_tma/topics.py prefetch_map(); one block of 32 threads per box, a fresh map per launch.
//
// The TMA unit reads the 128-byte descriptor from memory before it can move a box, and keeps
// recent descriptors in a cache. prefetch.tensormap asks for the descriptor early. Each block: lane 0
// optionally prefetches, then every block pauses PAUSE_NS (the same with or without prefetch),
// then times expect_tx + load + wait with clock64. Out: one latency (cycles) per block.
#include "tma.cuh"

#ifndef PREFETCH
#define PREFETCH 1
#endif
#ifndef PAUSE_NS
#define PAUSE_NS 2000
#endif

extern "C" __global__ void __launch_bounds__(32) prefetch_map(const __grid_constant__ TensorMap map,
                                                              long long* __restrict__ cycles, float* __restrict__ sink) {
  __shared__ alignas(128) float tile[16][32];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) {
#if PREFETCH
    tma::prefetch_map(&map);
#endif
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < PAUSE_NS);
    const long long c0 = clock64();
    tma::arrive_expect_tx(&bar, sizeof(tile));
    tma::load_2d(tile, &map, 0, 16 * blockIdx.x, &bar);
    tma::wait(&bar, 0);
    cycles[blockIdx.x] = clock64() - c0;
    sink[blockIdx.x] = tile[0][0] + tile[15][31];
  }
}
