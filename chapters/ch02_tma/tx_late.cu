// tx_late.cu - the bytes may land before they are announced: a TMA load issued BEFORE its arrive.expect_tx, with a pause between, still completes the phase correctly.
// judge: target=sm_90a features=tma.load,mbarrier.expect_tx,mbarrier.wait
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/tx_late.cu').sass)"
// Run: chapters/ch02_tma/topics.py tx_late(); a 1024x2048 int32 matrix, one 16x32 box per block, 128 threads.
//
// The rule (PTX ISA, mbarrier: "Contents of the mbarrier object" and "expect-tx operation"): a phase
// completes when its pending arrivals AND its tx-count are both zero. The tx-count may go negative
// (its range is -(2^20-1) .. 2^20-1): bytes that land first count down from zero. What must come
// first is the expect-tx before the ARRIVAL that could complete the phase. Here the barrier expects one
// arrival, and that arrival is the arrive.expect_tx itself, so the phase cannot complete early.
#include "tma.cuh"

#ifndef PAUSE_NS
#define PAUSE_NS 4000   // long enough for the 2 KiB box to have landed before the announcement
#endif

extern "C" __global__ void tx_late(const __grid_constant__ TensorMap map, int* __restrict__ out) {
  __shared__ alignas(128) int tile[16][32];
  __shared__ alignas(8) unsigned long long bar;
  const int x = blockIdx.x * 32, y = blockIdx.y * 16;
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::load_2d(tile, &map, x, y, &bar);     // complete_tx of 2048 bytes, nothing announced yet
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < PAUSE_NS);
    tma::arrive_expect_tx(&bar, sizeof(tile)); // tx-count: -2048 (if landed) + 2048 = 0, arrivals 0
  }
  tma::wait(&bar, 0);
  const int cols = gridDim.x * 32;
  for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x)
    out[(size_t)(y + i / 32) * cols + x + i % 32] = tile[i / 32][i % 32] + 1;
}
