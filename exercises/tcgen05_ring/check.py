"""Grader of tcgen05_ring: python practice/judge.py check tcgen05_ring

No Blackwell GPU is needed, and none is used. The shared CUDA flow (judge.grading.cuda_flow) runs the cases
below on the CPU model of the machine (judge.model, tensor memory and tcgen05 in judge/model/ops/tcgen05.py):
the kernel's own PTX, TMA loads from tensor maps over the host arrays (judge.hw.tma: no driver needed),
mbarriers, tcgen05.mma from the descriptors, commits, tcgen05.ld. C is compared against float64;
[carries] asks that C's bytes come out of tensor memory.
  * bf16 data: A and B are uint16 arrays of bf16 bit patterns (random normal numbers rounded to nearest
    even), decoded exactly to float64 by the reference; C is float32, poisoned with NaN before each launch.
  * persistent grid: CTAS CTAs take the tiles blockIdx.x, blockIdx.x + CTAS, ...; the model's cases are
    drawn from exercise.toml's [domain] (judge.grading.domain): every buffer and ring slot used three
    times or more by every CTA, tile counts the grid does not divide, several tiles along M and N.
  * the tolerance, from the arithmetic: products of bf16 are exact; K additions in fp32 err by about
    sqrt(K) 2^-24 ||a_i|| ||b_j|| with ||a_i|| ~ ||b_j|| ~ sqrt(K) for unit normal data; we allow 32 times
    that, and a relative error norm under 2^-12.
"""
from __future__ import annotations

import math

import numpy as np

from judge.gpu import launch as _launch
from judge.hw.formats import from_bf16_bits, to_bf16_bits
from judge.hw import tma

KERNEL = "tcgen05_ring"
BM, BN, BK, STAGES, THREADS = 128, 128, 64, 4, 192     # must match the #defines of tcgen05_ring.cu
SHARED_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 + 256



def inputs(case, xp, rng):
    M, N, K = case["m"], case["n"], case["k"]
    a = to_bf16_bits(rng.standard_normal((M, K), dtype=xp.float32), xp)
    b = to_bf16_bits(rng.standard_normal((N, K), dtype=xp.float32), xp)
    if xp is np:                     # the CPU model's "global memory": align it as cudaMalloc would
        a, b = tma.aligned(a), tma.aligned(b)
    return {"a": a, "b": b}


def outputs(case, ins, xp):
    return {"c": xp.empty((case["m"], case["n"]), dtype=xp.float32)}


def reference(case, ins):
    return {"c": from_bf16_bits(ins["a"]) @ from_bf16_bits(ins["b"]).T}


def tolerance(case):
    K = case["k"]
    return {"rtol": 0.0, "atol": 32 * math.sqrt(K) * 2.0 ** -24 * K, "norm_tol": 2.0 ** -12}


def launch(build, case, ins, outs):
    M, N, K = case["m"], case["n"], case["k"]
    # boxes innermost first: 64 bf16 (128 bytes = the 128B swizzle span) x rows; over NumPy arrays the
    # maps are not encoded and judge.gpu.launch runs the CPU model
    ma = tma.tensor_map(ins["a"], box=(BK, BM), swizzle="128B")
    mb = tma.tensor_map(ins["b"], box=(BK, BN), swizzle="128B")
    tiles = (M // BM) * (N // BN)
    return _launch.launch(build, KERNEL, grid=(min(case.get("ctas", tiles), tiles), 1, 1), block=(THREADS,),
                          shared_bytes=SHARED_BYTES, args=(ma, mb, outs["c"], np.int32(M), np.int32(N), np.int32(K)))


def work(case):
    M, N, K = case["m"], case["n"], case["k"]
    return {"flops": 2.0 * M * N * K, "bytes": 2.0 * (M * K + N * K) + 4.0 * M * N}


def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
