// tile_add_one_f32.cu - one warp: TMA-load one 8x32 float32 tile of A, add one, TMA-store it to B.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier.expect_tx,mbarrier.wait,proxy.fence
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/tile_add_one_f32.cu').sass)"
// Run: chapters/ch02_tma/run.py tile_add_one_f32(); launch with grid 1, block 32.
//
// Lane 0 issues both copies; each of the 32 lanes updates one column of the tile.
#include "tma.cuh"

#define ROWS 8
#define COLS 32

extern "C" __global__ void tile_add_one_f32(const __grid_constant__ TensorMap a_map,
                                            const __grid_constant__ TensorMap b_map) {
  __shared__ alignas(128) float tile[ROWS][COLS];
  __shared__ alignas(8) unsigned long long bar;
  const int lane = threadIdx.x;

  if (lane == 0) {
    tma::mbar_init(&bar, 1);
    tma::arrive_expect_tx(&bar, ROWS * COLS * sizeof(float));   // 8 * 32 * 4 = 1024 bytes
  }
  tma::fence_proxy_async();         // publish the initialized barrier to the async proxy...
  __syncwarp();                     // ...before lane 0 lets the TMA signal it
  if (lane == 0) tma::load_2d(tile, &a_map, 0, 0, &bar);
  tma::wait(&bar, 0);

  for (int r = 0; r < ROWS; ++r) tile[r][lane] += 1.0f;

  tma::fence_proxy_async();         // each lane's writes, visible to the async proxy
  __syncwarp();
  if (lane == 0) {
    tma::store_2d(&b_map, 0, 0, tile);
    tma::commit();
    tma::wait_read<0>();
  }
  __syncwarp();
}
