"""Chapter 4, wgmma and warp specialization (notebook: chapters/ch04_wgmma.ipynb).

Kernels: the GEMM ladder (gemm_01 ... gemm_10), its operand variants (N-major B, A from registers, split-K),
the first wgmma tile and the issue-rate probe. Host code: ladder (build, check and time every rung), variants,
issue_rate, clocks (speed as cycles times clock at the power cap) and cublas_kernels (what cuBLAS runs).
"""
