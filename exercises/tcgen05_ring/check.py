"""Grader of tcgen05_ring: python practice/judge.py check tcgen05_ring

No Blackwell GPU is needed, and none is used. The shared CUDA flow (judge.grading.cuda_flow) runs the cases
below on the CPU model of the machine (judge.model, tensor memory and tcgen05 in judge/model/ops/tcgen05.py):
the kernel's own PTX, TMA loads from tensor maps over the host arrays (judge.hw.tma: no driver needed),
mbarriers, tcgen05.mma from the descriptors, commits, tcgen05.ld. C is compared against float64;
[carries] asks that C's bytes come out of tensor memory.
  * bf16 data: A and B are uint16 arrays of bf16 bit patterns (random normal numbers rounded to nearest
    even), decoded exactly to float64 by the reference; C is float32, poisoned with NaN before each launch.
  * persistent grid: CTAS CTAs take the tiles blockIdx.x, blockIdx.x + CTAS, ...: with 4 tiles and one CTA
    each accumulator buffer is used twice (the parity flips), with two each CTA uses both buffers.
  * the tolerance, from the arithmetic: products of bf16 are exact; K additions in fp32 err by about
    sqrt(K) 2^-24 ||a_i|| ||b_j|| with ||a_i|| ~ ||b_j|| ~ sqrt(K) for unit normal data; we allow 32 times
    that, and a relative error norm under 2^-12.
"""
from __future__ import annotations

import math

import numpy as np

from judge.gpu import launch as _launch
from judge.hw import tma

KERNEL = "tcgen05_ring"
BM, BN, BK, STAGES, THREADS = 128, 128, 64, 4, 192     # must match the #defines of tcgen05_ring.cu
SHARED_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 + 256

# For the CPU model: 4 tiles on 1 CTA (each buffer twice, the 4-slot ring wraps 4 times), then on 2 CTAs.
model_cases = [{"m": 256, "n": 256, "k": 256, "ctas": 1}, {"m": 256, "n": 256, "k": 128, "ctas": 2}]


def to_bf16_bits(x, xp):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = x.astype(xp.float32).view(xp.uint32)
    u = u + xp.uint32(0x7FFF) + ((u >> xp.uint32(16)) & xp.uint32(1))
    return (u >> xp.uint32(16)).astype(xp.uint16)


def from_bf16_bits(b) -> np.ndarray:
    """bf16 bit patterns (uint16, NumPy) -> float64, exactly."""
    return (np.asarray(b).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def _aligned(a: np.ndarray, align: int = 1024) -> np.ndarray:
    """A copy of a NumPy array starting on an `align`-byte boundary (a 128B-swizzled map wants 128)."""
    raw = np.empty(a.nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def inputs(case, xp, rng):
    M, N, K = case["m"], case["n"], case["k"]
    a = to_bf16_bits(rng.standard_normal((M, K), dtype=xp.float32), xp)
    b = to_bf16_bits(rng.standard_normal((N, K), dtype=xp.float32), xp)
    if xp is np:                     # the CPU model's "global memory": align it as cudaMalloc would
        a, b = _aligned(a), _aligned(b)
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
    _launch.launch(build, KERNEL, grid=(min(case.get("ctas", tiles), tiles), 1, 1), block=(THREADS,),
                   shared_bytes=SHARED_BYTES, args=(ma, mb, outs["c"], np.int32(M), np.int32(N), np.int32(K)))


def work(case):
    M, N, K = case["m"], case["n"], case["k"]
    return {"flops": 2.0 * M * N * K, "bytes": 2.0 * (M * K + N * K) + 4.0 * M * N}


def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
