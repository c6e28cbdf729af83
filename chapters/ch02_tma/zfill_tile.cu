// zfill_tile.cu - chapter 1's cp.async meets chapter 2's mbarrier: a 32x32 float32 tile copied with zero-fill past the matrix edge (src-size), its completion signalled on an mbarrier.
// judge: target=sm_90a features=cp.async,mbarrier.wait
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/zfill_tile.cu').sass)"
// Run: chapters/ch02_tma/topics.py zfill_tile(); grid = (ceil(cols / 32), ceil(rows / 32)), 256 threads.
//
// Each thread copies one 16-byte chunk (4 floats) of the tile with cp.async and a src-size:
// 16 inside the matrix, fewer bytes at the right edge, 0 past it (the chunk becomes zeros).
// Instead of commit_group / wait_group, cp.async.mbarrier.arrive.noinc makes the copies arrive on
// an mbarrier when they land: the mechanism TMA uses, with chapter 1's copy.
#include "bulk.cuh"

#define TILE 32

extern "C" __global__ void __launch_bounds__(256) zfill_tile(const float* __restrict__ x, int rows, int cols,
                                                             int ld, float* __restrict__ tiles) {
  __shared__ alignas(128) float t[TILE][TILE];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) tma::mbar_init(&bar, blockDim.x);  // one (async) arrival per thread
  __syncthreads();                                          // cp.async is a generic-proxy copy: no proxy fence

  const int r = threadIdx.x / 8, c4 = (threadIdx.x % 8) * 4;   // this thread's row and first column
  const int gr = blockIdx.y * TILE + r, gc = blockIdx.x * TILE + c4;
  const int left = cols - gc;                                  // floats of this row left from gc
  const unsigned bytes = (gr < rows && left > 0) ? 4u * min(left, 4) : 0u;
  // With src-size 0 nothing is read; keep the address inside the allocation all the same.
  const float* src = bytes ? x + (size_t)gr * ld + gc : x;
  bulk::cp_async_16_zfill(&t[r][c4], src, bytes);
  bulk::cp_async_arrive_noinc(&bar);        // arrives once this thread's copies above have landed
  tma::wait(&bar, 0);                       // all 256 arrivals: the whole tile, zeros included

  // Write the whole tile out, zeros included, into a (gridDim.y * 32) x (gridDim.x * 32) array.
  const size_t ldt = (size_t)gridDim.x * TILE;
  for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) {
    const int rr = i / TILE, cc = i % TILE;
    tiles[(size_t)(blockIdx.y * TILE + rr) * ldt + blockIdx.x * TILE + cc] = t[rr][cc];
  }
}
