"""tcgen05.mma (UMMA, sm_100a) in Python: the shared-memory descriptor and the instruction descriptor.

    from judge.hw import umma
    d = umma.encode(start=0x400, lbo=16, sbo=1024, swizzle="128B")   # 0x4000404000010040
    umma.decode(d)                     # Descriptor(start=1024, lbo=16, sbo=1024, base_offset=0, lbo_mode=0, swizzle='128B')
    umma.tile_descriptor(0x400, "128B", "MN", rows=128, k_elems=64, ks=1)   # slice 1 of an MN-major tile
    umma.operand_address(d, mn=9, k=3, major="K")          # the byte the MMA reads [9][3] from
    i = umma.encode_idesc("kind::f16", "bf16", "bf16", M=128, N=256, b_major="MN")
    umma.decode_idesc(i, "kind::f16")  # {'m': 128, 'n': 256, 'a': 'bf16', 'b': 'bf16', 'b_major': 'MN', ...}
    umma.draw_layouts()                # every swizzle, K-major and MN-major, drawn

Sources: the PTX ISA, tcgen05 "Shared memory descriptor" (Matrix Descriptors) and "Instruction
descriptor" tables; CUTLASS's cute::UMMA::SmemDescriptor and InstrDescriptor (cute/arch/mma_sm100_desc.hpp)
have the same bitfields. The shared-memory descriptor, 64 bits:

  bits  0-13  start address >> 4              bits 46-48  fixed 0b001 (the "version": sm_90's has 0)
  bits 16-29  leading byte offset >> 4        bits 49-51  base offset
  bits 32-45  stride byte offset >> 4         bit  52     LBO mode (0: LBO is a relative byte offset;
  bits 53-60  0                                            1: an absolute address, for 48-byte K tiles;
                                                           sm_103a only, PTX ISA 9.7.16.4.1.1 Target ISA Note)
  bits 61-63  swizzle: 0 none, 1 128B with 32-byte atoms, 2 128B, 4 64B, 6 32B

against wgmma's (judge.hw.wgmma): the same three byte fields at the same bits, and bits 46-48 must hold 1.
The swizzle field grew one bit downwards, from bits 62-63 to 61-63: wgmma's code c there sets the same
bits as tcgen05's 2c (128B: 1 -> 2, 64B: 2 -> 4, 32B: 3 -> 6), so for every mode the same bits mean the
same swizzle and a Hopper descriptor differs from tcgen05's in bit 46 only. The numbers differ because the
field starts one bit lower: wgmma's number written into bits 61-63 as a number (1 for 128B) would be
tcgen05's new mode 1, 128B_base32B (bit 61 alone, which wgmma's field cannot reach).

The instruction descriptor (32 bits, the kind::f16 / tf32 / f8f6f4 / i8 layout):
  bits 0-1 sparsity selector, 2 sparse, 3 saturate (i8), 4-5 D format (0 F16, 1 F32, 2 S32),
  7-9 A format, 10-12 B format (kind::f16: 0 F16, 1 BF16; kind::tf32: 2 TF32; kind::f8f6f4: 0 E4M3,
  1 E5M2, 3 E2M3, 4 E3M2, 5 E2M1), 13/14 negate A/B, 15/16 transpose A/B (0 = K-major, 1 = MN-major;
  MN-major only for 8-bit, 16-bit and tf32 inputs), 17-22 N >> 3, 24-28 M >> 4, 30-31 max shift (.ws).

Which bytes a descriptor names is judge.hw.mma_layout (the canonical layouts, both majors, every swizzle).
"""
from __future__ import annotations

from dataclasses import dataclass

from judge.hw import mma_layout as L

# ----------------------------------------------------------------------------- shared-memory descriptor
#: the 3-bit swizzle field (bits 61-63), PTX ISA and cute::UMMA::LayoutType agree
SWIZZLE_MODE = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}
MODE_SWIZZLE = {v: k for k, v in SWIZZLE_MODE.items()}
VERSION = 1

