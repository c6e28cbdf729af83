"""judge.model.ops.common - small helpers the instruction families share (numbers, vector widths, hints).

Not an instruction family: it registers nothing. Families import it, the state (judge.model.state)
and the checks (judge.model.checks), never each other.
"""
from __future__ import annotations

import numpy as np

from judge.model.errors import Unsupported
from judge.model.state import DT, types

__all__ = ["as_f64", "round_to", "canonical_nan_f32", "NAN_F32", "NAN_16", "saturate", "wrap_int", "vector_count", "no_effect", "types", "rmw", "half_format",
           "wmma_fragment"]


def as_f64(x):
    """The operand's values as float64 (exact for every PTX float type the model reads)."""
    return np.asarray(x, np.float64)


#: the NaN an H200 gives for every f32 arithmetic result that is NaN, payload and sign of the inputs dropped
#: (add, sub, mul, div, fma, sqrt, rcp, neg, abs, min/max of two NaN, cvt.rni & co.; tests/model/
#: test_model_random_kernels.py compares the model with the H200 bit for bit); the PTX ISA leaves it unspecified
NAN_F32 = np.uint32(0x7FFFFFFF)
NAN_16 = np.uint16(0x7FFF)      # the same for an f16 or bf16 result of cvt from f32


def canonical_nan_f32(v):
    """float32 values with every NaN made the H200's (NAN_F32)."""
    v = np.asarray(v, np.float32)
    nan = np.isnan(v)
    return np.where(nan, NAN_F32.view(np.float32), v) if nan.any() else v


def round_to(v, ty):
    """Round float64 values to the PTX float type ty, once (round to nearest even); an f32 NaN is the H200's."""
    if ty == "f32":
        with np.errstate(over="ignore", invalid="ignore"):
            return canonical_nan_f32(np.asarray(v, np.float64).astype(np.float32))
    if ty == "f64":
        return np.asarray(v, np.float64)
    if ty == "f16":      # a NaN is 0x7fff, as from arithmetic on f16 pairs (judge.model.ops.alu.canonical_nan_halves)
        with np.errstate(over="ignore", invalid="ignore"):
            r = np.asarray(v, np.float64).astype(np.float16)
        return np.where(np.isnan(r), NAN_16.view(np.float16), r)
    raise Unsupported(f"arithmetic on .{ty}")


def saturate(v, ins):
    """.sat on a float result: clamp to [0, 1]; RULE (PTX ISA, .sat; libdevice __nv_saturatef): NaN gives +0,
    and so does -0 on an H200 (tests/model/test_model_random_kernels.py)."""
    if "sat" not in ins.parts:
        return v
    v = np.asarray(v)
    return np.where(np.isnan(v) | (v <= 0), np.zeros((), v.dtype), np.minimum(v, 1.0).astype(v.dtype))


def wrap_int(v, ty):
    """Integer values wrapped to the width and signedness of PTX type ty (two's complement)."""
    dt = np.dtype(DT[ty])
    v = np.asarray(v)
    if v.dtype.kind == "i":
        return v.astype(np.int64).astype(dt) if dt.kind == "i" else v.astype(np.int64).astype(np.uint64).astype(dt)
    return v.astype(np.uint64).astype(dt) if dt.kind == "u" else v.astype(np.uint64).astype(np.int64).astype(dt)


def vector_count(parts):
    """The vector width of .v2/.v4/.v8 (1 for a scalar access)."""
    for q in parts:
        if q in ("v2", "v4", "v8"):
            return int(q[1])
    return 1


def no_effect(m, ins):
    """The run function of an instruction with no effect the model can observe (hints, fences
    the model does not need)."""
    def nothing(ins, mask, full):
        pass
    return nothing


def rmw(opn: str, cur, x, c=None):
    """The new value of an atomic read-modify-write (atom, red, red.async) on integers, or add / min / max / exch on
    floats: cur the memory's value, x the operand, c cas's new value. RULE (PTX ISA, atom): inc gives 0 once cur
    reaches x, else cur + 1; dec gives x when cur is 0 or above x, else cur - 1; the caller wraps to the type."""
    if opn == "add":
        return (np.float64(cur) + np.float64(x)) if isinstance(cur, np.floating) else int(cur) + int(x)
    if opn == "min":
        return min(cur, x)
    if opn == "max":
        return max(cur, x)
    if opn == "exch":
        return x
    if opn == "cas":
        return c if cur == x else cur
    if opn == "and":
        return int(cur) & int(x)
    if opn == "or":
        return int(cur) | int(x)
    if opn == "xor":
        return int(cur) ^ int(x)
    if opn == "inc":
        return 0 if int(cur) >= int(x) else int(cur) + 1
    if opn == "dec":
        return x if (int(cur) == 0 or int(cur) > int(x)) else int(cur) - 1
    raise Unsupported(f"atomic .{opn}")


def half_format(ty: str):
    """The 16-bit float format (numpy dtype) of a half or bf16 PTX type, scalar or packed (.f16, .f16x2, .bf16,
    .bf16x2), or None for any other type."""
    import ml_dtypes
    return {"f16": np.float16, "f16x2": np.float16, "bf16": ml_dtypes.bfloat16, "bf16x2": ml_dtypes.bfloat16}.get(ty)


def wmma_fragment(which: str, lane):
    """Where the elements of a wmma m16n16k16 fragment sit: for lanes `lane` (0..31), a list of
    (register, byte offset in it, row, column) with one entry per element a lane holds, rows and columns as
    arrays over the lanes. which: "a" (16 x 16 A, 16-bit: 4 registers of 2), "b" (16 x 16 B as K x N, 16-bit:
    4 registers of 2), "c" (16 x 16 f32 accumulator: 8 registers).

    RULE (CUDA C++ Programming Guide, warp matrix functions): the mapping of a fragment's elements to lanes
    and registers is unspecified, and a program may rely only on load_matrix_sync / mma_sync /
    store_matrix_sync agreeing and on element-wise operations touching every element. The model uses
    mma.sync m16n8k16's fragments (g = lane / 4, t = lane % 4): A as one m16n8k16 A, B and C as two n8 halves."""
    g, t = lane // 4, lane % 4
    out = []
    if which == "a":
        for i in range(4):
            for h in range(2):
                out.append((i, 2 * h, g + 8 * (i % 2), 2 * t + 8 * (i // 2) + h))
    elif which == "b":
        for i in range(4):
            for h in range(2):
                out.append((i, 2 * h, 2 * t + 8 * (i % 2) + h, g + 8 * (i // 2)))
    else:
        for j in range(8):
            jj = j % 4
            out.append((j, 0, g + 8 * (jj // 2), 2 * t + jj % 2 + 8 * (j // 4)))
    return out
