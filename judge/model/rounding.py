"""judge.model.rounding - IEEE rounding done exactly, for the float instructions whose result float64 cannot give.

Used by alu.py (add, sub, mul, fma, mad, div, rcp, sqrt) and convert.py (cvt to a float type); tested by
tests/model/test_model_ops_alu.py and, against the H200, by tests/model/test_model_random_kernels.py.

    rounded("fma", [x, y, z], "f32", "rz")      # float64 arrays of float32 values -> float32 array

RULE (PTX ISA, floating-point instructions; IEEE 754): .rn rounds the exact result to the nearest value of the
format (ties to even), .rz toward zero, .rm toward -inf, .rp toward +inf; a finite result beyond the largest
finite value becomes infinity only where the direction allows (.rz gives the largest finite, .rm does for a
positive result, .rp for a negative one); subnormals are kept (no .ftz).
An exact zero sum is +0, or -0 under .rm, unless both terms are zeros of one sign (then that zero); a product
of a zero takes the sign of the product.

Why not float64: a float32 add, mul, div or sqrt computed in float64 and rounded once more to float32 is right
under .rn (53 >= 2 x 24 + 2 bits), but a directed rounding of that float64 is not (the float64 has already moved
the value, possibly across a float32), and fma's float64 sum can land exactly on a float32 midpoint and then
round the wrong way. Those lanes are computed here from exact fractions, one lane at a time: directed modes are
rare in kernels, and fma's midpoints are rare among fma's results, so the hot path stays vectorized. fma.rn.f64
has no wider type to lean on: it is computed vectorized from error-free transformations (_fma64_rn).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: precision (bits, the leading one included), smallest normal exponent, largest exponent
FORMATS = {"f32": (24, -126, 127), "f64": (53, -1022, 1023)}
DTYPE = {"f32": np.float32, "f64": np.float64}
DIRECTED = ("rz", "rm", "rp")


def mode_of(parts) -> str:
    """The rounding modifier among an instruction's parts (rn when none is written)."""
    return next((p for p in ("rz", "rm", "rp", "rn") if p in parts), "rn")


def round_fraction(x: Fraction, fmt: str, mode: str) -> float:
    """The nonzero exact x rounded to format fmt in mode (rn, rz, rm, rp), as a Python float (exact)."""
    p, emin, emax = FORMATS[fmt]
    neg = x < 0
    n, d = abs(x.numerator), x.denominator
    e = n.bit_length() - d.bit_length()                 # 2^e <= |x| < 2^(e+1) after the fix-up below
    if Fraction(n, d) < Fraction(2) ** e:
        e -= 1
    q = max(e, emin) - (p - 1)                          # the quantum: the value of the last kept bit
    scaled = Fraction(n, d) / (Fraction(2) ** q)
    m, rest = divmod(scaled.numerator, scaled.denominator)
    if rest:
        up = {"rz": False, "rm": neg, "rp": not neg}.get(mode)
        if up is None:                                   # rn: compare the remainder with one half, ties to even
            twice = 2 * rest
            up = twice > scaled.denominator or (twice == scaled.denominator and m % 2 == 1)
        m += up
    big = Fraction(2) ** (emax + 1)
    if m * Fraction(2) ** q >= big:                     # overflow: infinity, or the largest finite value
        to_inf = mode == "rn" or (mode == "rp" and not neg) or (mode == "rm" and neg)
        v = math.inf if to_inf else float((Fraction(2) ** p - 1) * Fraction(2) ** (emax + 1 - p))
    else:
        v = math.ldexp(m, q)
    return -v if neg else v


#: each operation in float64, on a list of operands (alu.py's round-to-nearest path uses these too)
FLOAT64 = {"add": lambda a: a[0] + a[1], "sub": lambda a: a[0] - a[1], "mul": lambda a: a[0] * a[1],
           "fma": lambda a: a[0] * a[1] + a[2], "div": lambda a: a[0] / a[1], "rcp": lambda a: 1.0 / a[0],
           "sqrt": lambda a: np.sqrt(a[0])}


