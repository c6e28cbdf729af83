"""Grader of ws_gemm: python practice/judge.py check ws_gemm

The shared CUDA flow (judge.grading.cuda_flow) runs exercise.toml's cases and timing; this file holds what
is this exercise's own:
  * bf16 data: CuPy has no bfloat16 dtype, so A and B live in uint16 arrays holding bf16 bit
    patterns (TMA moves bits, and its zero fill, 0x0000, is bf16 +0): random normal numbers
    rounded to bf16 (round to nearest even), decoded exactly to float64 by the reference. C is a
    torch bfloat16 tensor on the GPU (an ml_dtypes bfloat16 array on the CPU), so the engine
    poisons it with NaN and judge.grading.compare reads it exactly.
  * the tolerance, from the arithmetic: products of bf16 are exact in fp32; K fp32 additions err by
    about sqrt(K) 2^-24 ||a_i|| ||b_j||, with ||a_i|| ~ ||b_j|| ~ sqrt(K) for unit normal data; we
    allow 32 times that (tensor cores add in groups and truncate), plus rtol 2^-8 for rounding C to
    bf16 (p = 8, unit roundoff 2^-8: at most 2^-8 |c|, no headroom; the headroom is in the 32x atol),
    and a relative error norm under 2^-8.
  * the compile-log rules are exercise.toml's [log] (C7508: setmaxnreg ignored; C7515: wgmma
    serialized; both MISSING FEATURE); the engine's SASS rule catches a TMA store with no
    async-proxy fence after the tile's shared-memory stores (WRONG, named).
  * the CPU model of the machine (judge.model) runs cases drawn per run from exercise.toml's
    [domain] (judge.grading.domain: every residue of the ring, each slot used three times, tails
    in every dimension on several blocks each way, a K under one slice): it finds a ring that never turns (HANG),
    wrong rows and a dropped K tail (WRONG), setmaxnreg not executed by a whole warpgroup (HANG);
    work skipped on later launches shows only in the timed runs, on an H200.
"""
from __future__ import annotations

import math

import numpy as np

from judge.gpu import launch as _launch
from judge.hw.formats import from_bf16_bits, to_bf16_bits
from judge.hw import tma

KERNEL = "ws_gemm"
BM, BN, BK, STAGES, THREADS = 128, 256, 64, 4, 384       # must match the #defines of ws_gemm.cu
SHARED_BYTES = STAGES * (BM + BN) * BK * 2 + 2 * 64 * 128 * 2 + 1024


def inputs(case, xp, rng):
    M, N, K = case["m"], case["n"], case["k"]
    a = to_bf16_bits(rng.standard_normal((M, K), dtype=xp.float32), xp)
    b = to_bf16_bits(rng.standard_normal((N, K), dtype=xp.float32), xp)
    if xp is np:                     # the CPU model's "global memory": align it as cudaMalloc would
        a, b = tma.aligned(a), tma.aligned(b)
    return {"a": a, "b": b}


def outputs(case, ins, xp):
    shape = (case["m"], case["n"])
    if xp is np:
        import ml_dtypes
        return {"c": tma.aligned(np.empty(shape, dtype=ml_dtypes.bfloat16))}
    import torch
    return {"c": torch.empty(shape, dtype=torch.bfloat16, device="cuda")}


def reference(case, ins):
    a, b = from_bf16_bits(ins["a"]), from_bf16_bits(ins["b"])
    return {"c": a @ b.T}


def tolerance(case):
    K = case["k"]
    return {"rtol": 2.0 ** -8, "atol": 32 * math.sqrt(K) * 2.0 ** -24 * K, "norm_tol": 2.0 ** -8}


_MAPS: dict = {}


def _address(x) -> int:
    if hasattr(x, "data_ptr"):                   # torch
        return int(x.data_ptr())
    if isinstance(x, np.ndarray):                # the CPU model's global memory
        return int(x.ctypes.data)
    return int(x.data.ptr)                       # cupy


def _maps(a, b, c):
    """Tensor maps of A, B, C, cached by address (encoding them inside a timed launch would count)."""
    key = tuple(_address(x) for x in (a, b, c)) + (tuple(a.shape), tuple(b.shape))
    if key not in _MAPS:
        # boxes innermost first: 64 bf16 (128 bytes = the 128B swizzle span) x rows
        # (over NumPy arrays the map is not encoded: judge.gpu.launch then runs the CPU model)
        _MAPS[key] = (tma.tensor_map(a, box=(BK, BM), swizzle="128B"),
                      tma.tensor_map(b, box=(BK, BN), swizzle="128B"),
                      tma.tensor_map(c, box=(64, 64), swizzle="128B"))
    return _MAPS[key]


def launch(build, case, ins, outs):
    M, N, K = case["m"], case["n"], case["k"]
    ma, mb, mc = _maps(ins["a"], ins["b"], outs["c"])
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM, 1)
    return _launch.launch(build, KERNEL, grid=grid, block=(THREADS,), shared_bytes=SHARED_BYTES,
                          args=(ma, mb, mc, np.int32(M), np.int32(N), np.int32(K)))


def work(case):
    M, N, K = case["m"], case["n"], case["k"]
    return {"flops": 2.0 * M * N * K, "bytes": 2.0 * (M * K + N * K + M * N)}


def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
