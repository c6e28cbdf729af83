"""tests/model/random_kernels.py - random straight-line CUDA C++ kernels of the arithmetic a learner writes, with
what each must compute worked out exactly in Python: the CPU model must agree with that on every run, and the
H200 with the model bit for bit (tests/model/test_model_random_kernels.py).

    from random_kernels import program, inputs
    p = program(seed)                 # p.source (CUDA C++), p.kernel, p.outputs (values per thread)
    x = inputs(seed)                  # (THREADS, 4) uint32: bit patterns, floats of every kind among them
    p.expected(x, got)                # (THREADS, p.outputs) uint64: what each result must be, from got's operands

A program reads four words per thread and runs STEPS operations, each on values computed before it, of four
types: unsigned, int, float, unsigned long long and double (and two 16-bit floats packed in an unsigned) (bit
patterns of the float inputs include +-0, +-inf, NaN, subnormals and the largest finite). Some operations are the warp's:
shuffles of every mode and width, votes, reductions and match, over all 32 lanes (their references take the
lanes' values together). Every result is stored as its bits. Only C++ that is defined for every input is generated: shift
counts are masked, divisors kept nonzero and int division kept away from INT_MIN / -1, signed arithmetic done on
unsigned. The float operations are IEEE's (correctly rounded in the named mode, subnormals kept: NVRTC's default,
no fast math); approximate ones (__expf, __fdividef, rsqrtf) are left out, as they are the MUFU unit's own.
A NaN result is compared as "a NaN": the PTX ISA leaves the payload of a computed NaN to the implementation.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
from fractions import Fraction

import ml_dtypes
import numpy as np

THREADS = 128
STEPS = 14
U32 = np.uint32
M32 = 1 << 32

# ---------------------------------------------------------------------------------------------- exact floats

@dataclasses.dataclass(frozen=True)
class Fmt:
    """A binary float format the references round to: float32 or float64."""
    dtype: type          # np.float32, np.float64
    ubits: type          # the unsigned integer of its width
    mantissa: int        # stored fraction bits (23, 52)

    @property
    def max(self) -> Fraction:
        return Fraction(float(np.finfo(self.dtype).max))

    @property
    def nan(self) -> int:
        return (1 << (8 * np.dtype(self.dtype).itemsize - 1)) - 1      # 0x7fffffff, 0x7fffffffffffffff


F32 = Fmt(np.float32, np.uint32, 23)
F64 = Fmt(np.float64, np.uint64, 52)


def _f(bits, fmt: Fmt = F32):
    return np.array([bits], fmt.ubits).view(fmt.dtype)[0]


def _bits(x, fmt: Fmt = F32) -> int:
    return int(np.array([x], fmt.dtype).view(fmt.ubits)[0])


def _d(bits) -> np.float64:
    return _f(bits, F64)


def _is_nan(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0


def round_float(x: Fraction, mode: str, fmt: Fmt = F32) -> int:
    """The bits of the exact, nonzero x rounded to fmt in mode rn (ties to even), rz, rd or ru; overflow as IEEE."""
    neg = x < 0
    if abs(x) > fmt.max:
        half_ulp = Fraction(2) ** (int(np.finfo(fmt.dtype).maxexp) - fmt.mantissa - 2)   # 2^103, 2^970
        to_inf = {"rn": abs(x) >= fmt.max + half_ulp, "rz": False, "rd": neg, "ru": not neg}[mode]
        v = fmt.dtype(np.inf) if to_inf else np.finfo(fmt.dtype).max
        return _bits(-v if neg else v, fmt)
    with np.errstate(all="ignore"):
        c = fmt.dtype(float(x))
    if np.isinf(c):
        c = np.finfo(fmt.dtype).max * fmt.dtype(-1 if neg else 1)
    with np.errstate(all="ignore"):
        cands = sorted({float(v) for v in (np.nextafter(c, fmt.dtype(-np.inf)), c,
                                           np.nextafter(c, fmt.dtype(np.inf))) if np.isfinite(v)})
    lo = max(v for v in cands if Fraction(v) <= x)
    hi = min(v for v in cands if Fraction(v) >= x)
    if lo == hi:
        pick = lo
    elif mode == "rd":
        pick = lo
    elif mode == "ru":
        pick = hi
    elif mode == "rz":
        pick = hi if neg else lo
    else:
        dl, dh = x - Fraction(lo), Fraction(hi) - x
        if dl != dh:
            pick = lo if dl < dh else hi
        else:
            pick = lo if _bits(lo, fmt) % 2 == 0 else hi
    return _zero(neg, fmt) if pick == 0 else _bits(pick, fmt)


def round_f32(x: Fraction, mode: str) -> int:
    return round_float(x, mode, F32)


def _zero(neg: bool, fmt: Fmt = F32) -> int:
    return fmt.nan + 1 if neg else 0                   # the sign bit alone


def _numpy(fn, *bits, fmt: Fmt = F32) -> int:
    with np.errstate(all="ignore"):
        return _bits(fmt.dtype(fn(*[_f(b, fmt) for b in bits])), fmt)


def _zero_sum(neg1: bool, neg2: bool, mode: str, fmt: Fmt = F32) -> int:
    """IEEE's sign of an exact zero sum of two zeros: theirs when they agree, else +0 (-0 rounding down)."""
    return _zero(neg1, fmt) if neg1 == neg2 else _zero(mode == "rd", fmt)


def f_add(a, b, mode="rn", sub=False, fmt: Fmt = F32):
    fa, fb = _f(a, fmt), -_f(b, fmt) if sub else _f(b, fmt)
    if not (np.isfinite(fa) and np.isfinite(fb)):
        return _numpy(lambda x, y: x + y, _bits(fa, fmt), _bits(fb, fmt), fmt=fmt)
    x = Fraction(float(fa)) + Fraction(float(fb))
    if x == 0:
        if fa == 0 and fb == 0:
            return _zero_sum(bool(np.signbit(fa)), bool(np.signbit(fb)), mode, fmt)
        return _zero(mode == "rd", fmt)                  # opposite terms cancel: +0, or -0 rounding down
    return round_float(x, mode, fmt)


