// gemm_common.cuh - what chapter 5's two tcgen05 GEMMs share: the 128B-swizzled operand descriptor and the
// epilogue's tensor memory -> global copy of one row. Included by gemm_ws.cu (one CTA per tile) and
// gemm_2cta.cu (a CTA pair per tile); judge.gpu.build.compile inlines it. sm_100a only (tcgen05).
#pragma once
#include "tcgen05.cuh"

namespace gemm {

// The descriptor of a K-major bf16 tile written by a TMA box of 64 x rows with the 128B swizzle
// (PTX ISA 9.7.16.4.1, shared memory descriptor): start >> 4 in bits 0-13, leading byte offset
// unused for a swizzled K-major operand (16 bytes, field 1), stride byte offset 1024 (8 rows of
// 128 bytes) in bits 32-45, the fixed 0b001 in bits 46-48, base offset 0 (the slot is 1024-byte
// aligned), swizzle mode 2 = 128B in bits 61-63. RULE: the TMA swizzle and the descriptor's must be
// the same, or the MMA reads the wrong elements. A K step of 16 bf16 adds 32 bytes to the start
// (2 in the >> 4 field); the hardware applies the swizzle to the address bits, so this stays right.
__device__ __forceinline__ unsigned long long desc_sw128(const void* tile) {
  return (unsigned long long)((tc::smem(tile) >> 4) & 0x3FFF) | (1ull << 16) | ((1024ull >> 4) << 32) |
         (1ull << 46) | (2ull << 61);
}

// One epilogue warp copies `ncols` fp32 columns of its 32 tensor-memory lanes to global memory: thread
// `lane` gets lane (first lane of `rows`) + lane, i.e. one row of C, 8 columns per tcgen05.ld.
// RULE: `rows` addresses the warp's own quarter of the lanes, 32 * (warp % 4) (PTX ISA 9.7.16.8.1).
__device__ __forceinline__ void tmem_row_to_global(unsigned rows, float* crow, int ncols) {
  for (int c = 0; c < ncols; c += 8) {
    float v[8];
    tc::ld_32x32b_x8(rows + c, v);
    tc::wait_ld();                       // RULE: registers are valid only after tcgen05.wait::ld
    reinterpret_cast<float4*>(crow + c)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(crow + c)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

}  // namespace gemm
