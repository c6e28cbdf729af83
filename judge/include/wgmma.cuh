// wgmma.cuh - the course's warpgroup-MMA helpers for sm_90a: shared-memory matrix descriptors,
// wgmma.mma_async wrappers (bf16 in, fp32 accumulate), register reallocation, the mbarrier and
// cluster operations Chapter 4's GEMM ladder adds to tma.cuh, and a bf16 pack for epilogues.
// Use: #include "wgmma.cuh" in a .cu file built with judge.gpu.build.compile(..., target="sm_90a");
// it includes tma.cuh. Inline PTX only (no <cuda.h>, no CCCL), so NVRTC from pip wheels suffices.
#pragma once
#include "tma.cuh"

namespace wg {

// ---------------------------------------------------------------------------------- descriptors
// A wgmma operand in shared memory is named by a 64-bit descriptor, not a pointer:
//   bits  0-13  start address >> 4            (byte address in the CTA's shared window)
//   bits 16-29  leading byte offset >> 4      (unused for a swizzled K-major operand: set 1)
//   bits 32-45  stride byte offset >> 4       (from one 8-row group of the tile to the next)
//   bits 49-51  base offset                   (0: the tile starts on the swizzle's 1024-byte repeat)
//   bits 62-63  layout: 1 = 128B swizzle, 2 = 64B, 3 = 32B, 0 = none
// The course's tiles are what a TMA box of (64 bf16 = 128 bytes) x rows with the 128B swizzle
// leaves in shared memory: each row is 128 bytes, 8 rows make a 1024-byte swizzle atom, so the
// stride byte offset is 1024. RULE: the TMA swizzle and the descriptor's layout must be the same
// (128B and 1), and the tile must start 1024-byte aligned, or wgmma reads the wrong elements.
// The k-th 16-element slice of a 64-element row starts 32 bytes later: add 2 (32 >> 4) to the
// descriptor per k-step. The hardware applies the swizzle to the address bits themselves, so the
// shifted start still lands on the right chunks.
__device__ __forceinline__ unsigned long long desc_sw128(const void* tile) {
  unsigned long long addr = tma::smem(tile);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// The same for tiles whose rows are ROW_BYTES = 128, 64 or 32 bytes (a TMA box of 64, 32 or 16 bf16
// with the 128B, 64B or 32B swizzle): 8 rows make one swizzle atom of 8 * ROW_BYTES bytes, which is
// the stride byte offset; the layout codes are 1 (128B), 2 (64B), 3 (32B). The tile starts on an
// atom boundary; a k-step of 16 bf16 is still +32 bytes.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned long long desc_kmajor(const void* tile) {
  static_assert(ROW_BYTES == 128 || ROW_BYTES == 64 || ROW_BYTES == 32, "rows of 32, 64 or 128 bytes");
  constexpr unsigned long long layout = ROW_BYTES == 128 ? 1 : ROW_BYTES == 64 ? 2 : 3;
  unsigned long long addr = tma::smem(tile);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(8 * ROW_BYTES >> 4) << 32) |
         (layout << 62);
}

// ---------------------------------------------------------------------------------- ordering
// RULE (PTX ISA, wgmma.fence): wgmma reads its accumulator and A-fragment registers asynchronously.
// wgmma.fence orders this warpgroup's earlier accesses to those registers (zeroing the accumulators,
// an epilogue that read them) before the next wgmma; it orders registers only. Shared-memory tiles
// written by ordinary stores need fence.proxy.async (the async proxy) before a wgmma reads them;
// tiles written by TMA are already in the async proxy. Needed before the first wgmma of a batch.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// Close the batch of wgmma issued since the last commit into one group.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most N committed groups are still running. After wait<0>() the accumulators may
// be read and the shared-memory tiles the groups read may be overwritten (released to the producer).
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// ---------------------------------------------------------------------------------- registers
// setmaxnreg moves registers between the warpgroups of a block at run time: a producer that only
// issues TMA copies gives most of its registers back, consumers holding 64xN fp32 accumulators
// take them. RULES (PTX ISA, setmaxnreg): every thread of the warpgroup executes it (.sync.aligned);
// the count is a multiple of 8 in 24..256; .dec returns registers to a pool of the CTA and .inc takes
// them from that pool, so registers move between the warpgroups of one block, never between blocks.
// ptxas honours it only when it knows the register count each warp starts with, else it drops it with
// info C7508 "setmaxnreg ignored"; the course's kernels fix that count with __launch_bounds__(threads, 1).
template <int REGS>
__device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGS)); }
template <int REGS>
__device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS)); }

