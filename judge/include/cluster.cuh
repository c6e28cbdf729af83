// cluster.cuh - the course's device-side helpers for thread-block clusters, distributed shared
// memory (DSMEM) and TMA multicast: inline PTX only, for sm_90+.
// Use: #include "cluster.cuh" in a .cu file (judge.gpu.build.compile inlines it). Pairs with tma.cuh.
//
// A cluster is a group of up to 8 blocks (16 with the non-portable attribute) that the hardware
// promises to run AT THE SAME TIME on one GPC. Because they are co-resident, a block may read,
// write and atomically update the shared memory of the other blocks of its cluster (DSMEM), and
// wait for them at a cluster-wide barrier. A TMA load may deliver one tile into several of them.
#pragma once

// CLUSTER_ATTR: empty by default (the cluster size is chosen at launch, judge.gpu.launch.launch(...,
// cluster=...)). Built with -DCLUSTER_DIMS=n it fixes the size at compile time, __cluster_dims__(n,1,1),
// and a plain CuPy RawKernel launch of a grid that is a multiple of n then runs clusters of n.
#ifdef CLUSTER_DIMS
#define CLUSTER_ATTR __cluster_dims__(CLUSTER_DIMS, 1, 1)
#else
#define CLUSTER_ATTR
#endif

namespace cluster {

// ------------------------------------------------------------------------- who am I
// %cluster_ctarank: this block's rank inside its cluster, 0 .. size-1. It is NOT blockIdx.x % size
// in general: for a 2-D cluster it is x + y * dim.x of the block's position inside the cluster.
__device__ __forceinline__ unsigned rank() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
__device__ __forceinline__ unsigned size() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r;
}
// Which cluster of the grid (x only: the course's clusters lie along x).
__device__ __forceinline__ unsigned id_x() {
  unsigned r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r;
}
__device__ __forceinline__ unsigned count_x() {
  unsigned r; asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r)); return r;
}
// The SM this block runs on (valid while it runs; a different launch may place it elsewhere).
__device__ __forceinline__ unsigned smid() {
  unsigned r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r;
}
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

// ------------------------------------------------------------------------- the cluster barrier
// Every non-exited thread of every block of the cluster must arrive before any wait returns.
// arrive.release + wait.acquire (the defaults of sync()) order memory: writes made before the
// arrive (to own or peer shared memory) are visible to every thread after its wait.
// arrive.relaxed orders nothing: use it only where no data crosses the barrier (e.g. "all
// blocks have started").
__device__ __forceinline__ void arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void sync() { arrive(); wait(); }

// ------------------------------------------------------------------------- DSMEM addresses
// mapa: the address of the same shared-memory offset in block `peer` of this cluster, as a
// 32-bit .shared::cluster address. The offset is the same in every block because every block
// of a launch has the same shared-memory layout.
__device__ __forceinline__ unsigned map(const void* local, unsigned peer) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(local)), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(peer));
  return r;
}
// RULE: a peer's shared memory exists only while that block runs. Before the first access,
// a cluster barrier proves the peer has started (and initialised what you read); before a
// block exits, a cluster barrier proves no peer will touch its shared memory any more.
__device__ __forceinline__ unsigned ld(unsigned cluster_addr) {
  unsigned v; asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 ld4(unsigned cluster_addr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(cluster_addr) : "memory");
  return v;
}
__device__ __forceinline__ void st(unsigned cluster_addr, unsigned v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(cluster_addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_f32(unsigned cluster_addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" :: "r"(cluster_addr), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_f32(unsigned cluster_addr) {
  float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_addr) : "memory");
  return v;
}
// An atomic add whose result is not needed (red), relaxed, at cluster scope: only blocks of this
// cluster can see this memory, so nothing wider than the cluster needs ordering.
__device__ __forceinline__ void add(unsigned cluster_addr, unsigned v) {
  asm volatile("red.relaxed.cluster.shared::cluster.add.u32 [%0], %1;" :: "r"(cluster_addr), "r"(v) : "memory");
}

// ------------------------------------------------------------------------- multicast TMA
// After mbarrier.init, before a PEER's TMA may signal this barrier: make the init visible at
// cluster scope (then a cluster barrier).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One TMA load, delivered to the same shared-memory offset of every block whose bit is set in
// `mask` (bit r = cluster rank r). Each destination block's mbarrier at the offset of `bar` is
// signalled with the bytes that block received. RULE: every destination block announces those
// bytes with its OWN arrive_expect_tx on its own barrier; a destination that never does waits
// forever (its phase cannot complete), and a block that announced bytes that nobody sends too.
__device__ __forceinline__ void load_2d_multicast(void* dst, const void* map, int x, int y,
                                                  unsigned long long* bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
                  "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
                  "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "h"(mask)
               : "memory");
}

}  // namespace cluster
