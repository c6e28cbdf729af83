"""Rung 1 of Chapter 6, in numbers: the online softmax as the kernels compute it, against float64.

    from chapters.ch06_attention import online
    online.kernel_arithmetic(q, k, v, causal=False, block_n=128)   # NumPy: the kernels' arithmetic, tile by tile
    online.error_table(seed=0)                                      # rows: what each rounding costs, and the bound

What the kernels do per 64-row query tile, written here in NumPy with the kernels' number formats
(every step float32 as in the registers; P rounded to bf16 before the second product, as the register-
sourced wgmma takes it; exponentials as 2^x with log2(e)/sqrt(d) folded into one factor):

    for each key block j:   S_j = Q K_j^T                  (fp32 accumulation of bf16 products)
                            m' = max(m, rowmax S_j)        (the raw scores' running maximum)
                            alpha = 2^((m - m') c)         (c = log2(e) / sqrt(d); 0 on the first block)
                            P_j = 2^(S_j c - m' c)         (every entry <= 1)
                            l = alpha l + rowsum P_j       (fp32, from the unrounded P_j)
                            O = alpha O + bf16(P_j) V_j    (fp32 accumulator)
    O = O / l, LSE = (m c + log2 l) ln 2

Why it is softmax(S / sqrt(d)) V: after block j, l = sum over the keys read so far of 2^(s c - m c) =
e^(-m / sqrt(d)) sum e^(s / sqrt(d)) and O = e^(-m / sqrt(d)) sum e^(s / sqrt(d)) v; multiplying both by
alpha = e^((m - m') / sqrt(d)) moves them to the new maximum m', and the common factor cancels in O / l.
The exercise online_softmax (exercises/online_softmax) asks for exactly this bookkeeping in float64,
masked rows and huge logits included.
"""
from __future__ import annotations

import math

import numpy as np

from chapters.ch06_attention import attention


def _bf16(x):
    import ml_dtypes
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def kernel_arithmetic(q, k, v, causal: bool = False, block_n: int = 128, round_p: bool = True,
                      round_o: bool = True):
    """O and LSE of (B, H, S, d) inputs computed as the kernels compute them (module docstring), in NumPy.
    round_p=False keeps P in float32 for the second product; round_o=False leaves O in float32."""
    q32, k32, v32 = (np.asarray(x, dtype=np.float32) for x in (q, k, v))
    B, H, S, d = q32.shape
    c = np.float32(attention.scale_log2(d))
    o = np.zeros((B, H, S, d), np.float32)
    lse = np.zeros((B, H, S), np.float32)
    rows = np.arange(S)
    for b in range(B):
        for h in range(H):
            m = np.full(S, -np.inf, np.float32)
            l = np.zeros(S, np.float32)
            acc = np.zeros((S, d), np.float32)
            for k0 in range(0, S, block_n):
                keys = np.arange(k0, min(S, k0 + block_n))
                s = q32[b, h] @ k32[b, h, keys].T
                if causal:
                    s = np.where(keys[None, :] <= rows[:, None], s, np.float32(-np.inf))
                m_new = np.maximum(m, s.max(axis=1))
                mc = np.where(np.isneginf(m_new), np.float32(0), m_new * c)
                with np.errstate(invalid="ignore"):
                    alpha = np.exp2(m * c - mc).astype(np.float32)
                p = np.exp2(s * c - mc[:, None]).astype(np.float32)
                l = alpha * l + p.sum(axis=1, dtype=np.float32)
                pv = (_bf16(p) if round_p else p) @ v32[b, h, keys]
                acc = alpha[:, None] * acc + pv
                m = m_new
            out = acc / np.where(l > 0, l, 1)[:, None]
            o[b, h] = _bf16(out) if round_o else out
            lse[b, h] = np.where(l > 0, (m * c + np.log2(np.where(l > 0, l, 1))) * np.float32(math.log(2)), -np.inf)
    return o, lse


def error_table(B: int = 1, H: int = 2, S: int = 512, d: int = 128, causal: bool = False, seed: int = 0,
                block_n: int = 128) -> list[dict]:
    """Rows: the relative error (Frobenius) of O against float64 with each rounding on or off, the largest
    share of the derived allowance (attention.tolerances) any element uses, and the allowance in numbers."""
    import ml_dtypes
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, H, S, d)).astype(ml_dtypes.bfloat16) for _ in range(3))
    ref_o, ref_lse, pv_abs = attention.reference(q, k, v, causal)
    atol_o, atol_lse = attention.tolerances(q, k, pv_abs, ref_lse)
    rows = []
    for what, rp, ro in (("float32 throughout (P and O unrounded)", False, False),
                         ("P rounded to bf16 (the second product's A operand)", True, False),
                         ("P and O rounded to bf16 (what the kernels do)", True, True)):
        o, lse = kernel_arithmetic(q, k, v, causal, block_n, rp, ro)
        err = np.abs(o - ref_o)
        allow = atol_o + attention.RTOL * np.abs(ref_o)
        rows.append({"arithmetic": what,
                     "O rel. error": float(np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o)),
                     "O largest share of the allowance": float((err / allow).max()),
                     "LSE largest error": float(np.abs(lse - ref_lse).max()),
                     "LSE largest share of the allowance": float((np.abs(lse - ref_lse) / atol_lse).max())})
    rows.append({"arithmetic": "the allowance (attention.tolerances): norm_tol, and atol as a share of P|V|",
                 "O rel. error": attention.NORM_TOL, "O largest share of the allowance": 1.0,
                 "LSE largest error": float(atol_lse.max()), "LSE largest share of the allowance": 1.0})
    return rows
