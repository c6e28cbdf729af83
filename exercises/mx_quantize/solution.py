"""mx.py - quantize a tensor to MXFP8 (E4M3), MXFP4 and NVFP4, bit for bit (chapter 5).

Each function takes a 1-D float32 array whose length is a multiple of 32 and returns the bytes a
Blackwell tensor core reads: element codes and scale codes. README.md states every rule.
Check it: python practice/judge.py check mx_quantize
"""
import math

import ml_dtypes
import numpy as np

E4M3_MAX, E2M1_MAX = 448.0, 6.0
EMAX = {"e4m3": 8, "e2m1": 2}
DTYPE = {"e4m3": ml_dtypes.float8_e4m3fn, "e2m1": ml_dtypes.float4_e2m1fn}
MAX = {"e4m3": E4M3_MAX, "e2m1": E2M1_MAX}
EMIN = {"e4m3": -6, "e2m1": 0}          # exponent of the lowest normal binade
MBITS = {"e4m3": 3, "e2m1": 1}


def to_codes(values, fmt):
    """float64 values -> element codes: saturate at +-max, then round once to nearest, ties to even.
    A float32 step on the way (ml_dtypes before 0.7 takes one) rounds twice: a value just above a tie
    lands on the tie, then goes to even. Round in float64 yourself, then let ml_dtypes encode."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("to_codes: saturate, then round once to nearest even, then encode (ml_dtypes)")
    v = np.clip(np.asarray(values, dtype=np.float64), -MAX[fmt], MAX[fmt])
    a = np.abs(v)
    k = np.frexp(np.where(a > 0, a, 1.0))[1] - 1              # floor(log2 |v|), exactly
    quantum = np.exp2(np.maximum(k, EMIN[fmt]) - MBITS[fmt])  # the spacing of v's binade (subnormals: the lowest)
    q = np.copysign(np.rint(a / quantum) * quantum, v)         # np.rint: ties to even
    return q.astype(DTYPE[fmt]).view(np.uint8)                 # q is exact in the format: the cast only encodes
    # END SOLUTION


def mx_blocks(x, fmt):
    """(element codes, E8M0 scale codes) of x in blocks of 32, OCP floor rule."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("mx_blocks: per block of 32, the scale 2^e with e = floor(log2(amax)) - emax")
    b = np.asarray(x, dtype=np.float64).reshape(-1, 32)
    codes = np.zeros(b.shape, dtype=np.uint8)
    scales = np.zeros(len(b), dtype=np.uint8)
    for i, blk in enumerate(b):
        if not np.isfinite(blk).all():
            scales[i] = 255                       # NaN scale; element codes stay 0
            continue
        amax = float(np.max(np.abs(blk)))
        e = -127 if amax == 0 else max(-127, min(127, math.frexp(amax)[1] - 1 - EMAX[fmt]))
        scales[i] = e + 127
        codes[i] = to_codes(blk / 2.0 ** e, fmt)
    return codes.ravel(), scales
    # END SOLUTION


def pack(codes):
    """Two FP4 codes per byte: element 2i in the low nibble, element 2i+1 in the high nibble."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("pack: which element goes in the low nibble?")
    c = np.asarray(codes, dtype=np.uint8)
    return (c[0::2] | (c[1::2] << 4)).astype(np.uint8)
    # END SOLUTION


def quantize_mxfp8(x):
    """MXFP8 E4M3 -> (codes: uint8 per element, scales: uint8 E8M0 per 32)."""
    return mx_blocks(x, "e4m3")


def quantize_mxfp4(x):
    """MXFP4 E2M1 -> (packed: uint8 per 2 elements, scales: uint8 E8M0 per 32)."""
    codes, scales = mx_blocks(x, "e2m1")
    return pack(codes), scales


def quantize_nvfp4(x):
    """NVFP4 -> (packed E2M1 codes, E4M3 scale codes per 16, tensor_scale as np.float32)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("quantize_nvfp4: tensor scale, E4M3 block scales per 16, E2M1 elements")
    b = np.asarray(x, dtype=np.float64).reshape(-1, 16)
    finite = np.isfinite(b).all(axis=1)
    amax_b = np.max(np.abs(np.where(np.isfinite(b), b, 0.0)), axis=1)
    t_amax = float(amax_b.max())
    ts = np.float32(t_amax / (E4M3_MAX * E2M1_MAX))
    if ts == 0:                                   # all zeros, or amax / 2688 underflows float32
        ts = np.float32(1.0)
    s_codes = to_codes(amax_b / E2M1_MAX / np.float64(ts), "e4m3")
    s_vals = s_codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    codes = np.zeros(b.shape, dtype=np.uint8)
    for i in range(len(b)):
        if not finite[i]:
            s_codes[i] = 0x7F                     # E4M3 NaN; element codes stay 0
        elif s_vals[i] > 0:
            codes[i] = to_codes(b[i] / (s_vals[i] * np.float64(ts)), "e2m1")
    return pack(codes.ravel()), s_codes, ts
    # END SOLUTION
