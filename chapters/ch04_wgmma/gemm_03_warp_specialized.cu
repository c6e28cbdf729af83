// gemm_03_warp_specialized.cu - rungs 3 and 4 of Chapter 4's GEMM ladder: a producer warpgroup
// feeds consumer warpgroups through a ring of full/empty mbarriers; setmaxnreg moves registers
// from the producer to the consumers.
// C (M x N, bf16) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulation.
// Block = 3 warpgroups (384 threads): warpgroup 0 is the producer (one thread issues every TMA
// copy), warpgroups 1 and 2 each own 64 rows of the BM = 128-row tile and BN columns.
//   rung 3: BN = 128 (each consumer m64n128k16, 64 accumulator registers)
//   rung 4: BN = 256 (each consumer m64n256k16, 128 accumulator registers: setmaxnreg matters)
// Barriers here are used the way cuda::barrier's arrive()/wait(token) uses them: every consumer
// thread arrives on the "full" barrier and waits on the token of its own arrival, so one phase
// counts 1 + 256 arrivals. Rung 6 replaces this with parity waits and one arrival per warpgroup.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("warp specialized"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.load,mbarrier.wait
#include "wgmma.cuh"

#ifndef BN
#define BN 128     // columns per block (128: rung 3, 256: rung 4)
#define BM 128     // rows per block: 2 consumer warpgroups x 64
#define BK 64
#define STAGES 4   // 4 x (16 + 16 or 32 KiB) of tiles in flight
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))

extern "C" __global__ void __launch_bounds__(THREADS, 1)   // ", 1": else setmaxnreg is ignored (C7508)
gemm_warp_specialized(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
                      unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * A_BYTES;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1 + 128 * CONSUMERS);    // producer's expect_tx + every consumer thread
      tma::mbar_init(&empty[s], 1 + 128 * CONSUMERS);   // producer + every consumer thread
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    // PRODUCER. It holds no accumulators: give registers back so the consumers can take them.
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        // Wait until the consumers released slot s (they pre-released every slot once).
        wg::wait_token(&empty[s], wg::arrive_token(&empty[s]));
        tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
        tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
        tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
      }
    }
  } else {
    // CONSUMER c: rows m0 + 64c .. m0 + 64c + 63.
    wg::regs_inc<232>();     // 128 x 40 + 256 x 232 = 64512 <= 65536 registers of the SM
    const int c = wg_index - 1;
    for (int s = 0; s < STAGES; ++s) tma::arrive(&empty[s]);   // every slot starts free

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      wg::wait_token(&full[s], wg::arrive_token(&full[s]));
      wg::fence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        wg::mma_k16(acc, wg::desc_sw128(sA + s * A_BYTES + c * 64 * 128 + k * 32),
                    wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
      wg::commit();
      wg::wait<0>();                 // this warpgroup's reads of slot s are done ...
      tma::arrive(&empty[s]);        // ... so it may be refilled
    }
    wg::store_fragment_bf16(acc, C, M, N, m0 + c * 64, n0);
  }
}
