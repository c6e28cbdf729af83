"""Grader of cp_async_sgemm: python practice/judge.py check cp_async_sgemm

The shared CUDA flow (judge.grading.cuda_flow) runs the cases and the timing of exercise.toml; this file holds
what is this exercise's own: the inputs, the float64 reference, the launch, the work one launch does,
and the tolerance. The pipeline protocol (every commit, wait and barrier of every thread, in whatever
spelling) is checked by the CPU model of the machine on the very build that is graded (judge.model,
which judge.grading.cuda_flow runs first on every machine).

Tolerance, from the arithmetic: each output is a K-term dot product accumulated in float32 (unit
roundoff u = 2^-24). With uniform(-1, 1) inputs the relative error norm of a sequential FMA
accumulation is about 0.3 u sqrt(K) (measured: 0.30 at K = 64, 1024 and 4096), so the limit is
u sqrt(K), three times that. Inputs rounded to tf32 (11 bits) exceed it 70-550 times, to 16 bits
2-17 times: a reduced-precision shortcut fails. Each element must also be within 4 u K.
"""
from __future__ import annotations

import numpy as np

from judge.gpu import launch as _launch

KERNEL = "sgemm_pipelined"
STAGES = 3
U32 = 2.0 ** -24


def inputs(case, xp, rng):
    M, N, K = case["M"], case["N"], case["K"]
    return {"A": rng.uniform(-1, 1, (M, K)).astype(xp.float32), "B": rng.uniform(-1, 1, (K, N)).astype(xp.float32)}


def outputs(case, ins, xp):
    return {"C": xp.empty((case["M"], case["N"]), dtype=xp.float32)}


def reference(case, ins):
    return {"C": ins["A"].astype(np.float64) @ ins["B"].astype(np.float64)}


def launch(build, case, ins, outs):
    M, N, K = case["M"], case["N"], case["K"]
    return _launch.launch(build, KERNEL, grid=(N // 128, M // 128), block=(256,), shared_bytes=STAGES * 8192,
                          args=(np.int32(M), np.int32(N), np.int32(K), ins["A"], ins["B"], outs["C"]))


def owned(case, name, ctaids):
    """The elements of C that blocks `ctaids` write: block (bx, by) computes the 128 x 128 tile at rows
    128 by, columns 128 bx. The CPU model runs a sample of a large grid; only these are compared."""
    keep = np.zeros((case["M"], case["N"]), bool)
    for bx, by, _ in ctaids:
        keep[by * 128:(by + 1) * 128, bx * 128:(bx + 1) * 128] = True
    return keep


def work(case):
    M, N, K = case["M"], case["N"], case["K"]
    return {"flops": 2.0 * M * N * K, "bytes": 4.0 * (M * K + K * N + M * N)}


def tolerance(case):
    K = case["K"]
    return {"norm_tol": U32 * K ** 0.5, "atol": 4 * U32 * K, "rtol": 0.0}
