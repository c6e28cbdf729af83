// blockscaled_probe.cu - one issue of each block-scaled tcgen05.mma kind, and a 2-SM MMA: SASS probes, not GEMMs.
// judge: target=sm_100a features=tcgen05.f8f6f4,tcgen05.f4,tcgen05.2cta,tmem.cp,tcgen05.commit,tmem.alloc,tmem.dealloc,cluster.barrier
// Build and inspect (any machine): python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/blockscaled_probe.cu', target='sm_100a').sass)"
// Each kernel allocates tensor memory, copies scale factors from shared memory into it
// (tcgen05.cp), issues ONE MMA of its kind and waits for its commit. The descriptors point at
// shared memory the kernel never fills: these kernels exist to be compiled and read, never run.
// The block-scaled kinds and tcgen05.cp run on the CPU model in gemm_mxfp8.cu, a real tile (blockscaled.py).
//
// Block-scaled kinds (D = (A * scale_A) (B * scale_B) + D, scales per block of K, read from TMEM):
//   kind::mxf8f6f4  A, B: E4M3 / E5M2 / E3M2 / E2M3 / E2M1, one E8M0 scale per 32 elements (MXFP8/6/4)
//   kind::mxf4      A, B: E2M1 only, E8M0 scale per 32 (MXFP4)
//   kind::mxf4nvf4  A, B: E2M1, a scale per 32 or, with .block16, per 16; E4M3 scales (chosen in the
//                   instruction descriptor) with .block16 are NVFP4
#include "tcgen05.cuh"   // judge/include: tensor memory, tcgen05.mma and its commit (namespace tc)

#ifndef SCALE_COLS
#define SCALE_COLS 32     // columns for the scale factors of A and B, after the 128 accumulator columns
#endif

__device__ __forceinline__ void copy_scales(unsigned taddr, unsigned long long sdesc) {
  // 128 lanes x 128 bits, from the 32x128b layout in shared memory replicated over 4 warps' quarters
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" :: "r"(taddr), "l"(sdesc) : "memory");
}

#define PROBE(NAME, KIND)                                                                         \
extern "C" __global__ void __launch_bounds__(128, 1) NAME(unsigned long long a_desc,               \
    unsigned long long b_desc, unsigned long long sf_desc, unsigned idesc) {                       \
  __shared__ alignas(8) unsigned long long done;                                                   \
  __shared__ unsigned base;                                                                        \
  const int warp = threadIdx.x / 32;                                                               \
  if (warp == 0) { tc::alloc(&base, 256); tc::relinquish(); }                                      \
  if (threadIdx.x == 0) { tc::mbar_init(&done, 1); tc::fence_proxy_async(); }                     \
  tc::fence_before(); __syncthreads(); tc::fence_after();                                          \
  const unsigned d = base, sfa = base + 128, sfb = base + 128 + SCALE_COLS;                       \
  if (threadIdx.x == 0) {                                                                          \
    copy_scales(sfa, sf_desc);                                                                     \
    copy_scales(sfb, sf_desc);                                                                     \
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %4, 0;\n"                                     \
                 " tcgen05.mma.cta_group::1." KIND " [%0], %1, %2, %3, [%5], [%6], p;\n}"           \
                 :: "r"(d), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(0u), "r"(sfa), "r"(sfb)       \
                 : "memory");                                                                      \
    tc::commit(&done);                                                                             \
  }                                                                                                \
  tc::mbar_wait(&done, 0);                                                                         \
  tc::fence_before(); __syncthreads();                                                             \
  if (warp == 0) { tc::fence_after(); tc::dealloc(base, 256); }                                    \
}

PROBE(probe_mxf8f6f4, "kind::mxf8f6f4.block_scale.block32")
PROBE(probe_mxf4, "kind::mxf4.block_scale.block32")
PROBE(probe_nvf4, "kind::mxf4nvf4.block_scale.block16")

// The 2-SM MMA: a cluster of 2 CTAs (a "CTA pair", PTX ISA, tcgen05 chapter). With cta_group::2 one
// thread of ONE CTA of the pair issues an MMA of M = 256 for both; the PTX ISA does not fix which, and
// this probe (like CUTLASS's 2-SM kernels) issues from the even rank. Each CTA's shared memory holds its
// own 128 rows of A and its half of B's N rows (the same descriptors name both halves), and each CTA's
// tensor memory holds its 128 lanes of the accumulator. Both CTAs allocate with cta_group::2, and the
// commit, with .multicast::cluster and a CTA mask, arrives on the mbarrier of every CTA the mask names
// (here both). The CPU model runs this form; gemm_2cta.cu is the chapter's GEMM built on it.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1) probe_2sm(
    unsigned long long a_desc, unsigned long long b_desc, unsigned idesc) {
  __shared__ alignas(8) unsigned long long done;
  __shared__ unsigned base;
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;"
                 :: "r"(tc::smem(&base)), "r"(128u) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) { tc::mbar_init(&done, 1); tc::fence_proxy_async(); }
  tc::fence_before();
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  tc::fence_after();
  if (rank == 0 && threadIdx.x == 0) {
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %4, 0;\n"
                 " tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n}"
                 :: "r"(base), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(0u) : "memory");
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                 :: "r"(tc::smem(&done)), "h"((unsigned short)0x3) : "memory");
  }
  tc::mbar_wait(&done, 0);
  tc::fence_before();
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (warp == 0) {
    tc::fence_after();
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" :: "r"(base), "r"(128u) : "memory");
  }
}
