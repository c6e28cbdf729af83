// gemm_02_tma_ring.cu - rung 2 of Chapter 4's GEMM ladder: rung 1 plus a STAGES-deep TMA ring.
// C (M x N, bf16) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulation.
// Still one warpgroup per 128 x 128 tile, but the shared memory holds STAGES slices of A and B,
// each with its own "full" mbarrier: while the wgmma work on slice kt, the TMA is already
// fetching slices kt+1 .. kt+STAGES-1. Thread 0 refills a slot only after the whole warpgroup
// has finished reading it (wgmma wait, then __syncthreads), so the math still stalls once per
// slice; a dedicated producer (rung 3) removes that.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("TMA ring"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,tma.load,mbarrier.wait
#include "wgmma.cuh"

#ifndef BM
#define BM 128
#define BN 128
#define BK 64
#define STAGES 4   // 4 x 32 KiB of tiles in flight
#endif

extern "C" __global__ void __launch_bounds__(128)
gemm_tma_ring(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
              unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  unsigned char* sA = base;                        // STAGES x A_BYTES, each 1024-aligned
  unsigned char* sB = base + STAGES * A_BYTES;     // STAGES x B_BYTES
  __shared__ __align__(8) unsigned long long full[STAGES];

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) tma::mbar_init(&full[s], 1);
    tma::fence_proxy_async();
    // Fill the ring: slices 0 .. STAGES-1 are requested before any math starts.
    for (int s = 0; s < STAGES && s < k_tiles; ++s) {
      tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
      tma::load_2d(sA + s * A_BYTES, &mapA, s * BK, m0, &full[s]);
      tma::load_2d(sB + s * B_BYTES, &mapB, s * BK, n0, &full[s]);
    }
  }
  __syncthreads();

  float acc[BM / 64][BN / 2];
#pragma unroll
  for (int m = 0; m < BM / 64; ++m)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[m][i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % STAGES;
    // Slot s is filled for the (kt / STAGES)-th time: its barrier's phase number is kt / STAGES,
    // and the parity to wait for is that number's lowest bit.
    tma::wait(&full[s], (kt / STAGES) & 1);

    wg::fence();
#pragma unroll
    for (int m = 0; m < BM / 64; ++m)
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        wg::mma_m64n128k16(acc[m], wg::desc_sw128(sA + s * A_BYTES + m * 64 * 128 + k * 32),
                           wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
    wg::commit();
    wg::wait<0>();
    __syncthreads();                               // every warp is done with slot s
    const int next = kt + STAGES;
    if (threadIdx.x == 0 && next < k_tiles) {
      tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
      tma::load_2d(sA + s * A_BYTES, &mapA, next * BK, m0, &full[s]);
      tma::load_2d(sB + s * B_BYTES, &mapB, next * BK, n0, &full[s]);
    }
  }

#pragma unroll
  for (int m = 0; m < BM / 64; ++m) wg::store_fragment_bf16(acc[m], C, M, N, m0 + m * 64, n0);
}