def f_mul(a, b, mode="rn", fmt: Fmt = F32):
    fa, fb = _f(a, fmt), _f(b, fmt)
    if not (np.isfinite(fa) and np.isfinite(fb)):
        return _numpy(lambda x, y: x * y, a, b, fmt=fmt)
    x = Fraction(float(fa)) * Fraction(float(fb))
    if x == 0:
        return _zero(bool(np.signbit(fa)) != bool(np.signbit(fb)), fmt)
    return round_float(x, mode, fmt)


def f_div(a, b, mode="rn", fmt: Fmt = F32):
    fa, fb = _f(a, fmt), _f(b, fmt)
    if not (np.isfinite(fa) and np.isfinite(fb)) or fb == 0:
        return _numpy(lambda x, y: x / y, a, b, fmt=fmt)
    x = Fraction(float(fa)) / Fraction(float(fb))
    if x == 0:
        return _zero(bool(np.signbit(fa)) != bool(np.signbit(fb)), fmt)
    return round_float(x, mode, fmt)


def f_fma(a, b, c, mode="rn", fmt: Fmt = F32):
    fa, fb, fc = _f(a, fmt), _f(b, fmt), _f(c, fmt)
    if not (np.isfinite(fa) and np.isfinite(fb) and np.isfinite(fc)):     # infinities and NaN: as computed in float64
        return _numpy(lambda x, y, z: np.float64(x) * np.float64(y) + np.float64(z), a, b, c, fmt=fmt)
    p = Fraction(float(fa)) * Fraction(float(fb))
    x = p + Fraction(float(fc))
    if x == 0:
        if p == 0 and fc == 0:
            return _zero_sum(bool(np.signbit(fa)) != bool(np.signbit(fb)), bool(np.signbit(fc)), mode, fmt)
        return _zero(mode == "rd", fmt)
    return round_float(x, mode, fmt)


def f_sqrt(a, mode="rn", fmt: Fmt = F32):
    fa = _f(a, fmt)
    if not np.isfinite(fa) or fa <= 0:                     # +-0 keep their sign; negatives and NaN give NaN
        return _numpy(np.sqrt, a, fmt=fmt)
    x = Fraction(float(fa))
    c = fmt.dtype(np.sqrt(np.float64(fa)))
    cands = sorted({float(v) for v in (np.nextafter(c, fmt.dtype(0)), c, np.nextafter(c, fmt.dtype(np.inf)))})
    lo = max(v for v in cands if Fraction(v) ** 2 <= x)
    hi = min(v for v in cands if Fraction(v) ** 2 >= x)
    if lo == hi or mode in ("rd", "rz"):
        return _bits(lo, fmt)
    if mode == "ru":
        return _bits(hi, fmt)
    mid = (Fraction(lo) + Fraction(hi)) / 2                 # a square root of a binary float is never a tie
    return _bits(lo if x < mid * mid else hi, fmt)


def f_rcp(a, mode="rn", fmt: Fmt = F32):
    return f_div(_bits(1.0, fmt), a, mode, fmt)


def f_minmax(a, b, is_max, fmt: Fmt = F32):
    """fminf / fmaxf (fmin / fmax) on bits, by hmin / hmax's rule; two NaN give NaN."""
    fa, fb = _f(a, fmt), _f(b, fmt)
    if np.isnan(fa) and np.isnan(fb):
        return fmt.nan
    return _bits((hmax if is_max else hmin)(float(fa), float(fb)), fmt)


