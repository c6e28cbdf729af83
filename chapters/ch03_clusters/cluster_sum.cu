// cluster_sum.cu - each block of a cluster sums its stretch of the input; rank 0 adds its peers'
// partial sums by reading their shared memory (DSMEM) and writes one value per cluster.
// judge: target=sm_90a features=cluster.barrier
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch03_clusters/cluster_sum.cu').sass)"
//
// out[c] = sum of in[c * size * per_block ... (c + 1) * size * per_block), c = cluster id.
// cluster_sum works for any cluster size chosen at launch (judge.gpu.launch.launch(cluster=(n,1,1)));
// cluster_sum_pair fixes the size to 2 at compile time (__cluster_dims__), launchable by CuPy.
// cluster_sum_early_exit breaks the rule below on purpose (section 3 of the notebook).
#include "cluster.cuh"

#ifndef THREADS
#define THREADS 256
#endif

__device__ __forceinline__ float block_sum(const float* src, int n, float* warp_sums) {
  float v = 0.f;
  for (int i = threadIdx.x; i < n; i += THREADS) v += src[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.f;
  if (threadIdx.x == 0)
    for (int w = 0; w < THREADS / 32; ++w) s += warp_sums[w];
  return s;                                   // valid in thread 0
}

template <bool WAIT_BEFORE_EXIT>
__device__ __forceinline__ void sum_body(const float* in, float* out, int per_block, unsigned delay_ns) {
  __shared__ float warp_sums[THREADS / 32];
  __shared__ float mine;                      // this block's partial sum: what the peers read
  float s = block_sum(in + static_cast<size_t>(blockIdx.x) * per_block, per_block, warp_sums);
  if (threadIdx.x == 0) mine = s;
  // Barrier 1 (release/acquire): every block's `mine` is written and visible cluster-wide.
  cluster::sync();
  if (cluster::rank() == 0 && threadIdx.x == 0) {
    if (!WAIT_BEFORE_EXIT)                    // give the peers time to leave (the demo only)
      for (unsigned t = 0; t < delay_ns; t += 1000) __nanosleep(1000);
    float total = mine;
    for (unsigned r = 1; r < cluster::size(); ++r) total += cluster::ld_f32(cluster::map(&mine, r));
    out[cluster::id_x()] = total;
  }
  // Barrier 2. RULE: a block's shared memory is released when the block exits. No block may
  // exit while a peer can still read (or write) its shared memory: wait here until rank 0 is done.
  if (WAIT_BEFORE_EXIT) cluster::sync();
}

extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(THREADS) cluster_sum(const float* in, float* out, int per_block) {
  sum_body<true>(in, out, per_block, 0);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS)
cluster_sum_pair(const float* in, float* out, int per_block) {
  sum_body<true>(in, out, per_block, 0);
}

// WRONG on purpose: no barrier before exit; rank 0 reads its peers after `delay_ns`.
extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(THREADS)
cluster_sum_early_exit(const float* in, float* out, int per_block, unsigned delay_ns) {
  sum_body<false>(in, out, per_block, delay_ns);
}