#: (name, lowest bit, width, shift applied to the byte value before it is stored)
FIELDS = (
    ("start", 0, 14, 4),
    ("lbo", 16, 14, 4),
    ("sbo", 32, 14, 4),
    ("version", 46, 3, 0),        # fixed 0b001
    ("base_offset", 49, 3, 0),
    ("lbo_mode", 52, 1, 0),
    ("swizzle", 61, 3, 0),        # SWIZZLE_MODE
)
FIELD_BITS = {name: (lo, lo + width - 1) for name, lo, width, _ in FIELDS}
MEANING = {"start": "start address >> 4", "lbo": "leading byte offset >> 4", "sbo": "stride byte offset >> 4",
           "version": "fixed value 0b001", "base_offset": "base offset", "lbo_mode": "LBO mode",
           "swizzle": "swizzle (0 none, 1 128B_base32B, 2 128B, 4 64B, 6 32B)"}


class DescriptorError(ValueError):
    """A value no descriptor can hold; .field names the field."""

    def __init__(self, field: str, problem: str):
        self.field = field
        lo, hi = FIELD_BITS[field]
        super().__init__(f"tcgen05 descriptor field '{field}' (bits {lo}-{hi}): {problem}")


@dataclass(frozen=True)
class Descriptor:
    """The fields of a tcgen05 shared-memory descriptor, byte fields in bytes."""
    start: int
    lbo: int
    sbo: int
    base_offset: int = 0
    lbo_mode: int = 0
    swizzle: str = "128B"

    def __int__(self):
        return encode(self.start, self.lbo, self.sbo, self.swizzle, self.base_offset, self.lbo_mode)


def _field(name: str, value: int) -> int:
    lo, width, shift = next((lo, w, s) for n, lo, w, s in FIELDS if n == name)
    if not isinstance(value, int) or value < 0:
        raise DescriptorError(name, f"{value!r} is not a non-negative integer")
    if value % (1 << shift):
        raise DescriptorError(name, f"{value} bytes is not a multiple of 16: the field stores bytes >> 4")
    v = value >> shift
    if v >= 1 << width:
        raise DescriptorError(name, f"{value} does not fit in {width} bits")
    return v << lo


def encode(start: int, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0, lbo_mode: int = 0) -> int:
    """The 64-bit descriptor; start, lbo, sbo in bytes (multiples of 16 below 2^18); the version bits set."""
    if swizzle not in SWIZZLE_MODE:
        raise DescriptorError("swizzle", f"{swizzle!r} is not one of {', '.join(SWIZZLE_MODE)}")
    return (_field("start", start) | _field("lbo", lbo) | _field("sbo", sbo) | _field("version", VERSION)
            | _field("base_offset", base_offset) | _field("lbo_mode", lbo_mode) | SWIZZLE_MODE[swizzle] << 61)


def fields(desc: int) -> dict:
    """Every field's raw value (swizzle as its number), stray bits under 'stray'; never raises on content."""
    desc = int(desc)
    out, used = {}, 0
    for name, lo, width, shift in FIELDS:
        mask = (1 << width) - 1
        used |= mask << lo
        out[name] = ((desc >> lo) & mask) << shift
    out["stray"] = desc & ~used & ((1 << 64) - 1)
    return out


def decode(desc: int) -> Descriptor:
    """The fields of a descriptor. Raises ValueError for what the hardware does not accept: version bits
    other than 0b001, a reserved swizzle code (3, 5, 7), bits set outside the fields."""
    desc = int(desc)
    if not 0 <= desc < 1 << 64:
        raise ValueError(f"a descriptor is 64 bits: {desc:#x} is not")
    f = fields(desc)
    if f["stray"]:
        raise ValueError(f"descriptor {desc:#018x} sets bits outside its fields: {f['stray']:#018x}")
    if f["version"] != VERSION:
        raise DescriptorError("version", f"holds {f['version']:#05b}; tcgen05 needs the fixed value 0b001 there "
                                         f"(a wgmma descriptor has 0)")
    if f["swizzle"] not in MODE_SWIZZLE:
        raise DescriptorError("swizzle", f"{f['swizzle']} is not a swizzle code (0, 1, 2, 4, 6)")
    return Descriptor(f["start"], f["lbo"], f["sbo"], f["base_offset"], f["lbo_mode"], MODE_SWIZZLE[f["swizzle"]])


