"""Grader of e8m0_scale: python practice/judge.py check e8m0_scale

Each of the three functions is called directly, through the Python flow (judge.grading.cpu_flow),
and compared with judge.hw.formats (the chapter's reference, itself tested against ml_dtypes):
1. e8m0_code(amax, fmt): the statement's edge cases on every element format (powers of two, the
   doubles just below and above them, each format's max, subnormal amax, 0, NaN, Inf, magnitudes
   beyond the E8M0 range), then amax drawn per run;
2. e8m0_value(code) for all 256 codes;
3. dequantize(codes, scales, fmt, block): quantized tensors with zero, NaN and subnormal blocks at
   blocks of 32, 16 and 64, then codes, scales, shapes and block sizes drawn per run.
A failure names the call, both values and the rule that gives the expected one.
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from judge.grading import cpu_flow as flow
from judge.hw import formats as F

FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"]


# ----------------------------------------------------------------------------- e8m0_code
def code_ref(amax, fmt):
    """OCP MX v1.0: floor(log2(amax)) - emax, clamped to [-127, 127], + 127; 0 for 0; 255 for NaN/Inf."""
    if math.isnan(amax) or math.isinf(amax):
        return 255
    if amax == 0:
        return 0
    return int(F.scale_exponent(amax, fmt, "floor")) + 127


def _just_below_power_of_two(amax) -> bool:
    return amax > 0 and math.isfinite(amax) and math.frexp(math.nextafter(amax, math.inf))[0] == 0.5


def code_why(call, got, want):
    amax, fmt = call.args[:2]
    if math.isnan(amax) or math.isinf(amax):
        return "a NaN or an Inf in the block makes the scale NaN: code 255 (E8M0 has no Inf)"
    if amax == 0:
        return "an all-zero block gets code 0 (floor(log2(0)) = -inf, clamped to -127)"
    fl = math.frexp(amax)[1] - 1
    emax = F.ELEMENTS[fmt].emax
    e = want - 127
    clamp = "" if e == fl - emax else f", clamped to {e}"
    out = [f"OCP floor rule: floor(log2({amax!r})) = {fl}, minus emax {emax} of {fmt.upper()} = {fl - emax}{clamp}; "
           f"code = {e} + 127 = {want}"]
    if _just_below_power_of_two(amax) and flow.same(got, want + 1) is None:
        out.append(f"{amax!r} is the double just below 2^{fl + 1}: floating-point log2 rounds it up to {fl + 1}.0, "
                   f"one too many (log2 is off by one just below a power of two); math.frexp(amax)[1] - 1 is exact")
    if flow.same(got, want - 1) is None and math.isfinite(amax) and fl - emax >= -127:
        out.append("one binade too low: the no-overflow rule (amax / scale <= max) is not the OCP floor rule")
    if isinstance(got, (int, np.integer)) and not 0 <= int(got) <= 255:
        out.append("an E8M0 code is one byte, 0..255: clamp e to [-127, 127] before adding the bias")
    return out


def _amax_cases(fmt):
    e = F.ELEMENTS[fmt]
    vals = [0.0, math.nan, math.inf, e.max, e.max * 1.01, 1.0, 0.75, 3.0, 1e-3, 6e4, 1e30, 1e-30,
            1e-300, 1e300, 2.0 ** -140, 2.0 ** 140, 2.0 ** -127, 2.0 ** 127, 5e-324, 2.0 ** -1022 * 0.75,
            math.nextafter(e.max, 0.0), float(np.finfo(np.float64).max)]
    for k in (-1022, -126, -20, -3, 0, 1, 2, 3, 8, 9, 15, 16, 40, 127, 128, 1023):
        p = 2.0 ** k
        vals += [p, math.nextafter(p, 0.0), math.nextafter(p, math.inf)]
    return [flow.Edge((v, fmt), f"{fmt}, amax {v!r}") for v in vals]


def _powers_of_two_and_neighbours():
    return st.tuples(st.integers(-1074, 1023), st.sampled_from([-1, 0, 1])).map(
        lambda kd: [math.nextafter(2.0 ** kd[0], 0.0), 2.0 ** kd[0], math.nextafter(2.0 ** kd[0], math.inf)][kd[1] + 1])


AMAX = st.one_of(st.floats(min_value=0.0, allow_nan=False, allow_infinity=True), _powers_of_two_and_neighbours(),
                 st.just(math.nan))

E8M0_CODE = flow.Function(
    "e8m0_code", reference=code_ref, explain=code_why,
    args=st.tuples(AMAX, st.sampled_from(FORMATS)),
    edges=[c for fmt in FORMATS for c in _amax_cases(fmt)])


# ----------------------------------------------------------------------------- e8m0_value
def value_ref(code):
    return float(F.e8m0_decode(code))


E8M0_VALUE = flow.Function(
    "e8m0_value", reference=value_ref,
    explain=lambda call, got, want: ("code 255 is NaN: E8M0 has no Inf" if call.args[0] == 255
                                     else f"2^({call.args[0]} - 127) = 2^{call.args[0] - 127}"),
    edges=[flow.Edge((c,), "every code") for c in range(256)])


# ----------------------------------------------------------------------------- dequantize
def dequantize_ref(codes, scales, fmt, block=32):
    return F.MXTensor(np.asarray(codes, dtype=np.uint8), np.asarray(scales, dtype=np.uint8), fmt, block,
                      "floor", "saturate").dequantize()


def dequantize_why(call, got, want):
    codes, scales, fmt = call.args[:3]
    block = call.kwargs.get("block", call.args[3] if len(call.args) > 3 else 32)
    out = [f"element [r, c] is the element value of codes[r, c] ({fmt.upper()}) times the scale of its block, "
           f"scales[r, c // {block}]"]
    try:
        g = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return out
    if g.shape != want.shape:
        return out
    bad = np.argwhere(~((g == want) | (np.isnan(g) & np.isnan(want))))
    if len(bad):
        r, c = map(int, bad[0])
        sc = int(scales[r, c // block])
        out.append(f"element [{r}, {c}]: code {int(codes[r, c]):#04x} = {float(F.decode(codes[r, c], fmt))!r} "
                   f"x scale code {sc} = {float(F.e8m0_decode(sc))!r}"
                   + (" (code 255: the whole block is NaN)" if sc == 255 else ""))
        if block != 32:
            out.append(f"this call's block is {block}, not the default 32: use the block argument")
    return out


def _quantized(fmt, block, rows, cols, seed, tweak):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-3, 3, (rows, 1))
    tweak(x)
    q = F.mx_quantize(x, fmt, block=block)
    return q.codes, q.scales


def _zero_nan_subnormal(block):
    def tweak(x):
        x[1, :block] = 0.0                          # an all-zero block: scale code 0
        x[2, block + 3] = np.nan                    # a NaN block: scale code 255
        x[3, :block] *= 1e-38                       # a block of tiny values: small scale, subnormal codes
        x[0, 1] = np.inf
    return tweak


def _dequantize_edges():
    out = []
    for i, fmt in enumerate(FORMATS):
        codes, scales = _quantized(fmt, 32, 4, 128, 11 + i, _zero_nan_subnormal(32))
        out.append(flow.Edge((codes, scales, fmt), f"{fmt}, blocks of 32 (the default), with an Inf, a zero, a NaN "
                                                    f"and a tiny block"))
        for block in (16, 64):
            codes, scales = _quantized(fmt, block, 4, 128, 31 + i, _zero_nan_subnormal(block))
            out.append(flow.Edge(flow.Args(codes, scales, fmt, block=block),
                                 f"{fmt}, blocks of {block}: a block size other than 32"))
    sub = np.zeros((1, 32), dtype=np.uint8)
    sub[0, :8] = np.arange(8)                       # E4M3 codes 0..7: zero and the subnormals
    out.append(flow.Edge((sub, np.array([[127]], dtype=np.uint8), "e4m3"), "E4M3 subnormal element codes"))
    return out


@st.composite
def _dequantize_inputs(draw):
    fmt = draw(st.sampled_from(FORMATS))
    block = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    rows, nblocks = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    bits = F.ELEMENTS[fmt].bits
    codes = draw(hnp.arrays(np.uint8, (rows, nblocks * block), elements=st.integers(0, (1 << bits) - 1)))
    scales = draw(hnp.arrays(np.uint8, (rows, nblocks), elements=st.integers(0, 255)))
    if block == 32 and draw(st.booleans()):
        return (codes, scales, fmt)
    return flow.Args(codes, scales, fmt, block=block)


DEQUANTIZE = flow.Function(
    "dequantize", reference=dequantize_ref, explain=dequantize_why, args=_dequantize_inputs(),
    edges=_dequantize_edges())


def check(sub):
    return flow.run(sub, [E8M0_CODE, E8M0_VALUE, DEQUANTIZE],
                    checked=["e8m0_code: powers of two and their neighbours, each format's max, subnormal, "
                             "0, NaN, Inf, beyond the E8M0 range, on every format",
                             "e8m0_value: codes 0..255",
                             "dequantize: zero, NaN, Inf and tiny blocks at blocks of 32, 16 and 64"])
