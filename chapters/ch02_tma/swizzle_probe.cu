// swizzle_probe.cu - where does each element of a box land in shared memory? Ground truth for the drawing.
// judge: target=sm_90a features=tma.load,mbarrier.expect_tx,mbarrier.wait
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/swizzle_probe.cu').sass)"
// Run: chapters/ch02_tma/run.py swizzle_probe("128B"); the host gives an iota tensor the size of one box.
//
// The TMA loads one box (with the map's swizzle) into shared memory; then the block copies shared
// memory out WORD FOR WORD, unswizzled. out[p] is the element that landed in 4-byte word p, so the
// host can compare p with judge.hw.tma.swizzle_offset(4 * element, swizzle) / 4.
#include "tma.cuh"

#define PROBE_BYTES 4096

extern "C" __global__ void swizzle_probe(const __grid_constant__ TensorMap map, int* out, int box_bytes,
                                         unsigned* smem_base) {
  // The swizzle XORs shared-memory ADDRESS bits, so the pattern starts at row 0 only in a buffer
  // aligned to its repeat: 1024 bytes for the 128-byte swizzle. Align to that.
  __shared__ alignas(1024) int buf[PROBE_BYTES / 4];
  __shared__ alignas(8) unsigned long long bar;

  for (int i = threadIdx.x; i < PROBE_BYTES / 4; i += blockDim.x) buf[i] = -1;   // unwritten = -1
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    *smem_base = tma::smem(buf);    // recorded so the host can check the alignment held
  }
  tma::fence_proxy_async();         // the -1 fill and the init are generic writes: order them before the TMA's
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, box_bytes);
    tma::load_2d(buf, &map, 0, 0, &bar);
  }
  tma::wait(&bar, 0);
  for (int i = threadIdx.x; i < box_bytes / 4; i += blockDim.x) out[i] = buf[i];
}
