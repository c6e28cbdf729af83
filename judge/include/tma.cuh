// tma.cuh - the course's device-side TMA and mbarrier helpers: inline PTX only, for sm_90+.
// Use: #include "tma.cuh" in a .cu file; judge.gpu.build.compile inlines it (no <cuda.h>, no
// <cuda/ptx>, no <cuda/barrier>: none of them is needed, and <cuda.h> does not compile under NVRTC).
// Host side: judge/hw/tma.py builds the TensorMap these functions take.
//
// ORDER: coordinates are INNERMOST FIRST, as in the tensor map: for a row-major (rows, cols)
// tensor, the tile at row y, column x is load_2d(dst, map, x, y, bar).
#pragma once

// The 128-byte CUtensorMap, declared here because <cuda.h> is out of reach under NVRTC.
// The driver wants it 64-byte aligned; CUDA 13's own header aligns it to 128, and so do we.
struct alignas(128) TensorMap { unsigned long long opaque[16]; };

namespace tma {

// A shared-memory address as the 32-bit value PTX's .shared::cta operands take.
__device__ __forceinline__ unsigned smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The tensor map operand is its generic address. A `const __grid_constant__ TensorMap`
// parameter and a `__constant__ TensorMap` both work; a copy in a local variable does NOT
// (the hardware reads the descriptor from parameter/constant/global memory, never from a
// thread's registers or local memory).
__device__ __forceinline__ unsigned long long gmap(const TensorMap* map) {
  return reinterpret_cast<unsigned long long>(map);
}

// ---------------------------------------------------------------------------------- fences
// fence.proxy.async orders this thread's generic-proxy accesses to shared memory with later
// async-proxy (TMA) accesses. Two places need it:
//   1. after mbarrier.init, before TMA may signal the barrier (the init is a generic write);
//   2. after threads write a tile with ordinary stores, before a TMA store reads it:
//      EVERY writing thread fences, then __syncthreads(), then one thread issues the store.
// The other direction (TMA wrote, threads read) needs no fence: observing the mbarrier's
// phase complete makes the TMA's writes visible to the waiting thread (PTX ISA, cp.async.bulk.tensor
// and "mbarrier.test_wait / try_wait").
// Two cases the list above leaves out:
//   3. threads READ a slot, then a TMA load refills it (every ring buffer): no proxy fence. The
//      readers are done with their loads before they arrive on the slot's "empty" barrier (or meet at
//      __syncthreads()), and the producer issues the refill only after observing that arrival; a read
//      that has returned its value cannot see a later write. CUTLASS's TMA pipelines release a
//      consumed slot with a plain mbarrier arrive for this reason. Writes are what need the fence.
//   4. an mbarrier that TMA loads or threads of OTHER blocks of a cluster will signal (multicast):
//      init, then fence.mbarrier_init.release.cluster, then a cluster barrier (barrier.cluster.arrive
//      .release + wait.acquire) before any block may use it (PTX ISA, membar/fence: .mbarrier_init).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------- mbarrier
// An mbarrier is 8 bytes of shared memory, 8-byte aligned. A phase completes when BOTH its
// pending arrival count reaches zero AND its transaction count (bytes announced with
// expect_tx minus bytes the TMA has delivered) reaches zero. Then the phase parity flips
// and the counts reset for the next phase. Ranges (PTX ISA, "Contents of the mbarrier object"):
// arrivals 1 .. 2^20 - 1, tx-count -(2^20 - 1) .. 2^20 - 1 bytes per phase (so one phase can
// announce at most 1 MiB - 1 byte; bytes that land before their expect_tx make it negative).
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
  // One thread initializes; follow with fence_proxy_async() and __syncthreads(). `arrivals` is in
  // 1 .. 2^20 - 1 (PTX ISA, "Contents of the mbarrier object"). RULE: never init a live barrier
  // again: mbarrier.init on a location that holds a valid mbarrier is undefined; mbar_inval() first.
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(bar)), "r"(arrivals) : "memory");
}

__device__ __forceinline__ void mbar_inval(unsigned long long* bar) {
  // Needed only before the 8 bytes are reused as anything other than this barrier.
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(smem(bar)) : "memory");
}

// Arrive once and announce `bytes` more transaction bytes for the current phase.
// RULE: `bytes` must equal exactly what the copies signalling this barrier will deliver:
// for a TMA box that is the WHOLE box (out-of-bounds elements are filled and counted).
// Too many: the phase never completes and every waiter hangs. Too few: the phase completes
// while data is still landing. ORDER: the expect-tx must come before the arrival that could
// complete the phase (here they are one operation); the copy itself may be issued, and even
// land, earlier (chapters/ch02_tma/tx_late.cu).
__device__ __forceinline__ void arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :: "r"(smem(bar)), "r"(bytes) : "memory");
}

