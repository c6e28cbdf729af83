"""Grader of attention_softmax: python practice/judge.py check attention_softmax

The shared CUDA flow (judge.grading.cuda_flow) runs exercise.toml's cases and timing; this file holds what is
this exercise's own:
  * bf16 data: Q, K, V live in uint16 arrays of bf16 bit patterns (B, H, S, 64) (TMA moves bits; its zero
    fill, 0x0000, is bf16 +0): random normal numbers rounded to bf16, decoded exactly to float64 by the
    reference. O is a torch bfloat16 tensor on the GPU (an ml_dtypes bfloat16 array on the CPU model), LSE
    float32; the engine poisons both with NaN.
  * the reference: float64 softmax(Q K^T / 8) V and its log-sum-exp, whole rows at once (causal: key <= query).
  * the tolerance, from the arithmetic (chapters/ch06_attention/attention.py derives it element by element):
    P is rounded to bf16 for the second product, so each element of O errs by at most 2^-8 (P|V|), and P|V|
    is a weighted mean of |v| over the row's keys, at most max |v| (under 5 for the case's unit normal
    draws): atol = 5 * 2^-8; O rounded to bf16 adds 2^-8 |o| (rtol); the whole output's relative error is at
    most the two roundings, norm_tol = 2 * 2^-8. The same allowance holds LSE, whose fp32 error is near 1e-6.
    A missing rescale, a mask off by one or a missing 1/l errs by a share of |O| (norm) or by |v| (row 0).
  * the baseline (timing ceiling): torch SDPA pinned to its flash backend on the same inputs, same layout.
"""
from __future__ import annotations

import math

import numpy as np

from judge.gpu import launch as _launch
from judge.hw.formats import from_bf16_bits, to_bf16_bits
from judge.hw import tma

KERNEL = "attention_softmax"
D, BLOCK_N, STAGES, ROWS, THREADS = 64, 64, 2, 128, 384        # must match the #defines of attention.cu
SHARED_BYTES = ROWS * D * 2 + STAGES * 2 * BLOCK_N * D * 2 + 1024


def _shape(case):
    return (case["b"], case["h"], case["s"], D)


def inputs(case, xp, rng):
    out = {}
    for name in ("q", "k", "v"):
        x = to_bf16_bits(rng.standard_normal(_shape(case), dtype=xp.float32), xp)
        out[name] = tma.aligned(x) if xp is np else x
    return out


def outputs(case, ins, xp):
    B, H, S, _ = _shape(case)
    if xp is np:
        import ml_dtypes
        return {"o": tma.aligned(np.empty((B, H, S, D), dtype=ml_dtypes.bfloat16)),
                "lse": tma.aligned(np.empty((B, H, S), dtype=np.float32))}
    import torch
    return {"o": torch.empty((B, H, S, D), dtype=torch.bfloat16, device="cuda"),
            "lse": torch.empty((B, H, S), dtype=torch.float32, device="cuda")}


def reference(case, ins):
    """One (batch, head) at a time, so that the S x S scores of the timing case (4096^2 float64, 134 MB)
    exist for one head at once, never for all 128."""
    q, k, v = (from_bf16_bits(ins[n]) for n in ("q", "k", "v"))
    B, H, S, _ = _shape(case)
    o, lse = np.empty((B, H, S, D)), np.empty((B, H, S))
    seen = np.tril(np.ones((S, S), bool)) if case["causal"] else None
    for b in range(B):
        for h in range(H):
            s = q[b, h] @ k[b, h].T / math.sqrt(D)
            if seen is not None:
                s = np.where(seen, s, -np.inf)
            m = s.max(axis=-1, keepdims=True)
            e = np.exp(s - m)
            l = e.sum(axis=-1, keepdims=True)
            o[b, h] = (e / l) @ v[b, h]
            lse[b, h] = (m + np.log(l))[:, 0]
    return {"o": o, "lse": lse}


def tolerance(case):
    return {"rtol": 2.0 ** -8, "atol": 5 * 2.0 ** -8, "norm_tol": 2 * 2.0 ** -8}


_MAPS: dict = {}


def _address(x) -> int:
    if hasattr(x, "data_ptr"):
        return int(x.data_ptr())
    if isinstance(x, np.ndarray):
        return int(x.ctypes.data)
    return int(x.data.ptr)


def _maps(q, k, v, S, bh):
    """Rank-3 maps (64, S, B*H) over (B, H, S, 64): a box is 64 rows of one head; rows past S are zero-filled."""
    key = tuple(_address(x) for x in (q, k, v)) + (S, bh)
    if key not in _MAPS:
        _MAPS[key] = tuple(tma.tensor_map(x, box=(D, 64, 1), swizzle="128B", dims=(D, S, bh)) for x in (q, k, v))
    return _MAPS[key]


def launch(build, case, ins, outs):
    B, H, S, _ = _shape(case)
    mq, mk, mv = _maps(ins["q"], ins["k"], ins["v"], S, B * H)
    o = outs["o"]
    if isinstance(o, np.ndarray):          # the CPU model takes the bf16 bits as a buffer of uint16 (same bytes)
        o = o.view(np.uint16)
    return _launch.launch(build, KERNEL, grid=((S + ROWS - 1) // ROWS, B * H, 1), block=(THREADS,),
                          shared_bytes=SHARED_BYTES,
                          args=(mq, mk, mv, o, outs["lse"], np.int32(S), np.int32(int(case["causal"])),
                                np.float32(math.log2(math.e) / math.sqrt(D))))


def work(case):
    B, H, S, _ = _shape(case)
    flops = 4.0 * B * H * S * S * D
    return {"flops": flops / 2 if case["causal"] else flops, "bytes": 2.0 * 4 * B * H * S * D}


def baseline(case, ins, outs):
    """torch SDPA pinned to its flash backend, on the same (B, H, S, 64) bf16 inputs (no transpose)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    q, k, v = (torch.as_tensor(ins[n], device="cuda").view(torch.bfloat16) for n in ("q", "k", "v"))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        sdpa(q, k, v, is_causal=bool(case["causal"]))

def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
