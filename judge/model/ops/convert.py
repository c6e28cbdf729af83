"""judge.model.ops.convert - cvt (number formats) and cvta (address windows).

tf32 (PTX ISA, cvt: `cvt.frnd{.relu}{.satfinite}.tf32.f32 d, a`): a float32 rounded to 1 sign, 8
exponent and 10 mantissa bits, kept in a .b32 register as a float32 bit pattern whose low 13 bits are
zero; .rna rounds to nearest with ties away from zero, .rn to nearest even, .rz towards zero; NaN stays
NaN; .satfinite turns an infinite result into the largest finite tf32 of its sign. Done on the bits.

Registered with judge.model.registry; tested by tests/test_model_ops_alu.py. Conversions to a
narrower float round to nearest even unless the instruction names another mode; float -> integer
conversions saturate and map NaN to 0 (PTX: cvt to an integer type is saturating for floats).
"""
from __future__ import annotations

import numpy as np

from judge.model.errors import Unsupported
from judge.model.ops.common import as_f64, saturate, types, wrap_int
from judge.model.registry import op
from judge.model.state import DT, SHARED_BASE


@op("cvt")
def cvt(m, ins):
    """cvt between integer and float types (rounding modifiers .rn/.rz/.rm/.rp and .rni/... for integers), and the packing forms cvt.rn.f16x2/bf16x2.f32."""
    tys = types(ins.parts)
    if len(tys) < 2:
        raise Unsupported(ins.op)
    dt, st = tys[0], tys[1]
    rnd = next((r for r in ("rni", "rzi", "rmi", "rpi", "rn", "rz", "rm", "rp", "rna", "rs") if r in ins.parts), None)
    d = ins.args[0]
    if dt in ("f16x2", "bf16x2"):
        a, b = ins.args[1:3]

        def pack(ins, mask, full):
            def h(v):
                v = as_f64(m.rd(v, st, ins))
                if dt == "f16x2":
                    return v.astype(np.float16).view(np.uint16)
                import ml_dtypes
                return v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            hi, lo = np.broadcast_to(h(a), (m.n,)), np.broadcast_to(h(b), (m.n,))
            m.wr(d, (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32), mask, full)
        return pack
    a = ins.args[1]
    fl = {"f16", "bf16", "f32", "f64"}

    def to_float(x, t):
        if t == "bf16":
            import ml_dtypes
            return np.asarray(x).view(ml_dtypes.bfloat16).astype(np.float64)
        return as_f64(x)

    def convert(ins, mask, full):
        x = m.rd(a, st, ins)
        if st in fl and dt in fl:
            v = to_float(x, st)
            if rnd in ("rni", "rzi", "rmi", "rpi"):
                v = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](v)
            if dt == "bf16":
                import ml_dtypes
                r = v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            else:
                r = v.astype(DT[dt])
            r = saturate(r, ins) if dt != "bf16" else r
        elif st in fl:
            v = to_float(x, st)
            v = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil, None: np.trunc}[rnd](v)
            info = np.iinfo(DT[dt])
            v = np.where(np.isnan(v), 0, np.clip(v, info.min, info.max))
            r = v.astype(np.float64).astype(DT[dt]) if np.dtype(DT[dt]).itemsize < 8 else np.array(
                [int(q) for q in np.broadcast_to(v, (m.n,))], dtype=object).astype(DT[dt])
        elif dt in fl:
            v = np.asarray(x).astype(np.float64)
            if dt == "bf16":
                import ml_dtypes
                r = v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            else:
                r = v.astype(DT[dt])
        else:
            if "sat" in ins.parts:
                info = np.iinfo(DT[dt])
                v = np.asarray(x).astype(np.int64) if st.startswith("s") or np.dtype(DT[st]).itemsize < 8 else np.asarray(x)
                r = np.clip(v, info.min, info.max).astype(DT[dt])
            else:
                r = wrap_int(np.asarray(x).astype(np.int64) if st[0] == "s" else np.asarray(x).astype(np.uint64), dt)
        m.wr(d, r, mask, full)
    return convert


@op("cvta")
def cvta(m, ins):
    """cvta / cvta.to: between a shared (or global, ...) window address and a generic address."""
    d, a = ins.args[:2]
    to = "to" in ins.parts
    space = next((s for s in ("shared", "global", "local", "param", "const") if s in ins.parts), None)
    ty = types(ins.parts)[-1]
    if space is None:
        raise Unsupported(ins.op)
    base = SHARED_BASE if space == "shared" else 0

    def convert_address(ins, mask, full):
        x = np.asarray(m.rd(a, "u64" if ty == "u64" else "u32", ins)).astype(np.uint64)
        if space == "shared":
            if to:
                r = np.where(x >= np.uint64(SHARED_BASE), x - np.uint64(base), x)
            else:
                r = x + np.uint64(base)
        else:
            r = x
        m.wr(d, r.astype(DT[ty]), mask, full)
    return convert_address


# ---------------------------------------------------------------------------- tf32
KEEP = np.uint32(0xFFFFE000)
TF32_MAX = np.uint32(0x7F7FE000)  # the largest finite tf32


def round_tf32(bits: np.ndarray, mode: str, satfinite: bool = False) -> np.ndarray:
    """float32 bit patterns -> tf32 bit patterns (as float32 bits), rounding `mode` rna | rn | rz."""
    b = np.asarray(bits, np.uint32)
    sign, mag = b & np.uint32(0x80000000), b & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    inf = mag == np.uint32(0x7F800000)
    if mode == "rna":
        r = (mag + np.uint32(0x1000)) & KEEP
    elif mode == "rn":
        r = (mag + np.uint32(0xFFF) + ((mag >> np.uint32(13)) & np.uint32(1))) & KEEP
    elif mode == "rz":
        r = mag & KEEP
    else:
        raise ValueError(mode)
    if satfinite:
        r = np.where(r >= np.uint32(0x7F800000), TF32_MAX, r)
    r = np.where(inf, (TF32_MAX if satfinite else np.uint32(0x7F800000)), r)
    out = sign | r.astype(np.uint32)
    return np.where(nan, np.uint32(0x7FFFFFFF), out).astype(np.uint32)


@op("cvt.rna.tf32", "cvt.rn.tf32", "cvt.rz.tf32", "cvt.rna.satfinite.tf32", "cvt.rn.satfinite.tf32",
    "cvt.rz.satfinite.tf32", "cvt.rn.relu.tf32", "cvt.rz.relu.tf32", "cvt.rn.relu.satfinite.tf32",
    "cvt.rz.relu.satfinite.tf32")
def cvt_tf32(m, ins):
    """cvt.{rna,rn,rz}{.relu}{.satfinite}.tf32.f32: a float32 rounded to tf32 (10 mantissa bits)."""
    p = ins.parts
    if p[-1] != "f32" or len(ins.args) != 2:
        raise Unsupported(ins.op, "tf32 conversions from .f32 only")
    mode = p[1]
    sat, relu = "satfinite" in p, "relu" in p
    d, a = ins.args

    def to_tf32(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, "f32", ins), np.float32), (m.n,))
        bits = x.view(np.uint32)
        r = round_tf32(bits, mode, sat)
        if relu:                                   # negative results become +0; NaN stays NaN
            r = np.where(((r >> np.uint32(31)) == 1) & (r != np.uint32(0x7FFFFFFF)), np.uint32(0), r)
        m.counts["cvt.tf32"] += int(np.count_nonzero(mask))
        m.wr(d, r.astype(np.uint32), mask, full)
    return to_tf32
