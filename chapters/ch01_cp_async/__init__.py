"""Chapter 1, cp.async and multi-stage pipelines (notebook: chapters/ch01_cp_async.ipynb).

Kernels: the SGEMM baselines and the chapter's cp.async pipelines (sgemm_*.cu, handbook_gemm_cp_async.cu), the
wait-spelling and bank-wavefront probes. Host code: sgemm (build, launch, check, time every SGEMM), notes (the
sentences that quote the record's figures), wavefronts (the shared-memory wavefront probe under ncu).
"""
