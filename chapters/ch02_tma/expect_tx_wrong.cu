// expect_tx_wrong.cu - DELIBERATELY BROKEN: announces 16 bytes more than the box delivers, so it never finishes.
// judge: target=sm_90a features=tma.load,mbarrier.expect_tx,mbarrier.wait
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/expect_tx_wrong.cu').sass)"
// Run ONLY in a child process with a timeout: chapters/ch02_tma/run.py expect_tx_wrong() shows HANG.
//
// The box is 8 x 32 floats = 1024 bytes. The barrier is told 1040. The TMA delivers 1024, the
// transaction count stops at 16, phase 0 never completes, and every thread spins in try_wait forever.
#include "tma.cuh"

extern "C" __global__ void expect_tx_wrong(const __grid_constant__ TensorMap a_map, float* out) {
  __shared__ alignas(128) float tile[8][32];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::arrive_expect_tx(&bar, sizeof(tile) + 16);   // WRONG: 1040, the box is 1024 bytes
  }
  tma::fence_proxy_async();
  __syncwarp();
  if (threadIdx.x == 0) tma::load_2d(tile, &a_map, 0, 0, &bar);
  tma::wait(&bar, 0);                                  // never returns
  out[threadIdx.x] = tile[0][threadIdx.x];
}
