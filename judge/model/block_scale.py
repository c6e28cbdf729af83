"""judge.model.block_scale - what a block-scaled tcgen05.mma reads, decoded: its instruction descriptor, its
sub-byte operands and its scale factors in tensor memory. Pure NumPy; the instruction is judge.model.ops.tcgen05.

    from judge.model import block_scale as BS
    f = BS.decode_idesc(idesc, "kind::mxf8f6f4")      # formats, N, M, scale type, scale-factor IDs
    BS.scale_vector("kind::mxf4nvf4", ["block16"])    # 4 scales per row of A / column of B per MMA
    BS.scales_a(cells, col, 128, 1, sf_id, "ue8m0")   # (128, 1) float64 scale of each row of A

Try it: python -m pytest tests/model/test_model_blockscaled.py -q

Sections of the PTX ISA (chapter "TensorCore 5th Generation Family Instructions"):

  9.7.16.10.7    Block scaling: D = (A * scale_A) (B * scale_B) + D; scale_A is M x SFA_N, one scale per
                 row and chunk of K, scale_B SFB_M x N; both live in tensor memory and "need to be
                 duplicated to all 32 lane partitions".
  9.7.16.10.7.1  Table 54/55: kind::mxf8f6f4 -> scale_vec::1X (block32), UE8M0; kind::mxf4 -> 2X (block32),
                 UE8M0; kind::mxf4nvf4 -> 2X (block32, UE8M0) or 4X (block16, UE8M0 or UE4M3 = NVFP4).
  9.7.16.10.7.2  Scale factor A ID: 1X selects one byte of each 32-bit cell (ID 0..3), 2X a half word
                 (ID 0 or 2), 4X the whole word (ID 0).
  9.7.16.10.4    Packing: FP6 / FP4 elements of kind::f8f6f4 / mxf8f6f4 sit in shared memory as 16 elements
                 packed at the front of each 16-byte unit (FP4: 8 bytes + 8 bytes padding, FP6: 12 + 4);
                 kind::mxf4 / mxf4nvf4 pack two FP4 per byte with no padding.

The scale layout in tensor memory, as the course reads the ISA's figures and tcgen05.cp's 32x128b.warpx4
shape: a 32-bit cell at lane l, column c0 + j holds the scales of row (or column of B) r = 32 j + l % 32,
one byte per scale: byte ID + i is the i-th scale of the row in this MMA's K. The four lane quarters
hold copies. The model lets each quarter of D's rows read its own quarter's copy (D row m sits in lane
m: scale_A of row m is in lane m, column c0 + m // 32; scale_B of column n in lane 32 (m // 32) + n % 32,
column c0 + n // 32), so scales not copied to every quarter give those rows wrong products.
Nibble order of packed FP4 (element 2i in the low nibble) and the bit order of packed FP6 (element i in
bits 6i .. 6i + 5, little-endian) are the course's reading of the packing figures.
"""
from __future__ import annotations

import numpy as np

from judge.hw import formats

#: the block-scaled kinds, their K per MMA (dense) and the scale vector sizes each allows (Table 54/55)
KINDS = {"kind::mxf8f6f4": 32, "kind::mxf4": 64, "kind::mxf4nvf4": 64}
_MXF8F6F4 = {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}
_MXF4 = {1: "e2m1"}
#: sub-byte element formats and the bytes of each 16-byte unit that hold 16 elements (f8f6f4 packing)
PACKED16 = {"e2m1": 8, "e3m2": 12, "e2m3": 12}


def decode_idesc(idesc: int, kind: str) -> dict:
    """The fields of a block-scaled instruction descriptor (kind::mxf8f6f4 / mxf4 / mxf4nvf4): bit 2 sparsity,
    bits 4-5 scale factor B ID, 7-9 A format, 10-12 B format (10-11 for mxf4 kinds), 13/14 negate A/B,
    15/16 transpose A/B, 17-22 N >> 3, 23 scale type (1 = UE8M0, 0 = UE4M3), 27-28 M >> 7, 29-30 scale
    factor A ID, bit 31 reserved here (K = 96 forms)."""
    f = {"sparse": (idesc >> 2) & 1, "sfb_id": (idesc >> 4) & 3, "atype": (idesc >> 7) & 7,
         "btype": (idesc >> 10) & 7, "neg_a": (idesc >> 13) & 1, "neg_b": (idesc >> 14) & 1,
         "mn_a": (idesc >> 15) & 1, "mn_b": (idesc >> 16) & 1, "n": ((idesc >> 17) & 0x3F) << 3,
         "stype": "ue8m0" if (idesc >> 23) & 1 else "ue4m3", "m": ((idesc >> 27) & 3) << 7,
         "sfa_id": (idesc >> 29) & 3, "bit31": (idesc >> 31) & 1, "dtype": 1}
    if kind == "kind::mxf8f6f4":
        names = _MXF8F6F4
    else:
        names = _MXF4
        f["btype"] &= 3
    f["a"], f["b"] = names.get(f["atype"]), names.get(f["btype"])
    return f


