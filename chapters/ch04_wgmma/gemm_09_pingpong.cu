// gemm_09_pingpong.cu - rung 9 of Chapter 4's GEMM ladder: "ping-pong" consumers. The two consumer
// warpgroups no longer split one tile; each owns whole tiles of its own and they take turns, so one
// warpgroup's epilogue (registers -> shared memory -> TMA store) runs while the other's wgmma keep
// the tensor cores busy.
// C (M x N, bf16, row-major) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulate.
//
// What runs where (one block per SM, persistent; blocks paired in clusters of 2):
//   warpgroup 0  producer: one thread walks the block's tiles in order q = 0, 1, 2, ... and loads
//                every K-slice of each into one STAGES-deep ring; setmaxnreg 40 gives registers away.
//   warpgroups 1, 2  consumers (setmaxnreg 232): consumer c computes the tiles q = c, c + 2, ...:
//                128 x 128 each (two m64n128k16 per k-step, 128 fp32 accumulators per thread), or
//                with BM 64 BN 256, 64 x 256 (one m64n256k16, also 128 accumulators).
//   RULE of the register file: one warpgroup can hold 64 x 256 or 128 x 128 fp32 accumulators in
//   232 registers a thread, not 128 x 256. A ping-pong tile is half of rung 8's 128 x 256 (which two
//   warpgroups share), so each loaded byte feeds half the math: per MAC, TMA brings 2 (1/BM + 1/BN)
//   bytes: 0.031 at 128 x 128, 0.039 at 64 x 256, 0.023 on rung 8.
//   The ring holds the slices of tile q, then of tile q + 1, ...: a consumer finds its slices at
//   ring positions q * k_tiles + kt, and the slots of one tile are released by its one consumer.
//   The CLUSTER blocks of a cluster compute rows m0, m0 + BM, ... of the same BN columns: each loads
//   1 / CLUSTER of the B slice and multicasts it to all, as on rungs 7 and 8 (there CLUSTER = 2).
// Ordered named barriers (bar.sync id, 256 / bar.arrive id, 256: the 128 threads of one warpgroup
// wait, the 128 of the other arrive) give the turns:
//   MAINLOOP: consumer c issues tile q's wgmma only after the other consumer has issued all of tile
//             q - 1's, so the tensor cores work on one tile at a time, in ring order;
//   EPILOGUE: tile q's epilogue starts after tile q - 1's was issued, so the epilogues alternate too.
//   A consumer waits for its turn only if there was a tile before it (q > 0) and signals only if a
//   tile follows (q + 1 < the block's tile count): every arrival is matched by a wait, and no named
//   barrier is left half-arrived when the block exits.
//   RULE (PTX ISA, mbarrier.try_wait.parity): a wait names a phase by its parity alone. A wait for
//   phase t is right while the barrier is in phase t (it waits) or later than t by one (it passes);
//   while the barrier is still in phase t - 1 the parity test passes too, wrongly. The MAINLOOP turn
//   rules that out: consumer c starts waiting for tile q's slices only after the other consumer has
//   waited for all of tile q - 1's, so every slot it waits on has completed the phase before its own.
//   Without the turn, consumer 1 waits for ring position k_tiles at launch: with k_tiles >= STAGES
//   that slot is a phase or more behind, the wait passes at once, and consumer 1 computes on a slot
//   that holds tile 0's slice (or nothing yet) and releases it. Built that way the kernel faulted on
//   the H200 ("unspecified launch failure") and the CPU model ends it as a HANG
//   (tests/chapters/ch04_wgmma/test_on_model.py).
// Build with -DTIMELINE to record %globaltimer per stage for the producer and both consumers of
// block 0 into `timeline` (ladder.timeline("ping-pong") reads it); without it `timeline` is unused.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("ping-pong"), check_rung, measure_ladder).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.multicast,tma.store,mbarrier.wait,cluster.barrier
#include "wgmma.cuh"

#ifndef BN
#define BN 128          // columns per tile (m64n128k16; 256: m64n256k16)
#define BM 128          // rows per tile, all ONE consumer warpgroup's: two m64 wgmma per k-step (or 64: one)
#define BK 64           // K per slice: 64 bf16 = 128-byte rows, 128B swizzle
#define STAGES 6        // 6 x 32 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227 (64 x 256: 4 x 40)
#define GROUP_M 16      // cluster tile-rows walked together (L2 reuse of B): 16 x 128 rows
#define RELEASE_LAG 1   // wgmma groups a consumer leaves in flight before releasing a slot
#endif
#define CONSUMERS 2
#define MH (BM / 64)    // m64 fragments per tile: a consumer holds MH x BN / 2 fp32 accumulators
#define THREADS (128 * (CONSUMERS + 1))
#ifndef CLUSTER
#define CLUSTER 2       // blocks sharing B by multicast (1: no cluster, plain TMA loads)
#endif
#define BAR_MAIN 3      // named barriers 3, 4: consumer c's turn to issue a mainloop
#define BAR_EPI 5       // named barriers 5, 6: consumer c's turn to run an epilogue
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
// multicast into all of them, so each needs the consumer of that slot in every block to be done.
__device__ __forceinline__ void release(unsigned long long* empty_slot) {
  if (CLUSTER == 1) {
    tma::arrive(empty_slot);
  } else {
    for (int p = 0; p < CLUSTER; ++p) wg::arrive_cluster(empty_slot, p);
  }
}