def base_offset_for(pattern_start: int, swizzle: str) -> int:
    """The base offset field for a swizzle pattern starting at `pattern_start` (PTX ISA): 0 on the
    pattern's repeat (1024 / 512 / 256 bytes), else (pattern_start >> 7) & 7."""
    if swizzle not in SWIZZLE_MODE:
        raise DescriptorError("swizzle", f"{swizzle!r} is not one of {', '.join(SWIZZLE_MODE)}")
    if swizzle == "none" or pattern_start % L.REPEAT[swizzle] == 0:
        return 0
    return (pattern_start >> 7) & 7


def explain(desc: int) -> str:
    """One line per field: bits, stored value, meaning."""
    d = decode(desc)
    return "\n".join([
        f"tcgen05 shared-memory descriptor {int(desc):#018x}",
        f"  bits  0-13  start address >> 4       = {d.start >> 4:#x}  ({d.start} bytes)",
        f"  bits 16-29  leading byte offset >> 4 = {d.lbo >> 4}  ({d.lbo} bytes)",
        f"  bits 32-45  stride byte offset >> 4  = {d.sbo >> 4}  ({d.sbo} bytes)",
        "  bits 46-48  fixed                    = 0b001",
        f"  bits 49-51  base offset              = {d.base_offset}",
        f"  bit  52     LBO mode                 = {d.lbo_mode}",
        f"  bits 61-63  swizzle                  = {SWIZZLE_MODE[d.swizzle]}  ({d.swizzle})"])


def operand_address(desc: int, mn, k, major: str = "K", *, elem_bytes: int = 2):
    """The shared-memory byte address tcgen05.mma reads element [mn][k] of an operand from (mn: row of
    A (M) or of B (N); k along K), given its descriptor and the major the instruction descriptor's
    transpose bit says. judge.hw.mma_layout.read_address on the decoded fields, base offset included.
    LBO mode 1 (absolute LBO, 48-byte K tiles of sparse kinds) is not modelled: ValueError."""
    d = decode(desc)
    if d.lbo_mode:
        raise ValueError("LBO mode 1 (an absolute leading byte address) is not modelled")
    return L.read_address(d.start, d.lbo, d.sbo, d.swizzle, major, mn, k, elem_bytes=elem_bytes,
                          base_offset=d.base_offset)


def tile_descriptor(start: int, swizzle: str, major: str, *, rows: int, k_elems: int, ks: int = 0,
                    elem_bytes: int = 2, base_offset: int = 0) -> int:
    """The descriptor of K-slice `ks` (32 bytes of K) of the canonical rows x k_elems tile at `start`
    (judge.hw.mma_layout.tile_offset): its strides, and its start advanced to the slice."""
    lbo, sbo = L.tile_strides(swizzle, major, rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)
    first = start + L.slice_start(ks, 32 // elem_bytes, swizzle, major, rows=rows, k_elems=k_elems,
                                  elem_bytes=elem_bytes)
    return encode(first, lbo, sbo, swizzle, base_offset)


# ----------------------------------------------------------------------------- instruction descriptor
#: A/B format codes (bits 7-9, 10-12) per kind
FORMATS = {"kind::f16": {"f16": 0, "bf16": 1}, "kind::tf32": {"tf32": 2},
           "kind::f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
           "kind::i8": {"u8": 0, "s8": 1}}
D_FORMATS = {"f16": 0, "f32": 1, "s32": 2}
#: input formats that may be MN-major (PTX ISA: transpose only for 8-bit, 16-bit and tf32 inputs)
MN_MAJOR_OK = {"f16", "bf16", "tf32", "e4m3", "e5m2", "u8", "s8"}
#: K of one MMA, per kind (32 bytes of K)
KIND_K = {"kind::f16": 16, "kind::tf32": 8, "kind::f8f6f4": 32, "kind::i8": 32}

