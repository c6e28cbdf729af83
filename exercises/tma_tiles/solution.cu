// tma_tiles.cu - y = 2*x + 1 over a 2-D float32 tensor, one 32x64 tile per block, moved by TMA both ways.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier
// Check: python practice/judge.py check tma_tiles   (the judge builds the two tensor maps and launches
//        tma_affine<<<(ceil(cols/64), ceil(rows/32)), 128>>>(in_map, out_map))
//
// Your task: the body of tma_affine between the markers. One thread issues the load, an mbarrier
// counts its bytes, every thread computes in shared memory, one thread issues the store.
// Tiles at the right and bottom edges stick out of the tensor: TMA zero-fills what a load reads
// outside it and drops what a store writes outside it, so the kernel needs no bounds checks.

#ifndef BOX_ROWS
#define BOX_ROWS 32          // box dims: the judge encodes the tensor maps with the same numbers
#endif
#ifndef BOX_COLS
#define BOX_COLS 64          // 64 floats = 256 B: a multiple of 16 B, at most 256 elements
#endif
#ifndef THREADS
#define THREADS 128
#endif

// TensorMap, the mbarrier and the TMA wrappers come from the course's header (judge/include/tma.cuh):
// tma::mbar_init, tma::arrive_expect_tx, tma::wait, tma::load_2d, tma::store_2d, tma::commit,
// tma::wait_read<0>, tma::fence_proxy_async. Read it: each states the rule it serves.
#include "tma.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
tma_affine(const __grid_constant__ TensorMap in_map, const __grid_constant__ TensorMap out_map) {
  __shared__ alignas(128) float tile[BOX_ROWS * BOX_COLS];     // TMA wants its shared box 128-byte aligned
  __shared__ alignas(8) unsigned long long bar;
  const int col0 = blockIdx.x * BOX_COLS;
  const int row0 = blockIdx.y * BOX_ROWS;

  // BEGIN SOLUTION
  //> // 1. one thread initializes the mbarrier (one arrival per phase) and makes it visible to TMA
  //> // 2. one thread: arrive.expect_tx with the tile's bytes, then the TMA load
  //> // 3. everyone waits for phase 0 of the barrier
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();            // the initialized barrier must be visible to the async proxy
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The whole box counts, also the part outside the tensor that TMA zero-fills: expecting fewer
    // bytes completes the phase early, expecting more never completes it (the kernel hangs).
    tma::arrive_expect_tx(&bar, BOX_ROWS * BOX_COLS * sizeof(float));
    tma::load_2d(tile, &in_map, col0, row0, &bar);
  }
  tma::wait(&bar, 0);                    // phase 0 completes when the arrival and all bytes are in
  // END SOLUTION

  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += THREADS)
    tile[i] = 2.0f * tile[i] + 1.0f;

  // BEGIN SOLUTION
  //> // 4. make every thread's shared-memory writes visible to TMA, then one thread stores the tile
  //> //    and waits until TMA has read it (the block's shared memory is freed when it exits)
  tma::fence_proxy_async();              // each writer fences its own writes, before the barrier
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::store_2d(&out_map, col0, row0, tile);
    tma::commit();
    tma::wait_read<0>();                 // shared memory may be freed (the block may exit) after this
  }
  // END SOLUTION
}
