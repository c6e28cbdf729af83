"""judge.model.ops.mma - mma.sync: the warp-level tensor-core instruction of Ampere, still on Hopper (HMMA in SASS).

Registered with judge.model.registry; tested by tests/model/test_model_ops_async.py (from hand-written PTX, and
from CUDA C++ that loads its fragments with ldmatrix, the usual way, so the layouts below are checked against
ldmatrix's, which ran on the H200).

    mma.sync.aligned.m16n8k16.row.col.f32.{bf16, f16}.{bf16, f16}.f32  {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}
    mma.sync.aligned.m16n8k8.row.col.f32.{bf16, f16}.{bf16, f16}.f32   {d0..d3}, {a0, a1}, {b0}, {c0..c3}
    mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32                  {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}

RULE (PTX ISA, "Matrix Fragments for mma.m16n8k*"): with g = lane / 4 and t = lane % 4,
  C, D (16 x 8, f32): register j in 0..3 holds row g + 8 (j / 2), column 2 t + j % 2;
  A, 16-bit (16 x K, row): register i holds two elements (the lower column in the lower half): rows g + 8 (i % 2),
     columns 2 t + 8 (i / 2) and 2 t + 8 (i / 2) + 1;
  B, 16-bit (K x 8, col): register i holds rows (k) 2 t + 8 i and 2 t + 8 i + 1 of column (n) g;
  A, tf32 (16 x 8): register i holds row g + 8 (i % 2), column t + 4 (i / 2); B, tf32: register i holds k = t + 4 i,
     n = g.
The products are exact in float64 and the sum, with C, is rounded to f32 once. All 32 lanes of the warp execute it
together (.sync.aligned: rule warp-aligned). The other shapes and types (integer, FP8, .m8n8k4, sparse) are refused.

Also wmma.mma.sync.aligned.{row,col}.{row,col}.m16n16k16.f32 with bf16 (.f32.bf16.bf16.f32) or f16 (.f32.f32)
operands (nvcuda::wmma::mma_sync), on the fragments of common.wmma_fragment that wmma.load fills.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks
from judge.model.errors import Unsupported
from judge.model.ops.common import half_format, wmma_fragment
from judge.model.registry import op


def _halves(words, kind):
    """.b32 registers holding two 16-bit values -> float64 pairs (low half first)."""
    w = np.asarray(words).astype(np.uint32)
    lo, hi = (w & np.uint32(0xFFFF)).astype(np.uint16), (w >> np.uint32(16)).astype(np.uint16)
    el = half_format(kind)
    return lo.view(el).astype(np.float64), hi.view(el).astype(np.float64)


def _tf32(words):
    """A tf32 operand register: the float32 of its bits with the low 13 mantissa bits ignored, as the tensor core reads it."""
    w = np.asarray(words).astype(np.uint32) & np.uint32(0xFFFFE000)
    return w.view(np.float32).astype(np.float64)


@op("mma")
def mma_sync(m, ins):
    """mma.sync.aligned.m16n8k{8,16}.row.col.f32 with bf16 / f16 / tf32 operands: D = A B + C per warp."""
    p = ins.parts
    shape = next((x for x in p if x.startswith("m16n8k")), None)
    kinds = [x for x in p if x in ("bf16", "f16", "tf32", "f32")]
    if shape not in ("m16n8k16", "m16n8k8") or "row" not in p or "col" not in p or len(kinds) != 4 \
            or kinds[0] != "f32" or kinds[3] != "f32" or kinds[1] != kinds[2] or "sp" in p \
            or (kinds[1] == "tf32" and shape != "m16n8k8"):
        raise Unsupported(ins.op, "mma.sync forms other than .m16n8k16 / .m16n8k8 .row.col.f32 with bf16, f16 "
                                  "(or, k8, tf32) operands")
    el, K = kinds[1], int(shape[6:])
    d, a, b, c = ins.args[:4]
    na = 4 if (K == 16 or el == "tf32") else 2
    nb = 2 if (K == 16 or el == "tf32") else 1
    if any(o.kind != "vec" for o in (d, a, b, c)) or (len(d.items), len(a.items), len(b.items), len(c.items)) != (4, na, nb, 4):
        raise Unsupported(ins.op, f"expected 4, {na}, {nb} and 4 registers for D, A, B and C")

    def warp_mma(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        for w in np.unique(lanes // 32):
            if np.count_nonzero(mask[32 * w:32 * w + 32]) != 32:
                m.fail("warp-aligned", ins, f"{np.count_nonzero(mask[32 * w:32 * w + 32])} lanes of warp {int(w)} "
                                            f"executed {ins.op}; all 32 must execute it together")
                raise checks.abort(m, "warp-aligned", ins, "mma.sync by part of a warp")
        ra = [np.broadcast_to(np.asarray(m.rd(x, "b32", ins)), (m.n,)) for x in a.items]
        rb = [np.broadcast_to(np.asarray(m.rd(x, "b32", ins)), (m.n,)) for x in b.items]
        rc = [np.broadcast_to(np.asarray(m.rd(x, "f32", ins)), (m.n,)).astype(np.float64) for x in c.items]
        out = [np.zeros(m.n, np.float32) for _ in range(4)]
        for w in np.unique(lanes // 32):
            ln = np.arange(32 * w, 32 * w + 32)
            g, t = (ln % 32) // 4, ln % 4
            A = np.zeros((16, K))
            B = np.zeros((K, 8))
            C = np.zeros((16, 8))
            for i, reg in enumerate(ra):
                if el == "tf32":
                    A[g + 8 * (i % 2), t + 4 * (i // 2)] = _tf32(reg[ln])
                else:
                    lo, hi = _halves(reg[ln], el)
                    col = 2 * t + 8 * (i // 2)
                    A[g + 8 * (i % 2), col], A[g + 8 * (i % 2), col + 1] = lo, hi
            for i, reg in enumerate(rb):
                if el == "tf32":
                    B[t + 4 * i, g] = _tf32(reg[ln])
                else:
                    lo, hi = _halves(reg[ln], el)
                    B[2 * t + 8 * i, g], B[2 * t + 8 * i + 1, g] = lo, hi
            for j in range(4):
                C[g + 8 * (j // 2), 2 * t + j % 2] = rc[j][ln]
            D = (A @ B + C).astype(np.float32)
            for j in range(4):
                out[j][ln] = D[g + 8 * (j // 2), 2 * t + j % 2]
        for j in range(4):
            m.wr(d.items[j], out[j], mask, full)
        m.counts["mma.sync"] += len(lanes) // 32
    return warp_mma


@op("wmma.mma")
def wmma_mma(m, ins):
    """wmma.mma.sync.aligned.{row,col}.{row,col}.m16n16k16.f32.{bf16.bf16.f32 | f32}: D = A B + C (16 x 16 x 16)
    per warp, on the fragments wmma.load made (common.wmma_fragment; a fragment holds its elements whatever
    layout they were loaded from, so the layout qualifiers change nothing here)."""
    p = ins.parts
    kinds = [x for x in p if x in ("bf16", "f16", "f32")]
    if "m16n16k16" not in p or kinds not in (["f32", "bf16", "bf16", "f32"], ["f32", "f32"]) or "satfinite" in p:
        raise Unsupported(ins.op, "wmma.mma forms other than m16n16k16 with f32 C and D and bf16 or f16 A and B")
    el = "bf16" if "bf16" in kinds else "f16"
    nab = 4 if el == "bf16" else 8
    d, a, b, c = ins.args[:4]
    if any(o.kind != "vec" for o in (d, a, b, c)) or \
            (len(d.items), len(a.items), len(b.items), len(c.items)) != (8, nab, nab, 8):
        raise Unsupported(ins.op, f"expected 8, {nab}, {nab} and 8 registers for D, A, B and C")

    def warp_mma(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        for w in np.unique(lanes // 32):
            if np.count_nonzero(mask[32 * w:32 * w + 32]) != 32:
                m.fail("warp-aligned", ins, f"{np.count_nonzero(mask[32 * w:32 * w + 32])} lanes of warp {int(w)} "
                                            f"executed {ins.op}; all 32 must execute it together")
                raise checks.abort(m, "warp-aligned", ins, "wmma.mma by part of a warp")
        ra = [np.broadcast_to(np.asarray(m.rd(x, "b32", ins)), (m.n,)) for x in a.items[:4]]
        rb = [np.broadcast_to(np.asarray(m.rd(x, "b32", ins)), (m.n,)) for x in b.items[:4]]
        rc = [np.broadcast_to(np.asarray(m.rd(x, "f32", ins)), (m.n,)).astype(np.float64) for x in c.items]
        out = [np.zeros(m.n, np.float32) for _ in range(8)]
        for w in np.unique(lanes // 32):
            ln = np.arange(32 * w, 32 * w + 32)
            mats = {"a": np.zeros((16, 16)), "b": np.zeros((16, 16)), "c": np.zeros((16, 16))}
            for kind, regs in (("a", ra), ("b", rb)):
                for reg, at, r, col in wmma_fragment(kind, ln % 32):
                    mats[kind][r, col] = _halves(regs[reg][ln], el)[at // 2]
            for reg, _, r, col in wmma_fragment("c", ln % 32):
                mats["c"][r, col] = rc[reg][ln]
            D = (mats["a"] @ mats["b"] + mats["c"]).astype(np.float32)
            for reg, _, r, col in wmma_fragment("c", ln % 32):
                out[reg][ln] = D[r, col]
        for j in range(8):
            m.wr(d.items[j], out[j], mask, full)
        m.counts["wmma.mma"] += len(lanes) // 32
    return warp_mma
