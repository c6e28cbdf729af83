"""Chapter 1's SGEMM kernels on the CPU model (judge.model): each compiled exactly as the chapter builds it, run with
fresh random inputs and poisoned outputs against float64; the counts say who filled shared memory (cp.async for
the pipelined kernels, st.shared for the synchronous ones).

Run: python -m pytest tests/chapters/ch01_cp_async/test_on_model.py -q      (no GPU)
"""
from __future__ import annotations


import numpy as np
import pytest

from judge.gpu import build
from judge.grading import compare
from judge import model

from chapters.ch01_cp_async import sgemm as SG

ASYNC = {"sgemm_cp_async.cu", "sgemm_cp_async_timed.cu", "sgemm_tuned.cu", "handbook_gemm_cp_async.cu",
         "sgemm_tuned2.cu"}


@pytest.mark.parametrize("f", ["sgemm_sync.cu", "sgemm_regbuf.cu", *sorted(ASYNC)])
def test_chapter_1_sgemm_kernels_are_correct_on_the_model(f):
    sp = SG.spec(f)
    M, N, K = sp.bm, sp.bn, sp.bk * 5                  # one block tile, five k-tiles
    rng = np.random.default_rng()
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C = compare.poison(np.empty((M, N), np.float32))
    if f == "handbook_gemm_cp_async.cu":
        args = (np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), A, B, np.float32(0.0), C)
    elif sp.timed:
        stamps = np.zeros(sp.params["TIMED_BLOCKS"] * (1 + 3 * (K // sp.bk)), np.uint64)
        args = (np.int32(M), np.int32(N), np.int32(K), A, B, C, stamps)
    else:
        args = (np.int32(M), np.int32(N), np.int32(K), A, B, C)
    rep = model.run(build.compile(sp.path), sp.name, grid=sp.grid(M, N) + (1,), block=(sp.threads, 1, 1),
                    args=args, shared_bytes=sp.smem)
    assert compare.compare(C, A.astype(np.float64) @ B, rtol=0, atol=4 * 2.0 ** -24 * K,
                           norm_tol=2.0 ** -24 * K ** 0.5).ok
    if f in ASYNC:
        assert rep.counts["cp.async"] > 0 and rep.counts["smem_fill.st.shared.bytes"] == 0
    else:
        assert rep.counts["cp.async"] == 0 and rep.counts["smem_fill.st.shared.bytes"] > 0
