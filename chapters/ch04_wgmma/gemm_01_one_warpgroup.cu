// gemm_01_one_warpgroup.cu - rung 1 of Chapter 4's GEMM ladder: one warpgroup, TMA + wgmma.
// C (M x N, bf16, row-major) = A (M x K, bf16, row-major) * B^T, B given as N x K ("K-major"),
// fp32 accumulation. One block of 128 threads (one warpgroup) per 128 x 128 tile of C: thread 0
// loads a 128 x 64 slice of A and of B with two TMA boxes (128B swizzle), everyone waits on one
// mbarrier, the warpgroup runs 2 x 4 wgmma m64n128k16, waits for them, and only then may the next
// load overwrite the tiles: loads and math never overlap. That is what the next rungs fix.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("one warpgroup"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,tma.load,mbarrier.wait
#include "wgmma.cuh"

#ifndef BM
#define BM 128     // rows of C per block: two m64 wgmma row slices
#define BN 128     // columns of C per block: the N of m64nNk16
#define BK 64      // K per load: 64 bf16 = 128 bytes, exactly one 128B-swizzle row
#endif

extern "C" __global__ void __launch_bounds__(128)
gemm_one_warpgroup(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
                   unsigned short* C, int M, int N, int K) {
  // RULE: a 128B-swizzled tile starts on a 1024-byte boundary (the swizzle pattern's repeat),
  // both for the TMA that writes it and for the wgmma descriptor that reads it.
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  unsigned char* sA = base;                        // BM rows x 128 bytes
  unsigned char* sB = base + BM * BK * 2;          // BN rows x 128 bytes
  __shared__ __align__(8) unsigned long long full;

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (threadIdx.x == 0) {
    tma::mbar_init(&full, 1);                       // one arrival: thread 0's expect_tx
    tma::fence_proxy_async();                       // the init must be seen by the TMA unit
  }
  __syncthreads();

  float acc[BM / 64][BN / 2];
#pragma unroll
  for (int m = 0; m < BM / 64; ++m)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[m][i] = 0.f;

  const int k_tiles = (K + BK - 1) / BK;           // TMA fills the K tail with zeros
  unsigned phase = 0;
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (threadIdx.x == 0) {
      // expect_tx counts WHOLE boxes, including any part past the matrix (filled with zeros).
      tma::arrive_expect_tx(&full, (BM + BN) * BK * 2);
      tma::load_2d(sA, &mapA, kt * BK, m0, &full);
      tma::load_2d(sB, &mapB, kt * BK, n0, &full);
    }
    tma::wait(&full, phase);                       // the bytes have landed
    phase ^= 1;

    wg::fence();                                   // accumulator writes above come before the wgmma
#pragma unroll
    for (int m = 0; m < BM / 64; ++m)
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)            // 16 bf16 = 32 bytes further along each row
        wg::mma_m64n128k16(acc[m], wg::desc_sw128(sA + m * 64 * 128 + k * 32),
                           wg::desc_sw128(sB + k * 32), 1);
    wg::commit();
    wg::wait<0>();                                 // wgmma done reading sA and sB ...
    __syncthreads();                               // ... in every warp, before thread 0 reloads
  }

#pragma unroll
  for (int m = 0; m < BM / 64; ++m) wg::store_fragment_bf16(acc[m], C, M, N, m0 + m * 64, n0);
}
