// copy_cp_async.cu - the same copy with cp.async: 16-byte global->shared copies, STAGES tiles in flight per block.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=4
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/copy_cp_async.cu').sass)"
// Run: chapters/ch02_tma/run.py copy_speed(); persistent grid, 256 threads per block.
//
// Every thread copies its own 16-byte pieces of each tile into shared memory and later reads back
// the same pieces and stores them: no thread touches another's data, so no __syncthreads() is needed,
// only cp.async.wait_group. Compare the TMA version: one thread and a descriptor do all of this.
#ifndef STAGES
#define STAGES 4
#endif
#define THREADS 256
#define PER_THREAD 2                                   // 16-byte pieces per thread per tile
#define TILE_VEC (THREADS * PER_THREAD)                // float4 per tile: 8 KiB, STAGES * 8 KiB of static shared memory (<= 48 KiB)

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

extern "C" __global__ void __launch_bounds__(THREADS) copy_cp_async(const float4* __restrict__ src,
                                                                    float4* __restrict__ dst, long long n_vec) {
  __shared__ alignas(16) float4 ring[STAGES][PER_THREAD][THREADS];
  const long long tiles = n_vec / TILE_VEC;            // the host passes a whole number of tiles
  const int tid = threadIdx.x;

  auto issue = [&](long long tile, int slot) {
    if (tile < tiles)
      for (int k = 0; k < PER_THREAD; ++k)
        cp_async16(&ring[slot][k][tid], src + tile * TILE_VEC + k * THREADS + tid);
    cp_async_commit();                                 // commit even when empty: the group count stays in step
  };

  for (int s = 0; s < STAGES; ++s) issue(blockIdx.x + (long long)s * gridDim.x, s);
  int i = 0;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x, ++i) {
    const int s = i % STAGES;
    cp_async_wait<STAGES - 1>();                       // the oldest group, tile t, has landed
    for (int k = 0; k < PER_THREAD; ++k) dst[t * TILE_VEC + k * THREADS + tid] = ring[s][k][tid];
    issue(t + (long long)STAGES * gridDim.x, s);       // refill the slot just read (same thread)
  }
  cp_async_wait<0>();
}