// ---------------------------------------------------------------------------------- barriers
// Named barrier `id` (1..15; 0 is __syncthreads) among `count` threads: one warpgroup meets
// without stopping the others.
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}

// The arrive-and-wait-on-a-token style of cuda::barrier, done by hand: every waiting thread
// ARRIVES (so the barrier counts all of them) and waits for the phase its arrival belongs to.
// Simple, but each phase then needs one arrival per thread: 256 arrivals where one would do.
__device__ __forceinline__ unsigned long long arrive_token(unsigned long long* bar) {
  unsigned long long token;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(token) : "r"(tma::smem(bar)) : "memory");
  return token;
}
__device__ __forceinline__ void wait_token(unsigned long long* bar, unsigned long long token) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(tma::smem(bar)), "l"(token) : "memory");
  }
}

// ---------------------------------------------------------------------------------- clusters
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster arrives, then waits: barrier inits become visible
// to the peer block before it multicasts into them, and no block exits while a peer still
// writes into its shared memory or arrives on its barriers.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
// RULE: a barrier that blocks of the cluster (or their multicast copies) will signal must be
// initialized, then this fence, then a cluster-wide barrier, before any of them touches it.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrive on the barrier at the same shared-memory offset in block `cta` of the cluster.
// Default semantics (release at CTA scope) suffice for "my wgmma finished reading this slot":
// the reads are complete once wgmma.wait_group returned. Asking for .release.cluster instead
// makes ptxas put MEMBAR.ALL.GPU before every arrival: on an H200 that made the cluster rung
// 0.51 of cuBLAS at 4096^3 instead of 0.91.
__device__ __forceinline__ void arrive_cluster(unsigned long long* bar, unsigned cta) {
  asm volatile("{\n\t.reg .b32 remote;\n\t"
               "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}"
               :: "r"(tma::smem(bar)), "r"(cta) : "memory");
}
// One TMA box delivered to the same offset in every block of `mask` (bit i = cluster rank i);
// each destination's barrier at `bar`'s offset receives the bytes as complete_tx.
__device__ __forceinline__ void load_2d_multicast(void* dst, const TensorMap* map, int x, int y,
                                                  unsigned long long* bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(tma::smem(dst)), "l"(tma::gmap(map)), "r"(x), "r"(y), "r"(tma::smem(bar)),
                  "h"(mask) : "memory");
}

// ---------------------------------------------------------------------------------- misc
// Two fp32 -> one 32-bit word of two bf16 (round to nearest even); `lo` is the lower address.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// A 32-bit store to shared memory (STS), for epilogues that stage a tile for a TMA store: the
// compiler cannot always tell a dynamic-shared pointer from a global one and would emit a slower
// generic store (ST.E).
__device__ __forceinline__ void st_shared(void* p, unsigned v) {
  asm volatile("st.shared.u32 [%0], %1;" :: "r"(tma::smem(p)), "r"(v) : "memory");
}
// Nanoseconds of the global timer (advances in 32 ns steps on an H200).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Store a 64 x (2R) fp32 accumulator fragment as bf16 into row-major C (M x N, N even), rows
// from row0 and columns from col0; rows and columns past the matrix are skipped.
template <int R>
__device__ __forceinline__ void store_fragment_bf16(const float (&d)[R], unsigned short* C, int M, int N,
                                                    int row0, int col0) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  const int r = row0 + 16 * w + l / 4;
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const int c = col0 + 8 * j + 2 * (l % 4);
    if (c < N) {                         // N is even: c < N means c + 1 < N
      if (r < M) *reinterpret_cast<unsigned*>(C + (size_t)r * N + c) = pack_bf16x2(d[4 * j], d[4 * j + 1]);
      if (r + 8 < M) *reinterpret_cast<unsigned*>(C + (size_t)(r + 8) * N + c) = pack_bf16x2(d[4 * j + 2], d[4 * j + 3]);
    }
  }
}