def f_to_int(a, mode, signed=True, bits=32, fmt: Fmt = F32):
    """cvt.{rni,rzi,rmi,rpi}.{s32,u32,s64,u64}.{f32,f64}: NaN gives 0 to 32 bits and 0x8000000000000000 to 64 (the
    H200's bits from f32, signed and unsigned alike; from f64 not measured yet); beyond the range, the nearest end."""
    fa = _f(a, fmt)
    if np.isnan(fa):
        return 1 << 63 if bits == 64 else 0
    lo, hi = (-2**(bits - 1), 2**(bits - 1) - 1) if signed else (0, 2**bits - 1)
    if np.isinf(fa):
        return (hi if fa > 0 else lo) % 2**bits
    x = Fraction(float(fa))
    fl = x.numerator // x.denominator
    if mode == "rz":
        v = int(x)
    elif mode == "rd":
        v = fl
    elif mode == "ru":
        v = -((-x.numerator) // x.denominator)
    else:
        r = x - fl
        v = fl if r < Fraction(1, 2) or (r == Fraction(1, 2) and fl % 2 == 0) else fl + 1
    return min(max(v, lo), hi) % 2**bits


def int_to_f(v: int, mode, fmt: Fmt = F32) -> int:
    return 0 if v == 0 else round_float(Fraction(v), mode, fmt)


def f_round_int(a, how, fmt: Fmt = F32):
    """floorf / ceilf / truncf / rintf / roundf (floor, ... on doubles), exactly (round: halves away from zero)."""
    fa = _f(a, fmt)
    if not np.isfinite(fa) or abs(fa) >= 2 ** fmt.mantissa:
        return a
    x = Fraction(float(fa))
    fl = x.numerator // x.denominator
    v = {"floor": fl, "ceil": -((-x.numerator) // x.denominator), "trunc": int(x)}.get(how)
    if how == "rint":
        r = x - fl
        v = fl if r < Fraction(1, 2) or (r == Fraction(1, 2) and fl % 2 == 0) else fl + 1
    elif how == "round":
        v = int(abs(x) + Fraction(1, 2)) * (1 if x >= 0 else -1)
    return _zero(bool(np.signbit(fa)), fmt) if v == 0 else _bits(float(v), fmt)


def d_to_f(a, mode) -> int:
    """cvt.{rn,rz,rm,rp}.f32.f64: a double rounded to float (NaN stays NaN, infinity infinity)."""
    fa = _d(a)
    if not np.isfinite(fa) or fa == 0:
        with np.errstate(all="ignore"):
            return _bits(np.float32(fa))
    return round_float(Fraction(float(fa)), mode, F32)


def f_saturate(a):
    fa = _f(a)
    if np.isnan(fa):
        return 0
    return _bits(np.float32(min(max(fa, np.float32(0)), np.float32(1)))) if fa != 0 else 0


def to_half_bits(a, dtype) -> int:
    with np.errstate(all="ignore"):
        return int(np.array([_f(a)], np.float32).astype(dtype).view(np.uint16)[0])


def s32(v: int) -> int:
    return v - M32 if v >= 2**31 else v


def byte_perm(x: int, y: int, s: int) -> int:
    """__byte_perm: byte n of the result is byte (s >> 4n) & 7 of y:x. The selector's fourth bit (prmt's sign
    replication) does nothing through __byte_perm on an H200 (measured: 0x07ad over 0xf07007ad twice gives
    0xadf07007)."""
    src = (y << 32 | x).to_bytes(8, "little")
    return sum(src[(s >> (4 * n)) & 7] << (8 * n) for n in range(4))


def s64(v: int) -> int:
    return v - (1 << 64) if v >= 2**63 else v


HALVES = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ __half2 h2(unsigned u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ unsigned hu(__half2 h) { return *reinterpret_cast<const unsigned*>(&h); }
__device__ __forceinline__ __nv_bfloat162 b2(unsigned u) { return *reinterpret_cast<const __nv_bfloat162*>(&u); }
__device__ __forceinline__ unsigned bu(__nv_bfloat162 h) { return *reinterpret_cast<const unsigned*>(&h); }"""


def hmax(x, y):
    """max of two halves' values: one NaN gives the other (signaling or not: np.fmax would give NaN for a
    signaling one), -0 below +0."""
    if np.isnan(x) or np.isnan(y):
        return y if np.isnan(x) else x
    if x == 0 and y == 0:
        return -0.0 if (np.signbit(x) and np.signbit(y)) else 0.0
    return max(x, y)


def hmin(x, y):
    if np.isnan(x) or np.isnan(y):
        return y if np.isnan(x) else x
    if x == 0 and y == 0:
        return -0.0 if (np.signbit(x) or np.signbit(y)) else 0.0
    return min(x, y)


def halves(a: int, b: int, fn, dtype) -> int:
    """fn on the low halves and on the high halves of two words of 16-bit floats (float64 is exact for add, sub,
    mul of 16-bit floats; the result is rounded once to dtype, to nearest even)."""
    out = 0
    for shift in (0, 16):
        with np.errstate(all="ignore"):
            x, y = (np.array([(w >> shift) & 0xFFFF], np.uint16).view(dtype).astype(np.float64)[0] for w in (a, b))
            r = np.array([fn(x, y)], np.float64).astype(dtype).view(np.uint16)[0]
        out |= int(r) << shift
    return out


# ---------------------------------------------------------------------------------------------- the operations

@dataclasses.dataclass(frozen=True)
class Op:
    expr: str            # C++ with {a}, {b}, {c}
    args: str            # one letter per operand: u (unsigned), i (int), f (float), l (unsigned long long)
    result: str          # u, i, f, l (64-bit); h or b: an f16 or bf16 pattern; H or B: two of them in a word
    ref: object          # ints (bits) -> int (bits); for a warp operation, one list of 32 lanes' ints per operand -> 32
    header: str = ""
    warp: bool = False   # all 32 lanes of a warp take part (shuffles, votes, reductions, match)


def _u(fn):
    return lambda *v: fn(*v) % M32


OPS = [
    Op("{a} + {b}", "uu", "u", _u(lambda a, b: a + b)),
    Op("{a} - {b}", "uu", "u", _u(lambda a, b: a - b)),
    Op("{a} * {b}", "uu", "u", _u(lambda a, b: a * b)),
    Op("{a} / ({b} | 1u)", "uu", "u", lambda a, b: a // (b | 1)),
    Op("{a} % ({b} | 1u)", "uu", "u", lambda a, b: a % (b | 1)),
    Op("{a} << ({b} & 31u)", "uu", "u", _u(lambda a, b: a << (b & 31))),
    Op("{a} >> ({b} & 31u)", "uu", "u", lambda a, b: a >> (b & 31)),
    Op("({a} & {b}) ^ ~{c}", "uuu", "u", lambda a, b, c: (a & b) ^ (c ^ 0xFFFFFFFF)),
    Op("({a} | {b}) & ({c} ^ {a})", "uuu", "u", lambda a, b, c: (a | b) & (c ^ a)),
    Op("__umulhi({a}, {b})", "uu", "u", lambda a, b: (a * b) >> 32),
    Op("(unsigned)__mulhi({a}, {b})", "ii", "u", lambda a, b: ((s32(a) * s32(b)) >> 32) % M32),
    Op("__umul24({a}, {b})", "uu", "u", lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) % M32),
    Op("__mul24({a}, {b})", "ii", "i",
       lambda a, b: (s32((a & 0xFFFFFF) << 8) >> 8) * (s32((b & 0xFFFFFF) << 8) >> 8) % M32),
    Op("(unsigned)__popc({a})", "u", "u", lambda a: bin(a).count("1")),
    Op("(unsigned)__clz({a})", "u", "u", lambda a: 32 - a.bit_length()),
    Op("(unsigned)__ffs({a})", "u", "u", lambda a: (a & -a).bit_length()),
    Op("__brev({a})", "u", "u", lambda a: int(f"{a:032b}"[::-1], 2)),
    Op("__byte_perm({a}, {b}, {c})", "uuu", "u", lambda a, b, c: byte_perm(a, b, c & 0xFFFF)),
    Op("__funnelshift_l({a}, {b}, {c})", "uuu", "u", lambda a, b, c: ((b << 32 | a) << (c & 31) >> 32) % M32),
    Op("__funnelshift_r({a}, {b}, {c})", "uuu", "u", lambda a, b, c: ((b << 32 | a) >> (c & 31)) % M32),
    Op("__funnelshift_lc({a}, {b}, {c})", "uuu", "u", lambda a, b, c: ((b << 32 | a) << min(c, 32) >> 32) % M32),
    Op("__funnelshift_rc({a}, {b}, {c})", "uuu", "u", lambda a, b, c: ((b << 32 | a) >> min(c, 32)) % M32),
    Op("min({a}, {b})", "uu", "u", min),
    Op("max({a}, {b})", "ii", "i", lambda a, b: max(s32(a), s32(b)) % M32),
    Op("__uhadd({a}, {b})", "uu", "u", lambda a, b: (a + b) >> 1),
    Op("__urhadd({a}, {b})", "uu", "u", lambda a, b: (a + b + 1) >> 1),
    Op("__hadd({a}, {b})", "ii", "i", lambda a, b: ((s32(a) + s32(b)) >> 1) % M32),
    Op("__sad({a}, {b}, {c})", "iiu", "u", lambda a, b, c: (abs(s32(a) - s32(b)) + c) % M32),
    Op("__usad({a}, {b}, {c})", "uuu", "u", lambda a, b, c: (abs(a - b) + c) % M32),
    Op("abs({a})", "i", "i", lambda a: abs(s32(a)) % M32),
    Op("{a} >> ({b} & 31)", "iu", "i", lambda a, b: (s32(a) >> (b & 31)) % M32),
    Op("{a} / (int)(({b} & 0x7fffffffu) | 1u)", "iu", "i",
       lambda a, b: (lambda x, d: (abs(x) // d) * (1 if x >= 0 else -1))(s32(a), (b & 0x7FFFFFFF) | 1) % M32),
    Op("{a} % (int)(({b} & 0xffffu) | 1u)", "iu", "i",
       lambda a, b: (lambda x, d: x - (abs(x) // d) * (1 if x >= 0 else -1) * d)(s32(a), (b & 0xFFFF) | 1) % M32),
    Op("({a} < {b}) ? {c} : {a}", "iiu", "u", lambda a, b, c: c if s32(a) < s32(b) else a),
    # floats, correctly rounded
    Op("{a} + {b}", "ff", "f", f_add),
    Op("{a} - {b}", "ff", "f", lambda a, b: f_add(a, b, sub=True)),
    Op("{a} * {b}", "ff", "f", f_mul),
    Op("{a} / {b}", "ff", "f", f_div),
    Op("sqrtf({a})", "f", "f", f_sqrt),
    Op("fmaf({a}, {b}, {c})", "fff", "f", f_fma),
    Op("__fadd_rz({a}, {b})", "ff", "f", lambda a, b: f_add(a, b, "rz")),
    Op("__fadd_rd({a}, {b})", "ff", "f", lambda a, b: f_add(a, b, "rd")),
    Op("__fadd_ru({a}, {b})", "ff", "f", lambda a, b: f_add(a, b, "ru")),
    Op("__fmul_rz({a}, {b})", "ff", "f", lambda a, b: f_mul(a, b, "rz")),
    Op("__fmul_rd({a}, {b})", "ff", "f", lambda a, b: f_mul(a, b, "rd")),
    Op("__fmul_ru({a}, {b})", "ff", "f", lambda a, b: f_mul(a, b, "ru")),
    Op("__fdiv_rz({a}, {b})", "ff", "f", lambda a, b: f_div(a, b, "rz")),
    Op("__fdiv_ru({a}, {b})", "ff", "f", lambda a, b: f_div(a, b, "ru")),
    Op("__fmaf_rz({a}, {b}, {c})", "fff", "f", lambda a, b, c: f_fma(a, b, c, "rz")),
    Op("__fmaf_rd({a}, {b}, {c})", "fff", "f", lambda a, b, c: f_fma(a, b, c, "rd")),
    Op("__fsqrt_rd({a})", "f", "f", lambda a: f_sqrt(a, "rd")),
    Op("__fsqrt_ru({a})", "f", "f", lambda a: f_sqrt(a, "ru")),
    Op("__frcp_rn({a})", "f", "f", f_rcp),
    Op("__frcp_rz({a})", "f", "f", lambda a: f_rcp(a, "rz")),
    Op("fminf({a}, {b})", "ff", "f", lambda a, b: f_minmax(a, b, False)),
    Op("fmaxf({a}, {b})", "ff", "f", lambda a, b: f_minmax(a, b, True)),
    Op("fabsf({a})", "f", "f", lambda a: a & 0x7FFFFFFF),
    Op("-{a}", "f", "f", lambda a: a ^ 0x80000000),
    Op("copysignf({a}, {b})", "ff", "f", lambda a, b: (a & 0x7FFFFFFF) | (b & 0x80000000)),
    Op("floorf({a})", "f", "f", lambda a: f_round_int(a, "floor")),
    Op("ceilf({a})", "f", "f", lambda a: f_round_int(a, "ceil")),
    Op("truncf({a})", "f", "f", lambda a: f_round_int(a, "trunc")),
    Op("rintf({a})", "f", "f", lambda a: f_round_int(a, "rint")),
    Op("roundf({a})", "f", "f", lambda a: f_round_int(a, "round")),
    Op("__saturatef({a})", "f", "f", f_saturate),
    Op("({a} < {b}) ? {a} : {c}", "fff", "f", lambda a, b, c: a if _f(a) < _f(b) else c),
    Op("({a} != {a}) ? 1u : 0u", "f", "u", lambda a: int(_is_nan(a))),
    # conversions
    Op("__float2int_rn({a})", "f", "i", lambda a: f_to_int(a, "rn")),
    Op("__float2int_rz({a})", "f", "i", lambda a: f_to_int(a, "rz")),
    Op("__float2int_rd({a})", "f", "i", lambda a: f_to_int(a, "rd")),
    Op("__float2int_ru({a})", "f", "i", lambda a: f_to_int(a, "ru")),
    Op("__float2uint_rz({a})", "f", "u", lambda a: f_to_int(a, "rz", signed=False)),
    Op("__float2uint_rn({a})", "f", "u", lambda a: f_to_int(a, "rn", signed=False)),
    Op("(float){a}", "u", "f", lambda a: int_to_f(a, "rn")),
    Op("(float){a}", "i", "f", lambda a: int_to_f(s32(a), "rn")),
    Op("__uint2float_rz({a})", "u", "f", lambda a: int_to_f(a, "rz")),
    Op("__int2float_rd({a})", "i", "f", lambda a: int_to_f(s32(a), "rd")),
    Op("__int2float_ru({a})", "i", "f", lambda a: int_to_f(s32(a), "ru")),
    Op("__float_as_uint({a})", "f", "u", lambda a: a),
    Op("__uint_as_float({a})", "u", "f", lambda a: a),
    Op("(unsigned)__half_as_ushort(__float2half_rn({a}))", "f", "h", lambda a: to_half_bits(a, np.float16),
       "#include <cuda_fp16.h>"),
    Op("(unsigned)__bfloat16_as_ushort(__float2bfloat16_rn({a}))", "f", "b",
       lambda a: to_half_bits(a, ml_dtypes.bfloat16), "#include <cuda_bf16.h>"),
    Op("__half2float(__ushort_as_half((unsigned short){a}))", "u", "f",
       lambda a: _bits(np.float32(np.array([a & 0xFFFF], np.uint16).view(np.float16)[0])), "#include <cuda_fp16.h>"),
    Op("__bfloat162float(__ushort_as_bfloat16((unsigned short){a}))", "u", "f", lambda a: (a & 0xFFFF) << 16,
       "#include <cuda_bf16.h>"),
    # 64-bit integers (unsigned long long; signed through casts, C's shifts and divisions kept defined)
    Op("{a} + {b}", "ll", "l", lambda a, b: a + b),
    Op("{a} * {b}", "ll", "l", lambda a, b: a * b),
    Op("{a} / ({b} | 1ull)", "ll", "l", lambda a, b: a // (b | 1)),
    Op("{a} % ({b} | 1ull)", "ll", "l", lambda a, b: a % (b | 1)),
    Op("{a} << ({b} & 63u)", "lu", "l", lambda a, b: a << (b & 63)),
    Op("{a} >> ({b} & 63u)", "lu", "l", lambda a, b: a >> (b & 63)),
    Op("(unsigned long long)((long long){a} >> ({b} & 63u))", "lu", "l", lambda a, b: s64(a) >> (b & 63)),
    Op("__umul64hi({a}, {b})", "ll", "l", lambda a, b: (a * b) >> 64),
    Op("(unsigned long long)__mul64hi((long long){a}, (long long){b})", "ll", "l",
       lambda a, b: (s64(a) * s64(b)) >> 64),
    Op("(unsigned)__popcll({a})", "l", "u", lambda a: bin(a).count("1")),
    Op("(unsigned)__clzll({a})", "l", "u", lambda a: 64 - a.bit_length()),
    Op("(unsigned)__ffsll({a})", "l", "u", lambda a: (a & -a).bit_length()),
    Op("__brevll({a})", "l", "l", lambda a: int(f"{a:064b}"[::-1], 2)),
    Op("(unsigned long long){a} * {b}", "uu", "l", lambda a, b: a * b),
    Op("(unsigned long long)((long long){a} * {b})", "ii", "l", lambda a, b: s32(a) * s32(b)),
    Op("(unsigned)({a} >> 32)", "l", "u", lambda a: a >> 32),
    Op("min({a}, {b})", "ll", "l", min),
    Op("(float){a}", "l", "f", lambda a: int_to_f(a, "rn")),
    Op("__ull2float_rz({a})", "l", "f", lambda a: int_to_f(a, "rz")),
    Op("__ll2float_rd((long long){a})", "l", "f", lambda a: int_to_f(s64(a), "rd")),
    Op("__float2ull_rz({a})", "f", "l", lambda a: f_to_int(a, "rz", signed=False, bits=64)),
    Op("(unsigned long long)__float2ll_rn({a})", "f", "l", lambda a: f_to_int(a, "rn", bits=64)),
    # two halves in a word (__half2, __nv_bfloat162), each computed on its own and rounded once
    Op("hu(__hadd2(h2({a}), h2({b})))", "uu", "H", lambda a, b: halves(a, b, np.add, np.float16), HALVES),
    Op("hu(__hsub2(h2({a}), h2({b})))", "uu", "H", lambda a, b: halves(a, b, np.subtract, np.float16), HALVES),
    Op("hu(__hmul2(h2({a}), h2({b})))", "uu", "H", lambda a, b: halves(a, b, np.multiply, np.float16), HALVES),
    Op("hu(__hmax2(h2({a}), h2({b})))", "uu", "H", lambda a, b: halves(a, b, hmax, np.float16), HALVES),
    Op("hu(__hmin2(h2({a}), h2({b})))", "uu", "H", lambda a, b: halves(a, b, hmin, np.float16), HALVES),
    Op("hu(__hneg2(h2({a})))", "u", "H", lambda a: a ^ 0x80008000, HALVES),
    Op("bu(__hadd2(b2({a}), b2({b})))", "uu", "B", lambda a, b: halves(a, b, np.add, ml_dtypes.bfloat16), HALVES),
    Op("bu(__hmul2(b2({a}), b2({b})))", "uu", "B", lambda a, b: halves(a, b, np.multiply, ml_dtypes.bfloat16),
       HALVES),
    Op("bu(__hmax2(b2({a}), b2({b})))", "uu", "B", lambda a, b: halves(a, b, hmax, ml_dtypes.bfloat16), HALVES),
    Op("bu(__habs2(b2({a})))", "u", "B", lambda a: a & 0x7FFF7FFF, HALVES),
]



# ---------------------------------------------------------------------------------------------- doubles
# IEEE double arithmetic in every rounding mode (the __d*_r? and __fma_r? intrinsics), conversions to and from
# float and the integers, and the round-to-integer functions: the same references on float64.

def f_to_d(a) -> int:
    """cvt.f64.f32: exact widening (a NaN: the quiet NaN of its sign and payload, as NumPy widens)."""
    return _bits(np.float64(_f(a)), F64)


def _dd(fn):
    return lambda *v: fn(*v, fmt=F64)


OPS += [
    Op("{a} + {b}", "dd", "d", _dd(lambda a, b, fmt: f_add(a, b, fmt=fmt))),
    Op("{a} - {b}", "dd", "d", _dd(lambda a, b, fmt: f_add(a, b, sub=True, fmt=fmt))),
    Op("{a} * {b}", "dd", "d", _dd(lambda a, b, fmt: f_mul(a, b, fmt=fmt))),
    Op("{a} / {b}", "dd", "d", _dd(lambda a, b, fmt: f_div(a, b, fmt=fmt))),
    Op("__dadd_rz({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_add(a, b, "rz", fmt=fmt))),
    Op("__dsub_ru({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_add(a, b, "ru", sub=True, fmt=fmt))),
    Op("__dmul_rd({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_mul(a, b, "rd", fmt=fmt))),
    Op("__ddiv_ru({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_div(a, b, "ru", fmt=fmt))),
    Op("fma({a}, {b}, {c})", "ddd", "d", _dd(lambda a, b, c, fmt: f_fma(a, b, c, fmt=fmt))),
    Op("__fma_rz({a}, {b}, {c})", "ddd", "d", _dd(lambda a, b, c, fmt: f_fma(a, b, c, "rz", fmt=fmt))),
    Op("__fma_rd({a}, {b}, {c})", "ddd", "d", _dd(lambda a, b, c, fmt: f_fma(a, b, c, "rd", fmt=fmt))),
    Op("sqrt({a})", "d", "d", _dd(lambda a, fmt: f_sqrt(a, fmt=fmt))),
    Op("__dsqrt_ru({a})", "d", "d", _dd(lambda a, fmt: f_sqrt(a, "ru", fmt=fmt))),
    Op("__drcp_rn({a})", "d", "d", _dd(lambda a, fmt: f_rcp(a, fmt=fmt))),
    Op("fmin({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_minmax(a, b, False, fmt=fmt))),
    Op("fmax({a}, {b})", "dd", "d", _dd(lambda a, b, fmt: f_minmax(a, b, True, fmt=fmt))),
    Op("-{a}", "d", "d", lambda a: a ^ (1 << 63)),
    Op("fabs({a})", "d", "d", lambda a: a & ((1 << 63) - 1)),
    Op("floor({a})", "d", "d", _dd(lambda a, fmt: f_round_int(a, "floor", fmt=fmt))),
    Op("trunc({a})", "d", "d", _dd(lambda a, fmt: f_round_int(a, "trunc", fmt=fmt))),
    Op("rint({a})", "d", "d", _dd(lambda a, fmt: f_round_int(a, "rint", fmt=fmt))),
    Op("({a} < {b}) ? 1u : 0u", "dd", "u", lambda a, b: int(_d(a) < _d(b))),
    Op("(double){a}", "f", "d", f_to_d),
    Op("(float){a}", "d", "f", lambda a: d_to_f(a, "rn")),
    Op("__double2float_rz({a})", "d", "f", lambda a: d_to_f(a, "rz")),
    Op("__double2float_ru({a})", "d", "f", lambda a: d_to_f(a, "ru")),
    Op("(unsigned)__double2int_rz({a})", "d", "u", lambda a: f_to_int(a, "rz", fmt=F64)),
    Op("__double2uint_rn({a})", "d", "u", lambda a: f_to_int(a, "rn", signed=False, fmt=F64)),
    Op("(unsigned long long)__double2ll_rd({a})", "d", "l", lambda a: f_to_int(a, "rd", bits=64, fmt=F64)),
    Op("__double2ull_rz({a})", "d", "l", lambda a: f_to_int(a, "rz", signed=False, bits=64, fmt=F64)),
    Op("(double)(long long){a}", "l", "d", lambda a: int_to_f(s64(a), "rn", F64)),
    Op("__ull2double_rz({a})", "l", "d", lambda a: int_to_f(a, "rz", F64)),
    Op("__int2double_rn((int){a})", "u", "d", lambda a: int_to_f(s32(a), "rn", F64)),
]

# ---------------------------------------------------------------------------------------------- warp operations
# Every lane of every warp runs each step (straight-line code, the full mask), so each of these is defined for
# every operand. The references follow the CUDA C++ Programming Guide's warp functions, not PTX's formulas: a shuffle
# with width w works within segments of w lanes; __shfl_sync reads lane srcLane mod w of the caller's segment;
# __shfl_up_sync / __shfl_down_sync return the caller's own value where the source lane falls outside the segment,
# and __shfl_xor_sync where it falls in a later segment (an earlier one it may read). A delta or lane mask counts by
# its low five bits (PTX ISA, shfl.sync: bval = b[4:0]); a negative srcLane is read as its two's complement bits.

def _segment(lane: int, width: int) -> tuple[int, int]:
    first = lane - lane % width
    return first, first + width - 1


def shfl_ref(mode: str, width: int):
    def ref(vals, bs):
        out = []
        for lane in range(32):
            first, last = _segment(lane, width)
            b = bs[lane] & 31
            src = {"idx": first + (bs[lane] & (width - 1)), "up": lane - b, "down": lane + b, "xor": lane ^ b}[mode]
            inside = {"idx": True, "up": src >= first, "down": src <= last, "xor": src <= last}[mode]
            out.append(vals[src if inside else lane])
        return out
    return ref


def _warp(fn):
    """A reference giving every lane fn of all 32 lanes' values (votes and reductions: one answer per warp)."""
    return lambda *lists: [fn(*lists)] * 32


def match_any(vals):
    return [sum(1 << i for i in range(32) if vals[i] == v) for v in vals]


def _ballot(bits):
    return sum(1 << i for i, b in enumerate(bits) if b)


FULL = "0xffffffffu"
WARP_HEADER = f"""__device__ __forceinline__ unsigned match_all(unsigned v) {{   // the mask, its low bit flipped by the predicate
  int p;
  const unsigned m = __match_all_sync({FULL}, v, &p);
  return m ^ (unsigned)p;
}}"""

OPS += [
    Op(f"__shfl_sync({FULL}, {{a}}, (int){{b}})", "uu", "u", shfl_ref("idx", 32), warp=True),
    Op(f"__shfl_sync({FULL}, {{a}}, (int){{b}}, 8)", "uu", "u", shfl_ref("idx", 8), warp=True),
    Op(f"__shfl_up_sync({FULL}, {{a}}, {{b}})", "uu", "u", shfl_ref("up", 32), warp=True),
    Op(f"__shfl_up_sync({FULL}, {{a}}, {{b}}, 16)", "uu", "u", shfl_ref("up", 16), warp=True),
    Op(f"__shfl_down_sync({FULL}, {{a}}, {{b}})", "uu", "u", shfl_ref("down", 32), warp=True),
    Op(f"__shfl_down_sync({FULL}, {{a}}, {{b}}, 4)", "uu", "u", shfl_ref("down", 4), warp=True),
    Op(f"__shfl_xor_sync({FULL}, {{a}}, (int){{b}})", "uu", "u", shfl_ref("xor", 32), warp=True),
    Op(f"__shfl_xor_sync({FULL}, {{a}}, (int){{b}}, 8)", "uu", "u", shfl_ref("xor", 8), warp=True),
    Op(f"__shfl_xor_sync({FULL}, {{a}}, (int){{b}}, 16)", "fu", "f", shfl_ref("xor", 16), warp=True),   # bits, NaN too
    Op(f"__shfl_sync({FULL}, {{a}}, (int){{b}})", "lu", "l", shfl_ref("idx", 32), warp=True),
    Op(f"__shfl_down_sync({FULL}, {{a}}, {{b}}, 16)", "lu", "l", shfl_ref("down", 16), warp=True),
    Op(f"__ballot_sync({FULL}, {{a}} & 1u)", "u", "u", _warp(lambda a: _ballot(v & 1 for v in a)), warp=True),
    Op(f"__ballot_sync({FULL}, {{a}} < {{b}})", "ff", "u",
       _warp(lambda a, b: _ballot(_f(x) < _f(y) for x, y in zip(a, b))), warp=True),
    Op(f"(unsigned)__any_sync({FULL}, {{a}} < {{b}})", "uu", "u",
       _warp(lambda a, b: int(any(x < y for x, y in zip(a, b)))), warp=True),
    Op(f"(unsigned)__all_sync({FULL}, {{a}} < {{b}})", "ii", "u",
       _warp(lambda a, b: int(all(s32(x) < s32(y) for x, y in zip(a, b)))), warp=True),
    Op(f"__reduce_add_sync({FULL}, {{a}})", "u", "u", _warp(lambda a: sum(a) % M32), warp=True),
    Op(f"__reduce_min_sync({FULL}, {{a}})", "u", "u", _warp(min), warp=True),
    Op(f"__reduce_max_sync({FULL}, {{a}})", "i", "i", _warp(lambda a: max(a, key=s32)), warp=True),
    Op(f"__reduce_and_sync({FULL}, {{a}})", "u", "u", _warp(lambda a: functools.reduce(operator.and_, a)), warp=True),
    Op(f"__reduce_xor_sync({FULL}, {{a}})", "u", "u", _warp(lambda a: functools.reduce(operator.xor, a)), warp=True),
    Op(f"__match_any_sync({FULL}, {{a}} & 3u)", "u", "u", lambda a: match_any([v & 3 for v in a]), warp=True),
    Op(f"__match_any_sync({FULL}, {{a}} & 0x100000001ull)", "l", "u",
       lambda a: match_any([v & 0x100000001 for v in a]), warp=True),
    Op("match_all({a} & 1u)", "u", "u",
       _warp(lambda a: 0xFFFFFFFE if len({v & 1 for v in a}) == 1 else 0), WARP_HEADER, warp=True),
]

CTYPE = {"u": "unsigned", "i": "int", "f": "float", "l": "unsigned long long", "d": "double"}
U64 = np.uint64
#: the variables every program starts with: the four input words read as unsigned, int, float, and paired into
#: four unsigned long long (l0 = u0:u1, l1 = u2:u3, l2 = u1:u2, l3 = u3:u0, high word first); and four doubles:
#: d0, d1 the floats f0, f1 widened (values of every kind), d2, d3 the bits of l1, l3
START_TYPES = ["u"] * 4 + ["i"] * 4 + ["f"] * 4 + ["l"] * 4 + ["d"] * 4
START_NAMES = [f"{t}{n}" for t in "uifld" for n in range(4)]


def start_values(words) -> list[int]:
    w = [int(v) for v in words]
    longs = [w[0] << 32 | w[1], w[2] << 32 | w[3], w[1] << 32 | w[2], w[3] << 32 | w[0]]
    return w * 3 + longs + [f_to_d(w[0]), f_to_d(w[1]), longs[1], longs[3]]


@dataclasses.dataclass
class Program:
    seed: int
    source: str
    steps: list            # (op index, operand variable indices)
    kernel: str = "random_arith"

    @property
    def outputs(self) -> int:
        return len(self.steps)

    def expected(self, x: np.ndarray, got: np.ndarray | None = None) -> np.ndarray:
        """(threads, outputs) uint64, each result worked out exactly from its operands' values: the earlier results
        of `got` where given (so that one difference is reported where it arises, not in everything after it),
        else the reference's own."""
        n = x.shape[0]
        out = np.zeros((n, self.outputs), U64)
        vals = [start_values(x[t]) for t in range(n)]
        for j, (k, operands) in enumerate(self.steps):
            op = OPS[k]
            if op.warp:       # one call per warp, each operand as its 32 lanes' values
                assert n % 32 == 0, "warp operations need whole warps of threads"
                r = [v for w in range(0, n, 32) for v in op.ref(*[[vals[t][o] for t in range(w, w + 32)]
                                                                 for o in operands])]
            else:
                r = [op.ref(*[vals[t][o] for o in operands]) for t in range(n)]
            for t in range(n):
                out[t, j] = r[t] % (1 << 64 if op.result in "ld" else M32)
                vals[t].append(int(got[t, j]) if got is not None else int(out[t, j]))
        return out


def program(seed: int) -> Program:
    """STEPS random operations on the START_NAMES variables and the results before them."""
    rng = np.random.default_rng(seed)
    types, names = list(START_TYPES), list(START_NAMES)
    lines, steps, headers, flags, signs = [], [], set(), set(), set()
    for j in range(STEPS):
        k = int(rng.integers(len(OPS)))
        op = OPS[k]
        operands = []
        for want in op.args:
            # never one value twice in an operation: NVRTC then knows more than C says (__mul24(x, x) was taken to
            # be non-negative, and a later % became an unsigned one); never a 0/1 flag reinterpreted as a half:
            # ptxas folds cvt.f32.f16 of selp.u16 1, 0 into 1.0 (seen on the H200), which no model of PTX can be
            # and never the result of fabsf or a negation into a select: ptxas folds them into the select as operand
            # modifiers, which flip or clear the sign bit of a NaN, where the instruction alone gives 0x7fffffff
            # (seen on the H200); PTX leaves the NaN open, and the model gives the instruction's
            pool = [n for n, ty in enumerate(types) if ty == want and n not in operands
                    and not (("__ushort_as_" in op.expr or "h2(" in op.expr or "b2(" in op.expr) and n in flags)
                    and not ("?" in op.expr and want == "f" and n in signs)]
            recent = pool[-6:]                             # mostly chain on recent results
            operands.append(int(rng.choice(recent if rng.random() < 0.7 else pool)))
        rtype = "u" if op.result in "hbHB" else op.result
        name = f"v{j}"
        expr = op.expr.format(**{k_: names[o] for k_, o in zip("abc", operands)})
        lines.append(f"  const {CTYPE[rtype]} {name} = {expr};")
        store = {"u": name, "i": f"(unsigned){name}", "f": f"__float_as_uint({name})", "l": name,
                 "d": f"(unsigned long long)__double_as_longlong({name})"}[rtype]
        lines.append(f"  o[{j}] = {store};")
        if "? 1u : 0u" in op.expr:
            flags.add(len(types))
        if op.expr in ("fabsf({a})", "-{a}"):
            signs.add(len(types))
        types.append(rtype)
        names.append(name)
        steps.append((k, operands))
        if op.header:
            headers.add(op.header)
    src = "\n".join(sorted(headers)) + f"""
// random_arith (seed {seed}): tests/model/random_kernels.py
extern "C" __global__ void random_arith(const unsigned* in, unsigned long long* out) {{
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned u0 = in[4 * t], u1 = in[4 * t + 1], u2 = in[4 * t + 2], u3 = in[4 * t + 3];
  const int i0 = (int)u0, i1 = (int)u1, i2 = (int)u2, i3 = (int)u3;
  const float f0 = __uint_as_float(u0), f1 = __uint_as_float(u1), f2 = __uint_as_float(u2),
              f3 = __uint_as_float(u3);
  const unsigned long long l0 = (unsigned long long)u0 << 32 | u1, l1 = (unsigned long long)u2 << 32 | u3,
                           l2 = (unsigned long long)u1 << 32 | u2, l3 = (unsigned long long)u3 << 32 | u0;
  const double d0 = (double)f0, d1 = (double)f1, d2 = __longlong_as_double((long long)l1),
               d3 = __longlong_as_double((long long)l3);
  unsigned long long* o = out + {STEPS} * t;
""" + "\n".join(lines) + "\n}\n"
    return Program(seed, src, steps)


SPECIAL_FLOATS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.5, -2.5, 3.5, 1e-45, -1e-40, 1.1754942e-38,
                  float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max), 2.0 ** 31, -2.0 ** 31,
                  4294967296.0, 16777217.0, 65504.0, 65520.0, 3.4e38]
SPECIAL_WORDS = [0, 1, 2, 31, 32, 33, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x00010000, 0x00FFFFFF, 0x7FC00001,
                 0x7F800001]


def inputs(seed: int, threads: int = THREADS) -> np.ndarray:
    """(threads, 4) uint32: a third random bits, a third floats of every magnitude, a third special values."""
    rng = np.random.default_rng(seed ^ 0x5EED)
    x = rng.integers(0, M32, (threads, 4), dtype=np.uint64).astype(U32)
    kind = rng.integers(0, 3, (threads, 4))
    mags = (rng.standard_normal((threads, 4)) * 10.0 ** rng.integers(-8, 9, (threads, 4))).astype(np.float32)
    small = rng.integers(-40, 41, (threads, 4)).astype(np.float32) / np.float32(2)   # halves: rounding ties
    mags = np.where(rng.random((threads, 4)) < 0.3, small, mags)
    x = np.where(kind == 1, mags.view(U32), x)
    specials = np.array([_bits(np.float32(v)) for v in SPECIAL_FLOATS] + SPECIAL_WORDS, U32)
    x = np.where(kind == 2, specials[rng.integers(0, specials.size, (threads, 4))], x)
    return x.astype(U32)


def same(got: np.ndarray, want: np.ndarray, p: Program, exact: bool = False) -> np.ndarray:
    """Mask of results that agree: bit for bit, except (unless exact) that any NaN matches any NaN where a float was
    computed (for two halves in a word, half by half). The exact reference leaves NaN bits open; the H200 does not."""
    got, want = got.astype(U64), want.astype(U64)
    ok = got == want
    if exact:
        return ok
    for kind, exp, man, shifts in (("f", 0x7F800000, 0x7FFFFF, (0,)), ("h", 0x7C00, 0x3FF, (0,)),
                                   ("b", 0x7F80, 0x7F, (0,)), ("H", 0x7C00, 0x3FF, (0, 16)),
                                   ("B", 0x7F80, 0x7F, (0, 16)), ("d", 0x7FF0000000000000, (1 << 52) - 1, (0,))):
        cols = np.array([OPS[k].result == kind for k, _ in p.steps])
        if not cols.any():
            continue
        width = {"f": 0xFFFFFFFF, "d": 0xFFFFFFFFFFFFFFFF}.get(kind, 0xFFFF)
        part_ok = np.ones_like(ok)
        for sh in shifts:
            g, w = (got >> U64(sh)) & U64(width), (want >> U64(sh)) & U64(width)
            nan = lambda v: ((v & U64(exp)) == U64(exp)) & ((v & U64(man)) != 0)    # noqa: E731
            part_ok &= (g == w) | (nan(g) & nan(w))
        high_clear = True if kind == "d" else (got >> U64(16 * len(shifts) if kind in "hbHB" else 32)) == 0
        ok |= cols[None, :] & part_ok & high_clear
    return ok


def first_difference(got, want, x, p: Program, who: str, exact: bool = False) -> str:
    """A message naming the first operation whose result differs, its operands' bits (as `got` had them) and both
    results, or ''. exact: NaN bits must agree too (the model against the H200)."""
    bad = np.argwhere(~same(got, want, p, exact))
    if not bad.size:
        return ""
    t, j = (int(v) for v in bad[np.lexsort((bad[:, 0], bad[:, 1]))][0])
    k, operands = p.steps[j]
    vals = start_values(x[t]) + [int(v) for v in got[t]]
    return (f"seed {p.seed}, thread {t}, step {j}: {OPS[k].expr} on "
            f"{', '.join(f'{vals[o]:#x}' for o in operands)} gave {int(got[t, j]):#x} on {who}, "
            f"want {int(want[t, j]):#x} ({len(bad)} results differ)\n{p.source}")
