"""tests/model/test_model_ops_alu.py - the alu and convert families of the CPU model (judge/model/ops/alu.py,
convert.py), fed hand-written PTX (and, for the FP8 pairs, CUDA C++ through cuda_fp8.h), checked against
Python's exact integers and exactly rounded floats.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_ops_alu.py -q

Each kernel reads two inputs per thread (x[tid], y[tid]), computes one instruction and stores the
result to out[tid]; inputs are fresh random numbers each run and out starts poisoned.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import random_kernels
from judge.model import snippet

N = 64
PARAMS = (("x", "u64"), ("y", "u64"), ("out", "u64"))


def _body(compute: str, load="u32", store="u32", width=4) -> str:
    """Load x[tid], y[tid] into %r1/%r2 (or %f1/%f2 ...), run `compute`, store %r3 (or ...) to out[tid]."""
    reg = {"u32": "%r", "s32": "%r", "f32": "%f", "u64": "%rd", "f64": "%fd", "u16": "%h"}
    a, s = reg[load], reg[store]
    return f"""
    ld.param.u64 %rd10, [x];
    ld.param.u64 %rd11, [y];
    ld.param.u64 %rd12, [out];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd13, %r0, {width};
    add.s64 %rd14, %rd10, %rd13;
    add.s64 %rd15, %rd11, %rd13;
    ld.global.{load} {a}1, [%rd14];
    ld.global.{load} {a}2, [%rd15];
    {compute}
    mul.wide.u32 %rd16, %r0, {4 if store in ('u32', 's32', 'f32') else 8 if store in ('u64', 'f64') else 2};
    add.s64 %rd17, %rd12, %rd16;
    st.global.{store} [%rd17], {s}3;
