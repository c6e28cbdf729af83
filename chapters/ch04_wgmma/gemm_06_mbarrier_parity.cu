// gemm_06_mbarrier_parity.cu - rung 6 of Chapter 4's GEMM ladder: raw mbarrier parity waits.
// C (M x N, bf16) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulation.
// Rung 5 (persistent, producer + two consumers, 128 x 256 tiles, setmaxnreg) with the barriers
// used as the hardware intends: nobody arrives in order to wait. A "full" barrier expects ONE
// arrival (the producer's expect_tx) plus the bytes; consumers only test its phase parity. An
// "empty" barrier expects one arrival per consumer warpgroup (one elected thread, after the
// warpgroup's wgmma finished reading the slot). Each phase now costs 1 + 2 arrivals, not 257 + 257.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("mbarrier parity"), check_rung, measure_ladder).
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
gemm_mbarrier_parity(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
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
      tma::mbar_init(&full[s], 1);              // the producer's arrive.expect_tx
      tma::mbar_init(&empty[s], CONSUMERS);     // one arrival per consumer warpgroup
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES, round = it / STAGES;
          // PARITY: slot s is being filled for the round-th time. Before that the consumers
          // must have emptied it round times, i.e. phase round-1 of empty[s] has completed:
          // parity (round - 1) & 1 == (round & 1) ^ 1. In round 0 that is parity 1, which a
          // fresh barrier reports complete at once: the ring starts empty with no pre-arrivals.
          tma::wait(&empty[s], (round & 1) ^ 1);
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    float acc[BN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        tma::wait(&full[s], round & 1);        // fill number `round` of slot s has landed
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          wg::mma_k16(acc, wg::desc_sw128(sA + s * A_BYTES + c * 64 * 128 + k * 32),
                      wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
        wg::commit();
        wg::wait<0>();
        if (threadIdx.x % 128 == 0) tma::arrive(&empty[s]);   // one arrival for the warpgroup
      }
      wg::store_fragment_bf16(acc, C, M, N, m0 + c * 64, n0);
    }
  }
}
