"""Grader of exercise cp_async_sgemm (runs in a child process; see judge/isolate.py).

Order: compile for sm_90a -> SASS must show LDGSTS, LDGDEPBAR, DEPBAR.LE -> (H200 only)
protocol trace replayed by judge.pipesim -> correctness on several shapes with fresh
random inputs and NaN-poisoned outputs against float64 -> time at 4096^3 against cuBLAS
FP32 measured in the same run -> tier.
"""
from __future__ import annotations

import os

import numpy as np

from judge import compare, grade, pipesim, timing

KERNEL = "sgemm_pipelined"
STAGES = 3
# (M, N, K): one tile; fewer tiles than stages; a few; many; non-square
SHAPES = [(128, 128, 8), (128, 256, 16), (256, 384, 64), (384, 256, 200), (512, 512, 1024)]
BENCH_N = 4096
# judge/include/pipeline_trace.cuh writes (op, a, b) triples with these op codes
JT_LOAD, JT_COMMIT, JT_WAIT, JT_BARRIER, JT_READ = 1, 2, 3, 4, 5


def ops_from_trace(events):
    """The trace's (op, a, b) triples as judge.pipesim ops."""
    table = {JT_LOAD: lambda a, b: pipesim.Load(a, b), JT_COMMIT: lambda a, b: pipesim.COMMIT,
             JT_WAIT: lambda a, b: pipesim.Wait(a), JT_BARRIER: lambda a, b: pipesim.BARRIER,
             JT_READ: lambda a, b: pipesim.Read(a, b)}
    return [table[op](a, b) for op, a, b in events]


def launch(build, A, B, C, M, N, K):
    k = build.kernel(KERNEL)
    smem = STAGES * 8192
    k((N // 128, M // 128), (256,), (np.int32(M), np.int32(N), np.int32(K), A, B, C), shared_mem=smem)


def protocol(sub) -> compare.Comparison:
    """Replay the kernel's commit/wait/barrier/load/read sequence (thread 0, block 0) in the simulator."""
    import cupy as cp
    tb = sub.build(defines={"JUDGE_TRACE": None})
    M, N, K = 128, 128, 8 * 9              # 9 k-tiles: the prologue, the steady state and the drain
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    A = rng.uniform(-1, 1, (M, K), dtype=cp.float32)
    B = rng.uniform(-1, 1, (K, N), dtype=cp.float32)
    C = compare.poison(cp.empty((M, N), dtype=cp.float32))
    mod = tb.module()
    trace = cp.ndarray((1 + 3 * 4096,), dtype=cp.int32, memptr=mod.get_global("judge_trace"))
    trace[0] = 0
    launch(tb, A, B, C, M, N, K)
    cp.cuda.get_current_stream().synchronize()
    raw = trace.get()
    events = [tuple(int(x) for x in raw[1 + 3 * i: 4 + 3 * i]) for i in range(int(raw[0]))]
    if not any(e[0] == JT_READ for e in events):
        return compare.Comparison(False, "protocol trace", float("inf"), 0, 0, 0, [],
                                  "the trace shows no compute_tile call: keep the given load_tile / "
                                  "compute_tile functions and the #include \"pipeline_trace.cuh\"")
    report = pipesim.check(ops_from_trace(events), S=STAGES)
    if not report.ok:
        return compare.Comparison(False, "protocol trace", float("inf"), 0, 0, 0, [],
                                  f"pipeline protocol (K = {K}, {K // 8} tiles, {STAGES} stages): "
                                  f"{report.violations[0]}")
    return compare.Comparison(True, "protocol trace", 0.0, 0, 0, M * N)


def run_cases(build, sub):
    import cupy as cp
    sub.progress("protocol trace: replaying your commits, waits and barriers")
    out = [protocol(sub)]
    if not out[0].ok:
        return out
    for i, (M, N, K) in enumerate(SHAPES):
        seed = int.from_bytes(os.urandom(4), "little")        # fresh inputs every check
        sub.progress(f"case {i + 1}/{len(SHAPES)}: M={M} N={N} K={K} seed={seed}")
        rng = cp.random.default_rng(seed)
        A = rng.uniform(-1, 1, (M, K), dtype=cp.float32)
        B = rng.uniform(-1, 1, (K, N), dtype=cp.float32)
        C = compare.poison(cp.empty((M, N), dtype=cp.float32))
        launch(build, A, B, C, M, N, K)
        cp.cuda.get_current_stream().synchronize()
        ref = A.astype(cp.float64) @ B.astype(cp.float64)
        out.append(compare.compare(C, ref, rtol=1e-4, atol=1e-4 * K ** 0.5, norm_tol=1e-5,
                                   case=f"M={M} N={N} K={K} seed={seed}"))
        if not out[-1].ok:
            break
    return out


def measure(build, sub):
    import cupy as cp
    n = BENCH_N
    sub.progress(f"timing yours at {n}^3 (median of 20, L2 flushed, inputs rotated)")
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    sets = [(rng.uniform(-1, 1, (n, n), dtype=cp.float32), rng.uniform(-1, 1, (n, n), dtype=cp.float32))
            for _ in range(2)]
    C = cp.empty((n, n), dtype=cp.float32)
    yours = timing.bench(lambda a, b: launch(build, a, b, C, n, n, n), sets, reps=20, flops=2.0 * n ** 3)
    sub.progress(f"timing cuBLAS FP32 at {n}^3 in the same process")
    ceiling = timing.sgemm_ceiling(n)
    return yours.tflops / ceiling.tflops, {
        "n": n, "tflops": yours.tflops, "median_ms": yours.median_ms, "spread": yours.spread,
        "cublas_tflops": ceiling.tflops, "cublas_ms": ceiling.median_ms}


def check(sub) -> grade.Result:
    tiers = sub.exercise.tiers
    r = grade.cuda_flow(sub, kernel=KERNEL, features=sub.exercise.features, run_cases=run_cases,
                        measure=measure, tiers=tiers)
    if r.measurements:
        m = r.measurements
        r.details.append(f"yours {m['tflops']:.1f} TFLOPS vs cuBLAS FP32 {m['cublas_tflops']:.1f} "
                         f"at {m['n']}^3 (spread {m['spread']:.1%}); tiers: "
                         + ", ".join(f"{t} {tiers[t]}" for t in grade.TIERS if t in tiers))
    return r
