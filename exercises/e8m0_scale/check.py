"""Grader of e8m0_scale: python practice/judge.py check e8m0_scale

Three parts, each against judge.hw.formats (the chapter's reference, itself tested against ml_dtypes):
1. e8m0_code(amax, fmt) for every element format on amax values chosen at the edges: powers of
   two, the doubles just below and above them, each format's max, 0, NaN, Inf, and magnitudes
   beyond the E8M0 range (the clamp);
2. e8m0_value(code) for all 256 codes;
3. dequantize(codes, scales, fmt) on blocks quantized by judge.hw.formats, with a zero and a NaN block.
A failure names the format, the value and the rule that gives the expected code.
"""
import math

import numpy as np

from judge.hw import formats as F
from judge.grading.result import Result, Verdict
from judge.grading.submission import learner_error

FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"]


def _amax_cases(fmt):
    e = F.ELEMENTS[fmt]
    vals = [0.0, math.nan, math.inf, e.max, e.max * 1.01, 1.0, 0.75, 3.0, 1e-3, 6e4, 1e30, 1e-30,
            1e-300, 1e300, 2.0 ** -140, 2.0 ** 140, 2.0 ** -127, 2.0 ** 127]
    for k in (-20, -3, 0, 1, 2, 3, 8, 9, 15, 16, 40):
        p = 2.0 ** k
        vals += [p, math.nextafter(p, 0.0), math.nextafter(p, math.inf)]
    rng = np.random.default_rng(7)
    vals += list(np.abs(rng.standard_normal(40)) * 10.0 ** rng.integers(-8, 8, 40))
    return vals


def _expected_code(amax, fmt):
    if math.isnan(amax) or math.isinf(amax):
        return 255, "a NaN or Inf in the block makes the scale NaN: code 255"
    if amax == 0:
        return 0, "an all-zero block gets code 0 (floor(log2(0)) = -inf, clamped to -127)"
    e = int(F.scale_exponent(amax, fmt, "floor"))
    fl = math.frexp(amax)[1] - 1
    emax = F.ELEMENTS[fmt].emax
    clamp = "" if e == fl - emax else f", clamped to {e}"
    return e + 127, (f"OCP floor rule: floor(log2({amax!r})) = {fl}, minus emax {emax} of {fmt.upper()} "
                     f"= {fl - emax}{clamp}; code = {e} + 127")


def check(sub) -> Result:
    mod = sub.learner_module("e8m0_code", "e8m0_value", "dequantize")
    n = 0
    for fmt in FORMATS:
        sub.progress(f"e8m0_code for {fmt}")
        for amax in _amax_cases(fmt):
            want, why = _expected_code(amax, fmt)
            try:
                got = mod.e8m0_code(amax, fmt)
            except Exception as e:  # noqa: BLE001
                return Result(Verdict.WRONG, learner_error(e, f"e8m0_code({amax!r}, {fmt!r})"))
            n += 1
            if got != want:
                return Result(Verdict.WRONG, f"e8m0_code({amax!r}, {fmt!r}) returned {got!r}, expected {want}",
                              details=[why])
    sub.progress("e8m0_value for all 256 codes")
    for code in range(256):
        want = float(F.e8m0_decode(code))
        try:
            got = mod.e8m0_value(code)
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"e8m0_value({code})"))
        same = (math.isnan(want) and isinstance(got, float) and math.isnan(got)) or got == want
        if not same:
            rule = "code 255 is NaN: E8M0 has no Inf" if code == 255 else f"2^({code} - 127) = 2^{code - 127}"
            return Result(Verdict.WRONG, f"e8m0_value({code}) returned {got!r}, expected {want!r}", details=[rule])

    rng = np.random.default_rng(11)
    for fmt in FORMATS:
        sub.progress(f"dequantize {fmt}")
        x = rng.standard_normal((4, 128)) * 10.0 ** rng.integers(-3, 3, (4, 1))
        x[1, :32] = 0.0
        x[2, 70] = np.nan
        q = F.mx_quantize(x, fmt)
        want = q.dequantize()
        try:
            got = np.asarray(mod.dequantize(q.codes, q.scales, fmt), dtype=np.float64)
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"dequantize(codes, scales, {fmt!r})"))
        if got.shape != want.shape:
            return Result(Verdict.WRONG, f"dequantize returned shape {got.shape}, expected {want.shape}")
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        if bad.any():
            r, c = map(int, np.argwhere(bad)[0])
            code, sc = int(q.codes[r, c]), int(q.scales[r, c // 32])
            elem = float(F.decode(np.uint8(code), fmt))
            return Result(Verdict.WRONG, f"{fmt}: element [{r}, {c}] (block {c // 32}, code {code:#04x}, scale code "
                                         f"{sc}) dequantized to {got[r, c]!r}, expected {want[r, c]!r}",
                          details=[f"element value {elem!r} x scale {float(F.e8m0_decode(sc))!r}"
                                   + (" (code 255: the whole block is NaN)" if sc == 255 else "")])
    return Result(Verdict.PASS, f"{n} scale choices, all 256 codes and 5 dequantized tensors agree with the "
                                f"OCP MX rules",
                  checked=[f"e8m0_code on {n} (amax, format) pairs", "e8m0_value on codes 0..255",
                           "dequantize on E4M3, E5M2, E3M2, E2M3, E2M1 tensors with zero and NaN blocks"])
