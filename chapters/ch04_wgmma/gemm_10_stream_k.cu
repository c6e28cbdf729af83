// gemm_10_stream_k.cu - rung 10 of Chapter 4's GEMM ladder: rung 8 (TMA store, L2 tile order,
// cluster multicast, one wgmma group in flight) with a stream-K tail, so the last wave of tiles no
// longer leaves SMs idle.
// C (M x N, bf16, row-major) = A (M x K, bf16, row-major) * B^T (B: N x K, K-major), fp32 accumulate.
//
// Why: a persistent grid of P clusters walks T cluster tiles (256 x 256: the two blocks' 128 x 256).
// With T = 1024 (8192^3) and P = 66, the walk takes ceil(1024 / 66) = 16 rounds although the work is
// 15.5: the last round holds 34 tiles, and 48 % of the machine idles in it. (At 4096^3, 256 tiles, the
// last round is 88 % full; the host's plan, ladder.stream_k_plan, does not split there: splitting was
// measured 2.8 % slower, so this kernel then runs rung 8's path.)
// Here the first T - (T mod P) tiles are walked whole as before ("data-parallel"); the other
// sk_tiles tiles are cut into their k_tiles slices of BK, and those U = sk_tiles * k_tiles slices are
// dealt out in equal contiguous ranges to the first sk_clusters clusters ("stream-K"). A tile whose
// slices fall in several ranges is summed by the cluster that holds its LAST slice (the owner):
// every other cluster writes its fp32 partial sum into a workspace slot and raises a flag; the owner
// waits for the flags of the lower-ranked clusters, adds their partials and stores C.
//
// Who waits on whom (no cycles, and the CPU model's one-cluster-after-another order finishes):
//   a cluster's range [lo, hi) holds at most one tile that continues into the NEXT range (the
//   piece at its top end: it is not the owner there) and owns every other piece. It walks its
//   range from the top down: that piece first (write partial, raise flag: it waits for nobody), then
//   the pieces it owns; an owner waits only on lower-ranked clusters' first pieces. A cluster
//   contributes at most one partial per launch: one workspace slot per cluster and block.
// Flags hold the launch's `epoch` (the host counts launches), so the workspace is never cleared.
// Run: chapters/ch04_wgmma/ladder.py (build_rung("stream-K tail"), check_rung, model_check).
// judge: target=sm_90a features=wgmma,setmaxnreg,tma.multicast,tma.store,mbarrier.wait,cluster.barrier
#include "wgmma.cuh"

#ifndef BN
#define BN 256          // columns per block (one m64n256k16 per consumer and k-step)
#define BM 128          // rows per block: 2 consumers x 64
#define BK 64           // K per slice: 64 bf16 = 128-byte rows, 128B swizzle
#define STAGES 4        // 4 x 48 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227
#define GROUP_M 8       // cluster tile-rows walked together (L2 reuse of B)
#endif
#ifndef SK_FIRST
#define SK_FIRST 0      // 1: each cluster works its stream-K range before its whole tiles (measured slower:
#endif                  // 0.936 of cuBLAS at 4096^3, 0.996 at 8192^3; explore_h200.py round5)
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#define CLUSTER 2
#define PART_FLOATS (64 * BN)   // one consumer's partial sum: 64 x BN fp32, in fragment order

__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (t / per_group) * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);
  const int r = t % per_group;
  tm = first_m + r % rows;
  tn = r / rows;
}

// The stream-K schedule, computed alike by the producer and the consumers.
struct Schedule {
  int tiles, k_tiles, clusters, dp_tiles, sk_clusters;
  long long units;                                   // sk_tiles * k_tiles slices, dealt out
  __device__ long long lo(int j) const { return units * j / sk_clusters; }   // start of cluster j's range
  // The cluster whose range holds slice v (ranges are contiguous and ascending).
  __device__ int holder(long long v) const {
    int j = (int)(v * sk_clusters / units);
    while (j + 1 < sk_clusters && lo(j + 1) <= v) ++j;
    while (j > 0 && lo(j) > v) --j;
    return j;
  }
};