"""


def _run(compute, x, y, out, **kw):
    snippet.run(_body(compute, **kw), (x, y, out), params=PARAMS, block=(N, 1, 1))
    return out


def _u32(rng):
    v = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    v[:4] = [0, 1, 0xFFFFFFFF, 0x80000000]
    return v


M32 = 2**32


def _s(v):
    v = int(v)
    return v - M32 if v >= 2**31 else v


INT_CASES = {
    "add.u32 %r3, %r1, %r2;": lambda a, b: (a + b) % M32,
    "sub.u32 %r3, %r1, %r2;": lambda a, b: (a - b) % M32,
    "mul.lo.u32 %r3, %r1, %r2;": lambda a, b: (a * b) % M32,
    "mul.hi.u32 %r3, %r1, %r2;": lambda a, b: (a * b) >> 32,
    "mul.hi.s32 %r3, %r1, %r2;": lambda a, b: ((_s(a) * _s(b)) >> 32) % M32,
    "mad.lo.u32 %r3, %r1, %r2, %r1;": lambda a, b: (a * b + a) % M32,
    "min.s32 %r3, %r1, %r2;": lambda a, b: min(_s(a), _s(b)) % M32,
    "max.u32 %r3, %r1, %r2;": lambda a, b: max(a, b),
    "and.b32 %r3, %r1, %r2;": lambda a, b: a & b,
    "or.b32 %r3, %r1, %r2;": lambda a, b: a | b,
    "xor.b32 %r3, %r1, %r2;": lambda a, b: a ^ b,
    "not.b32 %r3, %r1;": lambda a, b: a ^ 0xFFFFFFFF,
    "neg.s32 %r3, %r1;": lambda a, b: (-_s(a)) % M32,
    "and.b32 %r4, %r2, 63;\n    shl.b32 %r3, %r1, %r4;": lambda a, b: (a << (b & 63)) % M32 if b & 63 < 32 else 0,
    "and.b32 %r4, %r2, 63;\n    shr.u32 %r3, %r1, %r4;": lambda a, b: a >> (b & 63) if b & 63 < 32 else 0,
    "and.b32 %r4, %r2, 31;\n    shr.s32 %r3, %r1, %r4;": lambda a, b: (_s(a) >> (b & 31)) % M32,
    "popc.b32 %r3, %r1;": lambda a, b: bin(a).count("1"),
    "clz.b32 %r3, %r1;": lambda a, b: 32 - a.bit_length(),
    "brev.b32 %r3, %r1;": lambda a, b: int(f"{a:032b}"[::-1], 2),
    "and.b32 %r4, %r2, 15;\n    bfe.u32 %r3, %r1, %r4, 9;": lambda a, b: (a >> (b & 15)) & 0x1FF,
    "and.b32 %r4, %r2, 15;\n    bfe.s32 %r3, %r1, %r4, 9;":
        lambda a, b: (((a >> (b & 15)) & 0x1FF) - (0x200 if (a >> ((b & 15) + 8)) & 1 else 0)) % M32,
    # bfi: b with bits pos .. pos + len - 1 replaced by a's low bits (ptxas's way of packing bf16 pairs)
    "bfi.b32 %r3, %r1, %r2, 3, 29;": lambda a, b: (b & 0x7) | ((a << 3) & 0xFFFFFFF8),
    "and.b32 %r4, %r2, 31;\n    bfi.b32 %r3, %r1, %r2, %r4, 8;":
        lambda a, b: (b & ~(0xFF << (b & 31)) | ((a & 0xFF) << (b & 31))) % M32,
    "bfi.b32 %r3, %r1, %r2, 40, 8;": lambda a, b: b,
    "lop3.b32 %r3, %r1, %r2, 0xF0F0F0F0, 0xE8;": lambda a, b: (a & b) | (a & 0xF0F0F0F0) | (b & 0xF0F0F0F0),
    "prmt.b32 %r3, %r1, %r2, 0x7351;":
        lambda a, b: int.from_bytes(bytes(((a | b << 32).to_bytes(8, "little")[i]) for i in (1, 5, 3, 7)), "little"),
    "and.b32 %r4, %r2, 31;\n    shf.l.wrap.b32 %r3, %r1, %r2, %r4;": lambda a, b: ((b << 32 | a) << (b & 31) >> 32) % M32,
    "and.b32 %r4, %r2, 31;\n    shf.r.wrap.b32 %r3, %r1, %r2, %r4;": lambda a, b: ((b << 32 | a) >> (b & 31)) % M32,
    "setp.lt.s32 %p1, %r1, %r2;\n    selp.b32 %r3, %r1, %r2, %p1;": lambda a, b: a if _s(a) < _s(b) else b,
    "setp.lo.u32 %p1, %r1, %r2;\n    selp.u32 %r3, 1, 0, %p1;": lambda a, b: int(a < b),
}


@pytest.mark.parametrize("compute", sorted(INT_CASES))
def test_integer_and_bit_instructions_match_exact_integers(compute):
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    out = _run(compute, x, y, np.full(N, 0xDEADBEEF, np.uint32))
    want = np.array([INT_CASES[compute](int(a), int(b)) for a, b in zip(x, y)], np.uint64).astype(np.uint32)
    bad = np.nonzero(out != want)[0]
    assert not bad.size, f"{compute}: x={x[bad[0]]:#x} y={y[bad[0]]:#x} gave {out[bad[0]]:#x}, want {want[bad[0]]:#x}"


def test_mul_wide_and_64_bit_adds():
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    out = np.zeros(N, np.uint64)
    _run("mul.wide.u32 %rd3, %r1, %r2;\n    add.u64 %rd3, %rd3, %rd3;", x, y, out, store="u64")
    assert [int(v) for v in out] == [(2 * int(a) * int(b)) % 2**64 for a, b in zip(x, y)]


def test_signed_division_truncates_toward_zero_and_the_remainder_takes_the_dividends_sign():
    rng = np.random.default_rng()
    x = rng.integers(-2**31, 2**31, N).astype(np.int32)
    y = rng.integers(-1000, 1000, N).astype(np.int32)
    y[y == 0] = 7
    q = _run("div.s32 %r3, %r1, %r2;", x, y, np.zeros(N, np.int32), load="s32", store="s32")
    r = _run("rem.s32 %r3, %r1, %r2;", x, y, np.zeros(N, np.int32), load="s32", store="s32")
    for a, b, qq, rr in zip(x.tolist(), y.tolist(), q.tolist(), r.tolist()):
        want_q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        assert (qq, rr) == (want_q, a - want_q * b), (a, b)


def _round_f32(fr: Fraction) -> np.float32:
    """fr rounded to the nearest float32 (ties to even), exactly: no double rounding through float64."""
    return np.array([random_kernels.round_f32(fr, "rn")], np.uint32).view(np.float32)[0]


FLOAT_CASES = {
    "add.rn.f32 %f3, %f1, %f2;": lambda a, b: Fraction(a) + Fraction(b),
    "sub.rn.f32 %f3, %f1, %f2;": lambda a, b: Fraction(a) - Fraction(b),
    "mul.rn.f32 %f3, %f1, %f2;": lambda a, b: Fraction(a) * Fraction(b),
    "fma.rn.f32 %f3, %f1, %f2, %f1;": lambda a, b: Fraction(a) * Fraction(b) + Fraction(a),
    "div.rn.f32 %f3, %f1, %f2;": lambda a, b: Fraction(a) / Fraction(b),
}


@pytest.mark.parametrize("compute", sorted(FLOAT_CASES))
def test_float_arithmetic_rounds_once_to_nearest_even(compute):
    rng = np.random.default_rng()
    x = (rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)).astype(np.float32)
    y = (rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)).astype(np.float32)
    out = _run(compute, x.view(np.uint32), y.view(np.uint32), np.full(N, np.nan, np.float32).view(np.uint32),
               load="f32", store="f32").view(np.float32)
    want = np.array([_round_f32(FLOAT_CASES[compute](float(a), float(b))) for a, b in zip(x, y)], np.float32)
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), (x, y, out, want)


def test_float_min_max_and_comparisons_with_nan():
    rng = np.random.default_rng()
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    x[:8] = np.nan
    out = _run("min.f32 %f3, %f1, %f2;", x.view(np.uint32), y.view(np.uint32), np.zeros(N, np.uint32),
               load="f32", store="f32").view(np.float32)
    assert np.array_equal(out, np.fmin(x, y))                          # PTX: NaN and a number gives the number
    lt = _run("setp.lt.f32 %p1, %f1, %f2;\n    selp.u32 %r3, 1, 0, %p1;", x.view(np.uint32), y.view(np.uint32),
              np.full(N, 9, np.uint32), load="f32")
    ltu = _run("setp.ltu.f32 %p1, %f1, %f2;\n    selp.u32 %r3, 1, 0, %p1;", x.view(np.uint32), y.view(np.uint32),
               np.full(N, 9, np.uint32), load="f32")
    assert np.array_equal(lt, (x < y).astype(np.uint32))               # ordered: false on NaN
    assert np.array_equal(ltu, ((x < y) | np.isnan(x)).astype(np.uint32))   # unordered: true on NaN


# ---------------------------------------------------------------------------- convert
def test_float_to_int_conversions_round_as_named_and_saturate():
    rng = np.random.default_rng()
    x = (rng.standard_normal(N) * 1e3).astype(np.float32)
    x[:4] = [np.nan, 3e9, -3e9, -2.5]
    y = np.zeros(N, np.uint32)
    for mode, fn in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        out = _run(f"cvt.{mode}.s32.f32 %r3, %f1;", x.view(np.uint32), y, np.full(N, 7, np.int32), load="f32",
                   store="s32")
        want = np.where(np.isnan(x), 0, np.clip(fn(x.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int64)
        assert out.tolist() == want.tolist(), mode


def test_narrowing_float_conversions_round_to_nearest_even():
    rng = np.random.default_rng()
    x = (rng.standard_normal(N) * 10.0 ** rng.integers(-4, 4, N)).astype(np.float32)
    h = np.zeros(N, np.uint16)
    _run("cvt.rn.f16.f32 %h3, %f1;", x.view(np.uint32), x.view(np.uint32), h, load="f32", store="u16", width=4)
    assert np.array_equal(h, x.astype(np.float16).view(np.uint16))
    b = np.zeros(N, np.uint16)
    _run("cvt.rn.bf16.f32 %h3, %f1;", x.view(np.uint32), x.view(np.uint32), b, load="f32", store="u16", width=4)
    assert np.array_equal(b, x.astype(ml_dtypes.bfloat16).view(np.uint16))
    packed = _run("cvt.rn.bf16x2.f32 %r3, %f1, %f2;", x.view(np.uint32), x[::-1].copy().view(np.uint32),
                  np.zeros(N, np.uint32), load="f32")
    assert np.array_equal(packed >> 16, x.astype(ml_dtypes.bfloat16).view(np.uint16))          # first operand high
    assert np.array_equal(packed & 0xFFFF, x[::-1].astype(ml_dtypes.bfloat16).view(np.uint16))


def _tf32_rna(v: np.ndarray) -> np.ndarray:
    """float32 -> tf32 bits by round-to-nearest, ties away from zero, on the 10-bit mantissa (exactly)."""
    out = []
    for f in v.astype(np.float64).tolist():
        if not np.isfinite(f) or f == 0:
            out.append(np.float32(f))
            continue
        m, e = np.frexp(f)                                  # f = m * 2^e, 0.5 <= |m| < 1
        q = Fraction(abs(m)) * 2**11                          # 11 significant bits (1 + 10)
        r = int(q) + (1 if q - int(q) >= Fraction(1, 2) else 0)
        out.append(np.float32(np.copysign(float(Fraction(r, 2**11) * Fraction(2) ** int(e)), f)))
    return np.array(out, np.float32)


def test_cvt_rna_tf32_f32_keeps_10_mantissa_bits_rounding_ties_away_from_zero():
    rng = np.random.default_rng()
    x = rng.standard_normal(N).astype(np.float32)
    bits = x.view(np.uint32)
    bits[:4] = [0x3F801000, 0xBF801000, 0x3F800FFF, 0x3F803000]   # exact ties (+, -), below a tie, tie above odd
    out = _run("cvt.rna.tf32.f32 %r3, %f1;", bits, bits, np.zeros(N, np.uint32), load="f32")
    want = _tf32_rna(x)
    assert np.array_equal(out, want.view(np.uint32)), [hex(v) for v in out[:4]]
    assert not (out & 0x1FFF).any()                              # the low 13 bits are zero


def test_integer_conversions_wrap_or_saturate():
    rng = np.random.default_rng()
    x = _u32(rng)
    out = _run("cvt.u16.u32 %h3, %r1;", x, x, np.zeros(N, np.uint16), store="u16")
    assert np.array_equal(out, (x & 0xFFFF).astype(np.uint16))
    sat = _run("cvt.sat.s16.s32 %h3, %r1;", x, x, np.zeros(N, np.int16).view(np.uint16), store="u16").view(np.int16)
    assert sat.tolist() == [max(-32768, min(32767, _s(v))) for v in x.tolist()]


# ---------------------------------------------------------------------------- FP8 pairs
def _fp8(v, name, top, relu=False):
    """What cvt.rn.satfinite gives for float64 v: clipped to the largest finite value (NaN kept), relu'd,
    rounded to nearest even by ml_dtypes; the byte."""
    v = np.clip(np.asarray(v, np.float64), -top, top)
    if relu:
        v = np.where(v < 0, 0.0, v)
    return v.astype(np.float32).astype(getattr(ml_dtypes, name)).view(np.uint8)


@pytest.mark.parametrize("pair,name,top", [("e4m3x2", "float8_e4m3fn", 448.0), ("e5m2x2", "float8_e5m2", 57344.0)])
@pytest.mark.parametrize("relu", [False, True])
def test_cvt_satfinite_packs_two_floats_into_an_fp8_pair_first_source_high(pair, name, top, relu):
    rng = np.random.default_rng()
    x = (rng.standard_normal(N) * top / 4).astype(np.float32)
    y = (rng.standard_normal(N) * top / 4).astype(np.float32)
    x[:4] = [1e9, -np.inf, np.nan, top * 1.01]         # beyond the format, and NaN
    out = np.full(N, 0xFFFF, np.uint16)
    _run(f"cvt.rn.satfinite{'.relu' if relu else ''}.{pair}.f32 %h3, %f1, %f2;", x, y, out, load="f32", store="u16")
    fp8 = getattr(ml_dtypes, name)
    hi = (out >> 8).astype(np.uint8).view(fp8).astype(np.float32)
    lo = (out & 0xFF).astype(np.uint8).view(fp8).astype(np.float32)
    want_hi = _fp8(x, name, top, relu).view(fp8).astype(np.float32)
    want_lo = _fp8(y, name, top, relu).view(fp8).astype(np.float32)
    assert np.array_equal(hi, want_hi, equal_nan=True) and np.array_equal(lo, want_lo, equal_nan=True)
    assert hi[0] == top and hi[3] == top and np.isnan(hi[2])      # 1e9 and 1.01 x max saturate; NaN stays NaN
    assert hi[1] == (0.0 if relu else -top)                         # -inf saturates (or relu makes it 0)


@pytest.mark.parametrize("pair,name", [("e4m3x2", "float8_e4m3fn"), ("e5m2x2", "float8_e5m2")])
def test_an_fp8_pair_widens_to_a_half_pair_exactly_and_back(pair, name):
    rng = np.random.default_rng()
    codes = rng.integers(0, 256, 2 * N).astype(np.uint8)
    vals = codes.view(getattr(ml_dtypes, name)).astype(np.float32)
    codes[~np.isfinite(vals)] = 0x38                   # finite codes only: f16 holds every finite FP8 value
    x = codes.view(np.uint16).astype(np.uint32)
    out = np.zeros(N, np.uint32)
    _run(f"cvt.u16.u32 %h1, %r1;\n    cvt.rn.f16x2.{pair} %r3, %h1;", x, x, out)
    halves = out.view(np.uint16).reshape(N, 2).view(np.float16).astype(np.float32)   # [lo, hi] per word
    pairs = codes.reshape(N, 2).view(getattr(ml_dtypes, name)).astype(np.float32)    # [lo byte, hi byte]
    assert np.array_equal(halves, pairs)
    back = np.zeros(N, np.uint32)
    _run(f"cvt.rn.satfinite.{pair}.f16x2 %h3, %r1;\n    cvt.u32.u16 %r3, %h3;", out, out, back)
    assert np.array_equal(back.astype(np.uint16), codes.view(np.uint16))


# cuda_fp8.h's pair type, as NVRTC compiles it: the constructor from float2 is one cvt.rn.satfinite.e4m3x2.f32 with
# .y as the first (high) source, the conversion to __half2 one cvt.rn.f16x2.e4m3x2. The bytes in memory must come
# out in element order, which checks the model's high/low convention against the header's.
QUANTIZE_PAIRS = r"""
#include <cuda_fp8.h>
extern "C" __global__ void quantize_pairs(const float2* x, __nv_fp8x2_e4m3* q, __half2* back, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const __nv_fp8x2_e4m3 p(x[i]);
    q[i] = p;
    back[i] = static_cast<__half2>(p);
  }
}
"""


def test_cuda_fp8_h_pairs_quantize_in_element_order_on_the_model(tmp_path):
    from judge import model
    from judge.gpu import build
    (tmp_path / "quantize_pairs.cu").write_text(QUANTIZE_PAIRS)
    b = build.compile(tmp_path / "quantize_pairs.cu")
    n = 100
    x = (np.random.default_rng().standard_normal(2 * n) * 100).astype(np.float32)
    q, back = np.full(n, 0xFFFF, np.uint16), np.full(n, 0xFFFFFFFF, np.uint32)
    model.run(b, "quantize_pairs", grid=(1,), block=(128,), args=(x, q, back, np.int32(n)))
    want = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(q.view(np.uint8), want.view(np.uint8))
    assert np.array_equal(back.view(np.float16).astype(np.float32), want.astype(np.float32))



@pytest.mark.parametrize("ty,shiftamt", [("u32", False), ("u32", True), ("s32", False), ("s32", True)])
def test_bfind_finds_the_highest_bit_unlike_the_sign_and_shiftamt_counts_from_the_top(ty, shiftamt):
    rng = np.random.default_rng()
    x = (rng.integers(-2**31, 2**31, N) >> rng.integers(0, 32, N)).astype(np.int32).view(np.uint32)
    x[:3] = [0, 0xFFFFFFFF, 1]                         # no bit (u32 0; s32 0 and -1), and bit 0
    out = np.full(N, 0xDEADBEEF, np.uint32)
    _run(f"bfind{'.shiftamt' if shiftamt else ''}.{ty} %r3, %r1;", x, x, out)
    for v, got in zip(x, out):
        iv = int(v.view(np.int32)) if ty == "s32" else int(v)
        pos = (~iv if iv < 0 else iv).bit_length() - 1
        assert got == (0xFFFFFFFF if pos < 0 else (31 - pos if shiftamt else pos)), (hex(int(v)), hex(int(got)))



# ---------------------------------------------------------------------------- packed half / bf16 arithmetic
def _bf16_exact(v: float) -> float:
    """v rounded to bf16 (8 significant bits, ties to even, subnormals below 2^-126, overflow to inf) with Fractions."""
    if v == 0 or not np.isfinite(v):
        return v
    f = Fraction(v)
    e = max(abs(f).numerator.bit_length() - abs(f).denominator.bit_length(), -126)
    while Fraction(2) ** e > abs(f):
        e -= 1
    e = max(e, -126)
    q = f / Fraction(2) ** (e - 7)
    n = round(q)                                       # Python rounds halves to even
    r = float(n * Fraction(2) ** (e - 7))
    return r if abs(r) <= 3.3895313892515355e38 else float(np.copysign(np.inf, r))


def test_round_half_rounds_float64_to_bf16_once_as_fractions_do():
    from judge.model.ops.alu import round_half
    rng = np.random.default_rng()
    v = np.concatenate([rng.standard_normal(300) * 2.0 ** rng.integers(-140, 130, 300),
                        [3.39e38, -3.4e38, 2.0 ** -133 * 1.5, 2.0 ** -134, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8]])
    got = round_half(v, ml_dtypes.bfloat16).astype(np.float64)
    want = np.array([_bf16_exact(float(x)) for x in v])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("ty,el", [("f16x2", np.float16), ("bf16x2", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("op,fn", [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
                                   ("max", np.fmax), ("min", np.fmin)])
def test_packed_half_arithmetic_computes_each_half_and_rounds_it_once(ty, el, op, fn):
    from judge.model.ops.alu import round_half
    rng = np.random.default_rng()
    x = (rng.standard_normal(2 * N) * 4).astype(el)
    y = (rng.standard_normal(2 * N) * 4).astype(el)
    out = np.zeros(N, np.uint32)
    _run(f"{op}{'.rn' if op in ('add', 'sub', 'mul') else ''}.{ty} %r3, %r1, %r2;", x.view(np.uint32), y.view(np.uint32), out)
    want = round_half(fn(x.astype(np.float64), y.astype(np.float64)), el)
    assert np.array_equal(out.view(el).astype(np.float64), want.astype(np.float64))


def _nan_halves_made_7fff(words, exp, man):
    out = []
    for w in (int(v) for v in words):
        for sh in (0, 16):
            h = (w >> sh) & 0xFFFF
            if h & exp == exp and h & man:
                w = w & ~(0xFFFF << sh) | 0x7FFF << sh
        out.append(w)
    return np.array(out, np.uint32)


def test_neg_and_abs_of_a_half_pair_flip_and_clear_the_sign_bits_and_a_nan_half_is_the_h200s():
    x = np.random.default_rng().integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0x7D48ED09, 0xFE01FC00, 0x7FC00001, 0xFFFF8000]        # NaN halves (f16 and bf16), inf, -0
    out = np.zeros(N, np.uint32)
    _run("neg.f16x2 %r4, %r1;\n    abs.bf16x2 %r5, %r4;\n    xor.b32 %r3, %r4, %r5;", x, x, out)
    neg = _nan_halves_made_7fff(x ^ 0x80008000, 0x7C00, 0x3FF)
    assert np.array_equal(out, neg ^ _nan_halves_made_7fff(neg & 0x7FFF7FFF, 0x7F80, 0x7F))


# __hfma2 / __hadd2 / __hmax2 / __hneg2 / __hmul2 / __hsub2 / __habs2 from cuda_fp16.h and cuda_bf16.h, as NVRTC
# compiles them: each step rounded to the format, as a chain of such instructions on the GPU.
HALVES = r"""