// ---------------------------------------------------------------------------------- wgmma
// Accumulator fragment of m64nN (fp32): thread t of the warpgroup (warp w = t / 32, lane l)
// holds d[i] at row 16*w + l/4 + 8*((i/2) % 2), column 8*(i/4) + 2*(l % 4) + i % 2.
// wgmma names every accumulator register: the vector of R = 32, 64 or 128 fp32 registers (N = 64, 128,
// 256) and its read-write asm operands are spelled once here, for the bf16 wrappers below, the FP8 ones
// of wgmma_fp8.cuh and attention.cuh's register-sourced ones. In a wrapper's asm the operands after the
// accumulators start at %R (here: the two descriptors, then scale_d at %R+2).
#define WG_ACC_0_31 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_ACC_32_63 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_ACC_64_127 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WG_ACC32 "{" WG_ACC_0_31 "}"
#define WG_ACC64 "{" WG_ACC_0_31 ", " WG_ACC_32_63 "}"
#define WG_ACC128 "{" WG_ACC_0_31 ", " WG_ACC_32_63 ", " WG_ACC_64_127 "}"
#define WG_OUT8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_OUT32(d) WG_OUT8(d, 0), WG_OUT8(d, 8), WG_OUT8(d, 16), WG_OUT8(d, 24)
#define WG_OUT64(d) WG_OUT32(d), WG_OUT8(d, 32), WG_OUT8(d, 40), WG_OUT8(d, 48), WG_OUT8(d, 56)
#define WG_OUT128(d) WG_OUT64(d), WG_OUT8(d, 64), WG_OUT8(d, 72), WG_OUT8(d, 80), WG_OUT8(d, 88), \
                     WG_OUT8(d, 96), WG_OUT8(d, 104), WG_OUT8(d, 112), WG_OUT8(d, 120)

// D(64x64, fp32, registers) += A(64x16, shared) * B(64x16, shared)^T, both K-major bf16.
// scale_d = 0 ignores D's old value (D = A*B), 1 accumulates. 32 accumulator registers per thread.
__device__ __forceinline__ void mma_m64n64k16(float (&d)[32], unsigned long long desc_a,
                                              unsigned long long desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_ACC32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : WG_OUT32(d) : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x128, fp32, registers) += A(64x16, shared) * B(128x16, shared)^T, both K-major bf16.
// scale_d = 0 ignores D's old value (D = A*B), 1 accumulates. 64 accumulator registers per thread.
__device__ __forceinline__ void mma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                              unsigned long long desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_ACC64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : WG_OUT64(d) : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x256, fp32, registers) += A(64x16, shared) * B(256x16, shared)^T, both K-major bf16.
// scale_d = 0 ignores D's old value (D = A*B), 1 accumulates. 128 accumulator registers per thread.
__device__ __forceinline__ void mma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                              unsigned long long desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_ACC128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : WG_OUT128(d) : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// The same three, chosen by the accumulator's size (32, 64 or 128 registers: N = 64, 128, 256),
// so a kernel with a compile-time tile width calls wg::mma_k16(acc, ...) whatever N is.
__device__ __forceinline__ void mma_k16(float (&d)[32], unsigned long long a, unsigned long long b, int s) { mma_m64n64k16(d, a, b, s); }
__device__ __forceinline__ void mma_k16(float (&d)[64], unsigned long long a, unsigned long long b, int s) { mma_m64n128k16(d, a, b, s); }
__device__ __forceinline__ void mma_k16(float (&d)[128], unsigned long long a, unsigned long long b, int s) { mma_m64n256k16(d, a, b, s); }
}  // namespace wg