def _zero(neg: bool) -> float:
    return -0.0 if neg else 0.0


def _sqrt(x: Fraction, fmt: str, mode: str) -> float:
    """sqrt of the positive exact x rounded in mode: m = isqrt(x / 4^q) is the floor on the format's grid."""
    p, emin, _ = FORMATS[fmt]
    n, d = x.numerator, x.denominator
    ex = n.bit_length() - d.bit_length()
    if x < Fraction(2) ** ex:
        ex -= 1
    q = max(ex // 2, emin) - (p - 1)
    y = x / (Fraction(4) ** q)                          # sqrt(x) = sqrt(y) 2^q, and sqrt(y) < 2^p
    m = math.isqrt(y.numerator // y.denominator)
    exact = Fraction(m * m) == y
    if not exact:
        if mode == "rp":
            m += 1
        elif mode == "rn":                               # sqrt(y) > m + 1/2  <=>  4y > (2m + 1)^2 (never equal)
            m += 4 * y > (2 * m + 1) ** 2
    return math.ldexp(m, q)


def _lane(kind: str, vals, fmt: str, mode: str) -> float:
    """One lane, exactly: vals are Python floats (the operands' exact values)."""
    if not all(math.isfinite(v) for v in vals) or (kind == "div" and vals[1] == 0) or (kind == "rcp" and vals[0] == 0) \
            or (kind == "sqrt" and vals[0] <= 0):
        with np.errstate(all="ignore"):                 # infinities, NaN, x / 0, sqrt of a zero or a negative:
            return float(DTYPE[fmt](FLOAT64[kind]([np.float64(v) for v in vals])))   # the same in every mode
    fr = [Fraction(v) for v in vals]
    if kind == "sqrt":
        return _sqrt(fr[0], fmt, mode)
    if kind in ("add", "sub", "fma"):
        if kind == "fma":
            t1, t2 = fr[0] * fr[1], fr[2]
            neg1, neg2 = (math.copysign(1, vals[0]) * math.copysign(1, vals[1]) < 0), math.copysign(1, vals[2]) < 0
        else:
            t1, t2 = fr[0], fr[1] if kind == "add" else -fr[1]
            neg1 = math.copysign(1, vals[0]) < 0
            neg2 = (math.copysign(1, vals[1]) < 0) != (kind == "sub")
        x = t1 + t2
        if x == 0:
            if t1 == 0 and t2 == 0 and neg1 == neg2:
                return _zero(neg1)
            return _zero(mode == "rm")
        return round_fraction(x, fmt, mode)
    if kind == "mul":
        x = fr[0] * fr[1]
        sign_neg = (math.copysign(1, vals[0]) * math.copysign(1, vals[1])) < 0
    elif kind == "div":
        x = fr[0] / fr[1]
        sign_neg = (math.copysign(1, vals[0]) * math.copysign(1, vals[1])) < 0
    else:                                               # rcp
        x = 1 / fr[0]
        sign_neg = vals[0] < 0
    return _zero(sign_neg) if x == 0 else round_fraction(x, fmt, mode)


def _split(a):
    """Veltkamp's split: hi + lo == a, each of at most 26 significant bits (|a| below 2^995: no overflow)."""
    c = a * 134217729.0                                  # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _two_sum(a, b):
    """Knuth's TwoSum: s = a + b rounded, and t with s + t == a + b exactly (finite values, no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fma64_rn(x, y, z):
    """fma.rn.f64 on float64 arrays: x * y + z rounded once, vectorized, with the lanes outside the method's
    range (non-finite values, zeros, magnitudes near overflow or underflow) done exactly one at a time.
    Method (Dekker's exact product, then Boldo and Melquiond's sum of three terms through round-to-odd): x * y = p
    + e exactly; z + p = th + tl exactly; v = tl + e rounded to odd (of the two neighbours of an inexact sum, the
    one whose last bit is 1); th + v rounded to nearest is then x * y + z rounded once."""
    with np.errstate(all="ignore"):
        p = x * y
        xh, xl = _split(x)
        yh, yl = _split(y)
        e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
        th, tl = _two_sum(z, p)
        v, err = _two_sum(tl, e)
        even = (v.view(np.int64) & 1) == 0
        v = np.where((err != 0) & even, np.nextafter(v, np.where(err > 0, np.inf, -np.inf)), v)
        r = th + v
        ax, ay, az, ap, ar = (np.abs(t) for t in (x, y, z, p, r))
        safe = (np.isfinite(r) & (ax < 2.0 ** 995) & (ay < 2.0 ** 995) & (az < 2.0 ** 1020) & (ap < 2.0 ** 1020)
                & (ap > 2.0 ** -960) & ((az > 2.0 ** -960) | (az == 0)) & (ar > 2.0 ** -960))
    return r, safe


def _in_float64(kind: str, ops, shape):
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(FLOAT64[kind](ops), np.float64), shape)


def rounded(kind: str, ops, fmt: str, mode: str = "rn"):
    """The result of `kind` (add, sub, mul, fma, div, rcp, sqrt) on float64 arrays holding values of format fmt
    (f32 or f64), rounded once in `mode`, as an array of that format."""
    ops = [np.asarray(o, np.float64) for o in ops]
    shape = np.broadcast_shapes(*[o.shape for o in ops])
    if kind == "fma" and fmt == "f64" and mode == "rn":  # no wider type to round from: error-free transformations
        out, safe = _fma64_rn(*(np.broadcast_to(o, shape).reshape(-1) for o in ops))
        lanes = np.flatnonzero(~safe)                    # outside their range (zeros, extremes): exactly, below
    elif mode == "rn":
        r64 = _in_float64(kind, ops, shape)
        if fmt == "f64":
            return r64
        with np.errstate(all="ignore"):
            out = r64.astype(np.float32)
        if kind != "fma":
            return out
        # float64 rounded fma's exact sum once; rounding it again is wrong only where it sits on a float32 midpoint
        with np.errstate(all="ignore"):
            other = np.nextafter(out, np.where(r64 > out, np.float32(np.inf), np.float32(-np.inf)))
            mid = (r64 != out) & np.isfinite(r64) & (r64 == (out.astype(np.float64) + other.astype(np.float64)) / 2)
        if not mid.any():
            return out
        lanes = np.flatnonzero(mid)
    else:
        with np.errstate(all="ignore"):
            out = _in_float64(kind, ops, shape).astype(DTYPE[fmt])
        lanes = np.arange(out.size)
    out = np.array(out).reshape(-1)
    flat = [np.broadcast_to(o, shape).reshape(-1) for o in ops]
    out[lanes] = np.array([_lane(kind, [float(o[i]) for o in flat], fmt, mode) for i in lanes], np.float64)
    return out.reshape(shape)


def int_to_float(values, fmt: str, mode: str):
    """Integers (any numpy integer array) converted to format fmt in mode, exactly (cvt.{rn,rz,rm,rp}.f32.s32 ...)."""
    v = np.asarray(values)
    flat = v.reshape(-1)
    out = np.array([0.0 if int(i) == 0 else round_fraction(Fraction(int(i)), fmt, mode) for i in flat], np.float64)
    return out.astype(DTYPE[fmt]).reshape(v.shape)


def float_to_float(values, fmt: str, mode: str):
    """Float values (float64 array holding exact values) rounded to format fmt in mode (cvt.rz.f32.f64 ...)."""
    v = np.asarray(values, np.float64)
    if mode == "rn":
        return v.astype(DTYPE[fmt])
    flat = v.reshape(-1)
    out = np.array([x if (not math.isfinite(x) or x == 0) else round_fraction(Fraction(float(x)), fmt, mode)
                    for x in flat], np.float64)
    return out.astype(DTYPE[fmt]).reshape(v.shape)
