// store_negative.cu - a TMA store whose box starts at negative coordinates: what does the hardware do with it? (Run only in a child process.)
// judge: target=sm_90a features=tma.store
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/store_negative.cu').sass)"
// Run: chapters/ch02_tma/topics.py store_negative(); one block of 128 threads, a 32 x 16 float32 box.
//
// The box is filled with 1000 + its element index and stored at (X0, Y0) (innermost first).
#include "tma.cuh"

extern "C" __global__ void store_negative(const __grid_constant__ TensorMap map, int x0, int y0) {
  __shared__ alignas(128) float tile[16][32];
  for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) tile[i / 32][i % 32] = 1000.0f + i;
  tma::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::store_2d(&map, x0, y0, tile);
    tma::commit();
    tma::wait_all<0>();
  }
}
