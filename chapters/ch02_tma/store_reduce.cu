// store_reduce.cu - TMA store and TMA reduce-add: y = 2x tile by tile, and acc += x from REPEAT blocks per tile.
// judge: target=sm_90a features=tma.load,tma.store,tma.reduce,mbarrier.expect_tx,mbarrier.wait,proxy.fence
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/store_reduce.cu').sass)"
// Run: chapters/ch02_tma/run.py store_reduce(); grid (cols/BOX_W, rows/BOX_H, REPEAT).
//
// Blocks with the same (x, y) and different blockIdx.z all reduce into the same box of acc:
// the TMA unit performs each element's read-add-write, so no two of them lose an update.
#include "tma.cuh"

#ifndef BOX_W
#define BOX_W 32
#endif
#ifndef BOX_H
#define BOX_H 16
#endif

extern "C" __global__ void store_reduce(const __grid_constant__ TensorMap x_map,
                                        const __grid_constant__ TensorMap y_map,
                                        const __grid_constant__ TensorMap acc_map) {
  __shared__ alignas(128) float tile[BOX_H][BOX_W];
  __shared__ alignas(128) float twice[BOX_H][BOX_W];
  __shared__ alignas(8) unsigned long long bar;
  const int x = blockIdx.x * BOX_W, y = blockIdx.y * BOX_H;

  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::prefetch_map(&acc_map);
    tma::arrive_expect_tx(&bar, sizeof(tile));
    tma::load_2d(tile, &x_map, x, y, &bar);
  }
  tma::wait(&bar, 0);

  for (int i = threadIdx.x; i < BOX_H * BOX_W; i += blockDim.x)
    twice[i / BOX_W][i % BOX_W] = 2.0f * tile[i / BOX_W][i % BOX_W];
  tma::fence_proxy_async();         // generic writes to `twice`, before the TMA reads it
  __syncthreads();
  if (threadIdx.x == 0) {
    if (blockIdx.z == 0) tma::store_2d(&y_map, x, y, twice);   // one writer per box of y
    tma::reduce_add_2d(&acc_map, x, y, tile);                  // every block adds its x tile into acc
    tma::commit();                                             // one group holds both
    tma::wait_read<0>();
  }
}
