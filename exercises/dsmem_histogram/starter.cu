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
  //> // 1. zero your slice; 2. a cluster barrier; 3. count every element into the slice of the
  //> //    block that owns its bin (cluster::map + cluster::add for a peer's slice);
  //> // 4. a cluster barrier; 5. add your slice's non-zero counts into hist.
}
