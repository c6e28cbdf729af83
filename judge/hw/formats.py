"""Block-scaled number formats of Blackwell's tensor cores: MXFP8 / MXFP6 / MXFP4 and NVFP4, in NumPy.

    from judge.hw import formats
    q = formats.mx_quantize(x, "e2m1", block=32, scale_rule="floor")   # MXFP4, OCP rule
    q.codes, q.scales              # element codes (uint8, one per element), E8M0 scale codes
    x_hat = q.dequantize()         # float64
    n = formats.nvfp4_quantize(x)  # E2M1 values, E4M3 scale per 16, FP32 tensor scale
    formats.pack_fp4(q.codes)      # two FP4 codes per byte, element 2i in the low nibble
    formats.to_bf16_bits(x)        # float32 -> bf16 bit patterns (uint16), what raw-bf16 kernels read

Try it: python -m judge.hw.formats   (prints the rounding rules and the error of each format on N(0,1)).

What the hardware reads (tcgen05.mma kind::mxf8f6f4, kind::mxf4, kind::mxf4nvf4) is codes plus
scales; how a library CHOOSES them is not fixed by the hardware. Where libraries differ, this module
names the choice and takes it as an option:

    scale_rule "floor"  OCP MX v1.0: scale exponent = floor(log2(amax)) - emax_elem. The largest
                        element of a block may then exceed the element's max (e.g. 460 in E4M3,
                        max 448) and is clamped: the block's amax is not always representable.
    scale_rule "ceil"   the smallest power of two with amax / scale <= max_elem (what cuBLAS-style
                        recipes do): nothing overflows, one bit of resolution may be lost.
    overflow "saturate" an element beyond the format's max becomes +-max (the only choice for FP6 and
                        FP4, which have no Inf or NaN); "nan": E4M3 gives NaN, E5M2 gives +-Inf.
    rounding            element values round to nearest, ties to even (FP4: 0.25->0, 0.75->1,
                        1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4); subnormals are kept.
    zero block          amax = 0: E8M0 code 0 (2^-127, floor(log2 0) clamped), every element +0.
    NaN / Inf in block  the block's scale is E8M0 NaN (code 255): the whole block decodes to NaN
                        (OCP: a NaN scale makes every element NaN).
    nibble order        pack_fp4: element 2i in bits 0-3, element 2i+1 in bits 4-7 of byte i.

Element encodings are checked against ml_dtypes (tests/hw/test_formats.py); this module rounds
itself (in float64, one rounding) rather than casting, so that no double rounding through float32
can move a value that sits near a tie.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALE_RULES = {
    "floor": "OCP MX v1.0: exponent = floor(log2(amax)) - emax of the element format",
    "ceil": "smallest power of two such that amax / scale <= the element format's max",
}
OVERFLOW = {
    "saturate": "values beyond the largest finite value become +-max",
    "nan": "values beyond the largest finite value become NaN (E4M3) or +-Inf (E5M2)",
}


@dataclass(frozen=True)
class Element:
    """An element format: sign, `ebits` exponent bits (bias), `mbits` mantissa bits."""
    name: str
    ebits: int
    mbits: int
    bias: int
    max: float             # largest finite value
    dtype_name: str        # the name of the ml_dtypes type holding one code per byte (see dtype)
    overflow_value: float  # what "nan" overflow gives: nan (E4M3), inf (E5M2), None if impossible

    @property
    def dtype(self):
        """The ml_dtypes type holding one code per byte."""
        return getattr(_ml_dtypes(), self.dtype_name)

    @property
    def emax(self) -> int:
        """Exponent of the largest binade (floor(log2(max)))."""
        return int(np.floor(np.log2(self.max)))

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits


def _ml_dtypes():
    """ml_dtypes, imported where a code is first cast: importing it takes over a second (it registers its
    NumPy casts one by one), and the CPU model imports this module for every kernel, block-scaled or not."""
    import ml_dtypes
    return ml_dtypes


ELEMENTS = {
    "e4m3": Element("e4m3", 4, 3, 7, 448.0, "float8_e4m3fn", float("nan")),
    "e5m2": Element("e5m2", 5, 2, 15, 57344.0, "float8_e5m2", float("inf")),
    "e3m2": Element("e3m2", 3, 2, 3, 28.0, "float6_e3m2fn", None),
    "e2m3": Element("e2m3", 2, 3, 1, 7.5, "float6_e2m3fn", None),
    "e2m1": Element("e2m1", 2, 1, 1, 6.0, "float4_e2m1fn", None),
}
#: The MX names of the OCP spec -> element format (all with an E8M0 scale per 32 elements).
MX_FORMATS = {"MXFP8 E4M3": "e4m3", "MXFP8 E5M2": "e5m2", "MXFP6 E3M2": "e3m2",
              "MXFP6 E2M3": "e2m3", "MXFP4 E2M1": "e2m1"}


def element(name) -> Element:
    if isinstance(name, Element):
        return name
    try:
        return ELEMENTS[name]
    except KeyError:
        raise KeyError(f"unknown element format {name!r}; known: {', '.join(ELEMENTS)}") from None


def _check_option(value, options, what):
    if value not in options:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, options))}, not {value!r}")


# ---------------------------------------------------------------------------------- elements
def round_to_element(x, fmt, overflow: str = "saturate") -> np.ndarray:
    """x (any float array) -> the nearest value of the element format, ties to even, as float64.

    Subnormals are kept (quantum 2^(1 - bias - mbits) below the smallest normal). A value beyond
    the largest finite one follows `overflow`. NaN stays NaN (FP6/FP4 cannot encode it: encode()
    refuses). Signed zero is kept.
    """
    e = element(fmt)
    _check_option(overflow, OVERFLOW, "overflow")
    if overflow == "nan" and e.overflow_value is None:
        raise ValueError(f"{e.name} has no Inf or NaN: overflow must be 'saturate'")
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the binade of each value, exactly (frexp; a floating-point log2 rounds up just below 2^k)
        _, fexp = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
        exp = (fexp - 1).astype(np.float64)
        exp = np.maximum(exp, 1 - e.bias)                      # subnormal range: fixed quantum
        quantum = np.exp2(exp - e.mbits)
        q = np.rint(a / quantum) * quantum                     # np.rint: round half to even
    too_big = q > e.max
    if overflow == "saturate":
        q = np.where(too_big, e.max, q)
    else:
        q = np.where(too_big, e.overflow_value, q)
    q = np.where(np.isnan(x), np.nan, q)
    q = np.where(np.isinf(x), e.max if overflow == "saturate" else e.overflow_value, q)
    return np.copysign(q, x)


def encode(values, fmt) -> np.ndarray:
    """Values already in the format (round_to_element's output) -> their codes, uint8 (low bits)."""
    e = element(fmt)
    v = np.asarray(values, dtype=np.float64)
    if e.overflow_value is None and np.isnan(v).any():
        raise ValueError(f"{e.name} has no NaN: a NaN block must be marked by its scale")
    return v.astype(e.dtype).view(np.uint8)


def decode(codes, fmt) -> np.ndarray:
    """Codes (uint8, one per element) -> float64 values."""
    e = element(fmt)
    c = np.asarray(codes, dtype=np.uint8)
    mask = (1 << e.bits) - 1
    if (c & ~np.uint8(mask)).any():
        raise ValueError(f"{e.name} codes use {e.bits} bits; got a code above {mask:#x}")
    return c.view(e.dtype).astype(np.float64)


# ---------------------------------------------------------------------------------- E8M0
E8M0_BIAS = 127
E8M0_NAN = 255


def e8m0_decode(codes) -> np.ndarray:
    """E8M0 codes -> 2^(code - 127) as float64; code 255 is NaN. No sign, no zero, no mantissa."""
    c = np.asarray(codes, dtype=np.int64)
    out = np.exp2((c - E8M0_BIAS).astype(np.float64))
    return np.where(c == E8M0_NAN, np.nan, out)


def e8m0_encode(exponents) -> np.ndarray:
    """Scale exponents (integers in [-127, 127]) -> E8M0 codes."""
    ex = np.asarray(exponents, dtype=np.int64)
    if ((ex < -127) | (ex > 127)).any():
        raise ValueError("an E8M0 scale exponent must lie in [-127, 127]")
    return (ex + E8M0_BIAS).astype(np.uint8)


def _floor_log2(a):
    """floor(log2(a)) exactly, for finite a > 0 (frexp: a = m * 2^k with m in [0.5, 1))."""
    _, k = np.frexp(a)
    return k - 1


def scale_exponent(amax, fmt, rule: str = "floor") -> np.ndarray:
    """The E8M0 scale exponent of blocks with these |max| values (finite, > 0), clamped to [-127, 127].

    floor: floor(log2(amax)) - emax(fmt)                           (OCP MX v1.0)
    ceil:  the smallest e with amax / 2^e <= max(fmt)              (nothing overflows)
    """
    e = element(fmt)
    _check_option(rule, SCALE_RULES, "scale_rule")
    a = np.asarray(amax, dtype=np.float64)
    safe = np.where((a > 0) & np.isfinite(a), a, 1.0)
    if rule == "floor":
        ex = _floor_log2(safe) - e.emax
    else:
        ex = _floor_log2(safe / e.max)                        # 2^ex <= amax/max < 2^(ex+1)
        ex = np.where(safe / np.exp2(ex) > e.max, ex + 1, ex)  # amax/max a power of two: keep ex
    return np.clip(ex, -127, 127).astype(np.int64)


# ---------------------------------------------------------------------------------- MX
@dataclass
class MXTensor:
    """An MX-quantized tensor: codes (x's shape, uint8), scales (E8M0 codes, one per block)."""
    codes: np.ndarray
    scales: np.ndarray
    fmt: str
    block: int
    scale_rule: str
    overflow: str

    def dequantize(self) -> np.ndarray:
        vals = decode(self.codes, self.fmt)
        shape = vals.shape
        blocks = vals.reshape(*shape[:-1], shape[-1] // self.block, self.block)
        out = blocks * e8m0_decode(self.scales)[..., None]
        return out.reshape(shape)

    @property
    def bits_per_element(self) -> float:
        return element(self.fmt).bits + 8 / self.block


def _blocks(x, block):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] % block:
        raise ValueError(f"the last dimension ({x.shape[-1] if x.ndim else 'scalar'}) must be a "
                         f"multiple of the block size {block}: pad the tensor first")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def mx_quantize(x, fmt: str = "e4m3", *, block: int = 32, scale_rule: str = "floor",
                overflow: str = "saturate") -> MXTensor:
    """Quantize along the last axis in blocks of `block` (32 in the OCP spec) with an E8M0 scale each.

    Per block: amax = max |x|; the scale 2^e (scale_exponent, `scale_rule`); each element
    x / 2^e rounded to the element format (ties to even, `overflow`). A block holding NaN or Inf
    gets the NaN scale; an all-zero block gets code 0 and zero elements.
    """
    e = element(fmt)
    b = _blocks(x, block)
    bad = ~np.isfinite(b).all(axis=-1)
    amax = np.max(np.abs(np.where(np.isfinite(b), b, 0.0)), axis=-1)
    ex = scale_exponent(amax, e, scale_rule)
    ex = np.where(amax == 0, -127, ex)
    scaled = b / np.exp2(ex)[..., None]                   # exact: a power of two (or underflow)
    vals = round_to_element(np.where(bad[..., None], 0.0, scaled), e, overflow)
    codes = encode(vals, e).reshape(np.shape(x))
    scales = np.where(bad, E8M0_NAN, e8m0_encode(ex)).astype(np.uint8)
    return MXTensor(codes, scales, e.name, block, scale_rule, overflow)


# ---------------------------------------------------------------------------------- NVFP4
@dataclass
class NVFP4Tensor:
    """NVFP4: E2M1 codes, one E4M3 scale per 16 elements, one FP32 scale for the whole tensor."""
    codes: np.ndarray
    scales: np.ndarray        # E4M3 codes (uint8), one per block
    tensor_scale: np.float32  # multiplies every block scale
    block: int = 16

    def dequantize(self) -> np.ndarray:
        vals = decode(self.codes, "e2m1")
        shape = vals.shape
        blocks = vals.reshape(*shape[:-1], shape[-1] // self.block, self.block)
        s = decode(self.scales, "e4m3") * np.float64(self.tensor_scale)
        return (blocks * s[..., None]).reshape(shape)

    @property
    def bits_per_element(self) -> float:
        return 4 + 8 / self.block


def nvfp4_quantize(x, *, block: int = 16, tensor_amax: float | None = None) -> NVFP4Tensor:
    """NVIDIA's two-level recipe.

    tensor_scale = amax(x) / (448 * 6), in FP32, so that the largest block scale lands at E4M3's
    max; block scale = amax(block) / 6 / tensor_scale, rounded to E4M3 (ties to even, saturating);
    elements = x / (block scale * tensor_scale), rounded to E2M1 (ties to even, saturating).
    A block scale that rounds to 0 (an all-zero or tiny block) gives zero elements; a block with
    NaN or Inf gets the E4M3 NaN scale (code 0x7F). NaN and Inf do not enter the tensor amax. A tensor
    whose tensor_scale would be 0 (all zeros, or so tiny that amax / 2688 underflows float32) gets 1.
    """
    b = _blocks(x, block)
    finite = np.isfinite(b)
    bad = ~finite.all(axis=-1)
    amax_blocks = np.max(np.abs(np.where(finite, b, 0.0)), axis=-1)
    t_amax = float(np.max(amax_blocks)) if tensor_amax is None else float(tensor_amax)
    # float32(amax / 2688) is 0 for an all-zero tensor and for one so tiny that the quotient underflows
    # float32: a zero tensor scale would divide by zero, so 1.0 stands in (every block scale then rounds to 0)
    ts = np.float32(t_amax / (448.0 * 6.0))
    if not ts > 0:
        ts = np.float32(1.0)
    s_vals = round_to_element(amax_blocks / 6.0 / np.float64(ts), "e4m3", "saturate")
    denom = s_vals * np.float64(ts)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(denom[..., None] > 0, b / denom[..., None], 0.0)
    vals = round_to_element(np.where(bad[..., None], 0.0, scaled), "e2m1", "saturate")
    scales = np.where(bad, 0x7F, encode(s_vals, "e4m3")).astype(np.uint8)
    return NVFP4Tensor(encode(vals, "e2m1").reshape(np.shape(x)), scales, ts, block)


# ---------------------------------------------------------------------------------- packing
def pack_fp4(codes) -> np.ndarray:
    """FP4 codes (uint8, last axis even) -> bytes: element 2i in the low nibble, 2i+1 in the high."""
    c = np.asarray(codes, dtype=np.uint8)
    if c.shape[-1] % 2:
        raise ValueError("pack_fp4 needs an even number of elements along the last axis")
    if (c > 0xF).any():
        raise ValueError("FP4 codes are 4 bits: a code above 0xF")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed) -> np.ndarray:
    p = np.asarray(packed, dtype=np.uint8)
    out = np.empty(p.shape[:-1] + (2 * p.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


# ---------------------------------------------------------------------------------- error
def relative_error(x, x_hat) -> float:
    """||x_hat - x|| / ||x|| (Frobenius), the figure the chapter plots."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(x_hat, dtype=np.float64) - x) / np.linalg.norm(x))


def to_bf16_bits(x, xp=np):
    """float32 values -> bf16 bit patterns (uint16), rounded to nearest, ties to even: what a kernel that
    takes raw bf16 (`unsigned short`) reads. xp: numpy (the CPU model) or cupy (a GPU), the array's own."""
    u = x.astype(xp.float32).view(xp.uint32)
    u = u + xp.uint32(0x7FFF) + ((u >> xp.uint32(16)) & xp.uint32(1))
    return (u >> xp.uint32(16)).astype(xp.uint16)


def from_bf16_bits(b) -> np.ndarray:
    """bf16 bit patterns (uint16, NumPy) -> float64, exactly (a bf16 is the top half of a float32)."""
    return (np.asarray(b).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def bf16_roundtrip(x) -> np.ndarray:
    """x rounded to bfloat16 (ties to even) and back: the unscaled 16-bit baseline."""
    return np.asarray(x, dtype=np.float32).astype(_ml_dtypes().bfloat16).astype(np.float64)


def error_table(x, formats=("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"), blocks=(16, 32, 64, 128),
                scale_rule: str = "floor") -> list[dict]:
    """Relative error of each MX element format at each block size, then NVFP4 and bf16."""
    rows = []
    for f in formats:
        for bs in blocks:
            q = mx_quantize(x, f, block=bs, scale_rule=scale_rule)
            rows.append({"format": f"MX {f}", "block": bs, "bits": q.bits_per_element,
                         "rel_err": relative_error(x, q.dequantize())})
    n = nvfp4_quantize(x)
    rows.append({"format": "NVFP4", "block": 16, "bits": n.bits_per_element,
                 "rel_err": relative_error(x, n.dequantize())})
    rows.append({"format": "bf16", "block": None, "bits": 16.0,
                 "rel_err": relative_error(x, bf16_roundtrip(x))})
    return rows


if __name__ == "__main__":
    for k, v in SCALE_RULES.items():
        print(f"scale_rule {k!r}: {v}")
    x = np.random.default_rng(0).standard_normal((256, 1024))
    for row in error_table(x, blocks=(32,)):
        print(f"{row['format']:>9}  block {row['block']!s:>4}  {row['bits']:5.2f} bits  "
              f"relative error {row['rel_err']:.2e}")
