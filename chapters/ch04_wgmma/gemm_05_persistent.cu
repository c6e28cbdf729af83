// gemm_05_persistent.cu - rung 5 of Chapter 4's GEMM ladder: persistent blocks.
// C (M x N, bf16) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulation.
// Rung 4 (producer warpgroup + two consumers, 128 x 256 tiles, setmaxnreg), but launched with one
// block per SM that walks the tiles t = blockIdx.x, blockIdx.x + gridDim.x, ... The ring keeps
// running across tile boundaries: the producer fetches the next tile's first slices while the
// consumers still compute (and store) the current one, and no block pays a launch, a barrier
// init or a pipeline fill per tile. Barriers are still used token-style (see rung 3).
// Run: chapters/ch04_wgmma/ladder.py (build_rung("persistent"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.load,mbarrier.wait
#include "wgmma.cuh"

#ifndef BN
#define BN 256
#define BM 128
#define BK 64
#define STAGES 4
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_persistent(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
                unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * A_BYTES;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1 + 128 * CONSUMERS);
      tma::mbar_init(&empty[s], 1 + 128 * CONSUMERS);
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;                                   // slices issued by this block, all tiles
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          wg::wait_token(&empty[s], wg::arrive_token(&empty[s]));
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    for (int s = 0; s < STAGES; ++s) tma::arrive(&empty[s]);
    float acc[BN / 2];
    int it = 0;                                     // the same count as the producer's
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        wg::wait_token(&full[s], wg::arrive_token(&full[s]));
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          wg::mma_k16(acc, wg::desc_sw128(sA + s * A_BYTES + c * 64 * 128 + k * 32),
                      wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
        wg::commit();
        wg::wait<0>();
        tma::arrive(&empty[s]);
      }
      wg::store_fragment_bf16(acc, C, M, N, m0 + c * 64, n0);
    }
  }
}
