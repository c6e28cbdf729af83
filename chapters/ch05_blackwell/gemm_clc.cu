// gemm_clc.cu - persistent GEMM tiles scheduled by cluster launch control (sm_100a): a block that finishes a tile takes the next one by cancelling a block that has not started.
// judge: target=sm_100a features=clc.try_cancel,mbarrier.wait
// Build and inspect (any machine, no GPU): python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/gemm_clc.cu').sass)"
// Run it on the CPU model (no GPU): chapters/ch05_blackwell/gemm_clc.py (run_on_model); tests/chapters/ch05_blackwell/test_gemm_clc.py.
// No Blackwell GPU has run this kernel: the course compiles it, reads its SASS and runs its PTX on judge.model.
//
// The grid has one block per TILE x TILE tile of C = A B (fp32, row-major, each element an FMA loop
// on CUDA cores: the scheduling is the point here, not the arithmetic). A block computes its own
// tile, then asks for more work with clusterlaunchcontrol.try_cancel: if some block of the grid has
// not started yet, the request cancels it and answers with its ctaid, and this block computes that
// block's tile instead. A block whose request fails stops: every remaining tile belongs to a block
// that is already running. So as many blocks run as fit on the GPU, and each keeps its registers,
// shared memory and set-up across tiles - a persistent kernel that still lets the hardware place
// blocks (and lets a higher-priority kernel take SMs between tiles).
//
// The hardware rules where they bite (PTX ISA, clusterlaunchcontrol.try_cancel / query_cancel):
// - the 16-byte response is written asynchronously; its arrival is a complete-tx of 16 bytes on the
//   mbarrier, so the requesting thread arms the mbarrier with expect_tx(16) and every reader waits
//   on that phase before reading the response;
// - the response is opaque: decode it only with query_cancel (is_canceled, get_first_ctaid);
// - once a block has seen a request fail it must not ask again (undefined behaviour): it exits.
// - the next request overwrites the response, so every thread has read it (a barrier) before then.
#include "tma.cuh"

#ifndef TILE
#define TILE 16
#endif

__device__ __forceinline__ void clc_try_cancel(unsigned long long* response, unsigned long long* bar) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "r"(tma::smem(response)), "r"(tma::smem(bar)) : "memory");
}

// is_canceled, and the first ctaid of the cancelled cluster (undefined when not cancelled)
__device__ __forceinline__ unsigned clc_query(const unsigned long long* response, unsigned& x, unsigned& y) {
  unsigned ok;
  asm volatile("{\n\t.reg .b128 r;\n\t.reg .pred p;\n\t"
               "mov.b128 r, {%3, %4};\n\t"
               "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t"
               "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %1, r;\n\t"
               "clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 %2, r;\n\t}"
               : "=r"(ok), "=r"(x), "=r"(y) : "l"(response[0]), "l"(response[1]));
  return ok;
}

extern "C" __global__ void __launch_bounds__(TILE * TILE) gemm_clc(
    int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int* __restrict__ tiles_done) {
  __shared__ alignas(16) unsigned long long response[2];
  __shared__ alignas(8) unsigned long long bar;
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  unsigned bx = blockIdx.x, by = blockIdx.y, phase = 0;
  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();
  }
  __syncthreads();
  while (true) {
    // ask for the next tile first: the answer arrives while this tile is computed
    if (threadIdx.x == 0) {
      tma::arrive_expect_tx(&bar, 16);        // the response's 16 bytes complete this phase
      clc_try_cancel(response, &bar);
    }
    const int row = by * TILE + ty, col = bx * TILE + tx;
    if (row < M && col < N) {
      float acc = 0.f;
      for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
      C[(size_t)row * N + col] = acc;
    }
    if (threadIdx.x == 0) atomicAdd(&tiles_done[by * gridDim.x + bx], 1);
    tma::wait(&bar, phase);                   // the response is in shared memory only after this
    phase ^= 1;
    unsigned nx, ny;
    const unsigned cancelled = clc_query(response, nx, ny);
    __syncthreads();                          // every thread has read it before the next request
    if (!cancelled) break;                    // no block left to take: never ask again
    bx = nx;
    by = ny;
  }
}
