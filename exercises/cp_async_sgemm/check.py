"""Grader of cp_async_sgemm: python practice/judge.py check cp_async_sgemm

The shared CUDA flow (judge.cuda_flow) runs the cases and the timing of exercise.toml; this file holds
what is this exercise's own: the inputs, the float64 reference, the launch, the work one launch does,
the tolerance, and (on a GPU, until the CPU model covers it everywhere) the protocol trace replayed in
judge.pipesim.

Tolerance, from the arithmetic: each output is a K-term dot product accumulated in float32 (unit
roundoff u = 2^-24). With uniform(-1, 1) inputs the relative error norm of a sequential FMA
accumulation is about 0.3 u sqrt(K) (measured: 0.30 at K = 64, 1024 and 4096), so the limit is
u sqrt(K), three times that. Inputs rounded to tf32 (11 bits) exceed it 70-550 times, to 16 bits
2-17 times: a reduced-precision shortcut fails. Each element must also be within 4 u K.
"""
from __future__ import annotations

import os

import numpy as np

from judge import compare, launch as _launch, pipesim

KERNEL = "sgemm_pipelined"
STAGES = 3
U32 = 2.0 ** -24
JT_LOAD, JT_COMMIT, JT_WAIT, JT_BARRIER, JT_READ = 1, 2, 3, 4, 5   # judge/include/pipeline_trace.cuh


def inputs(case, xp, rng):
    M, N, K = case["M"], case["N"], case["K"]
    return {"A": rng.uniform(-1, 1, (M, K)).astype(xp.float32), "B": rng.uniform(-1, 1, (K, N)).astype(xp.float32)}


def outputs(case, ins, xp):
    return {"C": xp.empty((case["M"], case["N"]), dtype=xp.float32)}


def reference(case, ins):
    return {"C": ins["A"].astype(np.float64) @ ins["B"].astype(np.float64)}


def launch(build, case, ins, outs):
    M, N, K = case["M"], case["N"], case["K"]
    _launch.launch(build, KERNEL, grid=(N // 128, M // 128), block=(256,), shared_bytes=STAGES * 8192,
                   args=(np.int32(M), np.int32(N), np.int32(K), ins["A"], ins["B"], outs["C"]))


def work(case):
    M, N, K = case["M"], case["N"], case["K"]
    return {"flops": 2.0 * M * N * K, "bytes": 4.0 * (M * K + K * N + M * N)}


def tolerance(case):
    K = case["K"]
    return {"norm_tol": U32 * K ** 0.5, "atol": 4 * U32 * K, "rtol": 0.0}


def _ops(events):
    table = {JT_LOAD: lambda a, b: pipesim.Load(a, b), JT_COMMIT: lambda a, b: pipesim.COMMIT,
             JT_WAIT: lambda a, b: pipesim.Wait(a), JT_BARRIER: lambda a, b: pipesim.BARRIER,
             JT_READ: lambda a, b: pipesim.Read(a, b)}
    return [table[op](a, b) for op, a, b in events]


def gpu_checks(build, sub):
    """The commit/wait/barrier/load/read sequence of thread 0, block 0, replayed in judge.pipesim."""
    import cupy as cp
    from judge.result import Result, Verdict
    sub.progress("protocol trace: replaying your commits, waits and barriers")
    tb = sub.build(target=sub.exercise.target, defines={"JUDGE_TRACE": None})
    case = {"M": 128, "N": 128, "K": 8 * 9}           # 9 k-tiles: prologue, steady state and drain
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    ins = inputs(case, cp, rng)
    out = outputs(case, ins, cp)
    compare.poison(out["C"])
    trace = cp.ndarray((1 + 3 * 4096,), dtype=cp.int32, memptr=tb.module().get_global("judge_trace"))
    trace[0] = 0
    tb.kernel(KERNEL)((1, 1), (256,), (np.int32(128), np.int32(128), np.int32(72), ins["A"], ins["B"], out["C"]),
                      shared_mem=STAGES * 8192)
    cp.cuda.get_current_stream().synchronize()
    raw = trace.get()
    events = [tuple(int(x) for x in raw[1 + 3 * i: 4 + 3 * i]) for i in range(int(raw[0]))]
    if not any(e[0] == JT_READ for e in events):
        return Result(Verdict.WRONG, "the trace shows no compute_tile call: keep the given load_tile / "
                                     "compute_tile functions and the #include \"pipeline_trace.cuh\"")
    report = pipesim.check(_ops(events), S=STAGES)
    if not report.ok:
        return Result(Verdict.WRONG, f"pipeline protocol (K = 72, 9 tiles, {STAGES} stages): {report.violations[0]}")
    return None
