// gemm_common.cuh - what chapter 5's two tcgen05 GEMMs share beyond judge/include/tcgen05.cuh: the
// epilogue's tensor memory -> global copy of one row. Included by gemm_ws.cu (one CTA per tile) and
// gemm_2cta.cu (a CTA pair per tile); judge.gpu.build.compile inlines it. sm_100a only (tcgen05).
#pragma once
#include "tcgen05.cuh"

namespace gemm {

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