def scale_vector(kind: str, parts) -> tuple[int, str]:
    """(scales per row per MMA, the qualifier as written) from the instruction's qualifiers (Table 54)."""
    q = next((p for p in parts if p.startswith("scale_vec::") or p in ("block16", "block32")), "")
    if q.startswith("scale_vec::"):
        return int(q[len("scale_vec::"):-1]), q
    if q == "block16":
        return KINDS[kind] // 16, q
    if q == "block32" or kind != "kind::mxf4nvf4":     # block32 is the default of mxf8f6f4 and mxf4
        return KINDS[kind] // 32, q or "(default block32)"
    return 0, ""                                        # mxf4nvf4 must state it


def scale_problem(kind: str, nx: int, stype: str, sfa_id: int, sfb_id: int) -> str:
    """What is wrong with this combination of kind, scale vector size, scale type and IDs (Table 55,
    9.7.16.10.7.2/3), or ''."""
    allowed = {"kind::mxf8f6f4": {1}, "kind::mxf4": {2}, "kind::mxf4nvf4": {2, 4}}[kind]
    if nx not in allowed:
        return (f"{kind} takes " + " or ".join(f"{n} scale(s) per row (scale_vec::{n}X)" for n in sorted(allowed))
                + f", not {nx or 'none stated'}")
    if stype == "ue4m3" and not (kind == "kind::mxf4nvf4" and nx == 4):
        return (f"scale type UE4M3 (instruction descriptor bit 23 = 0) is allowed only with kind::mxf4nvf4 "
                f"and block16 (scale_vec::4X); {kind} with {nx} scale(s) per row takes UE8M0 (bit 23 = 1)")
    for name, v in (("A", sfa_id), ("B", sfb_id)):
        if v % nx:
            return (f"scale factor {name} ID {v} with {nx} scale(s) per row: the ID is the byte offset of the "
                    f"scales in the 32-bit cell and must be a multiple of {nx}")
    return ""


def decode_scales(codes: np.ndarray, stype: str) -> np.ndarray:
    """Scale codes (uint8) -> float64: UE8M0 2^(code - 127) (255: NaN), UE4M3 the unsigned E4M3 value."""
    c = np.asarray(codes, np.uint8)
    if stype == "ue8m0":
        return formats.e8m0_decode(c)
    return formats.decode(c & np.uint8(0x7F), "e4m3")


def _bytes(cells: np.ndarray) -> np.ndarray:
    """uint32 cells (...,) -> their 4 bytes (..., 4), byte 0 the least significant."""
    return np.ascontiguousarray(cells, dtype=np.uint32)[..., None].view(np.uint8).reshape(*cells.shape, 4)


def scale_columns(rows: int) -> int:
    """Tensor-memory columns the scales of `rows` rows of A (or columns of B) occupy: one per 32."""
    return max(1, -(-rows // 32))


def scales_a(cells: np.ndarray, col: int, M: int, nx: int, sf_id: int, stype: str) -> np.ndarray:
    """(M, nx) scale of each row of A: lane m, column col + m // 32, bytes sf_id .. sf_id + nx - 1."""
    m = np.arange(M)
    by = _bytes(cells[m, col + m // 32])                               # (M, 4)
    return decode_scales(by[:, sf_id:sf_id + nx], stype)


def scales_b(cells: np.ndarray, col: int, N: int, nx: int, sf_id: int, stype: str, quarter: int) -> np.ndarray:
    """(N, nx) scale of each column of B as the rows of D in lane quarter `quarter` read them: lane
    32 quarter + n % 32, column col + n // 32."""
    n = np.arange(N)
    by = _bytes(cells[32 * quarter + n % 32, col + n // 32])
    return decode_scales(by[:, sf_id:sf_id + nx], stype)


def unpack_f8f6f4(raw: np.ndarray, fmt: str) -> np.ndarray:
    """Bytes (rows, K) of an FP6/FP4 operand of kind::f8f6f4 / mxf8f6f4 -> element codes (rows, K): each
    16-byte unit holds 16 elements packed at its front (FP4 low nibble first, FP6 little-endian bit order),
    the rest is padding."""
    rows, kb = raw.shape
    units = raw.reshape(rows, kb // 16, 16)
    if fmt == "e2m1":
        return formats.unpack_fp4(units[..., :8]).reshape(rows, kb)
    bits = np.unpackbits(units[..., :12], axis=-1, bitorder="little")   # (rows, units, 96)
    six = bits.reshape(rows, kb // 16, 16, 6)
    codes = (six * (1 << np.arange(6, dtype=np.uint8))).sum(axis=-1).astype(np.uint8)
    return codes.reshape(rows, kb)


def pack_f8f6f4(codes: np.ndarray, fmt: str) -> np.ndarray:
    """The inverse of unpack_f8f6f4 (codes (rows, K), K a multiple of 16), padding bytes zero: how a host
    lays an FP6/FP4 operand out for kind::f8f6f4 / mxf8f6f4."""
    c = np.asarray(codes, np.uint8)
    rows, k = c.shape
    out = np.zeros((rows, k // 16, 16), np.uint8)
    units = c.reshape(rows, k // 16, 16)
    if fmt == "e2m1":
        out[..., :8] = formats.pack_fp4(units)
    else:
        bits = ((units[..., None] >> np.arange(6, dtype=np.uint8)) & 1).reshape(rows, k // 16, 96)
        out[..., :12] = np.packbits(bits, axis=-1, bitorder="little")
    return out.reshape(rows, k)
