"""Grader of ws_gemm: python practice/judge.py check ws_gemm

The shared CUDA flow (judge.cuda_flow) runs exercise.toml's cases and timing; this file holds what
is this exercise's own:
  * bf16 data: CuPy has no bfloat16 dtype, so A and B live in uint16 arrays holding bf16 bit
    patterns (TMA moves bits, and its zero fill, 0x0000, is bf16 +0): random normal numbers
    rounded to bf16 (round to nearest even), decoded exactly to float64 by the reference. C is a
    torch bfloat16 tensor on the GPU (an ml_dtypes bfloat16 array on the CPU), so the engine
    poisons it with NaN and judge.compare reads it exactly.
  * the tolerance, from the arithmetic: products of bf16 are exact in fp32; K fp32 additions err by
    about sqrt(K) 2^-24 ||a_i|| ||b_j||, with ||a_i|| ~ ||b_j|| ~ sqrt(K) for unit normal data; we
    allow 32 times that (tensor cores add in groups and truncate), plus rtol 2^-8 for rounding C to
    bf16 (at most 2^-9), and a relative error norm under 2^-8.
  * static_checks(build): what the compile log and the SASS must show beyond the features:
      - no "setmaxnreg ignored" (ptxas C7508: the kernel needs __launch_bounds__(384, 1));
      - no "wgmma.mma_async instructions are serialized" (ptxas C7515);
      - every TMA store (UTMASTG) preceded by an async-proxy fence (FENCE.VIEW.ASYNC) after the
        last shared-memory store (STS) on the way to it: the tile's writers fence, then meet, then
        one thread stores. A missing fence is a race that often gives the right numbers, so it is
        judged from the code, not from the output.
    Each problem is (verdict, message): C7508 and C7515 are MISSING FEATURE (register reallocation,
    asynchronous wgmma), the missing fence is WRONG.
"""
from __future__ import annotations

import math
import re

import numpy as np

from judge import launch as _launch
from judge import tma

KERNEL = "ws_gemm"
BM, BN, BK, STAGES, THREADS = 128, 256, 64, 4, 384       # must match the #defines of ws_gemm.cu
SHARED_BYTES = STAGES * (BM + BN) * BK * 2 + 2 * 64 * 128 * 2 + 1024


def to_bf16_bits(x, xp):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = x.astype(xp.float32).view(xp.uint32)
    u = u + xp.uint32(0x7FFF) + ((u >> xp.uint32(16)) & xp.uint32(1))
    return (u >> xp.uint32(16)).astype(xp.uint16)


def from_bf16_bits(b) -> np.ndarray:
    """bf16 bit patterns (uint16, NumPy) -> float64, exactly."""
    return (np.asarray(b).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def inputs(case, xp, rng):
    M, N, K = case["m"], case["n"], case["k"]
    return {"a": to_bf16_bits(rng.standard_normal((M, K), dtype=xp.float32), xp),
            "b": to_bf16_bits(rng.standard_normal((N, K), dtype=xp.float32), xp)}


def outputs(case, ins, xp):
    shape = (case["m"], case["n"])
    if xp is np:
        import ml_dtypes
        return {"c": np.empty(shape, dtype=ml_dtypes.bfloat16)}
    import torch
    return {"c": torch.empty(shape, dtype=torch.bfloat16, device="cuda")}


def reference(case, ins):
    a, b = from_bf16_bits(ins["a"]), from_bf16_bits(ins["b"])
    return {"c": a @ b.T}


def tolerance(case):
    K = case["k"]
    return {"rtol": 2.0 ** -8, "atol": 32 * math.sqrt(K) * 2.0 ** -24 * K, "norm_tol": 2.0 ** -8}


_MAPS: dict = {}


def _maps(a, b, c):
    key = tuple(int(x.data_ptr() if hasattr(x, "data_ptr") else x.data.ptr) for x in (a, b, c))
    key += (tuple(a.shape), tuple(b.shape))
    if key not in _MAPS:
        # boxes innermost first: 64 bf16 (128 bytes = the 128B swizzle span) x rows
        _MAPS[key] = (tma.tensor_map(a, box=(BK, BM), swizzle="128B"),
                      tma.tensor_map(b, box=(BK, BN), swizzle="128B"),
                      tma.tensor_map(c, box=(64, 64), swizzle="128B"))
    return _MAPS[key]


def launch(build, case, ins, outs):
    M, N, K = case["m"], case["n"], case["k"]
    ma, mb, mc = _maps(ins["a"], ins["b"], outs["c"])
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM, 1)
    _launch.launch(build, KERNEL, grid=grid, block=(THREADS,), shared_bytes=SHARED_BYTES,
                   args=(ma, mb, mc, np.int32(M), np.int32(N), np.int32(K)))


def work(case):
    M, N, K = case["m"], case["n"], case["k"]
    return {"flops": 2.0 * M * N * K, "bytes": 2.0 * (M * K + N * K + M * N)}


_STS = re.compile(r"\bSTS(?:\.\S+)?\b")
_FENCE = re.compile(r"\bFENCE\.VIEW\.ASYNC\b")
_STORE = re.compile(r"\bUTMASTG\b")


def unfenced_tma_stores(sass: str) -> list[str]:
    """SASS lines of TMA stores reached from a shared-memory store with no async fence between."""
    bad, pending = [], False
    for line in sass.splitlines():
        if _STS.search(line):
            pending = True
        elif _FENCE.search(line):
            pending = False
        elif _STORE.search(line) and pending:
            bad.append(line.strip())
    return bad


def static_checks(build) -> list[tuple[str, str]]:
    """(verdict, message) for every rule the compile log or the SASS breaks (see the docstring)."""
    problems = []
    log = build.log
    if "C7508" in log:
        problems.append(("MISSING FEATURE", ("ptxas ignored setmaxnreg (C7508): declare the kernel "
                                             "__launch_bounds__(384, 1) so that ptxas knows the "
                                             "register count at entry")))
    if "C7515" in log:
        line = next(l for l in log.splitlines() if "C7515" in l)
        problems.append(("MISSING FEATURE", "ptxas serialized the wgmma (C7515): " + line.split("due to")[-1]
                         .split(" in the function")[0].strip() + ". Wait for each slice's wgmma group "
                         "(wg::wait<0>) inside the loop, before releasing its slot"))
    bad = unfenced_tma_stores(build.sass_of(KERNEL))
    if bad:
        problems.append(("WRONG", "rule 'fence before a TMA store': a TMA store (" + bad[0] + ") follows "
                         "shared-memory stores with no fence.proxy.async between them. Every thread "
                         "that wrote the tile runs tma::fence_proxy_async(), then the warpgroup meets, "
                         "then one thread stores"))
    return problems


def check(sub):
    from judge import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