// One piece of work: slices [kt0, kt1) of cluster tile t.
struct Piece { int t, kt0, kt1; };

// Piece i of cluster j's stream-K range, walked from the top down (see the header); false past the last.
__device__ __forceinline__ bool sk_piece(const Schedule& s, int j, int i, Piece& p) {
  if (j >= s.sk_clusters) return false;
  long long hi = s.lo(j + 1);
  const long long lo = s.lo(j);
  while (hi > lo) {
    const long long first = max(lo, (hi - 1) / s.k_tiles * s.k_tiles);   // start of the piece below hi
    if (i == 0) {
      const int tile = (int)((hi - 1) / s.k_tiles);
      p.t = s.dp_tiles + tile;
      p.kt0 = (int)(first - (long long)tile * s.k_tiles);
      p.kt1 = (int)(hi - (long long)tile * s.k_tiles);
      return true;
    }
    --i; hi = first;
  }
  return false;
}

// The pieces of cluster j in the order it works them: its whole tiles, then its stream-K range
// (SK_FIRST: the range first, so partial sums are exchanged while other clusters still run whole tiles).
__device__ __forceinline__ bool piece(const Schedule& s, int j, int i, Piece& p) {
  const int dp_here = j < s.dp_tiles % s.clusters ? s.dp_tiles / s.clusters + 1 : s.dp_tiles / s.clusters;
#if SK_FIRST
  int n_sk = 0;
  for (Piece q; sk_piece(s, j, n_sk, q);) ++n_sk;
  if (i < n_sk) return sk_piece(s, j, i, p);
  i -= n_sk;
#endif
  if (i < dp_here) {
    p.t = j + i * s.clusters; p.kt0 = 0; p.kt1 = s.k_tiles;
    return true;
  }
#if SK_FIRST
  return false;
#else
  return sk_piece(s, j, i - dp_here, p);
#endif
}

__device__ __forceinline__ void release(unsigned long long* empty_slot) {
  for (int p = 0; p < CLUSTER; ++p) wg::arrive_cluster(empty_slot, p);
}

