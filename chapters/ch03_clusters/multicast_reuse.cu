// multicast_reuse.cu - a GEMM-like reuse pattern: block (n, m) streams the row panel A[m] and
// the row panel B[n] through shared memory, K/64 tiles each, and accumulates sum(A .* B).
// Blocks with the same m (one cluster, along n) need the SAME A tiles: with MULTICAST=1 each of
// the CLUSTER blocks loads 1/CLUSTER of every A tile and the TMA delivers it to all of them.
// judge: target=sm_90a features=tma.load,tma.multicast,mbarrier.expect_tx,mbarrier.wait,cluster.barrier defines=MULTICAST=1,CLUSTER=2
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch03_clusters/multicast_reuse.cu', defines={'MULTICAST': 1, 'CLUSTER': 2}).sass)"
//
// out[m * gridDim.x + n] = sum over i < 64, k < K of A[64m + i, k] * B[64n + i, k]   (float32 sums)
// A and B are stored TILE-MAJOR (run.py tile_major): 64-column slab k of all M rows of A sits at
// rows [k * M, (k + 1) * M) of a (K/64 * M, 64) array, so each 64 x 64 tile is 16 KiB of
// consecutive memory. Maps (judge.hw.tma, innermost first): B box (64, 64); A box (64, 64 / CLUSTER)
// with multicast, (64, 64) without. Launch: grid (N / 64, M / 64), 256 threads, cluster (CLUSTER, 1, 1) when
// MULTICAST=1, dynamic shared memory STAGES * 32 KiB + 1 KiB.
#include "tma.cuh"
#include "cluster.cuh"

#ifndef MULTICAST
#define MULTICAST 1
#define CLUSTER 2
#define STAGES 4
#endif
#ifndef CLUSTER
#define CLUSTER 2
#endif
#ifndef STAGES
#define STAGES 4
#endif

constexpr int TILE = 64;                              // 64 x 64 float32 = 16 KiB per tile
constexpr int TILE_FLOATS = TILE * TILE;
constexpr unsigned TILE_BYTES = TILE_FLOATS * 4;
constexpr int THREADS = 256;

extern "C" __global__ void __launch_bounds__(THREADS, 1)
CLUSTER_ATTR multicast_reuse(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
                int K, int M, int N, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // 1024-byte alignment of the dynamic buffer is asked for, not promised: align by hand.
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  float* As = reinterpret_cast<float*>(base);                       // STAGES A tiles
  float* Bs = As + STAGES * TILE_FLOATS;                             // STAGES B tiles
  unsigned long long* full = reinterpret_cast<unsigned long long*>(Bs + STAGES * TILE_FLOATS);

  const int kt_count = K / TILE;
  const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
#if MULTICAST
  const unsigned rank = cluster::rank();
  constexpr int SLICE = TILE / CLUSTER;                              // rows of A this block loads
  constexpr unsigned short MASK = (1u << CLUSTER) - 1;               // deliver to every block
#endif

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) tma::mbar_init(&full[s], 1);
    tma::fence_proxy_async();
#if MULTICAST
    cluster::fence_mbarrier_init();     // peers' TMA will signal these barriers
#endif
  }
#if MULTICAST
  cluster::sync();                      // RULE: no peer multicasts into a barrier not yet initialised
#else
  __syncthreads();
#endif

  auto issue = [&](int kt, int s) {
    // Each destination announces its own bytes: a whole A tile (all slices, whoever sends them)
    // plus its own B tile. The multicast signals the barrier at the same offset in every block.
    tma::arrive_expect_tx(&full[s], 2 * TILE_BYTES);
    tma::load_2d(Bs + s * TILE_FLOATS, &mapB, 0, kt * N + n0, &full[s]);
#if MULTICAST
    cluster::load_2d_multicast(As + s * TILE_FLOATS + rank * SLICE * TILE, &mapA, 0,
                               kt * M + m0 + rank * SLICE, &full[s], MASK);
#else
    tma::load_2d(As + s * TILE_FLOATS, &mapA, 0, kt * M + m0, &full[s]);
#endif
  };

  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES && s < kt_count; ++s) issue(s, s);

  float acc = 0.f;
  for (int kt = 0; kt < kt_count; ++kt) {
    const int s = kt % STAGES;
    tma::wait(&full[s], (kt / STAGES) & 1);
    const float* a = As + s * TILE_FLOATS;
    const float* b = Bs + s * TILE_FLOATS;
#pragma unroll 4
    for (int i = threadIdx.x; i < TILE_FLOATS; i += THREADS) acc += a[i] * b[i];
#if MULTICAST
    // RULE: slot s of EVERY block is refilled by this block's next multicast, so every block of
    // the cluster must have finished reading slot s first: a cluster barrier, not __syncthreads.
    cluster::sync();
#else
    __syncthreads();
#endif
    if (threadIdx.x == 0 && kt + STAGES < kt_count) issue(kt + STAGES, s);
  }

  __shared__ float warp_sums[THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < THREADS / 32; ++w) t += warp_sums[w];
    out[blockIdx.y * gridDim.x + blockIdx.x] = t;
  }
}
