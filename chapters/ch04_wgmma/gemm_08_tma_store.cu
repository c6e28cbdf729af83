// gemm_08_tma_store.cu - rung 8 of Chapter 4's GEMM ladder: a TMA-store epilogue and a tile order that
// keeps L2 warm, on top of every earlier rung (rung 9 regroups its consumers, rung 10 splits its last round).
// C (M x N, bf16, row-major) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulate.
//
// What runs where (one block per SM, persistent; blocks paired in clusters of 2):
//   warpgroup 0  producer: one thread issues every TMA load of a STAGES-deep ring; setmaxnreg
//                gives its registers away.
//   warpgroups 1, 2  consumers: 64 rows x 256 columns each (m64n256k16, 128 fp32 accumulators).
//   The two blocks of a cluster compute rows m0 and m0 + 128 of the same 256 columns: each loads
//   half of the B slice and multicasts it to both.
//   Barriers: "full" = 1 arrival + bytes, "empty" = one arrival per consumer warpgroup of the
//   cluster; everyone waits on phase parity.
// New on this rung:
//   * epilogue: a consumer writes its bf16 tile into shared memory (128B-swizzled, no bank
//     conflicts), fences, and one thread stores it with TMA; the store runs while the next
//     tile's math starts.
//   * tile order: cluster tiles are walked in groups of GROUP_M tile-rows, so the blocks running
//     at the same time share A rows and B columns in L2 instead of sweeping all of B.
//   * a consumer keeps one wgmma group in flight (RELEASE_LAG 1): it waits for the PREVIOUS
//     slice's group and releases that slot, so the tensor cores never wait for the issue.
// Build with -DTIMELINE to record %globaltimer per stage for the producer and both consumers of
// block 0 into `timeline` (ladder.timeline() reads it); without it `timeline` is unused.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("TMA store + L2 order"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.multicast,tma.store,mbarrier.wait,cluster.barrier
#include "wgmma.cuh"

#ifndef BN
#define BN 256          // columns per block (one m64n256k16 per consumer and k-step)
#define BM 128          // rows per block: 2 consumers x 64
#define BK 64           // K per slice: 64 bf16 = 128-byte rows, 128B swizzle (32: 64-byte rows, 64B swizzle)
#define STAGES 4        // 4 x 48 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227
#define GROUP_M 8       // cluster tile-rows walked together (L2 reuse of B)
#define RELEASE_LAG 1   // wgmma groups a consumer leaves in flight before releasing a slot
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#ifndef CLUSTER
#define CLUSTER 2       // blocks sharing B by multicast (1: no cluster, plain TMA loads)
#endif
#define TL_EVENTS 1024  // timeline: events recorded per role

#ifdef TIMELINE
// timeline[(role * TL_EVENTS + i) * 4 + j]; roles 0 producer, 1-2 consumers, 3-4 their epilogues
#define TL_MARK(role, i, j) \
  do { if (blockIdx.x == 0 && threadIdx.x % 128 == 0 && (i) < TL_EVENTS) timeline[((role) * TL_EVENTS + (i)) * 4 + (j)] = wg::globaltimer(); } while (0)
#else
#define TL_MARK(role, i, j) do {} while (0)
#endif

// Cluster tile t -> (tile row, tile column), GROUP_M tile-rows at a time, column by column.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (t / per_group) * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);
  const int r = t % per_group;
  tm = first_m + r % rows;
  tn = r / rows;
}

