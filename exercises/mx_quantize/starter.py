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
    raise NotImplementedError("to_codes: saturate, then round once to nearest even, then encode (ml_dtypes)")


def mx_blocks(x, fmt):
    """(element codes, E8M0 scale codes) of x in blocks of 32, OCP floor rule."""
    raise NotImplementedError("mx_blocks: per block of 32, the scale 2^e with e = floor(log2(amax)) - emax")


def pack(codes):
    """Two FP4 codes per byte: element 2i in the low nibble, element 2i+1 in the high nibble."""
    raise NotImplementedError("pack: which element goes in the low nibble?")


def quantize_mxfp8(x):
    """MXFP8 E4M3 -> (codes: uint8 per element, scales: uint8 E8M0 per 32)."""
    return mx_blocks(x, "e4m3")


def quantize_mxfp4(x):
    """MXFP4 E2M1 -> (packed: uint8 per 2 elements, scales: uint8 E8M0 per 32)."""
    codes, scales = mx_blocks(x, "e2m1")
    return pack(codes), scales


def quantize_nvfp4(x):
    """NVFP4 -> (packed E2M1 codes, E4M3 scale codes per 16, tensor_scale as np.float32)."""
    raise NotImplementedError("quantize_nvfp4: tensor scale, E4M3 block scales per 16, E2M1 elements")
