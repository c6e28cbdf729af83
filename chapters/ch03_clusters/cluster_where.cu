// cluster_where.cu - where the blocks of a cluster run: rank, cluster id and SM of every block.
// judge: target=sm_90a features=cluster.barrier
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch03_clusters/cluster_where.cu').sass)"
//
// Launched with a runtime cluster size (judge.gpu.launch.launch(..., cluster=(c, 1, 1))), or through
// the compile-time variant whose cluster shape is part of the kernel (__cluster_dims__).
// Each block's thread 0 writes 8 words: blockIdx.x, cluster rank, cluster id, cluster count,
// cluster size, SM id, and the low 32 bits of %globaltimer (ns) when it started and when it
// stopped spinning for spin_ns: overlapping intervals show how many clusters ran at once. Blocks of one cluster always share a GPC, so SMs seen in one cluster
// are SMs of one GPC: chapters/ch03_clusters/run.py infers the GPC layout from that.
#include "cluster.cuh"

#ifndef WORDS
#define WORDS 8
#endif

__device__ __forceinline__ void record(unsigned* out, unsigned spin_ns) {
  const unsigned long long t0 = cluster::globaltimer();
  // relaxed arrive: this barrier only proves every block of the cluster has started; no data
  // crosses it, so it needs no release/acquire ordering.
  cluster::arrive_relaxed();
  cluster::wait();
  if (threadIdx.x == 0) {
    unsigned* o = out + WORDS * blockIdx.x;
    o[0] = blockIdx.x;
    o[1] = cluster::rank();
    o[2] = cluster::id_x();
    o[3] = cluster::count_x();
    o[4] = cluster::size();
    o[5] = cluster::smid();
    unsigned long long t1 = t0;
    while (t1 - t0 < spin_ns) t1 = cluster::globaltimer();
    o[6] = static_cast<unsigned>(t0);
    o[7] = static_cast<unsigned>(t1);
  }
}

extern "C" __global__ void CLUSTER_ATTR cluster_where(unsigned* out, unsigned spin_ns) { record(out, spin_ns); }

// The same body with the cluster shape fixed at compile time: a plain launch of a grid that is a
// multiple of 4 runs it in clusters of 4; a launch-time cluster size must not contradict it.
extern "C" __global__ void __cluster_dims__(4, 1, 1) cluster_where_dims4(unsigned* out, unsigned spin_ns) {
  record(out, spin_ns);
}

// What mapa returns: for every rank r of the cluster and a few shared-memory offsets, block 0
// writes map(&probe[i], r) next to the plain 32-bit shared address of &probe[i].
// out[(r * 4 + i) * 2 + 0] = cvta shared address of probe[16 * i]; [.. + 1] = mapa to rank r.
extern "C" __global__ void mapa_probe(unsigned* out) {
  __shared__ unsigned probe[64];
  cluster::sync();
  if (cluster::rank() == 0 && threadIdx.x == 0) {
    for (unsigned r = 0; r < cluster::size(); ++r)
      for (int i = 0; i < 4; ++i) {
        out[(r * 4 + i) * 2 + 0] = static_cast<unsigned>(__cvta_generic_to_shared(&probe[16 * i]));
        out[(r * 4 + i) * 2 + 1] = cluster::map(&probe[16 * i], r);
      }
  }
  cluster::sync();
}
