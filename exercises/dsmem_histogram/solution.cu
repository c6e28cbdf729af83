// histogram.cu - exercise dsmem_histogram: a histogram too large for one block's shared memory,
// spread over the shared memory of a thread-block cluster (DSMEM).
// judge: target=sm_90a features=cluster.barrier
// Check: python practice/judge.py check dsmem_histogram
//
// hist[b] += number of i < n with x[i] == b, for 0 <= x[i] < bins. The grader zeroes hist, then
// launches cluster_histogram once with grid (BLOCKS, 1, 1), 256 threads, clusters of
// (CLUSTER, 1, 1) and 4 * ceil(bins / CLUSTER) bytes of dynamic shared memory: block rank r of
// a cluster owns bins [r * slice, (r + 1) * slice). It reads CLUSTER and BLOCKS from this file.
#include "cluster.cuh"

#ifndef CLUSTER
#define CLUSTER 2        // blocks per cluster: 2, 4 or 8 (portable sizes)
#define BLOCKS 132       // the grid, in blocks: a multiple of CLUSTER
#endif

extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(256) cluster_histogram(const int* __restrict__ x, int n,
                                                                    int bins, unsigned* hist) {
  extern __shared__ unsigned counts[];                 // this block's slice of the bins
  const int slice = (bins + CLUSTER - 1) / CLUSTER;
  const unsigned rank = cluster::rank();
  const int lo = static_cast<int>(rank) * slice;
  const int cnt = max(0, min(slice, bins - lo));
  // BEGIN SOLUTION
  for (int i = threadIdx.x; i < slice; i += blockDim.x) counts[i] = 0;
  // Barrier 1: every slice of the cluster is zeroed before any block adds into a peer's slice.
  cluster::sync();

  auto add = [&](int b) {
    const unsigned owner = static_cast<unsigned>(b) / slice;
    const unsigned off = static_cast<unsigned>(b) - owner * slice;
    if (owner == rank)
      atomicAdd(&counts[off], 1u);                     // own slice: a plain shared atomic
    else
      cluster::add(cluster::map(&counts[off], owner), 1u);   // a peer's slice, through DSMEM
  };
  const int stride = gridDim.x * blockDim.x;
  const int n4 = n / 4;
  const int4* x4 = reinterpret_cast<const int4*>(x);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const int4 v = x4[i];
    add(v.x); add(v.y); add(v.z); add(v.w);
  }
  for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) add(x[i]);

  // Barrier 2: every add of every peer has landed in this slice, and no peer will touch it
  // again, so it may be read out, and the block may exit afterwards.
  cluster::sync();
  for (int i = threadIdx.x; i < cnt; i += blockDim.x)
    if (counts[i]) atomicAdd(&hist[lo + i], counts[i]);
  // END SOLUTION
  //> // 1. zero your slice; 2. a cluster barrier; 3. count every element into the slice of the
  //> //    block that owns its bin (cluster::map + cluster::add for a peer's slice);
  //> // 4. a cluster barrier; 5. add your slice's non-zero counts into hist.
}
