// ws_gemm.cu - exercise ws_gemm (Chapter 4): a warp-specialized bf16 GEMM. You write the ring.
// C (M x N, bf16, row-major) = A (M x K, bf16, row-major) * B^T, B given N x K (K-major),
// fp32 accumulation. One block of 3 warpgroups per 128 x 256 tile of C:
//   warpgroup 0 = PRODUCER: thread 0 loads, slice by slice, A (128 x 64) and B (256 x 64) with TMA
//                 into a ring of STAGES slots;
//   warpgroups 1, 2 = CONSUMERS: consumer c multiplies rows 64c .. 64c+63 of the A slice with the
//                 whole B slice (4 x wgmma m64n256k16 per slice) into 128 fp32 registers.
// Each slot s has two mbarriers: full[s] (1 arrival: the producer's expect_tx, plus the bytes)
// and empty[s] (2 arrivals: one thread of each consumer warpgroup, once its wgmma are done).
// Check: python practice/judge.py check ws_gemm   (needs an H200 to run; compiles anywhere)
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.load,tma.store,mbarrier.wait
#include "wgmma.cuh"

#define BM 128
#define BN 256
#define BK 64
#define STAGES 4
#define CONSUMERS 2
#define A_BYTES (BM * BK * 2)      // 16 KiB per slot
#define B_BYTES (BN * BK * 2)      // 32 KiB per slot
#define C_BYTES (64 * 128 * 2)     // one consumer's half tile (64 x 128 bf16) on its way out

// Given: consumer c's 64 x 256 accumulators -> bf16 -> shared memory -> two TMA stores per half.
__device__ void store_tile(const float (&acc)[BN / 2], unsigned char* myC, const TensorMap* mapC,
                           int m0, int n0, int c) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int h = 0; h < BN / 128; ++h) {
    if (t == 0) tma::wait_read<0>();               // the previous store has finished reading myC
    wg::named_sync(1 + c, 128);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = 16 * w + l / 4 + 8 * hr;   // the m64nN accumulator layout
        const int off = (j / 8) * 8192 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + (l % 4) * 4;
        wg::st_shared(myC + off, wg::pack_bf16x2(acc[(h * 16 + j) * 4 + 2 * hr],
                                                 acc[(h * 16 + j) * 4 + 2 * hr + 1]));
      }
    }
    tma::fence_proxy_async();                      // RULE: writers fence, meet, then one thread stores
    wg::named_sync(1 + c, 128);
    if (t == 0) {
      tma::store_2d(mapC, n0 + h * 128, m0 + c * 64, myC);
      tma::store_2d(mapC, n0 + h * 128 + 64, m0 + c * 64, myC + 8192);
      tma::commit();
    }
  }
  if (t == 0) tma::wait_all<0>();
}

extern "C" __global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
ws_gemm(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
        const __grid_constant__ TensorMap mapC, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* sA = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  unsigned char* sB = sA + STAGES * A_BYTES;
  unsigned char* sC = sB + STAGES * B_BYTES;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;           // the last slice may hang over K: TMA fills zeros
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS);
    }
    wg::fence_barrier_init();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    wg::regs_dec<40>();                            // the producer holds no accumulators
    if (threadIdx.x == 0) {
      // BEGIN SOLUTION
      //> // TODO producer: for each slice kt, slot s = kt % STAGES, round = kt / STAGES:
      //> //   wait until slot s is empty (which parity does round 0 need on a fresh barrier?),
      //> //   announce A_BYTES + B_BYTES on full[s], load A (x = kt * BK, y = m0) and B (y = n0).
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES, round = kt / STAGES;
        tma::wait(&empty[s], (round & 1) ^ 1);     // round 0: parity 1, complete on a fresh barrier
        tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
        tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
        tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
      }
      // END SOLUTION
    }
  } else {
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    // BEGIN SOLUTION
    //> // TODO consumer c: for each slice kt: wait until full[s] completes its phase `round`,
    //> //   wg::fence(), 4 x wg::mma_k16(acc, desc of A rows 64c.. at k * 32 bytes, desc of B, 1),
    //> //   wg::commit(), wg::wait<0>(), then ONE thread of the warpgroup releases slot s.
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES, round = kt / STAGES;
      tma::wait(&full[s], round & 1);
      wg::fence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        wg::mma_k16(acc, wg::desc_sw128(sA + s * A_BYTES + c * 64 * 128 + k * 32),
                    wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
      wg::commit();
      wg::wait<0>();
      if (threadIdx.x % 128 == 0) tma::arrive(&empty[s]);
    }
    // END SOLUTION
    store_tile(acc, sC + c * C_BYTES, &mapC, m0, n0, c);
  }
}