__device__ __forceinline__ void flag_release(unsigned* flag, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(flag), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned flag_acquire(const unsigned* flag) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_stream_k(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
              const __grid_constant__ TensorMap mapC, int M, int N, int K,
              int sk_tiles, int sk_clusters, float* workspace, unsigned* flags, unsigned epoch) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, B_HALF = B_BYTES / CLUSTER;
  constexpr int C_BYTES = 64 * 128 * 2;
  unsigned char* sA = base;
  unsigned char* sB = sA + STAGES * A_BYTES;
  unsigned char* sC = sB + STAGES * B_BYTES;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const unsigned rank = wg::cluster_rank();
  const int cluster_id = blockIdx.x / CLUSTER;
  Schedule sch;
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);
  const int tiles_n = (N + BN - 1) / BN;
  sch.tiles = tiles_m * tiles_n;
  sch.k_tiles = (K + BK - 1) / BK;
  sch.clusters = gridDim.x / CLUSTER;
  sch.dp_tiles = sch.tiles - sk_tiles;
  sch.sk_clusters = max(1, sk_clusters);
  sch.units = (long long)sk_tiles * sch.k_tiles;
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
      Piece p;
      for (int i = 0; piece(sch, cluster_id, i, p); ++i) {
        int tm, tn;
        tile_coords(p.t, tiles_m, tiles_n, tm, tn);
        const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
        for (int kt = p.kt0; kt < p.kt1; ++kt, ++it) {
          const int s = it % STAGES, round = it / STAGES;
          tma::wait(&empty[s], (round & 1) ^ 1);
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          wg::load_2d_multicast(sB + s * B_BYTES + rank * B_HALF, &mapB, kt * BK,
                                n0 + rank * (BN / CLUSTER), &full[s], (1 << CLUSTER) - 1);
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
    int it = 0;
    Piece p;
    for (int i = 0; piece(sch, cluster_id, i, p); ++i) {
      int tm, tn;
      tile_coords(p.t, tiles_m, tiles_n, tm, tn);
      const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
#pragma unroll
      for (int q = 0; q < BN / 2; ++q) acc[q] = 0.f;
      for (int kt = p.kt0; kt < p.kt1; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        tma::wait(&full[s], round & 1);
        wg::fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          wg::mma_k16(acc, wg::desc_kmajor<BK * 2>(sA + s * A_BYTES + c * 64 * BK * 2 + k * 32),
                      wg::desc_kmajor<BK * 2>(sB + s * B_BYTES + k * 32), 1);
        wg::commit();
        wg::wait<1>();                               // the previous slice's group is done: free it
        if (kt > p.kt0 && t128 == 0) release(&empty[(it - 1) % STAGES]);
      }
      wg::wait<0>();
      if (t128 == 0) release(&empty[(it - 1) % STAGES]);

      // Partial sums of one consumer live in a workspace slot in fragment order: float4 q of
      // thread t at (q * 128 + t) * 4, so each warp's store or load is 512 contiguous bytes.
      float4* slot_of_mine = (float4*)(workspace + ((size_t)(cluster_id * CLUSTER + rank) * CONSUMERS + c) * PART_FLOATS);
      if (p.kt1 < sch.k_tiles) {
        // Not the owner: hand the partial sum to the cluster holding the tile's last slice.
#pragma unroll
        for (int q = 0; q < BN / 8; ++q)
          __stcg(&slot_of_mine[q * 128 + t128], make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
        // RULE: every thread's stores happen before the warpgroup meets; the one thread that then
        // raises the flag with .release at GPU scope makes them all visible to whoever acquires it.
        wg::named_sync(1 + c, 128);
        if (t128 == 0) flag_release(&flags[(cluster_id * CLUSTER + rank) * CONSUMERS + c], epoch);
        continue;
      }
      if (p.kt0 > 0) {
        // The owner of a shared tile: add the partials of every lower-ranked cluster holding part of it.
        const long long tile_first = (long long)(p.t - sch.dp_tiles) * sch.k_tiles;
        for (int j = sch.holder(tile_first); j < cluster_id; ++j) {
          if (sch.lo(j) == sch.lo(j + 1)) continue;   // an empty range holds nothing (the host avoids them)
          const int f = (j * CLUSTER + rank) * CONSUMERS + c;
          if (t128 == 0)
            while (flag_acquire(&flags[f]) != epoch) {
            }
          wg::named_sync(1 + c, 128);                // the flag was acquired before anyone reads
          const float4* slot = (const float4*)(workspace + (size_t)f * PART_FLOATS);
#pragma unroll
          for (int q = 0; q < BN / 8; ++q) {
            const float4 v = __ldcg(&slot[q * 128 + t128]);
            acc[4 * q] += v.x; acc[4 * q + 1] += v.y; acc[4 * q + 2] += v.z; acc[4 * q + 3] += v.w;
          }
        }
      }

      // Epilogue (as rung 8): 64 x 256 fp32 -> bf16 -> shared (two halves of 64 x 128) -> TMA store.
#pragma unroll
      for (int h = 0; h < BN / 128; ++h) {
        if (t128 == 0) tma::wait_read<0>();
        wg::named_sync(1 + c, 128);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const float* d = &acc[(h * 16 + j) * 4];
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int row = 16 * w + l / 4 + 8 * hr;
            const int off = (j / 8) * 8192 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + (l % 4) * 4;
            wg::st_shared(myC + off, wg::pack_bf16x2(d[2 * hr], d[2 * hr + 1]));
          }
        }
        tma::fence_proxy_async();
        wg::named_sync(1 + c, 128);
        if (t128 == 0) {
          tma::store_2d(&mapC, n0 + h * 128, m0 + c * 64, myC);
          tma::store_2d(&mapC, n0 + h * 128 + 64, m0 + c * 64, myC + 8192);
          tma::commit();
        }
      }
    }
    if (t128 == 0) tma::wait_all<0>();
  }
  wg::cluster_sync();
}
