// tcgen05.cuh - the course's Blackwell (sm_100a) helpers: tensor memory and tcgen05 MMA, inline PTX only.
// Use: #include "tcgen05.cuh" in any kernel (chapter 5's, the tcgen05 exercises'); judge.gpu.build finds it
// in judge/include and inlines it: judge.gpu.build.compile(path, target="sm_100a").
// Nothing here runs on Hopper: every instruction below exists only on sm_100a / sm_103a.
//
// Tensor memory (TMEM): 128 lanes x 512 columns of 32-bit cells per SM, next to the tensor cores.
// An address is (lane << 16) | column. tcgen05.mma writes its accumulator there, not into registers.
#pragma once

namespace tc {

__device__ __forceinline__ unsigned smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ------------------------------------------------------------------------------ allocation
// RULE: one whole warp allocates (.sync.aligned), the column count is a power of two >= 32,
// and the allocation writes the TMEM base address into SHARED memory (not a register):
// every thread reads it from there after a barrier.
__device__ __forceinline__ void alloc(unsigned* dst_smem, unsigned ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
               :: "r"(smem(dst_smem)), "r"(ncols) : "memory");
}
// After its last alloc, a CTA gives up the right to allocate, so that a CTA waiting on the
// same SM for columns is not blocked behind it.
__device__ __forceinline__ void relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
// RULE: the same warp that allocated frees exactly what it allocated, after every MMA writing
// there has completed (its commit's mbarrier phase was waited) and every tcgen05.ld is done.
__device__ __forceinline__ void dealloc(unsigned taddr, unsigned ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols) : "memory");
}

// ------------------------------------------------------------------------------ ordering
// tcgen05 operations are asynchronous; these fences order them around a thread barrier
// (__syncthreads or an mbarrier wait): "before" on the side that finished, "after" on the side
// that continues.
__device__ __forceinline__ void fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
// Threads that wrote shared memory with ordinary stores must make them visible to the async
// proxy (which is how tcgen05.mma reads its operands) before the MMA is issued.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ------------------------------------------------------------------------------ mbarrier
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" :: "r"(smem(bar)), "r"(parity) : "memory");
}

// ------------------------------------------------------------------------------ MMA
// ONE thread issues the MMA for the whole CTA (on Hopper a warpgroup of 128 issued wgmma).
// D[tmem] (+)= A[smem] * B[smem]; accumulate = 0 overwrites D (the first K step).
__device__ __forceinline__ void mma_bf16(unsigned d_tmem, unsigned long long a_desc,
                                         unsigned long long b_desc, unsigned idesc, unsigned accumulate) {
  asm volatile(
      "{\n .reg .pred acc;\n"
      " setp.ne.u32 acc, %4, 0;\n"
      " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n}"
      :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}
// The MMAs this thread issued so far arrive (once) on the mbarrier when they have completed.
// This is the ONLY completion signal: there is no wait_group for tcgen05.mma.
__device__ __forceinline__ void commit(unsigned long long* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :: "r"(smem(bar)) : "memory");
}

// ------------------------------------------------------------------------------ TMEM <-> registers
// RULE: warp w of the CTA reaches lanes 32*(w % 4) .. 32*(w % 4) + 31 only. The 32x32b shape:
// thread t of the warp gets lane (base lane + t), 8 consecutive columns. The fp32 registers are the
// instruction's own destinations (a .b32 operand takes any 32-bit register): no instruction reads them
// between the load and the wait::ld that makes them valid.
__device__ __forceinline__ void ld_32x32b_x8(unsigned taddr, float (&v)[8]) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]), "=f"(v[4]), "=f"(v[5]), "=f"(v[6]), "=f"(v[7])
               : "r"(taddr));
}
__device__ __forceinline__ void st_32x32b_x1(unsigned taddr, float v) {
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" :: "r"(taddr), "r"(__float_as_uint(v)) : "memory");
}
// tcgen05.ld is asynchronous too: registers are valid only after wait::ld.
__device__ __forceinline__ void wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }

// ------------------------------------------------------------------------------ descriptors
// Shared-memory matrix descriptor (tcgen05 version), no swizzle, K-major operand stored as
// 8-row x 16-byte "core matrices": bits 0-13 start >> 4, 16-29 leading byte offset >> 4 (next
// core matrix along K), 32-45 stride byte offset >> 4 (next core matrix along M or N),
// bits 46-48 = 0b001 (the descriptor version sm_100 requires), 61-63 swizzle = 0 (none).
__device__ __forceinline__ unsigned long long smem_desc(const void* start, unsigned lbo, unsigned sbo) {
  unsigned long long d = 0;
  d |= (unsigned long long)((smem(start) >> 4) & 0x3FFF);
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= 1ull << 46;
  return d;
}
// Instruction descriptor of kind::f16: F32 accumulator (bits 4-5 = 1), A and B BF16 (bits 7-9
// and 10-12 = 1), both K-major (bits 15, 16 = 0), N >> 3 in bits 17-22, M >> 4 in bits 24-28.
__host__ __device__ constexpr unsigned idesc_bf16_f32(unsigned M, unsigned N) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((N >> 3) << 17) | ((M >> 4) << 24);
}

// The descriptor of a K-major bf16 tile written by a TMA box of 64 x rows with the 128B swizzle
// (PTX ISA 9.7.16.4.1, shared memory descriptor): start >> 4 in bits 0-13, leading byte offset
// unused for a swizzled K-major operand (16 bytes, field 1), stride byte offset 1024 (8 rows of
// 128 bytes) in bits 32-45, the fixed 0b001 in bits 46-48, base offset 0 (the slot is 1024-byte
// aligned), swizzle mode 2 = 128B in bits 61-63. RULE: the TMA swizzle and the descriptor's must be
// the same, or the MMA reads the wrong elements. A K step of 16 bf16 adds 32 bytes to the start
// (2 in the >> 4 field); the hardware applies the swizzle to the address bits, so this stays right.
__device__ __forceinline__ unsigned long long desc_sw128(const void* tile) {
  return (unsigned long long)((smem(tile) >> 4) & 0x3FFF) | (1ull << 16) | ((1024ull >> 4) << 32) |
         (1ull << 46) | (2ull << 61);
}

}  // namespace tc
