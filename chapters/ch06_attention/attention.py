"""Host side of Chapter 6's attention ladder: build, run on the CPU model or a GPU, check, time.

    from chapters.ch06_attention import attention
    [r["name"] for r in attention.RUNGS]                      # the kernel rungs, in order
    attention.build_rung("one warpgroup", head_dim=64).sass   # any machine: NVRTC -> sm_90a -> SASS
    attention.model_check("one warpgroup", B=1, H=2, S=200, d=64, causal=True)   # any machine: the CPU model
    attention.check_rung("one warpgroup", 2, 4, 1000, 128, causal=False)        # an H200, against float64
    rows = attention.measure()                                 # an H200: every rung and SDPA backend, one run
    python -m chapters.ch06_attention.attention               # an H200: checks and the table (device script)

The problem. O = softmax(Q K^T / sqrt(d)) V per (batch, head), with the log-sum-exp of every query row
(LSE = log sum_j exp(q.k_j / sqrt(d)), natural log, what a backward pass reads). Q, K, V are bf16 tensors
(B, H, S, d), contiguous, the layout torch's scaled_dot_product_attention takes; O is bf16 (B, H, S, d),
LSE float32 (B, H, S). Causal: query i sees keys j <= i. Any S >= 1 (the tail of the last tile masked);
d = 64 or 128.

The tolerance (check_outputs), derived from the arithmetic, as chapter 4 derived its GEMM's:
  * Q, K, V are bf16, exact in float64; products of two bf16 are exact in fp32. The scores' fp32
    accumulation over d terms and the fp32 rescales and exponentials (ex2.approx: relative error about
    2^-22) err in the 6th or 7th digit: small beside the two roundings that follow;
  * P is rounded to bf16 (unit roundoff u = 2^-8) before the second product, while l sums the fp32
    P: each term p_j v_j of O's row carries a relative error of at most u, so
        |O_id - O64_id| <= u * sum_j P_ij |V_jd| + (fp32 terms),
    with P the exact softmax: atol_id = (2^-8 + 2^-16) (P |V|)_id, computed from the float64 reference;
  * O is rounded to bf16: rtol = 2^-8 covers it;
  * the whole output's relative error (Frobenius) is at most the two roundings' share, each at most
    u: norm_tol = 2 * 2^-8;
  * LSE: ln l carries l's relative error (the fp32 sum of up to S terms, about sqrt(S) 2^-24 as a random
    walk, allowed 16 times, plus 2^-22 per ex2) and the score's fp32 error (about sqrt(d) 2^-24 |q| |k|
    / sqrt(d), allowed 16 times), and is itself fp32: atol = 16 (sqrt(S) 2^-24 + 2^-22 + 2^-24 |q_i|
    max_j |k_j|) + 2^-22 |LSE|.
For random normal inputs a dropped key block, a missing rescale or a wrong mask errs by a sizeable share
of |O| (the tests break the kernel on purpose and see it fail); the allowance is below 1 % of P|V|.

Timing (measure): the course's protocol (judge.gpu.timing.bench: L2 scrubbed before each launch, two
input sets alternating, median of 20), in interleaved rounds: every rung and every SDPA backend once per
round, rounds repeated, each one's median over its rounds, so a drift of clock or temperature falls on
all alike. FLOPs 4 B H S^2 d (the two products), half of it causal. Layouts: every kernel here and every
SDPA backend reads Q, K, V as (B, H, S, d) contiguous and writes O (B, H, S, d): nothing is transposed.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

from judge.gpu import build as _build
from judge.grading import compare as _cmp
from judge.hw import tma

HERE = Path(__file__).resolve().parent
NOTEBOOK = "chapters/ch06_attention.ipynb"
BLOCK_M = 64                   # query rows per consumer warpgroup

#: The ladder, in order: file, kernel, threads per block, query rows per block, and the defines of
#: each head dimension (keys per block, ring stages).
RUNGS: list[dict] = [
    {"name": "one warpgroup", "file": "attn_02_one_warpgroup.cu", "kernel": "attn_one_warpgroup",
     "what": "one warpgroup per 64 query rows: S = QK^T by wgmma from shared memory, softmax in registers "
             "(ex2, scale folded), P from registers into the second wgmma, K/V through a 2-stage TMA ring",
     "threads": 128, "rows": 64, "defines": {128: {"BLOCK_N": 128, "STAGES": 2}, 64: {"BLOCK_N": 128, "STAGES": 2}}},
]

HEAD_DIMS = (64, 128)


def rung(name: str) -> dict:
    for r in RUNGS:
        if r["name"] == name:
            return r
    raise KeyError(f"no rung {name!r}; the rungs are: " + ", ".join(repr(r["name"]) for r in RUNGS))


def defines(name: str, head_dim: int, **extra) -> dict:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim {head_dim}: the kernels take d = 64 or 128 (a TMA box row is 64 bf16)")
    d = {"HEAD_DIM": head_dim, **rung(name)["defines"][head_dim]}
    d.update(extra)
    return d


def build_rung(name: str, head_dim: int = 128, **extra):
    """Compile one rung for sm_90a (any machine): a judge.gpu.build.Build."""
    return _build.compile(HERE / rung(name)["file"], defines=defines(name, head_dim, **extra))


def shared_bytes(name: str, head_dim: int, **extra) -> int:
    """Dynamic shared memory: the Q tile(s), the K/V ring, 1 KiB to align to 1024."""
    r, d = rung(name), defines(name, head_dim, **extra)
    q = r["rows"] * head_dim * 2
    ring = d["STAGES"] * 2 * d["BLOCK_N"] * head_dim * 2
    return q + ring + 1024


def grid(name: str, B: int, H: int, S: int) -> tuple:
    r = rung(name)
    return (-(-S // r["rows"]), B * H, 1)


def scale_log2(d: int) -> float:
    """The factor folded into every exponential: e^(s / sqrt(d)) = 2^(s * log2(e) / sqrt(d))."""
    return math.log2(math.e) / math.sqrt(d)


def tensor_maps(q, k, v, S: int, d: int, block_n: int, rows: int = BLOCK_M):
    """3-D maps (d, S, B*H) over (B, H, S, d) tensors: a box is 64 of d (128 bytes, the 128B swizzle span) by
    `rows` (Q) or `block_n` (K, V) rows of one head. Rows past S are zero-filled: never another head's."""
    bh = int(np.prod(q.shape[:2]))
    mk = lambda a, r: tma.tensor_map(a, box=(64, r, 1), swizzle="128B", dims=(d, S, bh))  # noqa: E731
    return mk(q, rows), mk(k, block_n), mk(v, block_n)


