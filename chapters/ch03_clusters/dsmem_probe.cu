// dsmem_probe.cu - latency and bandwidth of a block reading its own shared memory, a peer's
// shared memory (DSMEM) and L2 (global, L1 bypassed), all three by the same method.
// judge: target=sm_90a features=cluster.barrier
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch03_clusters/dsmem_probe.cu').sass)"
//
// Three targets, one kernel each (a template parameter, so the timed loop holds one kind of load):
// _local: own shared memory (ld.shared), _peer: rank 1's shared memory (ld.shared::cluster on a
// mapa address), _l2: global memory with ld.global.cg (cached in L2 only, never in L1).
// Launch with clusters of 2; rank 0 measures, rank 1 only lends its shared memory.
// Latency: one thread follows a random cycle through a table (each load's address is the value
// of the load before), so the time per step is the latency of one load.
// Bandwidth: every thread of rank 0 streams 16-byte loads over the table, `reps` times.
#include "cluster.cuh"

template <int mode>
__device__ __forceinline__ unsigned load_u32( unsigned sbase, const unsigned* g, unsigned i) {
  unsigned v;
  if constexpr (mode == 0)
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(sbase + 4 * i) : "memory");
  else if constexpr (mode == 1)
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(sbase + 4 * i) : "memory");
  else
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(g + i) : "memory");
  return v;
}

template <int mode>
__device__ __forceinline__ uint4 load_v4( unsigned sbase, const uint4* g, unsigned i) {
  uint4 v;
  if constexpr (mode == 0)
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(sbase + 16 * i) : "memory");
  else if constexpr (mode == 1)
    asm volatile("ld.shared::cluster.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(sbase + 16 * i) : "memory");
  else
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(g + i) : "memory");
  return v;
}

template <int mode>
__device__ __forceinline__ unsigned base_for( const void* table) {
  unsigned own = static_cast<unsigned>(__cvta_generic_to_shared(table));
  if constexpr (mode == 1) return cluster::map(table, 1);
  return own;
}

// out[4 * cluster]: cycles, nanoseconds (globaltimer), final index (keeps the chase alive), steps
template <int mode>
__device__ void latency(const unsigned* perm, int n, int steps, unsigned long long* out) {
  extern __shared__ unsigned table[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) table[i] = perm[i];
  cluster::sync();                            // the peer's table is filled before anyone reads it
  if (cluster::rank() == 0 && threadIdx.x == 0) {
    unsigned sbase = base_for<mode>(table);
    unsigned idx = 0;
    for (int s = 0; s < n; ++s) idx = load_u32<mode>(sbase, perm, idx);      // warm the path
    unsigned long long c0 = clock64(), t0 = cluster::globaltimer();
    for (int s = 0; s < steps; ++s) idx = load_u32<mode>(sbase, perm, idx);
    unsigned long long c1 = clock64(), t1 = cluster::globaltimer();
    unsigned long long* o = out + 4 * cluster::id_x();
    o[0] = c1 - c0; o[1] = t1 - t0; o[2] = idx; o[3] = steps;
  }
  cluster::sync();                            // rank 1 stays until rank 0 stops reading it
}

// out[4 * cluster]: cycles, nanoseconds, bytes read by rank 0, checksum (sum of the words read, mod 2^32)
template <int mode>
__device__ void bandwidth(const uint4* src, int n_vec, int reps, unsigned long long* out) {
  extern __shared__ uint4 buf[];
  for (int i = threadIdx.x; i < n_vec; i += blockDim.x) buf[i] = src[i];
  cluster::sync();
  if (cluster::rank() == 0) {
    unsigned sbase = base_for<mode>(buf);
    unsigned acc = 0;
    __syncthreads();
    unsigned long long c0 = clock64(), t0 = cluster::globaltimer();
    for (int r = 0; r < reps; ++r)
      for (int i = threadIdx.x; i < n_vec; i += blockDim.x) {
        uint4 v = load_v4<mode>(sbase, src, i);
        acc += v.x + v.y + v.z + v.w;
      }
    __syncthreads();
    unsigned long long c1 = clock64(), t1 = cluster::globaltimer();
    __shared__ unsigned check;
    if (threadIdx.x == 0) check = 0;
    __syncthreads();
    atomicAdd(&check, acc);
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long* o = out + 4 * cluster::id_x();
      o[0] = c1 - c0; o[1] = t1 - t0; o[2] = 16ull * n_vec * reps; o[3] = check;
    }
  }
  cluster::sync();
}

#define PROBES(name, mode)                                                                          \
  extern "C" __global__ void CLUSTER_ATTR dsmem_latency_##name(const unsigned* perm, int n, int steps,           \
                                                  unsigned long long* out) {                      \
    latency<mode>(perm, n, steps, out);                                                           \
  }                                                                                               \
  extern "C" __global__ void CLUSTER_ATTR dsmem_bandwidth_##name(const uint4* src, int n_vec, int reps,          \
                                                    unsigned long long* out) {                    \
    bandwidth<mode>(src, n_vec, reps, out);                                                       \
  }
PROBES(local, 0)
PROBES(peer, 1)
PROBES(l2, 2)