#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void halves(__half2* h, __nv_bfloat162* b) {
  const int i = threadIdx.x;
  __half2 hh = h[i];
  hh = __hfma2(hh, hh, hh); hh = __hadd2(hh, hh); hh = __hmax2(hh, __hneg2(hh)); hh = __hmul2(hh, hh); hh = __hsub2(hh, __habs2(hh));
  h[i] = hh;
  __nv_bfloat162 bb = b[i];
  bb = __hfma2(bb, bb, bb); bb = __hadd2(bb, bb); bb = __hmax2(bb, __hneg2(bb)); bb = __hmul2(bb, bb);
  b[i] = bb;
}
"""


def test_cuda_half_intrinsics_compute_on_the_model_as_each_step_rounds(tmp_path):
    from judge import model
    from judge.gpu import build
    from judge.model.ops.alu import round_half
    (tmp_path / "halves.cu").write_text(HALVES)
    b = build.compile(tmp_path / "halves.cu")
    rng = np.random.default_rng()
    h, bb = rng.standard_normal(64).astype(np.float16), rng.standard_normal(64).astype(ml_dtypes.bfloat16)
    h0, b0 = h.astype(np.float64), bb.astype(np.float64)
    model.run(b, "halves", grid=(1,), block=(32,), args=(h.view(np.uint32), bb.view(np.uint32)))

    def chain(x, el, last_sub):
        r = lambda v: round_half(v, el).astype(np.float64)                     # noqa: E731
        x = r(r(x * x + x) * 2)
        x = r(np.maximum(x, -x) ** 2)
        return r(x - np.abs(x)) if last_sub else x
    assert np.array_equal(h.astype(np.float64), chain(h0, np.float16, True))
    assert np.array_equal(bb.astype(np.float64), chain(b0, ml_dtypes.bfloat16, False))



# ---------------------------------------------------------------------------- copysign, sad, dp4a, dp2a
def test_copysign_gives_b_the_sign_of_a():
    rng = np.random.default_rng()
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    out = np.full(N, np.nan, np.float32)
    _run("copysign.f32 %f3, %f1, %f2;", x, y, out, load="f32", store="f32")
    assert np.array_equal(out, np.copysign(y, x))


def test_sad_adds_the_absolute_difference_to_c_and_wraps():
    rng = np.random.default_rng()
    x = rng.integers(-2**31, 2**31, N).astype(np.int32).view(np.uint32)
    y = rng.integers(-2**31, 2**31, N).astype(np.int32).view(np.uint32)
    out = np.zeros(N, np.uint32)
    _run("sad.s32 %r3, %r1, %r2, %r1;", x, y, out)
    xs, ys = x.view(np.int32).astype(np.int64), y.view(np.int32).astype(np.int64)
    assert np.array_equal(out, ((xs + np.abs(xs - ys)) % 2**32).astype(np.uint32))


def _bytes(v, signed):
    b = np.stack([(v.astype(np.int64) >> (8 * i)) & 0xFF for i in range(4)], 1)
    return np.where(b >= 128, b - 256, b) if signed else b


@pytest.mark.parametrize("ta,tb", [("u32", "u32"), ("s32", "s32"), ("s32", "u32")])
def test_dp4a_adds_the_four_byte_products_to_c(ta, tb):
    rng = np.random.default_rng()
    x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(N, np.uint32)
    _run(f"dp4a.{ta}.{tb} %r3, %r1, %r2, %r2;", x, y, out)
    c = y.view(np.int32).astype(np.int64) if "s32" in (ta, tb) else y.astype(np.int64)
    want = (c + (_bytes(x, ta == "s32") * _bytes(y, tb == "s32")).sum(1)) % 2**32
    assert np.array_equal(out, want.astype(np.uint32))


@pytest.mark.parametrize("half", ["lo", "hi"])
def test_dp2a_multiplies_the_halves_of_a_by_two_bytes_of_b(half):
    rng = np.random.default_rng()
    x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(N, np.uint32)
    _run(f"dp2a.{half}.s32.s32 %r3, %r1, %r2, %r2;", x, y, out)
    h = np.stack([(x.astype(np.int64) >> (16 * i)) & 0xFFFF for i in range(2)], 1)
    h = np.where(h >= 2**15, h - 2**16, h)
    bb = _bytes(y, True)[:, (0, 1) if half == "lo" else (2, 3)]
    want = (y.view(np.int32).astype(np.int64) + (h * bb).sum(1)) % 2**32
    assert np.array_equal(out, want.astype(np.uint32))


# ---------------------------------------------------------------------------- packed 16-bit integers, vabsdiff4
def _halves16(v, signed):
    h = np.stack([(v.astype(np.int64) >> (16 * i)) & 0xFFFF for i in range(2)], 1)
    return np.where(h >= 2**15, h - 2**16, h) if signed else h


def _pack16(h):
    return ((h[:, 0] & 0xFFFF) | ((h[:, 1] & 0xFFFF) << 16)).astype(np.uint32)


@pytest.mark.parametrize("form,fn", [
    ("add.u16x2", lambda a, b: a + b), ("add.s16x2", lambda a, b: a + b), ("sub.u16x2", lambda a, b: a - b),
    ("sub.s16x2", lambda a, b: a - b), ("min.u16x2", np.minimum), ("max.u16x2", np.maximum),
    ("min.s16x2", np.minimum), ("max.s16x2", np.maximum),
    ("max.relu.s16x2", lambda a, b: np.maximum(np.maximum(a, b), 0)),
    ("min.relu.s16x2", lambda a, b: np.maximum(np.minimum(a, b), 0))])
def test_packed_16_bit_integers_compute_each_half_on_its_own_and_wrap(form, fn):
    # the halves never carry into each other: 0xFFFF + 1 in the low half leaves the high half alone
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    x[4], y[4] = 0x0001FFFF, 0x00000001
    out = np.zeros(N, np.uint32)
    _run(f"{form} %r3, %r1, %r2;", x, y, out)
    signed = "s16x2" in form
    assert np.array_equal(out, _pack16(fn(_halves16(x, signed), _halves16(y, signed))))


def test_max_relu_s32_is_max_then_zero_for_negatives():
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    out = np.zeros(N, np.uint32)
    _run("max.relu.s32 %r3, %r1, %r2;", x, y, out)
    want = np.maximum(np.maximum(x.view(np.int32), y.view(np.int32)), 0).astype(np.int32).view(np.uint32)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("form", ["add.sat.s16x2", "max.relu.u16x2"])
def test_forms_the_ptx_isa_does_not_define_on_pairs_are_refused(form):
    from judge.model.errors import Unsupported
    with pytest.raises(Unsupported):
        _run(f"{form} %r3, %r1, %r2;", _u32(np.random.default_rng()), _u32(np.random.default_rng()),
             np.zeros(N, np.uint32))


@pytest.mark.parametrize("acc", [False, True])
def test_vabsdiff4_gives_each_bytes_distance_or_their_sum_plus_c(acc):
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    out = np.zeros(N, np.uint32)
    _run(f"vabsdiff4.u32.u32.u32{'.add' if acc else ''} %r3, %r1, %r2, %r2;", x, y, out)
    d = np.abs(_bytes(x, False) - _bytes(y, False))
    want = (y.astype(np.int64) + d.sum(1)) % 2**32 if acc else (d << np.array([0, 8, 16, 24])).sum(1)
    assert np.array_equal(out, want.astype(np.uint32))


SIMD_INTRINSICS = r"""
extern "C" __global__ void simd(const unsigned* a, const unsigned* b, unsigned* out) {
  const int i = threadIdx.x;
  const unsigned x = a[i], y = b[i];
  out[8 * i + 0] = __vadd2(x, y);
  out[8 * i + 1] = __vsub2(x, y);
  out[8 * i + 2] = __vmaxs2(x, y);
  out[8 * i + 3] = __vminu2(x, y);
  out[8 * i + 4] = __vabsdiffu4(x, y);
  out[8 * i + 5] = __vsadu4(x, y);
  out[8 * i + 6] = __vimax3_s16x2_relu(x, y, 0x00050005u);
  out[8 * i + 7] = (unsigned)__vimax_s32_relu((int)x, (int)y);
}
"""


def test_cuda_simd_and_dpx_intrinsics_compute_on_the_model_as_their_definitions_say(tmp_path):
    # what a learner's kernel gets from cuda's SIMD-in-a-word and Hopper DPX intrinsics, compiled by NVRTC
    from judge import model
    from judge.gpu import build
    (tmp_path / "simd.cu").write_text(SIMD_INTRINSICS)
    b = build.compile(tmp_path / "simd.cu")
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    out = np.full(8 * N, 0xDEADBEEF, np.uint32)
    model.run(b, "simd", grid=(1,), block=(N,), args=(x, y, out))
    got = out.reshape(N, 8)
    hu, hs = (_halves16(x, False), _halves16(y, False)), (_halves16(x, True), _halves16(y, True))
    d = np.abs(_bytes(x, False) - _bytes(y, False))
    want = [_pack16(hu[0] + hu[1]), _pack16(hu[0] - hu[1]), _pack16(np.maximum(*hs)), _pack16(np.minimum(*hu)),
            (d << np.array([0, 8, 16, 24])).sum(1).astype(np.uint32), d.sum(1).astype(np.uint32),
            _pack16(np.maximum(np.maximum(np.maximum(*hs), 5), 0)),
            np.maximum(np.maximum(x.view(np.int32), y.view(np.int32)), 0).astype(np.int32).view(np.uint32)]
    for k, w in enumerate(want):
        assert np.array_equal(got[:, k], w), k


def test_the_h200_computes_the_simd_and_dpx_intrinsics_as_the_model_does(tmp_path):
    from judge import gpu, model
    gpu.need("sm_90")
    import cupy
    from judge.gpu import build
    (tmp_path / "simd.cu").write_text(SIMD_INTRINSICS)
    b = build.compile(tmp_path / "simd.cu")
    rng = np.random.default_rng()
    x, y = _u32(rng), _u32(rng)
    on_model = np.full(8 * N, 0xDEADBEEF, np.uint32)
    model.run(b, "simd", grid=(1,), block=(N,), args=(x, y, on_model))
    on_gpu = cupy.full(8 * N, 0xDEADBEEF, cupy.uint32)
    b.kernel("simd")((1, 1, 1), (N, 1, 1), (cupy.asarray(x), cupy.asarray(y), on_gpu))
    assert np.array_equal(cupy.asnumpy(on_gpu), on_model)


def test_a_form_the_families_tables_lack_is_unsupported_not_an_internal_error():
    # add.u8x4 is no PTX type the model knows (add.u16x2 used to end the run with an IndexError, as this did):
    # the learner is told the model has no rule for it, and where
    from judge.model.errors import Unsupported
    with pytest.raises(Unsupported, match="no rule for") as e:
        _run("add.u8x4 %r3, %r1, %r2;", _u32(np.random.default_rng()), _u32(np.random.default_rng()),
             np.zeros(N, np.uint32))
    assert "add.u8x4" in str(e.value)


def test_fma_on_doubles_rounds_once_where_float64_would_round_the_product_first():
    # fma.rn.f64 has no wider type to compute in: the model's vectorized method against exact fractions, on products
    # that cancel against z (where rounding the product first gives 0), ties, extremes and special values
    from judge.model import rounding
    rng = np.random.default_rng()
    n = 1500
    x, y, z = (rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n) for _ in range(3))
    x[:500], y[:500] = rng.standard_normal(500) * 1e100, rng.standard_normal(500) * 1e-50
    z[:500] = -(x[:500] * y[:500])
    x[500:600], y[500:600], z[500:600] = 1 + 2.0 ** -52, 1 + 2.0 ** -52, -1.0
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308, 2.0 ** -1022, 2.0 ** 1000])
    for v in (x, y, z):
        at = rng.integers(600, n, 200)
        v[at] = special[rng.integers(0, special.size, at.size)]
    got = rounding.rounded("fma", [x, y, z], "f64", "rn")
    for i in range(n):
        a, b, c = float(x[i]), float(y[i]), float(z[i])
        exact = Fraction(a) * Fraction(b) + Fraction(c) if all(map(math.isfinite, (a, b, c))) else None
        if exact and abs(exact) < 2 ** 1023:            # float() of a Fraction rounds once, to nearest even
            assert got[i] == float(exact), (a.hex(), b.hex(), c.hex(), float(got[i]).hex(), float(exact).hex())
    assert np.count_nonzero(got[:500] != 0) > 450        # the product's rounding error, which float64 alone loses
