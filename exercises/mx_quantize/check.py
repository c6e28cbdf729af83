"""Grader of mx_quantize: python practice/judge.py check mx_quantize

Every function is compared bit for bit (element codes, scale codes, packed bytes, tensor scale)
with judge.hw.formats under the rules the statement names (OCP floor scale, round to nearest even,
saturation, zero and NaN blocks, subnormals, element 2i in the low nibble), on one case per rule
and on random tensors. A failure names the case, the rule it is about, the element and both codes.
"""
import numpy as np

from judge.hw import formats as F
from judge.grading.result import Result, Verdict
from judge.grading.submission import learner_error


def _cases():
    rng = np.random.default_rng(2024)
    pad = lambda v, n=32: np.concatenate([v, np.zeros(n - len(v) % n if len(v) % n else 0)])  # noqa: E731
    fp4_ties = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0]
    fp8_ties = [448.0, 1.0625, 1.1875, 17.0, 19.0, 0.0068359375, -1.0625, -19.0, 240.0 + 8, 3 * 2.0 ** -10]
    sub = np.zeros(32)
    sub[:6] = [448.0, 2.0 ** -8, 3 * 2.0 ** -10, 2.0 ** -11, -(2.0 ** -9), 5 * 2.0 ** -11]
    zero_nan = np.concatenate([np.zeros(32), rng.standard_normal(32), rng.standard_normal(32)])
    zero_nan[70] = np.nan
    inf = rng.standard_normal(64)
    inf[5] = np.inf
    wide = np.concatenate([rng.standard_normal(32) * s for s in (1e-30, 1e30, 3e-39, 1e38, 1e-3)])
    return [
        ("FP4 ties", "round to nearest, ties to even (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4)",
         pad(np.array(fp4_ties))),
        ("FP8 ties", "round to nearest, ties to even", pad(np.array(fp8_ties))),
        ("saturation", "floor scale: amax in [max, 2^(emax+1)) gives elements above max, saturated to +-max",
         np.concatenate([np.full(32, 470.0), np.full(32, 7.5), np.array([500.0, -500.0, 1.0] + [0.5] * 29)])),
        ("zero and NaN blocks", "an all-zero block: scale code 0, element codes 0; a NaN: NaN scale, element codes 0",
         zero_nan),
        ("an Inf", "an Inf makes its block's scale NaN, element codes 0", inf),
        ("subnormals", "elements below the smallest normal keep their subnormal codes", sub),
        ("wide range", "the scale exponent clamps to [-127, 127]", wide),
        ("random normal", "all rules", rng.standard_normal(4096)),
        ("heavy tails", "all rules", rng.standard_t(3, 4096)),
    ]


def _reference(name, x):
    if name == "quantize_mxfp8":
        q = F.mx_quantize(x, "e4m3")
        return {"codes": q.codes, "scales": q.scales}
    if name == "quantize_mxfp4":
        q = F.mx_quantize(x, "e2m1")
        return {"packed": F.pack_fp4(q.codes), "scales": q.scales}
    n = F.nvfp4_quantize(x)
    return {"packed": F.pack_fp4(n.codes), "scales": n.scales, "tensor_scale": n.tensor_scale}


def _describe(name, key, x, i, got, want):
    if key == "packed":
        g, w = int(got), int(want)
        (glo, ghi), (wlo, whi) = (g & 0xF, g >> 4), (w & 0xF, w >> 4)
        if (glo, ghi) == (whi, wlo):
            return (f"byte {i} is {g:#04x}, expected {w:#04x}: the nibbles are swapped; element {2 * i} "
                    f"goes in the low nibble, element {2 * i + 1} in the high one")
        e = 2 * i if glo != wlo else 2 * i + 1
        gc, wc = (glo, wlo) if e == 2 * i else (ghi, whi)
        dec = lambda c: float(F.decode(np.uint8(c), "e2m1"))  # noqa: E731
        return (f"element {e} (x = {float(x[e])!r}, byte {i}, {'low' if e == 2 * i else 'high'} nibble) has "
                f"code {gc:#x} = {dec(gc)!r}, expected {wc:#x} = {dec(wc)!r} (times the block's scale)")
    if key == "codes":
        return (f"element {i} (x = {float(x[i])!r}, block {i // 32}) has code {int(got):#04x} = "
                f"{float(F.decode(np.uint8(got), 'e4m3'))!r}, expected {int(want):#04x} = "
                f"{float(F.decode(np.uint8(want), 'e4m3'))!r} (times the block's scale)")
    size = 32 if name != "quantize_nvfp4" else 16
    blk = x[i * size:(i + 1) * size]
    return (f"scale of block {i} (elements {i * size}..{(i + 1) * size - 1}, amax "
            f"{float(np.max(np.abs(blk))):.6g}) is {int(got)}, expected {int(want)}")


def check(sub) -> Result:
    fns = ("quantize_mxfp8", "quantize_mxfp4", "quantize_nvfp4")
    mod = sub.learner_module(*fns)
    n = 0
    for case, rule, x in _cases():
        x = np.asarray(x, dtype=np.float32)
        for name in fns:
            sub.progress(f"{name}: {case}")
            want = _reference(name, x)
            try:
                got = getattr(mod, name)(x.copy())
            except Exception as e:  # noqa: BLE001
                return Result(Verdict.WRONG, learner_error(e, f"{name} on case '{case}'"))
            if not isinstance(got, tuple) or len(got) != len(want):
                return Result(Verdict.WRONG, f"{name} must return a tuple of {len(want)} "
                                             f"({', '.join(want)}), got {type(got).__name__}")
            order = sorted(zip(want.items(), got), key=lambda kv: kv[0][0] != "scales")
            for (key, w), g in order:
                if key == "tensor_scale":
                    if np.float32(g) != w:
                        return Result(Verdict.WRONG, f"{name}, case '{case}': tensor_scale {g!r}, expected {w!r} "
                                                     f"= float32(amax / (448 * 6))")
                    continue
                g = np.asarray(g)
                if g.shape != w.shape:
                    return Result(Verdict.WRONG, f"{name}, case '{case}': {key} has shape {g.shape}, "
                                                 f"expected {w.shape}")
                bad = np.flatnonzero(g.astype(np.int64) != w.astype(np.int64))
                if len(bad):
                    i = int(bad[0])
                    return Result(Verdict.WRONG, f"{name}, case '{case}': {_describe(name, key, x, i, g[i], w[i])}",
                                  details=[f"the rule this case is about: {rule}",
                                           f"{len(bad)} of {len(w)} {key} differ"])
            n += 1
    return Result(Verdict.PASS, f"MXFP8, MXFP4 and NVFP4 bit-exact on {n // 3} cases each",
                  checked=[f"{case}: {rule}" for case, rule, _ in _cases()])