// A consumer warpgroup (one thread) frees a slot in every block of the cluster: the producers
// multicast into all of them, so each needs every block's consumers to be done with the slot.
__device__ __forceinline__ void release(unsigned long long* empty_slot) {
  if (CLUSTER == 1) {
    tma::arrive(empty_slot);
  } else {
    for (int p = 0; p < CLUSTER; ++p) wg::arrive_cluster(empty_slot, p);
  }
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_tma_store(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
               const __grid_constant__ TensorMap mapC, int M, int N, int K,
               unsigned long long* timeline) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, B_HALF = B_BYTES / CLUSTER;
  constexpr int C_BYTES = 64 * 128 * 2;            // one consumer's half tile: 64 x 128 bf16
  unsigned char* sA = base;
  unsigned char* sB = sA + STAGES * A_BYTES;
  unsigned char* sC = sB + STAGES * B_BYTES;       // CONSUMERS x C_BYTES, 1024-aligned
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const unsigned rank = wg::cluster_rank();
  const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);
  const int tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS * CLUSTER);
    }
    wg::fence_barrier_init();
  }
  wg::cluster_sync();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    // ------------------------------------------------------------------ producer
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = cluster_id; t < tiles; t += clusters) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, tm, tn);
        const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES, round = it / STAGES;
          TL_MARK(0, it, 0);
          tma::wait(&empty[s], (round & 1) ^ 1);   // fresh barrier: parity 1 is already complete
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          if (CLUSTER > 1)
            wg::load_2d_multicast(sB + s * B_BYTES + rank * B_HALF, &mapB, kt * BK,
                                  n0 + rank * (BN / CLUSTER), &full[s], (1 << CLUSTER) - 1);
          else
            tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
          TL_MARK(0, it, 1);
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ consumers
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    const int t128 = threadIdx.x % 128, w = t128 / 32, l = t128 % 32;
    unsigned char* myC = sC + c * C_BYTES;
    float acc[BN / 2];
    int it = 0, tile_no = 0;
    for (int t = cluster_id; t < tiles; t += clusters, ++tile_no) {
      int tm, tn;
      tile_coords(t, tiles_m, tiles_n, tm, tn);
      const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        if (kt == 0) TL_MARK(1 + c, it, 0);         // later slices start waiting where the last one
        tma::wait(&full[s], round & 1);              // released: one mark fewer on the critical path
        TL_MARK(1 + c, it, 1);
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          wg::mma_k16(acc, wg::desc_kmajor<BK * 2>(sA + s * A_BYTES + c * 64 * BK * 2 + k * 32),
                      wg::desc_kmajor<BK * 2>(sB + s * B_BYTES + k * 32), 1);
        wg::commit();
        // Release a slot only when the wgmma that read it have finished.
        wg::wait<RELEASE_LAG>();
        if (kt >= RELEASE_LAG && t128 == 0) {
          const int done = (it - RELEASE_LAG) % STAGES;
          release(&empty[done]);
        }
        TL_MARK(1 + c, it, 2);
      }
      wg::wait<0>();                                 // the tile's last groups
      if (t128 == 0)
        for (int lag = RELEASE_LAG; lag > 0; --lag)
          if (k_tiles >= lag)
            release(&empty[(it - lag) % STAGES]);

      // Epilogue: 64 x 256 fp32 -> bf16 -> shared (two halves of 64 x 128) -> TMA store.
      TL_MARK(3 + c, tile_no, 0);
#pragma unroll
      for (int h = 0; h < BN / 128; ++h) {
        if (t128 == 0) tma::wait_read<0>();          // the previous store has read myC
        wg::named_sync(1 + c, 128);
#pragma unroll
        for (int j = 0; j < 16; ++j) {               // 16 chunks of 8 columns
          const float* d = &acc[(h * 16 + j) * 4];
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int row = 16 * w + l / 4 + 8 * hr;
            // Two 64 x 64 boxes of 128-byte rows, 128B-swizzled like the map: the 16-byte
            // chunk index is XORed with row % 8 (8 rows of one store hit 8 different chunks).
            const int off = (j / 8) * 8192 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + (l % 4) * 4;
            wg::st_shared(myC + off, wg::pack_bf16x2(d[2 * hr], d[2 * hr + 1]));
          }
        }
        // RULE: every thread that wrote the tile fences its generic writes against the TMA's
        // async-proxy read, THEN the warpgroup meets, THEN one thread issues the store.
        tma::fence_proxy_async();
        wg::named_sync(1 + c, 128);
        if (t128 == 0) {
          tma::store_2d(&mapC, n0 + h * 128, m0 + c * 64, myC);
          tma::store_2d(&mapC, n0 + h * 128 + 64, m0 + c * 64, myC + 8192);
          tma::commit();
        }
      }
      TL_MARK(3 + c, tile_no, 1);
    }
    if (t128 == 0) tma::wait_all<0>();               // shared memory outlives the stores' reads
  }
  wg::cluster_sync();
}