IDESC_FIELDS = (("sparse_id", 0, 2), ("sparse", 2, 1), ("saturate", 3, 1), ("dtype", 4, 2), ("atype", 7, 3),
                ("btype", 10, 3), ("neg_a", 13, 1), ("neg_b", 14, 1), ("mn_a", 15, 1), ("mn_b", 16, 1),
                ("n_shr3", 17, 6), ("m_shr4", 24, 5), ("max_shift", 30, 2))


def encode_idesc(kind: str, a: str, b: str, *, M: int, N: int, a_major: str = "K", b_major: str = "K",
                 d: str = "f32", neg_a: bool = False, neg_b: bool = False, sparse: bool = False) -> int:
    """The 32-bit instruction descriptor of a dense (or sparse) tcgen05.mma of this kind."""
    if kind not in FORMATS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(FORMATS)}")
    fm = FORMATS[kind]
    for what, x in (("A", a), ("B", b)):
        if x not in fm:
            raise ValueError(f"{what} format {x!r} is not a format of {kind} ({', '.join(fm)})")
    for what, x, mj in (("A", a, a_major), ("B", b, b_major)):
        if mj not in L.MAJORS:
            raise ValueError(f"{what} major {mj!r}: 'K' or 'MN'")
        if mj == "MN" and x not in MN_MAJOR_OK:
            raise ValueError(f"{what} in {x} must be K-major: the transpose bit is for 8-bit, 16-bit and tf32 inputs")
    if M % 16 or not 0 < M >> 4 < 32 or N % 8 or not 0 < N >> 3 < 64:
        raise ValueError(f"M = {M}, N = {N}: the fields hold M >> 4 (5 bits) and N >> 3 (6 bits)")
    return (int(sparse) << 2 | D_FORMATS[d] << 4 | fm[a] << 7 | fm[b] << 10 | int(neg_a) << 13 | int(neg_b) << 14
            | (a_major == "MN") << 15 | (b_major == "MN") << 16 | (N >> 3) << 17 | (M >> 4) << 24)


def decode_idesc(idesc: int, kind: str) -> dict:
    """The fields of an instruction descriptor, raw and named: 'm', 'n', 'a', 'b' (format names, None for
    a code that is no format of `kind`), 'a_major' / 'b_major' ('K' or 'MN'), 'd' (D format name)."""
    idesc = int(idesc)
    f = {name: (idesc >> lo) & ((1 << w) - 1) for name, lo, w in IDESC_FIELDS}
    names = {v: k for k, v in FORMATS[kind].items()}
    f.update(m=f["m_shr4"] << 4, n=f["n_shr3"] << 3, a=names.get(f["atype"]), b=names.get(f["btype"]),
             a_major="MN" if f["mn_a"] else "K", b_major="MN" if f["mn_b"] else "K",
             d={v: k for k, v in D_FORMATS.items()}.get(f["dtype"]))
    return f


# ----------------------------------------------------------------------------- drawing
def draw_layouts(swizzles=("none", "32B", "64B", "128B"), *, elem_bytes: int = 2):
    """A matplotlib Figure: for each swizzle, the canonical K-major tile (top) and MN-major tile
    (bottom), each 16-byte chunk labelled with the shared-memory slot it lies in (judge.hw.mma_layout.draw_tile)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(3.2 * len(swizzles), 8.5), layout="constrained")
    axes = fig.subplots(2, len(swizzles), squeeze=False)
    for j, sw in enumerate(swizzles):
        if sw == "128B_base32B":                   # an MN-major layout only
            axes[0][j].text(0.5, 0.5, "128B_base32B:\nMN-major only", ha="center", va="center")
            axes[0][j].set_axis_off()
        else:
            L.draw_tile(sw, "K", elem_bytes=elem_bytes, ax=axes[0][j])
        L.draw_tile(sw, "MN", elem_bytes=elem_bytes, ax=axes[1][j])
    fig.suptitle("number = the 16-byte slot of shared memory the chunk lies in; colour = core matrix "
                 "(8 rows x 16 bytes); top K-major, bottom MN-major", fontsize=9)
    return fig
