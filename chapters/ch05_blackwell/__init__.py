"""Chapter 5, Blackwell without a Blackwell GPU: tcgen05, tensor memory and block-scaled formats (notebook:
chapters/ch05_blackwell.ipynb).

Kernels: the tcgen05 tile and GEMMs (warp-specialized, CTA pairs, cluster launch control), the block-scaled
MXFP8 tile, the Hopper FP8 GEMM the chapter measures on the H200. Host code: gemm_ws, gemm_2cta, gemm_clc and
blockscaled (build, run on the CPU model, check), fp8 (the H200's FP8 measurements) and notes (the sentences
that quote the record).
"""