// A plain arrival (consumers releasing a buffer, for example).
__device__ __forceinline__ void arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem(bar)) : "memory");
}

// Has the phase with this parity completed? One try. try_wait may suspend the thread until the
// phase completes or a system-dependent time limit passes (PTX ISA 9.7.13.15.16);
// on the H200 a loop of them polled about 70 times over 540,000 cycles (chapters/ch02_tma/topics.py
// wait_kinds), where a test_wait loop polled 5,456 times.
__device__ __forceinline__ bool try_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done) : "r"(smem(bar)), "r"(parity) : "memory");
  return done != 0;
}

// Wait until the phase with parity `parity` (0 for phase 0, 2, 4...; 1 for phase 1, 3...)
// has completed. RULE: a waiter tracks the parity itself and flips it each time it reuses
// the barrier; and every phase must be observed complete (a successful wait) before anyone
// arrives for the next one, or a parity wait cannot tell phase k from phase k + 2. A freshly initialized barrier behaves as if the phase before phase 0 (parity 1)
// had just completed: waiting on parity 1 returns at once, waiting on parity 0 blocks.
__device__ __forceinline__ void wait(unsigned long long* bar, unsigned parity) {
  while (!try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------------------------- TMA loads
// One thread issues a whole box. RULES: the shared destination is 128-byte aligned (a
// destination that is not aligned to the swizzle's repeat, 256/512/1024 bytes, is legal but
// shifts the pattern: it starts at line (address / 128) % 8, measured in swizzle_shifted.cu);
// the barrier must be initialized and fenced before; a LOAD's coordinates may be negative or
// run past the tensor: those elements are filled (zero, or NaN if the map says so).
__device__ __forceinline__ void load_2d(void* dst, const TensorMap* map, int x, int y,
                                        unsigned long long* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               :: "r"(smem(dst)), "l"(gmap(map)), "r"(x), "r"(y), "r"(smem(bar)) : "memory");
}

__device__ __forceinline__ void load_3d(void* dst, const TensorMap* map, int x, int y, int z,
                                        unsigned long long* bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(smem(dst)), "l"(gmap(map)), "r"(x), "r"(y), "r"(z), "r"(smem(bar)) : "memory");
}

// Fetch the descriptor into the TMA unit's cache ahead of the first copy (optional).
__device__ __forceinline__ void prefetch_map(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(gmap(map)) : "memory");
}

// ---------------------------------------------------------------------------------- TMA stores
// RULE: before a store, the tile's writers have run fence_proxy_async() and met at a barrier.
// Elements of the box past the tensor's far edges are not written (the store is clipped; in the
// innermost dimension to 16-byte chunks, measured). A STORE may not start at negative
// coordinates: on the H200 a store at (-16, -4) stopped the kernel with
// CUDA_ERROR_ILLEGAL_INSTRUCTION (chapters/ch02_tma/store_negative.cu, topics_h200.json).
// Completion is tracked by bulk groups, not by an mbarrier: commit(), then wait_read<N>().
__device__ __forceinline__ void store_2d(const TensorMap* map, int x, int y, const void* src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
               :: "l"(gmap(map)), "r"(x), "r"(y), "r"(smem(src)) : "memory");
}

__device__ __forceinline__ void store_3d(const TensorMap* map, int x, int y, int z, const void* src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];"
               :: "l"(gmap(map)), "r"(x), "r"(y), "r"(z), "r"(smem(src)) : "memory");
}

// global[box] += shared tile, element by element, performed by the TMA unit (the element
// type comes from the map). Several blocks may reduce into the same box.
__device__ __forceinline__ void reduce_add_2d(const TensorMap* map, int x, int y, const void* src) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
               " [%0, {%1, %2}], [%3];"
               :: "l"(gmap(map)), "r"(x), "r"(y), "r"(smem(src)) : "memory");
}

// Close the group of bulk stores/reductions this thread issued since the last commit.
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still READING shared memory.
// RULE: before the block exits or overwrites a stored tile, wait_read<0>() (or <N> for a
// ring of N buffers still in flight): shared memory must outlive the reads of the TMA.
template <int N>
__device__ __forceinline__ void wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}

// Wait until at most N groups are still in flight at all (their global writes done too).
template <int N>
__device__ __forceinline__ void wait_all() {
  asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}

}  // namespace tma
