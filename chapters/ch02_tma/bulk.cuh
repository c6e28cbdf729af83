// bulk.cuh - chapter 2's helpers beyond the tensor copy: 1-D bulk copies, L2 prefetch and cache
// hints, elect.sync, cp.async completion on an mbarrier, try_wait / test_wait. Inline PTX, sm_90+.
// Use: #include "bulk.cuh" after "tma.cuh" in a chapters/ch02_tma/*.cu file.
#pragma once
#include "tma.cuh"

namespace bulk {

// elect.sync (PTX ISA 9.7.13, elect.sync; sm_90): of the lanes in the mask, exactly one gets true, the
// same one in every lane's answer. RULE: every lane of the mask executes it together (.sync),
// so call it from converged code, e.g. `if (warp == 0 && bulk::elect_one())`.
__device__ __forceinline__ bool elect_one() {
  unsigned is_elected;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "elect.sync _|p, 0xffffffff;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(is_elected));
  return is_elected != 0;
}

// 1-D bulk copy global -> shared (PTX cp.async.bulk, no tensor map): `bytes` a multiple of 16,
// both addresses 16-byte aligned. Completes on an mbarrier, exactly like a tensor load: announce
// the bytes on the barrier (arrive_expect_tx) for the phase this copy must complete.
__device__ __forceinline__ void load_1d(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(tma::smem(dst)), "l"(src), "r"(bytes), "r"(tma::smem(bar)) : "memory");
}

// The same with an L2 cache policy (createpolicy): a hint, never a change of the result.
__device__ __forceinline__ void load_1d_hint(void* dst, const void* src, unsigned bytes,
                                             unsigned long long* bar, unsigned long long policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1], %2, [%3], %4;"
               :: "r"(tma::smem(dst)), "l"(src), "r"(bytes), "r"(tma::smem(bar)), "l"(policy) : "memory");
}

// An L2 policy that marks the lines it touches as the first to evict (streamed data).
__device__ __forceinline__ unsigned long long policy_evict_first() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// 1-D bulk copy shared -> global, tracked by bulk groups (commit / wait_read), like a tensor store.
// RULE: threads that wrote `src` ran tma::fence_proxy_async() and met at a barrier first.
__device__ __forceinline__ void store_1d(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(dst), "r"(tma::smem(src)), "r"(bytes) : "memory");
}

// Ask L2 to fetch `bytes` of global memory ahead of use; nothing lands in shared memory and
// nothing signals completion (a hint: it may be dropped).
__device__ __forceinline__ void prefetch_l2(const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(src), "r"(bytes) : "memory");
}

// cp.async (chapter 1's copy) with src-size: copies `src_bytes` (0..16) and writes zeros to the
// rest of the 16 bytes of `dst`. src_bytes == 0 reads nothing: a tile edge costs no branch.
__device__ __forceinline__ void cp_async_16_zfill(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(tma::smem(dst)), "l"(src), "r"(src_bytes) : "memory");
}

// Make the mbarrier track this thread's earlier cp.async copies: when they have all landed, the
// barrier receives one arrival from this thread. .noinc: the arrival counts against the count
// given to mbarrier.init (so init with the number of threads that do this), instead of the
// pending count being raised by one first.
__device__ __forceinline__ void cp_async_arrive_noinc(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(tma::smem(bar)) : "memory");
}

// test_wait never blocks: it answers at once. try_wait may suspend the thread for a
// system-dependent time, or up to `ns` nanoseconds with the hint, before answering false.
__device__ __forceinline__ bool test_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(tma::smem(bar)), "r"(parity) : "memory");
  return done != 0;
}

__device__ __forceinline__ bool try_wait_hint(unsigned long long* bar, unsigned parity, unsigned ns) {
  unsigned done;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done) : "r"(tma::smem(bar)), "r"(parity), "r"(ns) : "memory");
  return done != 0;
}

}  // namespace bulk
