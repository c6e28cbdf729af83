// wgmma_fp8.cuh - the course's FP8 warpgroup-MMA wrappers for sm_90a: E4M3 x E4M3 -> fp32,
// wgmma.mma_async m64nNk32 with both operands in shared memory (named by wgmma.cuh's descriptors).
// Use: #include "wgmma_fp8.cuh" in a .cu built with judge.gpu.build.compile(..., target="sm_90a");
// it includes wgmma.cuh (fence/commit/wait, descriptors, setmaxnreg, barriers) and tma.cuh.
// Used by chapters/ch05_blackwell/gemm_fp8.cu.
//
// What changes from bf16 (PTX ISA, wgmma.mma_async, "Matrix shape" and "Register fragments"):
//   * K per instruction is 32 (not 16): 32 one-byte elements are still 32 bytes of a K-major row,
//     so a k-step is +32 bytes in the descriptor exactly as for bf16, and a 128-byte swizzled row
//     holds 128 elements (4 k-steps).
//   * RULE: 8-bit operands are K-major only. The instruction has no imm-trans-a / imm-trans-b
//     operands (only f16/bf16 have them); a transposed FP8 operand must be transposed in memory.
//   * imm-scale-a / imm-scale-b are still there (1 or -1: negate an operand); they are NOT block
//     scales, which the kernel applies to the fp32 accumulators itself.
//   * The fp32 accumulator fragment is the same as bf16's: thread t of the warpgroup holds rows
//     16 * (t / 32) + (t % 32) / 4 (+ 8) and column pairs 8 * j + 2 * (t % 4) (+ 1).
// SASS: QGMMA.64xNx32.F32.E4M3.E4M3 (the "wgmma" feature of judge/hw/sass.py).
#pragma once
#include "wgmma.cuh"

namespace wg {

// The accumulator vectors and operands (WG_ACC64 / WG_OUT64, WG_ACC128 / WG_OUT128) are wgmma.cuh's:
// only the instruction and its immediates differ from bf16 (no transpose immediates for FP8).
// D(64x128, fp32, registers) += A(64x32, shared, E4M3) * B(128x32, shared, E4M3)^T, both K-major.
// scale_d = 0 ignores D's old value (D = A*B), 1 accumulates. 64 accumulator registers per thread.
__device__ __forceinline__ void mma_m64n128k32_e4m3(float (&d)[64], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " WG_ACC64 ", %64, %65, p, 1, 1;\n}\n"
               : WG_OUT64(d) : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x256, fp32, registers) += A(64x32, shared, E4M3) * B(256x32, shared, E4M3)^T, both K-major.
// 128 accumulator registers per thread.
__device__ __forceinline__ void mma_m64n256k32_e4m3(float (&d)[128], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " WG_ACC128 ", %128, %129, p, 1, 1;\n}\n"
               : WG_OUT128(d) : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// Chosen by the accumulator's size (64 or 128 registers: N = 128 or 256).
__device__ __forceinline__ void mma_k32_e4m3(float (&d)[64], unsigned long long a, unsigned long long b, int s) { mma_m64n128k32_e4m3(d, a, b, s); }
__device__ __forceinline__ void mma_k32_e4m3(float (&d)[128], unsigned long long a, unsigned long long b, int s) { mma_m64n256k32_e4m3(d, a, b, s); }
}  // namespace wg
