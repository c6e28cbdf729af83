// swizzle_shifted.cu - a 128B-swizzled TMA load into a shared buffer that starts OFFSET bytes past a 1024-byte boundary: where does each element land?
// judge: target=sm_90a features=tma.load,mbarrier.wait defines=OFFSET=128
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/swizzle_shifted.cu').sass)"
// Run: chapters/ch02_tma/topics.py swizzle_shifted(); one block, an iota box of 8 rows x 32 floats, 128B swizzle.
//
// The swizzle XORs bits 4-6 of the shared-memory ADDRESS with bits 7-9: a destination that is
// 128-byte aligned (the TMA's requirement) but not 1024-byte aligned starts the pattern at line
// OFFSET / 128 instead of line 0. The copy is legal; the layout is the pattern, shifted.
#include "tma.cuh"

#ifndef OFFSET
#define OFFSET 128    // bytes past a 1024-byte boundary (a multiple of 128)
#endif
#define BOX_BYTES 1024

static_assert(OFFSET % 128 == 0, "a TMA destination must be 128-byte aligned");

extern "C" __global__ void swizzle_shifted(const __grid_constant__ TensorMap map, int* out) {
  __shared__ alignas(1024) int buf[(OFFSET + BOX_BYTES) / 4];
  __shared__ alignas(8) unsigned long long bar;
  int* dst = buf + OFFSET / 4;
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, BOX_BYTES);
    tma::load_2d(dst, &map, 0, 0, &bar);
  }
  tma::wait(&bar, 0);
  for (int i = threadIdx.x; i < BOX_BYTES / 4; i += blockDim.x) out[i] = dst[i];   // word i of the buffer
}
