"""Grader of mx_quantize: python practice/judge.py check mx_quantize

The three functions are called directly through the Python flow (judge.grading.cpu_flow) and
compared bit for bit (element codes, scale codes, packed bytes, tensor scale) with judge.hw.formats,
which rounds exactly (once, in float64). First one case per rule of the statement (FP4 and FP8
ties, saturation, zero and NaN blocks, +Inf and -Inf, block maxima just below a power of two,
subnormals, the clamp of the scale, NVFP4's tensor scale beside NaN and Inf, an all-zero tensor,
random normal and Student-t data), then float32 tensors drawn per run (any float32, NaN and Inf
included). A failure names the element (its input, both codes and what they decode to) or the
block of the scale, and the rule it is about.
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import formats as F

KEYS = {"quantize_mxfp8": ("codes", "scales"), "quantize_mxfp4": ("packed", "scales"),
        "quantize_nvfp4": ("packed", "scales", "tensor_scale")}
RULES = {
    "scale": "MX scale: e = floor(log2(amax)) - emax (8 for E4M3, 2 for E2M1), clamped to [-127, 127], code e + 127; "
             "an all-zero block: code 0",
    "nonfinite": "a block holding a NaN, +Inf or -Inf: scale code 255 (NVFP4: 0x7F), element codes 0",
    "log2": "floor(log2(amax)) must be exact: floating-point log2 (float32 above all) rounds up just below a power "
            "of two, one binade too many; math.frexp(amax)[1] - 1 is exact",
    "nvfp4": "NVFP4: tensor_scale = float32(amax / (448 * 6)) over the finite elements only (NaN and Inf ignored; "
             "1.0 where that is 0: an all-zero tensor, or one whose amax / 2688 underflows); block scale = E4M3(amax_block / 6 / tensor_scale), ties to even, saturating",
    "round": "elements round to the nearest value of the format, ties to even (FP4: 0.25->0, 0.75->1, 1.25->1, "
             "1.75->2, 2.5->2, 3.5->4, 5->4); subnormals kept; the reference rounds once, exactly (a float32 step "
             "on the way, as ml_dtypes before 0.7 takes, rounds twice)",
    "saturate": "an element beyond the format's max after scaling saturates to +-max (448 for E4M3, 6 for E2M1); "
                "the floor rule makes that happen",
    "pack": "byte i = code[2i] in bits 0-3 | code[2i+1] in bits 4-7",
    "double": "the value to round lies just off a tie: rounded to float32 first (ml_dtypes before 0.7 does so "
              "when casting a float64), it lands on the tie and goes to even (double rounding); the rule rounds once, exactly: round in float64, "
              "then encode",
    "sign": "an element's code carries the sign of x, zeros included: -0.0, or a negative x that rounds to 0, is the "
            "negative zero (0x80 in E4M3, 0x8 in E2M1); NaN/Inf blocks and NVFP4 blocks of scale 0 hold code 0",
}


def reference(name, x):
    if name == "quantize_mxfp8":
        q = F.mx_quantize(x, "e4m3")
        return (q.codes, q.scales)
    if name == "quantize_mxfp4":
        q = F.mx_quantize(x, "e2m1")
        return (F.pack_fp4(q.codes), q.scales)
    n = F.nvfp4_quantize(x)
    return (F.pack_fp4(n.codes), n.scales, n.tensor_scale)


def _block_size(name):
    return 16 if name == "quantize_nvfp4" else 32


def _below_power_of_two(a: float) -> bool:
    return a > 0 and math.isfinite(a) and math.frexp(float(np.nextafter(np.float32(a), np.float32(np.inf))))[0] == 0.5


def _first_difference(name, x, got):
    """(headline, rule keys) of the first difference from the reference, or None when all agree."""
    want = reference(name, x)
    keys = KEYS[name]
    if not isinstance(got, (tuple, list)) or len(got) != len(want):
        return (f"must return a tuple of {len(want)} ({', '.join(keys)}), got {checks.show(got)}", [])
    # a wrong tensor scale explains wrong block scales, and a wrong block scale wrong elements
    order = sorted(range(len(keys)), key=lambda i: ("tensor_scale", "scales").index(keys[i])
                   if keys[i] in ("tensor_scale", "scales") else 2)
    for i in order:
        key, g, w = keys[i], got[i], want[i]
        if key == "tensor_scale":
            if flow.same(g, w) is not None:
                how = ("float32(amax / (448 * 6)) with amax over the finite elements" if w != 1 or np.float32(
                    np.max(np.abs(np.where(np.isfinite(x), x, 0))) / 2688.0) == 1 else
                    "1.0, because float32(amax / (448 * 6)) is 0 here (no finite nonzero element, or it underflows)")
                return (f"tensor_scale {checks.show(g)}, expected {checks.show(w)} = {how}", ["nvfp4"])
            continue
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype.kind not in "iu":
            return (f"{key} is {checks.show(g, 80)}: expected an integer array of shape {w.shape}", [])
        bad = np.flatnonzero(g.astype(np.int64) != w.astype(np.int64))
        if len(bad):
            j = int(bad[0])
            text, rules = _describe(name, key, x, j, int(g[j]), int(w[j]))
            return (f"{text} ({len(bad)} of {len(w)} {key} differ)", rules)
    return None


def _double_rounded(v: float, fmt: str) -> bool:
    """Whether rounding v through float32 first (what ml_dtypes before 0.7 does with a float64) changes its rounding."""
    return bool(F.round_to_element(v, fmt) != F.round_to_element(float(np.float32(v)), fmt))


def _nvfp4_values(x, i):
    """(amax_block / 6 / ts, the block's scale value * ts) of NVFP4 block i, in float64 as the rule computes them."""
    n = F.nvfp4_quantize(x)
    ts = np.float64(n.tensor_scale)
    blk = np.asarray(x[i * 16:(i + 1) * 16], dtype=np.float64)
    amax = float(np.max(np.abs(np.where(np.isfinite(blk), blk, 0.0))))
    return amax / 6.0 / ts, float(F.decode(n.scales[i], "e4m3")) * ts


def _describe(name, key, x, i, got, want):
    size = _block_size(name)
    if key == "scales":
        blk = np.asarray(x[i * size:(i + 1) * size], dtype=np.float64)
        finite = blk[np.isfinite(blk)]
        amax = float(np.max(np.abs(finite))) if len(finite) else 0.0
        rules = ["scale"] if name != "quantize_nvfp4" else ["nvfp4"]
        if not np.isfinite(blk).all():
            rules = ["nonfinite"]
            what = "holds " + ", ".join(sorted({repr(float(v)) for v in blk[~np.isfinite(blk)]}))
        else:
            what = f"amax {amax!r}"
            if _below_power_of_two(amax) and name != "quantize_nvfp4" and got == want + 1:
                rules.append("log2")
            if name == "quantize_nvfp4" and _double_rounded(_nvfp4_values(x, i)[0], "e4m3"):
                rules.append("double")
        return (f"scale of block {i} (elements {i * size}..{(i + 1) * size - 1}, {what}) is {got}, expected {want}",
                rules)
    if key == "packed":
        (glo, ghi), (wlo, whi) = (got & 0xF, got >> 4), (want & 0xF, want >> 4)
        if (glo, ghi) == (whi, wlo):
            return (f"byte {i} is {got:#04x}, expected {want:#04x}: the nibbles are swapped; element {2 * i} goes "
                    f"in the low nibble, element {2 * i + 1} in the high one", ["pack"])
        e = 2 * i if glo != wlo else 2 * i + 1
        gc, wc = (glo, wlo) if e == 2 * i else (ghi, whi)
        dec = lambda c: float(F.decode(np.uint8(c), "e2m1"))  # noqa: E731
        return (f"element {e} (x = {float(x[e])!r}, byte {i}, {'low' if e == 2 * i else 'high'} nibble) has code "
                f"{gc:#x} = {dec(gc)!r}, expected {wc:#x} = {dec(wc)!r} (times the block's scale)",
                ["sign"] if gc ^ wc == 0x8 else _element_rules(name, x, e, "e2m1"))
    dec = lambda c: float(F.decode(np.uint8(c), "e4m3"))  # noqa: E731
    return (f"element {i} (x = {float(x[i])!r}, block {i // 32}) has code {got:#04x} = {dec(got)!r}, expected "
            f"{want:#04x} = {dec(want)!r} (times the block's scale)",
            ["sign"] if got ^ want == 0x80 else _element_rules(name, x, i, "e4m3"))


def _element_rules(name, x, i, fmt):
    size = _block_size(name)
    blk = np.asarray(x[(i // size) * size:(i // size + 1) * size], dtype=np.float64)
    if not np.isfinite(blk).all():
        return ["nonfinite"]
    rules = ["round"]
    if name == "quantize_nvfp4":
        _, scale = _nvfp4_values(x, i // size)
        if scale > 0 and _double_rounded(float(x[i]) / scale, fmt):
            rules.append("double")
    else:
        amax = float(np.max(np.abs(blk)))
        if amax > 0 and abs(float(x[i])) / 2.0 ** int(F.scale_exponent(amax, fmt)) > F.ELEMENTS[fmt].max:
            rules = ["saturate"]
    return rules


def _validate(name):
    def validate(call, got):
        d = _first_difference(name, call.args[0], got)
        return d[0] if d else None
    return validate


def _explain(name):
    def explain(call, got, want):
        d = _first_difference(name, call.args[0], got)
        return [RULES[k] if k == "double" else f"the rule: {RULES[k]}" for k in (d[1] if d else [])]
    return explain


def _pad(v, n=32):
    v = np.asarray(v, dtype=np.float64)
    return np.concatenate([v, np.zeros(-len(v) % n)])


def _cases():
    rng = np.random.default_rng(2024)
    fp4_ties = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0]
    fp8_ties = [448.0, 1.0625, 1.1875, 17.0, 19.0, 0.0068359375, -1.0625, -19.0, 240.0 + 8, 3 * 2.0 ** -10]
    sub = np.zeros(32)
    sub[:6] = [448.0, 2.0 ** -8, 3 * 2.0 ** -10, 2.0 ** -11, -(2.0 ** -9), 5 * 2.0 ** -11]
    zero_nan = np.concatenate([np.zeros(32), rng.standard_normal(32), rng.standard_normal(32)])
    zero_nan[70] = np.nan
    inf = rng.standard_normal(64)
    inf[5] = np.inf
    ninf = rng.standard_normal(96)
    ninf[33] = -np.inf
    ninf[64:] = -np.inf                               # a block of -Inf only
    below = rng.uniform(-1, 1, (6, 32))
    for b, k in enumerate((4, 8, 9, 12, -10, 100)):   # each block's amax the float32 just below 2^k
        top = np.nextafter(np.float32(2.0 ** k), np.float32(0))
        below[b] *= float(top) / 2
        below[b, 3 * b] = float(top) * (-1) ** b
    mixed = rng.standard_normal(96) * 3
    mixed[10], mixed[40], mixed[41], mixed[80] = np.nan, np.inf, -np.inf, 1000.0
    negz = np.zeros(64)
    negz[:32] = -0.0                                  # a zero block of negative zeros
    negz[32:35] = [1.0, -1e-6, -0.0]                  # a negative value that rounds to zero, and a -0.0
    off_tie = np.zeros(64)                            # NVFP4: 2.375 / 6 / float32(448 / 2688) lies just below
    off_tie[0], off_tie[16] = 448.0, 2.375            # the E4M3 tie 2.375: exactly, 2.25; through float32, 2.5
    off_tie[32:48] = [448.0, 2.5 * 448 / 6 * (1 + 2.0 ** -22)] + [0.0] * 14
    wide = np.concatenate([rng.standard_normal(32) * s for s in (1e-30, 1e30, 3e-39, 1e38, 1e-3)])
    return [
        ("FP4 ties", "round", _pad(fp4_ties)),
        ("FP8 ties", "round", _pad(fp8_ties)),
        ("saturation", "saturate",
         np.concatenate([np.full(32, 470.0), np.full(32, 7.5), np.array([500.0, -500.0, 1.0] + [0.5] * 29)])),
        ("zero and NaN blocks", "nonfinite", zero_nan),
        ("an Inf", "nonfinite", inf),
        ("a -Inf, and a block of -Inf only", "nonfinite", ninf),
        ("block maxima just below a power of two", "log2", below.ravel()),
        ("NaN and Inf beside the largest finite value", "nvfp4", mixed),
        ("an all-zero tensor", "nvfp4", np.zeros(64)),
        ("a tensor so tiny that amax / 2688 underflows float32", "nvfp4", np.array([1e-45, -3e-45] + [0.0] * 30)),
        ("subnormals", "round", sub),
        ("negative zeros", "sign", negz),
        ("an NVFP4 block scale just off an E4M3 tie", "double", off_tie),
        ("wide range", "scale", wide),
        ("random normal", "round", rng.standard_normal(1024)),
        ("heavy tails", "round", rng.standard_t(3, 1024)),
    ]


def _edges():
    return [flow.Edge((np.asarray(x, dtype=np.float32),), f"{case} (about: {rule})") for case, rule, x in _cases()]


BELOW_POW2 = st.integers(-126, 127).map(lambda k: float(np.nextafter(np.float32(2.0 ** k), np.float32(0))))
ELEMENT = st.one_of(st.floats(width=32), st.floats(-8, 8, width=32), st.integers(-24, 24).map(lambda i: i / 4),
                    BELOW_POW2, BELOW_POW2.map(lambda v: -v))
ANY_TENSOR = st.integers(1, 4).flatmap(lambda m: hnp.arrays(np.float32, 32 * m, elements=ELEMENT))


@st.composite
def _with_specials(draw):
    """A tensor of finite values with one to three NaN, +Inf or -Inf put in (beside finite ones in their block)."""
    x = draw(ANY_TENSOR.map(lambda a: np.where(np.isfinite(a), a, np.float32(1.0))))
    for _ in range(draw(st.integers(1, 3))):
        x[draw(st.integers(0, len(x) - 1))] = draw(st.sampled_from([np.inf, -np.inf, np.nan]))
    return x

@st.composite
def _minus_inf_only(draw):
    """A finite tensor with -Inf put into one block (one to three times) and no NaN or +Inf beside it: a block
    whose only non-finite element is -Inf, which a test for NaN and +Inf alone lets through."""
    x = draw(ANY_TENSOR.map(lambda a: np.where(np.isfinite(a), a, np.float32(1.0))))
    b = draw(st.integers(0, len(x) // 16 - 1))
    for _ in range(draw(st.integers(1, 3))):
        x[16 * b + draw(st.integers(0, 15))] = -np.inf
    return x


#: the points halfway between neighbouring magnitudes of each element format: where rounding ties
MIDPOINTS = {fmt: (lambda g: (g[1:] + g[:-1]) / 2)(F.decode(np.arange(n, dtype=np.uint8), fmt))
             for fmt, n in (("e4m3", 0x7F), ("e2m1", 8))}


@st.composite
def _ties(draw):
    """Blocks of exact ties: the format's max (which fixes the scale at 2^k) and 31 midpoints, times 2^k."""
    fmt = draw(st.sampled_from(sorted(MIDPOINTS)))
    mids, blocks = MIDPOINTS[fmt], []
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(-100, 100))
        idx = draw(st.lists(st.integers(0, len(mids) - 1), min_size=31, max_size=31))
        signs = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=31, max_size=31))
        blocks.append(np.array([F.ELEMENTS[fmt].max] + [s * mids[i] for s, i in zip(signs, idx)]) * 2.0 ** k)
    return np.concatenate(blocks).astype(np.float32)


@st.composite
def _nvfp4_near_ties(draw):
    """Blocks of 16 whose other elements sit just off an E2M1 tie once divided by their NVFP4 scale: each is
    float32(midpoint * scale), and the scale (an E4M3 value times a float32 tensor scale) is rarely a power
    of two, so x / scale in float64 misses the midpoint by less than half a float32 ulp. Rounded once it goes
    to the side it lies on; rounded through float32 first it lands on the tie and goes to even ("double")."""
    x = draw(hnp.arrays(np.float32, 32 * draw(st.integers(1, 4)), elements=st.floats(-8, 8, width=32)))
    x[0] = np.float32(draw(st.floats(1, 8, width=32)))         # a finite tensor amax, never zero
    q = F.nvfp4_quantize(x)
    mids = MIDPOINTS["e2m1"]
    for b in range(len(x) // 16):
        blk = x[16 * b:16 * b + 16]
        amax = float(np.max(np.abs(blk)))
        scale = float(F.decode(q.scales[b], "e4m3")) * float(q.tensor_scale)
        if scale == 0.0:
            continue
        top = int(np.argmax(np.abs(blk)))
        for i in range(16):
            m = mids[draw(st.integers(0, len(mids) - 1))] * draw(st.sampled_from([-1.0, 1.0]))
            v = np.float32(m * scale)
            if i != top and abs(float(v)) < amax:                # the block's amax, and so its scale, stay
                blk[i] = v
    return x


#: tensors of float32 subnormals and zeros only: NVFP4's amax / 2688 underflows there
#: (below 2688 x 2^-150, half the smallest float32 subnormal times 2688, so even the largest rounds to 0; one
#: element is set to +-TINY so the tensor is never all zeros, which has a rule of its own)
TINY = float(np.float32(1e-42))
SUBNORMAL_TENSOR = st.tuples(st.integers(1, 2), st.integers(0, 63), st.sampled_from([-TINY, TINY])).flatmap(
    lambda t: hnp.arrays(np.float32, 32 * t[0], elements=st.floats(-TINY, TINY, width=32)).map(
        lambda a: np.where(np.arange(a.size) == t[1] % a.size, np.float32(t[2]), a)))
TENSOR = st.one_of(ANY_TENSOR, _with_specials(), _minus_inf_only(), _ties(), _nvfp4_near_ties(),
                   SUBNORMAL_TENSOR).map(lambda x: (x,))

FUNCTIONS = [flow.Function(name, reference=(lambda x, name=name: reference(name, x)), args=TENSOR, edges=_edges(),
                           validate=_validate(name), explain=_explain(name), examples=100)
             for name in KEYS]


def check(sub):
    return flow.run(sub, FUNCTIONS, checked=["one case per rule: " + ", ".join(case for case, _, _ in _cases()),
                                             "float32 tensors of 32..128 elements drawn per run, NaN and Inf included"])
