// attention.cuh - device helpers of Chapter 6's attention kernels (sm_90a): the second product's
// register-sourced wgmma (P from registers, V by an MN-major descriptor), the exponential on the
// multi-function unit, and the quad reductions of the softmax. Inline PTX only (NVRTC from pip suffices).
// Use: #include "attention.cuh" in a kernel built with judge.gpu.build.compile (it includes wgmma.cuh).
#pragma once
#include "wgmma.cuh"

namespace attn {

// -infinity for masked scores (no <cmath> under NVRTC).
#define ATTN_NEG_INF __int_as_float(0xff800000)

// 2^x on the multi-function unit (MUFU.EX2): one instruction, relative error about 2^-22 (PTX ISA,
// ex2.approx.ftz.f32), ex2(-inf) = +0. The softmax's exponentials are all of this form: the
// 1/sqrt(d) scale and log2(e) are folded into one factor, e^(s/sqrt(d) - m) = 2^(s*c - m*c) with
// c = log2(e)/sqrt(d), so each score costs one FFMA and one MUFU.EX2.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// log2(x) on the multi-function unit (MUFU.LG2), for the log-sum-exp of the epilogue.
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A row of an m64nN accumulator lives in the four threads of a quad (lanes 4r .. 4r + 3): reduce
// over them with two butterfly shuffles.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The V tile of a key block as TMA leaves it: HEAD_DIM / 64 boxes of (64 d) x (BLOCK_N keys), each
// key row 128 bytes, 128B-swizzled; box b holds columns 64b .. 64b + 63. For the second product
// (O += P V: M = 64 queries, N = head dim, K = keys) V is MN-major: N (d) is contiguous.
// RULE (PTX ISA, "Matrix Descriptor Format", MN-major swizzled layouts): LBO steps to the next
// 64-wide block of N (the next box, BLOCK_N x 128 bytes), SBO to the next 8 keys (8 x 128 bytes);
// the k16 slice kk of keys starts kk x 16 x 128 bytes into the tile. Chapter 4's gemm_mn_major.cu
// reads a K x N weight the same way.
template <int KEYS>
__device__ __forceinline__ unsigned long long desc_v(const void* tile) {
  unsigned long long addr = tma::smem(tile);
  return ((addr & 0x3FFFF) >> 4) | ((unsigned long long)((KEYS * 128) >> 4) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// The score accumulator S (m64nN fp32) becomes the A operand of the second product without
// leaving registers: thread t holds S[row][8i/4 + 2(t%4) + i%2] in s[i], and the m64k16 A fragment
// of keys 16kk .. 16kk + 15 wants, in register j, the pair at row + 8(j%2), columns 16kk + 8(j/2)
// + 2(t%4) + {0, 1} (PTX ISA, wgmma register fragments): that is s[8kk + 2j], s[8kk + 2j + 1].
// The same thread holds both sides, so P costs no shuffle, only the rounding to bf16.
template <int N>
__device__ __forceinline__ void p_fragment(unsigned (&a)[4], const float (&s)[N], int kk) {
#pragma unroll
  for (int j = 0; j < 4; ++j) a[j] = wg::pack_bf16x2(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
}

// D(64 x 64, fp32) += A(64 x 16, four .b32 registers per thread) * B(16 x 64, MN-major descriptor),
// imm-trans-b = 1: B is V as it lies in memory, keys by rows, head dimension contiguous.
__device__ __forceinline__ void mma_rs_n64_tb(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_ACC32 ", "
               "{%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
               : WG_OUT32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// D(64 x 128, fp32) += A(64 x 16, four .b32 registers per thread) * B(16 x 128, MN-major descriptor),
// imm-trans-b = 1: B is V as it lies in memory, keys by rows, head dimension contiguous.
__device__ __forceinline__ void mma_rs_n128_tb(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_ACC64 ", "
               "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
               : WG_OUT64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// RULE (compiler, not PTX): wgmma.fence orders register accesses for the hardware, but to the compiler it
// is an asm statement that names no register, so it may move an FMUL that rescales O, or the packing of P,
// past it: the wgmma then reads a register written after the fence (the CPU model reports it as
// "wgmma-fence"; on the GPU it is a race). Pin every accumulator and fragment register in place first:
// an empty asm volatile that reads and writes each one, as CUTLASS's warpgroup_fence_operand does. The
// same holds after wgmma.wait_group: pin the accumulators there too, so that no read of S (nor rescale of
// O) is hoisted above the wait.
template <int N>
__device__ __forceinline__ void fence_operand(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N>
__device__ __forceinline__ void fence_operand(unsigned (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j]) :: "memory");
}

// The end of a consumer's rows: O divided by the row's sum l (a row that saw no key: O = 0), and the
// log-sum-exp in natural log, LSE = (m c + log2 l) ln 2 (-inf for a row that saw no key), written by one
// thread of each quad for rows row0 and row0 + 8 below S. lsum is this thread's share of l (quad-reduced
// here), m the raw scores' maximum, lse_head the head's LSE row (B, H, S layout).
template <int D>
__device__ __forceinline__ void finish(float (&o)[D], const float (&m)[2], const float (&lsum)[2], int row0, int S,
                                       float scale_log2, float* lse_head) {
  const int l = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float lt = quad_sum(lsum[h]);
    const float inv = lt > 0.f ? 1.f / lt : 0.f;
#pragma unroll
    for (int i = 0; i < D; ++i)
      if ((i / 2) % 2 == h) o[i] *= inv;
    const int row = row0 + 8 * h;
    if (l % 4 == 0 && row < S)
      lse_head[row] = lt > 0.f ? (m[h] * scale_log2 + lg2(lt)) * 0.69314718055994531f : ATTN_NEG_INF;
  }
}

// Chosen by the accumulator's size (32 registers: head dim 64; 64: head dim 128).
__device__ __forceinline__ void mma_pv(float (&d)[32], const unsigned (&a)[4], unsigned long long b) { mma_rs_n64_tb(d, a, b); }
__device__ __forceinline__ void mma_pv(float (&d)[64], const unsigned (&a)[4], unsigned long long b) { mma_rs_n128_tb(d, a, b); }

}  // namespace attn
