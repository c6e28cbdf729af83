// gemm_07_cluster_multicast.cu - rung 7 of Chapter 4's GEMM ladder: a 2-block cluster shares
// its B slices through TMA multicast.
// C (M x N, bf16) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulation.
// Rung 6 (persistent, parity barriers, producer + two consumers, 128 x 256 per block), with
// blocks paired in clusters of 2 that compute vertically adjacent tiles: rows m0 and m0 + 128,
// the SAME 256 columns. Both need the same B slice, so each block's producer loads half of it
// (128 of the 256 rows of B) and multicasts it into BOTH blocks' shared memory: every B byte
// crosses L2 -> SM once per cluster instead of once per block: a block now pulls 16 KiB of A
// and 16 of B per slice instead of 16 + 32, a third less L2 traffic.
// The price: a slot may be refilled only when the consumers of BOTH blocks have released it
// (the peer's copy lands in our slot too), so consumers arrive on both blocks' empty barriers.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("cluster multicast"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.multicast,mbarrier.wait,cluster.barrier
#include "wgmma.cuh"

#ifndef BN
#define BN 256
#define BM 128
#define BK 64
#define STAGES 4
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#define CLUSTER 2

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_cluster_multicast(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
                       unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, B_HALF = B_BYTES / CLUSTER;
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * A_BYTES;
  // Same offsets in every block of the cluster: a multicast copy and a remote arrival name the
  // peer's buffer and barrier by the offset of our own.
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const unsigned rank = wg::cluster_rank();
  const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);     // a cluster tile: 256 x 256
  const int tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS * CLUSTER);   // both blocks' consumers release a slot
    }
    wg::fence_barrier_init();
  }
  wg::cluster_sync();        // the peer's barriers exist before we multicast into them

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = cluster_id; t < tiles; t += clusters) {
        const int m0 = (t / tiles_n) * (CLUSTER * BM) + rank * BM, n0 = (t % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES, round = it / STAGES;
          tma::wait(&empty[s], (round & 1) ^ 1);    // released by all 4 consumers of the cluster
          // Our full barrier receives our A, our half of B and the peer's half of B.
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          wg::load_2d_multicast(sB + s * B_BYTES + rank * B_HALF, &mapB, kt * BK,
                                n0 + rank * (BN / CLUSTER), &full[s], (1 << CLUSTER) - 1);
        }
      }
    }
  } else {
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    float acc[BN / 2];
    int it = 0;
    for (int t = cluster_id; t < tiles; t += clusters) {
      const int m0 = (t / tiles_n) * (CLUSTER * BM) + rank * BM, n0 = (t % tiles_n) * BN;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        tma::wait(&full[s], round & 1);
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          wg::mma_k16(acc, wg::desc_sw128(sA + s * A_BYTES + c * 64 * 128 + k * 32),
                      wg::desc_sw128(sB + s * B_BYTES + k * 32), 1);
        wg::commit();
        wg::wait<0>();
        if (threadIdx.x % 128 == 0)
          for (int p = 0; p < CLUSTER; ++p) wg::arrive_cluster(&empty[s], p);   // ours and the peer's
      }
      wg::store_fragment_bf16(acc, C, M, N, m0 + c * 64, n0);
    }
  }
  wg::cluster_sync();        // no block leaves while its peer may still write into it
}
