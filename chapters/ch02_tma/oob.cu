// oob.cu - boxes that hang over the edge of a 37x70 float32 matrix: fill on loads, clipping on stores.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier.expect_tx,mbarrier.wait,proxy.fence
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/oob.cu').sass)"
// Run: chapters/ch02_tma/run.py oob("zero") / oob("nan").
//
// Each block loads box (bx, by) of the input. The box arrives whole: elements past the tensor's
// edge are filled by the TMA (zero, or NaN with oob_fill="nan") and COUNT toward the expect_tx bytes.
// The block writes the raw box to `tiles` with ordinary stores (so the host sees the fill), adds one,
// and TMA-stores the box to the output, which is clipped at the tensor's edge: rows past it are not
// written, and in the innermost dimension the clip is to whole 16-byte chunks (measured on the H200:
// with 70-float rows the store also wrote columns 70-71, the rest of the row's last chunk).
#include "tma.cuh"

#ifndef BOX_W
#define BOX_W 32
#endif
#ifndef BOX_H
#define BOX_H 16
#endif

extern "C" __global__ void oob_tiles(const __grid_constant__ TensorMap in_map,
                                     const __grid_constant__ TensorMap out_map,
                                     float* tiles, int tiles_ld) {
  __shared__ alignas(128) float tile[BOX_H][BOX_W];
  __shared__ alignas(8) unsigned long long bar;
  const int x = blockIdx.x * BOX_W, y = blockIdx.y * BOX_H;

  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, sizeof(tile));   // the whole box, even when part of it is outside
    tma::load_2d(tile, &in_map, x, y, &bar);
  }
  tma::wait(&bar, 0);

  for (int i = threadIdx.x; i < BOX_H * BOX_W; i += blockDim.x) {
    const int r = i / BOX_W, c = i % BOX_W;
    tiles[(size_t)(y + r) * tiles_ld + x + c] = tile[r][c];
    tile[r][c] += 1.0f;
  }
  tma::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::store_2d(&out_map, x, y, tile);         // clipped at the tensor's edge
    tma::commit();
    tma::wait_read<0>();
  }
}