// A k16 step's descriptor is the slice's first with its address field moved on by 32 bytes (+2 in the
// field's 16-byte units), made with one 32-bit add (chapters/ch05_blackwell/gemm_fp8.cu: DESC_STEP, which
// says why, and the RULE that keeps the add inside bits 0-13). Each consumer here issues its slice's
// eight wgmma alone, so what sits between two of them is on its critical path. Measured on the H200
// (explore_h200.py round17, 2026-12-02, both orders, of cuBLAS bf16): 0.848 / 0.893 -> 0.869 / 0.913 at
// 4096^3 and 0.834 -> 0.863 / 0.864 at 8192^3; rung 8, whose two consumers issue together, did not move.
__device__ __forceinline__ unsigned long long desc_step(unsigned long long d, unsigned units16) {
  unsigned long long out;
  asm("mov.b64 %0, {%1, %2};" : "=l"(out) : "r"((unsigned)d + units16), "r"((unsigned)(d >> 32)));
  return out;
}

// Ordered turns between the two consumers. RULE (PTX ISA, bar/barrier): a named barrier completes
// when `count` threads have arrived, counting those that bar.sync (and wait) and those that
// bar.arrive (and go on); count is a multiple of 32, the same in every thread that uses the id.
// The waiting warpgroup's 128 threads plus the signalling warpgroup's 128 make the 256.
__device__ __forceinline__ void turn_wait(int id) {
  asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory");
}
__device__ __forceinline__ void turn_give(int id) {
  asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory");
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_pingpong(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
              const __grid_constant__ TensorMap mapC, int M, int N, int K,
              unsigned long long* timeline) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, B_HALF = B_BYTES / CLUSTER;
  constexpr int C_BYTES = 64 * 128 * 2;            // one consumer's half tile: 64 x 128 bf16
  unsigned char* sA = base;
  unsigned char* sB = sA + STAGES * A_BYTES;       // A_BYTES (8 or 16 KiB) keeps every B slot 1024-aligned
  unsigned char* sC = sB + STAGES * B_BYTES;       // CONSUMERS x C_BYTES, 1024-aligned
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const unsigned rank = wg::cluster_rank();
  const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);
  const int tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  // The block's tiles: cluster_id, cluster_id + clusters, ... (q = 0, 1, ..., my_tiles - 1).
  const int my_tiles = cluster_id < tiles ? (tiles - 1 - cluster_id) / clusters + 1 : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CLUSTER);          // one consumer per block reads a given slot
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
      for (int q = 0; q < my_tiles; ++q) {
        int tm, tn;
        tile_coords(cluster_id + q * clusters, tiles_m, tiles_n, tm, tn);
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
    float acc[MH][BN / 2];
    for (int q = c; q < my_tiles; q += CONSUMERS) {
      int tm, tn;
      tile_coords(cluster_id + q * clusters, tiles_m, tiles_n, tm, tn);
      const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
      int it = q * k_tiles;                          // where tile q's slices sit in the ring
#pragma unroll
      for (int f = 0; f < MH; ++f)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[f][i] = 0.f;
      if (q > 0) turn_wait(BAR_MAIN + c);            // tile q - 1's wgmma are all issued
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        if (kt == 0) TL_MARK(1 + c, it, 0);
        tma::wait(&full[s], round & 1);
        TL_MARK(1 + c, it, 1);
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
#pragma unroll
          for (int f = 0; f < MH; ++f)              // rows 64 f .. 64 f + 63 of the tile, the same B
            wg::mma_k16(acc[f], desc_step(wg::desc_kmajor<BK * 2>(sA + s * A_BYTES + f * 64 * BK * 2), 2 * k),
                        desc_step(wg::desc_kmajor<BK * 2>(sB + s * B_BYTES), 2 * k), 1);
        wg::commit();
        // Release a slot only when the wgmma that read it have finished.
        wg::wait<RELEASE_LAG>();
        if (kt >= RELEASE_LAG && t128 == 0) release(&empty[(it - RELEASE_LAG) % STAGES]);
        TL_MARK(1 + c, it, 2);
      }
      // Every wgmma of tile q is issued: the other consumer may start tile q + 1's while ours finish.
      if (q + 1 < my_tiles) turn_give(BAR_MAIN + 1 - c);
      wg::wait<0>();                                 // the tile's last groups
      if (t128 == 0)
        for (int lag = RELEASE_LAG; lag > 0; --lag)
          if (k_tiles >= lag)
            release(&empty[(it - lag) % STAGES]);

      // Epilogue (as on rung 8): BM x BN fp32 -> bf16 -> shared, 64 x 128 at a time -> TMA store;
      // it runs while the other consumer's wgmma run.
      if (q > 0) turn_wait(BAR_EPI + c);
      TL_MARK(3 + c, q, 0);
#pragma unroll
      for (int part = 0; part < MH * (BN / 128); ++part) {
        const int f = part / (BN / 128), h = part % (BN / 128);
        if (t128 == 0) tma::wait_read<0>();          // the previous store has read myC
        wg::named_sync(1 + c, 128);
#pragma unroll
        for (int j = 0; j < 16; ++j) {               // 16 chunks of 8 columns
          const float* d = &acc[f][(h * 16 + j) * 4];
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
          tma::store_2d(&mapC, n0 + h * 128, m0 + f * 64, myC);
          tma::store_2d(&mapC, n0 + h * 128 + 64, m0 + f * 64, myC + 8192);
          tma::commit();
        }
      }
      TL_MARK(3 + c, q, 1);
      if (q + 1 < my_tiles) turn_give(BAR_EPI + 1 - c);
    }
    if (t128 == 0) tma::wait_all<0>();               // shared memory outlives the stores' reads
  }
  wg::cluster_sync();
}