# ----------------------------------------------------------------------------- float64 reference
def reference(q, k, v, causal: bool):
    """float64 O and LSE of NumPy arrays (B, H, S, d) (any float type), and the P |V| of the tolerance."""
    q64, k64, v64 = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    d = q64.shape[-1]
    s = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(d)
    if causal:
        S = s.shape[-1]
        s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = e / l
    return p @ v64, (m + np.log(l))[..., 0], p @ np.abs(v64)


RTOL = 2.0 ** -8
NORM_TOL = 2 * 2.0 ** -8


def tolerances(q, k, pv_abs, lse):
    """Per-element atol of O and of LSE (the module docstring derives them)."""
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    S = k64.shape[-2]
    atol_o = (2.0 ** -8 + 2.0 ** -16) * pv_abs
    qn = np.linalg.norm(q64, axis=-1)                              # (B, H, S)
    kn = np.linalg.norm(k64, axis=-1).max(axis=-1, keepdims=True)  # (B, H, 1)
    atol_lse = 16 * (math.sqrt(S) * 2.0 ** -24 + 2.0 ** -22 + 2.0 ** -24 * qn * kn) \
        + 2.0 ** -22 * np.abs(np.where(np.isfinite(lse), lse, 0))
    return atol_o, atol_lse


def check_outputs(o, lse, q, k, v, causal: bool, case: str):
    """Compare a kernel's O (bf16 as float32, NumPy) and LSE with float64: (Comparison of O, of LSE)."""
    ref_o, ref_lse, pv_abs = reference(q, k, v, causal)
    atol_o, atol_lse = tolerances(q, k, pv_abs, ref_lse)
    co = _cmp.compare(np.asarray(o, np.float32), ref_o, rtol=RTOL, atol=atol_o, norm_tol=NORM_TOL, case=case + ", O")
    cl = _cmp.compare(np.asarray(lse, np.float32), ref_lse, rtol=0.0, atol=atol_lse, case=case + ", LSE")
    return co, cl


# ----------------------------------------------------------------------------- the CPU model
def _host_aligned(shape, dtype, align: int = 1024):
    """An uninitialized NumPy array starting on an `align`-byte boundary (as cudaMalloc's are)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dtype).reshape(shape)


def model_inputs(B, H, S, d, seed):
    """Random normal bf16 Q, K, V (B, H, S, d) on the host, 1024-byte aligned."""
    import ml_dtypes
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        a = _host_aligned((B, H, S, d), ml_dtypes.bfloat16)
        a[...] = rng.standard_normal((B, H, S, d)).astype(ml_dtypes.bfloat16)
        out.append(a)
    return out


def model_run(name: str, q, k, v, causal: bool, *, build=None):
    """Run a rung on the CPU model (judge.model) on host bf16 arrays: O (float32) and LSE, poisoned first."""
    import ml_dtypes

    from judge.gpu import launch as _launch
    B, H, S, d = q.shape
    dfs = defines(name, d)
    b = build or build_rung(name, d)
    o = _host_aligned((B, H, S, d), ml_dtypes.bfloat16)
    o[...] = np.nan
    lse = _host_aligned((B, H, S), np.float32)
    lse[...] = np.nan
    maps = tensor_maps(q, k, v, S, d, dfs["BLOCK_N"], rung(name)["rows"])
    args = (*maps, o.view(np.uint16), lse, np.int32(S), np.int32(int(causal)), np.float32(scale_log2(d)))
    _launch.launch(b, rung(name)["kernel"], grid=grid(name, B, H, S), block=(rung(name)["threads"], 1, 1),
                   args=args, shared_bytes=shared_bytes(name, d))
    return o.astype(np.float32), lse


def model_check(name: str, B: int = 1, H: int = 2, S: int = 200, d: int = 64, causal: bool = False,
                seed=None, build=None):
    """One rung on the CPU model of the machine against float64: (Comparison of O, of LSE).

    The model runs the kernel's own PTX with the asynchronous rules enforced (a TMA box lands when its
    phase completes, a register read by a running wgmma may not be written, a fence missing between
    register writes and the wgmma that reads them is a violation), so a protocol error fails here even
    where a GPU would usually give the right numbers. Small sizes: a few seconds per (1, 2, 200, 64).
    """
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    q, k, v = model_inputs(B, H, S, d, seed)
    o, lse = model_run(name, q, k, v, causal, build=build)
    return check_outputs(o, lse, q, k, v, causal,
                         f"{name} on the CPU model: B={B} H={H} S={S} d={d} causal={causal} seed={seed}")
