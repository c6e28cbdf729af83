"""e8m0.py - choose the E8M0 scale of an MX block and dequantize with it (chapter 5).

An MX block is 32 elements (E4M3, E5M2, E3M2, E2M3 or E2M1) that share one scale 2^e, stored as
an E8M0 byte: code = e + 127, code 255 = NaN; no sign, no mantissa, no zero.
Check it: python practice/judge.py check e8m0_scale   (README.md has the rules and examples)
"""
import math

import ml_dtypes
import numpy as np

# emax: the exponent of the element format's largest binade, floor(log2(max)).
EMAX = {"e4m3": 8, "e5m2": 15, "e3m2": 4, "e2m3": 2, "e2m1": 2}
DTYPE = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e3m2": ml_dtypes.float6_e3m2fn,
         "e2m3": ml_dtypes.float6_e2m3fn, "e2m1": ml_dtypes.float4_e2m1fn}


def e8m0_code(amax, fmt):
    """The E8M0 code of a block whose largest magnitude is amax, by the OCP MX rule:
    e = floor(log2(amax)) - EMAX[fmt], clamped to [-127, 127]; code = e + 127.
    amax = 0 -> code 0; amax NaN or Inf -> code 255."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("e8m0_code: floor(log2(amax)) minus the element's emax, clamped, plus the bias")
    if math.isnan(amax) or math.isinf(amax):
        return 255
    if amax == 0:
        return 0
    e = math.frexp(amax)[1] - 1 - EMAX[fmt]      # frexp: amax = m * 2^k, 0.5 <= m < 1: floor(log2) = k - 1
    return max(-127, min(127, e)) + 127
    # END SOLUTION


def e8m0_value(code):
    """The scale an E8M0 code stands for: 2^(code - 127); code 255 is NaN."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("e8m0_value: 2^(code - 127), and one code is NaN")
    return math.nan if code == 255 else 2.0 ** (code - 127)
    # END SOLUTION


def dequantize(codes, scales, fmt, block=32):
    """Element codes (uint8 array, one per element) and E8M0 scale codes (one per block of `block`
    elements) -> float64 values: element value times its block's scale (NaN scale: all NaN)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("dequantize: decode the elements (ml_dtypes), multiply each block by its scale")
    vals = np.asarray(codes, dtype=np.uint8).view(DTYPE[fmt]).astype(np.float64)
    s = np.array([e8m0_value(int(c)) for c in np.asarray(scales).ravel()]).reshape(np.shape(scales))
    return (vals.reshape(*vals.shape[:-1], -1, block) * s[..., None]).reshape(vals.shape)
    # END SOLUTION
