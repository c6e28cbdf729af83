"""Grader of tcgen05_gemm: python practice/judge.py check tcgen05_gemm

No Blackwell GPU is needed, and none is used. The shared CUDA flow (judge.grading.cuda_flow) runs
exercise.toml's cases; this file holds what is this exercise's own:
  * bf16 data: A and B are uint16 arrays of bf16 bit patterns (random normal numbers rounded to
    nearest even), decoded exactly to float64 by the reference; C is float32, poisoned with NaN by
    the engine before every launch.
  * without a GPU the kernel's own PTX runs on the CPU model of the machine (judge.model, with
    tensor memory and tcgen05 from judge.model.ops.tcgen05): the alloc / mma / commit / wait / ld /
    dealloc protocol is checked thread by thread, the MMAs compute from the shared-memory and
    instruction descriptors, and C is compared against float64. [carries] asks that C's bytes come
    out of tensor memory (tcgen05.ld of the MMA results), so a kernel that runs the protocol but
    computes C on the CUDA cores is MISSING FEATURE.
  * the tolerance, from the arithmetic: products of bf16 are exact; K additions in fp32 err by about
    sqrt(K) 2^-24 ||a_i|| ||b_j|| with ||a_i|| ~ ||b_j|| ~ sqrt(K) for unit normal data; we allow 32
    times that, and a relative error norm under 2^-12. The model adds each MMA's 16 products in
    float64 and rounds once to fp32; a tensor core rounds differently, well inside this bound.
"""
from __future__ import annotations

import math

import numpy as np

from judge.gpu import launch as _launch
from judge.hw.formats import from_bf16_bits, to_bf16_bits

KERNEL = "tcgen05_gemm"
BM, BN, THREADS = 128, 128, 128        # must match the #defines of tcgen05_gemm.cu



def inputs(case, xp, rng):
    M, N, K = case["m"], case["n"], case["k"]
    return {"a": to_bf16_bits(rng.standard_normal((M, K), dtype=xp.float32), xp),
            "b": to_bf16_bits(rng.standard_normal((N, K), dtype=xp.float32), xp)}


def outputs(case, ins, xp):
    return {"c": xp.empty((case["m"], case["n"]), dtype=xp.float32)}


def reference(case, ins):
    return {"c": from_bf16_bits(ins["a"]) @ from_bf16_bits(ins["b"]).T}


def tolerance(case):
    K = case["k"]
    return {"rtol": 0.0, "atol": 32 * math.sqrt(K) * 2.0 ** -24 * K, "norm_tol": 2.0 ** -12}


def launch(build, case, ins, outs):
    M, N, K = case["m"], case["n"], case["k"]
    return _launch.launch(build, KERNEL, grid=(N // BN, M // BM, 1), block=(THREADS,),
                          args=(ins["a"], ins["b"], outs["c"], np.int32(M), np.int32(N), np.int32(K)))


def work(case):
    M, N, K = case["m"], case["n"], case["k"]
    return {"flops": 2.0 * M * N * K, "bytes": 2.0 * (M * K + N * K) + 4.0 * M * N}


def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
