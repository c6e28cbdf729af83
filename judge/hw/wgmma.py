"""wgmma in Python: the shared-memory matrix descriptor, the accumulator fragment, the operand layouts.

    from judge.hw import wgmma
    d = wgmma.encode(start=0x400, lbo=16, sbo=1024, swizzle="128B")   # 0x4000004000010040
    wgmma.decode(d)              # Descriptor(start=1024, lbo=16, sbo=1024, base_offset=0, swizzle='128B')
    wgmma.kmajor_descriptor(0x400, swizzle="128B")    # the descriptor of a canonical K-major tile
    wgmma.operand_address(d, row=9, k=3)              # the shared-memory byte wgmma reads A[9][3] from
    wgmma.kmajor_offset(9, 3, "128B")                 # where the canonical layout puts it (the same)
    dmn = wgmma.mnmajor_descriptor(0x400, "128B", rows=128)   # an N-major B tile, 128 x 16 (imm-trans-b 1)
    wgmma.operand_address(dmn, row=9, k=3, major="MN")        # where wgmma reads B[n=9][k=3]
    wgmma.field_differences(d, dmn)                           # [(field, lowest bit, highest bit, have, want), ...]
    wgmma.fragment_coord(thread=37, reg=6, n=64)      # (row, col) of C that register d6 of thread 37 holds
    wgmma.fragment_owner(row=20, col=13, n=64)        # (thread, reg): the way back
    wgmma.ring_schedule(tiles=12, S=4, load=3, mma=2) # a model of the producer/consumer mbarrier ring

Sources, and what each was checked against (tests/hw/test_wgmma.py runs the checks):
- Descriptor fields: PTX ISA, "Asynchronous Warpgroup Level Matrix Shared Memory Layout: Matrix
  Descriptor Format": start address, leading and stride byte offsets are byte values >> 4 in
  14-bit fields at bits 0, 16 and 32; the base offset is 3 bits at 49; the swizzle mode is 2 bits
  at 62 with 0 = none (interleave), 1 = 128B, 2 = 64B, 3 = 32B. CUTLASS's cute::GmmaDescriptor
  (cute/arch/mma_sm90_desc.hpp) has the same bitfield and the same mode numbers; DeepGEMM builds its
  K-major descriptors with the stride byte offset of 8 rows (8 x 128 bytes) and an unused leading
  offset. The SASS agrees: the high 32 bits of a descriptor appear as an immediate (UMOV into the
  odd uniform register of HGMMA's gdesc[] pair), bit for bit what encode() gives
  (sass_descriptor_words(); chapters/ch04_wgmma/wgmma_tile.cu shows it for all three swizzles).
- Accumulator fragment: PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk16", accumulator D:
  warp w of the warpgroup owns rows 16w..16w+15; lane l holds rows 16w + l/4 and 16w + l/4 + 8,
  columns 8j + 2(l % 4) + {0, 1}; register d[i] is column pair j = i // 4, the lower row for
  i % 4 in {0, 1}, the upper for {2, 3}. CUTLASS's CLayout_64xN (cute/atom/mma_traits_sm90_gmma.hpp)
  is the same map written as a CuTe layout ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)).
- K-major operand layouts: the swizzled canonical layouts are rows of 32, 64 or 128 bytes, 8 rows
  to a pattern, with the 16-byte chunk index XORed with the 128-byte line index: the same address
  rule as TMA's swizzles (judge.hw.tma.swizzle_offset), which is why a TMA box with the 128B swizzle
  is a valid wgmma operand as it lands. Without swizzle the unit is the 8 x 16-byte core matrix
  (128 contiguous bytes); the leading byte offset steps to the next core matrix along K, the
  stride byte offset to the next along M/N.

- MN-major operands (imm-trans-a / imm-trans-b = 1, bf16 and f16 only; tf32 and FP8 are K-major):
  PTX ISA, "Shared Memory Matrix Layout", the canonical layouts table; judge.hw.mma_layout states
  it for both majors and both architectures. Without swizzle the roles stay (SBO steps along M/N,
  LBO along K); swizzled, they swap: LBO steps from one span-wide block of M/N to the next, SBO
  from one group of 8 k-rows to the next (mnmajor_strides()). CUTLASS's make_gmma_desc<Major::MN>
  reads LBO and SBO from the same strides of its Layout_MN_SW*_Atom tiles.

The ISA stores each byte field as matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4 and asks for
16-byte alignment; encode() refuses what that would silently cut (a value not a multiple of 16,
or one of 2^18 bytes or more) instead of masking it. The base offset is 0 when the swizzle's
repeating pattern starts on its boundary (1024, 512, 256 bytes for 128B, 64B, 32B), else
(pattern start address >> 7) & 7 (base_offset_for()); operand_address() reads it as
judge.hw.mma_layout does (the XORed line index counts from the pattern start).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from judge.hw import mma_layout as _layout
from judge.hw import tma as _tma

# ----------------------------------------------------------------------------- descriptor
#: the 2-bit layout field (bits 62-63): PTX ISA and cute::GMMA::LayoutType agree
SWIZZLE_MODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
MODE_SWIZZLE = {v: k for k, v in SWIZZLE_MODE.items()}
#: bytes in one row of a swizzled K-major atom (the swizzle's span)
SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128}

#: (name, lowest bit, width, shift applied to the byte value before it is stored)
FIELDS = (
    ("start", 0, 14, 4),          # start address >> 4
    ("lbo", 16, 14, 4),           # leading dimension byte offset >> 4
    ("sbo", 32, 14, 4),           # stride dimension byte offset >> 4
    ("base_offset", 49, 3, 0),
    ("swizzle", 62, 2, 0),        # SWIZZLE_MODE
)
FIELD_BITS = {name: (lo, lo + width - 1) for name, lo, width, _ in FIELDS}
#: what each field holds, in words (for messages that name a field)
FIELD_MEANING = {"start": "start address >> 4", "lbo": "leading byte offset >> 4", "sbo": "stride byte offset >> 4",
                 "base_offset": "base offset", "swizzle": "layout (0 none, 1 = 128B, 2 = 64B, 3 = 32B)"}


class DescriptorError(ValueError):
    """A value that no descriptor can hold; .field names the field."""

    def __init__(self, field: str, problem: str):
        self.field = field
        super().__init__(f"descriptor field '{field}' (bits {FIELD_BITS[field][0]}-{FIELD_BITS[field][1]}): "
                         f"{problem}")


@dataclass(frozen=True)
class Descriptor:
    """The fields of a wgmma shared-memory matrix descriptor, in bytes (not yet shifted)."""
    start: int                 # shared-memory byte address of the operand's first element
    lbo: int                   # leading dimension byte offset
    sbo: int                   # stride dimension byte offset
    base_offset: int = 0
    swizzle: str = "128B"

    def __int__(self):
        return encode(self.start, self.lbo, self.sbo, self.swizzle, self.base_offset)


def _field_value(name: str, byte_value: int) -> int:
    lo, width, shift = next((lo, w, s) for n, lo, w, s in FIELDS if n == name)
    if not isinstance(byte_value, int) or byte_value < 0:
        raise DescriptorError(name, f"{byte_value!r} is not a non-negative integer")
    if byte_value % (1 << shift):
        raise DescriptorError(name, f"{byte_value} bytes is not a multiple of 16: the field stores bytes >> 4")
    v = byte_value >> shift
    if v >= 1 << width:
        raise DescriptorError(name, f"{byte_value} does not fit: {width} bits hold at most "
                                    f"{((1 << width) - 1) << shift}")
    return v << lo


def encode(start: int, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0) -> int:
    """The 64-bit descriptor. start, lbo, sbo in bytes (multiples of 16, below 2^18);
    swizzle one of "none", "32B", "64B", "128B"; base_offset 0..7."""
    if swizzle not in SWIZZLE_MODE:
        raise DescriptorError("swizzle", f"{swizzle!r} is not one of {', '.join(SWIZZLE_MODE)}")
    return (_field_value("start", start) | _field_value("lbo", lbo) | _field_value("sbo", sbo)
            | _field_value("base_offset", base_offset) | (SWIZZLE_MODE[swizzle] << 62))


def decode(desc: int) -> Descriptor:
    """The fields of a 64-bit descriptor, in bytes. Bits outside the fields must be 0."""
    desc = int(desc)
    if not 0 <= desc < 1 << 64:
        raise ValueError(f"a descriptor is 64 bits: {desc:#x} is not")
    used = 0
    vals = {}
    for name, lo, width, shift in FIELDS:
        mask = (1 << width) - 1
        used |= mask << lo
        vals[name] = ((desc >> lo) & mask) << shift
    if desc & ~used & ((1 << 64) - 1):
        stray = desc & ~used & ((1 << 64) - 1)
        raise ValueError(f"descriptor {desc:#018x} sets bits outside its fields: {stray:#018x}")
    return Descriptor(vals["start"], vals["lbo"], vals["sbo"], vals["base_offset"],
                      MODE_SWIZZLE[vals["swizzle"]])


def base_offset_for(pattern_start: int, swizzle: str) -> int:
    """The base offset field for a swizzle pattern that starts at `pattern_start` (PTX ISA):
    0 on the pattern's boundary (1024 / 512 / 256 bytes), else (pattern_start >> 7) & 7."""
    if swizzle not in SWIZZLE_MODE:
        raise DescriptorError("swizzle", f"{swizzle!r} is not one of {', '.join(SWIZZLE_MODE)}")
    if swizzle == "none" or pattern_start % _tma.SWIZZLE_REPEAT[swizzle] == 0:
        return 0
    return (pattern_start >> 7) & 7


def fields(desc: int) -> dict:
    """Every field's value as stored (byte fields still >> 4, the layout as its code), and the bits set
    outside the fields under "stray". Never raises on content: for messages about a wrong descriptor."""
    desc = int(desc)
    out, used = {}, 0
    for name, lo, width, _ in FIELDS:
        mask = (1 << width) - 1
        used |= mask << lo
        out[name] = (desc >> lo) & mask
    out["stray"] = desc & ~used & ((1 << 64) - 1)
    return out


def as_descriptor(v) -> int | None:
    """A descriptor as a learner's function returned it, as an int of its 64 bits: any Python or NumPy
    integer (an int64 holding bit 63 read unsigned), or an integral float; None for anything else."""
    import numbers

    import numpy as np
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, np.signedinteger) and v.dtype.itemsize == 8 and v < 0:
        return int(v) + (1 << 64)             # an int64 holding bit 63: the same 64 bits
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return None


def as_bits(value: int, width: int) -> str:
    """A field's stored value in binary, all its bits shown: as_bits(3, 2) == '0b11'."""
    return "0b" + format(int(value), f"0{width}b")


def field_differences(have: int, want: int) -> list[tuple]:
    """The fields in which descriptor `have` differs from `want`, in bit order: (name, lowest bit, highest
    bit, stored value in have, stored value in want); then ("stray", ...) listing the bits `have` sets
    outside every field. Both must be below 2^64."""
    h, w = fields(have), fields(want)
    out = [(name, lo, lo + width - 1, h[name], w[name]) for name, lo, width, _ in FIELDS if h[name] != w[name]]
    if h["stray"] != w["stray"]:
        out.append(("stray", 0, 63, [b for b in range(64) if h["stray"] >> b & 1],
                    [b for b in range(64) if w["stray"] >> b & 1]))
    return out


def explain(desc: int) -> str:
    """One line per field: bits, stored value, meaning."""
    d = decode(desc)
    return "\n".join([
        f"descriptor {int(desc):#018x}",
        f"  bits  0-13  start address >> 4       = {d.start >> 4:#x}  ({d.start} bytes)",
        f"  bits 16-29  leading byte offset >> 4 = {d.lbo >> 4}  ({d.lbo} bytes)",
        f"  bits 32-45  stride byte offset >> 4  = {d.sbo >> 4}  ({d.sbo} bytes)",
        f"  bits 49-51  base offset              = {d.base_offset}",
        f"  bits 62-63  layout                   = {SWIZZLE_MODE[d.swizzle]}  ({d.swizzle} swizzle)"])


# ----------------------------------------------------------------------------- K-major layouts
def _check_swizzle(swizzle: str):
    if swizzle not in SWIZZLE_MODE:
        raise ValueError(f"swizzle {swizzle!r}: use one of {', '.join(SWIZZLE_MODE)}")


def kmajor_offset(row: int, k: int, swizzle: str = "128B", *, elem_bytes: int = 2, rows: int = 64,
                  k_elems: int | None = None):
    """Byte offset, from the tile's start, of element [row][k] of a K-major operand tile of `rows`
    rows (M or N) and `k_elems` elements along K, in the canonical layout of `swizzle`.

    Swizzled: the tile is cut along K into column blocks one span wide (128, 64 or 32 bytes); each
    block holds all `rows` rows, one span per row, and the 16-byte chunks of each row are XORed with
    the 128-byte line index (judge.hw.tma.swizzle_offset, what TMA writes with the same swizzle).
    "none": 8 x 16-byte core matrices of 128 contiguous bytes, K-fastest: core matrix (row // 8,
    kbyte // 16) at ((row // 8) * (k_bytes // 16) + kbyte // 16) * 128.
    Works on ints and on NumPy integer arrays."""
    _check_swizzle(swizzle)
    kb = k * elem_bytes
    if swizzle == "none":
        k_bytes = (k_elems if k_elems is not None else 16 // elem_bytes * 2) * elem_bytes
        return ((row // 8) * (k_bytes // 16) + kb // 16) * 128 + (row % 8) * 16 + kb % 16
    span = SPAN[swizzle]
    plain = ((kb // span) * rows + row) * span + kb % span
    return _tma.swizzle_offset(plain, swizzle)


def kmajor_strides(swizzle: str = "128B", *, rows: int = 64, k_bytes: int = 32) -> tuple[int, int]:
    """(lbo, sbo) in bytes of the canonical K-major tile kmajor_offset() lays out.

    Swizzled: sbo = 8 rows x span (1024 for 128B); one wgmma's k16 slice (32 bytes of bf16) never
    leaves its row, so the leading byte offset is not used: the course sets it to 16 (field value 1),
    as CUTLASS does. "none": lbo = 128 (the next core matrix along K), sbo = 8 rows x k_bytes."""
    _check_swizzle(swizzle)
    if swizzle == "none":
        return 128, (k_bytes // 16) * 128
    return 16, 8 * SPAN[swizzle]


def kmajor_descriptor(start: int, swizzle: str = "128B", *, rows: int = 64, k_bytes: int = 32) -> int:
    """The descriptor of the canonical K-major tile at shared address `start` (see kmajor_offset).
    For the k-th 16-element slice of a swizzled tile, pass start + its offset (32 bytes per slice
    inside a span; the next column block after a span)."""
    lbo, sbo = kmajor_strides(swizzle, rows=rows, k_bytes=k_bytes)
    return encode(start, lbo, sbo, swizzle)


def operand_address(desc: int, row, k, *, elem_bytes: int = 2, major: str = "K"):
    """The shared-memory byte address wgmma reads element [row][k] of an operand from (row: M of A,
    N of B; k < 16 for bf16: one wgmma's slice), given its descriptor and its major (K, or MN when
    the instruction's imm-trans bit for it is 1). The model of the hardware, for K-major:
    swizzled: start + (row // 8) * sbo + (row % 8) * span + k bytes, then the swizzle on the address
    bits; none: start + (row // 8) * sbo + (kbyte // 16) * lbo + (row % 8) * 16 + kbyte % 16;
    MN-major and the base offset as judge.hw.mma_layout.read_address states them."""
    d = decode(desc)
    return _layout.read_address(d.start, d.lbo, d.sbo, d.swizzle, major, row, k, elem_bytes=elem_bytes,
                                base_offset=d.base_offset)


# ----------------------------------------------------------------------------- MN-major layouts
def mnmajor_offset(row, k, swizzle: str = "128B", *, elem_bytes: int = 2, rows: int = 64, k_elems: int = 16):
    """Byte offset, from the tile's start, of element [row][k] (row: M of A or N of B) of an MN-major
    tile of `rows` x `k_elems`: swizzled, blocks one span wide along M/N, each holding every k-row
    (one span per k-row, the 16-byte chunks XORed with the line index: what TMA writes for a box whose
    inner dimension is M/N); "none", core matrices of 8 k-rows x 16 bytes of M/N, M/N fastest."""
    _check_swizzle(swizzle)
    return _layout.tile_offset(row, k, swizzle, "MN", rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)


def mnmajor_strides(swizzle: str = "128B", *, rows: int = 64, k_elems: int = 16, elem_bytes: int = 2):
    """(lbo, sbo) of the MN-major tile mnmajor_offset() lays out. Swizzled: LBO = k_elems x span (the
    next span-wide block of M/N), SBO = 8 x span (the next 8 k-rows) - the roles swap against K-major;
    "none": LBO = 8 k-rows further (rows x elem_bytes / 16 core matrices), SBO = 128 (the next 16 bytes of M/N)."""
    _check_swizzle(swizzle)
    return _layout.tile_strides(swizzle, "MN", rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)


def mnmajor_descriptor(start: int, swizzle: str = "128B", *, rows: int = 64, k_elems: int = 16,
                       elem_bytes: int = 2) -> int:
    """The descriptor of the MN-major tile at `start` (mnmajor_offset). The k16 slice ks of a taller
    tile (k_elems > 16) starts 16 k-rows further: start + 2 * sbo swizzled, start + 2 * lbo without."""
    lbo, sbo = mnmajor_strides(swizzle, rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)
    return encode(start, lbo, sbo, swizzle)


def draw_layout(swizzle: str = "128B", major: str = "K", **kw):
    """A matplotlib Figure of a canonical tile's 16-byte chunks and core matrices (judge.hw.mma_layout.draw_tile)."""
    _check_swizzle(swizzle)
    return _layout.draw_tile(swizzle, major, **kw)


# ----------------------------------------------------------------------------- accumulator fragment
#: legal N of wgmma .m64nNk16 (bf16/f16 inputs): multiples of 8 up to 256
SHAPES_N = tuple(range(8, 257, 8))


def _check_n(n: int):
    if n not in SHAPES_N:
        raise ValueError(f"wgmma .m64nNk16 has N = 8, 16, ..., 256, not {n}")


def fragment_coord(thread: int, reg: int, n: int = 64) -> tuple[int, int]:
    """(row, col) of the m64nN fp32 accumulator that register d[reg] of `thread` (0..127) holds."""
    _check_n(n)
    if not 0 <= thread < 128:
        raise ValueError(f"a warpgroup has threads 0..127, not {thread}")
    if not 0 <= reg < n // 2:
        raise ValueError(f"m64n{n} has {n // 2} fp32 accumulator registers per thread, not d[{reg}]")
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((reg // 2) % 2)
    col = 8 * (reg // 4) + 2 * (lane % 4) + reg % 2
    return row, col


def a_fragment_coord(thread: int, reg: int, k: int = 16) -> tuple[int, int]:
    """(row, k) of the lowest element that register a[reg] (0..3, .b32) of `thread` holds in the register
    form of wgmma (A from registers): .m64nNk16 (k=16, bf16/f16: the register holds (row, k) and (row, k + 1))
    or .m64nNk32 (k=32, e4m3/e5m2: four bytes, (row, k) .. (row, k + 3)).
    PTX ISA, wgmma "Register Fragments", matrix A: warp w owns rows 16w..16w+15, lane l row l / 4 of each
    8-row band and the (l % 4)-th register-wide column group of each half of K; a[0] upper band left
    half, a[1] lower band, a[2] upper band right half, a[3] lower band right half (the accumulator's
    pattern with 16 columns; for 8-bit types every element is half as wide, so a register spans 4 of K)."""
    if not 0 <= thread < 128:
        raise ValueError(f"a warpgroup has threads 0..127, not {thread}")
    if k not in (16, 32):
        raise ValueError(f"wgmma's K is 16 (16-bit types) or 32 (8-bit types), not {k}")
    if not 0 <= reg < 4:
        raise ValueError(f"the A fragment of m64nNk{k} is four .b32 registers per thread, not a[{reg}]")
    warp, lane = divmod(thread, 32)
    per = k // 8                                      # elements per register: 2 or 4
    return 16 * warp + lane // 4 + 8 * (reg % 2), per * (lane % 4) + (k // 2) * (reg // 2)


def fragment_owner(row: int, col: int, n: int = 64) -> tuple[int, int]:
    """(thread, reg): who holds C[row][col] of an m64nN fp32 accumulator."""
    _check_n(n)
    if not (0 <= row < 64 and 0 <= col < n):
        raise ValueError(f"C is 64 x {n}: ({row}, {col}) is outside it")
    warp, r = divmod(row, 16)
    half, group = divmod(r, 8)
    j, c = divmod(col, 8)
    pair, low = divmod(c, 2)
    return 32 * warp + 4 * group + pair, 4 * j + 2 * half + low


def fragment_tables(n: int = 64):
    """Two (64, n) integer arrays: the thread and the register holding each C element."""
    import numpy as np
    thread = np.empty((64, n), dtype=np.int64)
    reg = np.empty((64, n), dtype=np.int64)
    for t in range(128):
        for i in range(n // 2):
            r, c = fragment_coord(t, i, n)
            thread[r, c], reg[r, c] = t, i
    return thread, reg


def draw_fragment(n: int = 16, *, rows: int = 64, label_threads=(0, 1, 4, 37)):
    """A matplotlib Figure: C (rows x n) coloured by warp, each cell labelled with the lane, and
    the registers of a few threads spelled out. No pyplot (safe under Agg)."""
    import numpy as np
    from matplotlib.figure import Figure

    thread, reg = fragment_tables(n)
    thread, reg = thread[:rows], reg[:rows]
    fig = Figure(figsize=(1.2 + 0.42 * n, 0.6 + 0.26 * rows), layout="constrained")
    ax = fig.subplots()
    warp = thread // 32
    colors = np.array([[0.80, 0.87, 0.96], [0.98, 0.85, 0.74], [0.82, 0.93, 0.80], [0.95, 0.80, 0.82]])
    img = colors[warp]
    for t in label_threads:
        img[thread == t] = [0.35, 0.35, 0.35]
    ax.imshow(img, aspect="auto", interpolation="nearest")
    for r in range(rows):
        for c in range(n):
            t, i = int(thread[r, c]), int(reg[r, c])
            dark = t in label_threads
            ax.text(c, r, f"T{t}\nd{i}" if dark else f"{t % 32}", ha="center", va="center",
                    fontsize=5 if dark else 6, color="white" if dark else "black")
    ax.set_xticks(range(0, n, 2))
    ax.set_yticks(range(0, rows, 4))
    ax.set_xlabel("column of C (N)")
    ax.set_ylabel("row of C (M)")
    for r in range(8, rows, 8):
        ax.axhline(r - 0.5, color="black", linewidth=0.5 if r % 16 else 1.5)
    for c in range(8, n, 8):
        ax.axvline(c - 0.5, color="black", linewidth=1.0)
    ax.set_title(f"m64n{n} accumulator: cell = lane; colour = warp 0-3 of the warpgroup; "
                 f"dark = threads {', '.join(map(str, label_threads))} with their registers", fontsize=9)
    return fig


# ----------------------------------------------------------------------------- SASS
_UMOV = re.compile(r"\bUMOV\s+UR(\d+),\s*(0x[0-9a-fA-F]+|\d+)\b")
_GDESC = re.compile(r"\b[HQI]GMMA\.\S+\s+R\d+,\s*gdesc\[UR(\d+)\]")


def sass_descriptor_words(sass: str) -> list[tuple[int | None, int | None]]:
    """For every HGMMA with both operands in shared memory (gdesc[URn]): the immediate last moved
    into UR(n+1) and UR(n+3), the high 32 bits of the A and B descriptors (None when the register
    was computed rather than loaded with an immediate). The low words hold the start address,
    which kernels compute at run time."""
    last: dict[int, int] = {}
    out = []
    for line in sass.splitlines():
        m = _UMOV.search(line)
        if m:
            last[int(m.group(1))] = int(m.group(2), 0)
            continue
        g = _GDESC.search(line)
        if g:
            n = int(g.group(1))
            out.append((last.get(n + 1), last.get(n + 3)))
    return out


# ----------------------------------------------------------------------------- the ring, modelled
def ring_schedule(tiles: int, S: int, load: float, mma: float, consumers: int = 2,
                  issue_gap: float | None = None):
    """A model of the warp-specialized main loop: one producer, `consumers` consumer warpgroups,
    an S-slot ring of full/empty mbarriers. Every consumer works on every k-tile (each its own rows
    of the block's output), so empty[slot] completes when all consumers released it.

    Rules: the producer issues tile i's load when empty[i % S] has completed lap i // S - 1 (all
    consumers done with tile i - S) and at least `issue_gap` after the previous issue (default
    `load`: one load at a time; 0: as many in flight as there are free slots, each taking `load`
    from issue to landing); consumer c computes tile i (`mma`) once the load landed and its tile i - 1 is done.
    Returns {"producer": [(start, end), ...], "consumers": [[(start, end), ...], ...]} and the
    per-consumer schedules judge.draw.timeline.draw takes: schedules(model)."""
    if S < 1 or tiles < 0 or consumers < 1:
        raise ValueError("need S >= 1, tiles >= 0, consumers >= 1")
    prod, cons = [], [[] for _ in range(consumers)]
    engine_free = 0.0
    for i in range(tiles):
        freed = max((cons[c][i - S][1] for c in range(consumers)), default=0.0) if i >= S else 0.0
        start = max(engine_free, freed)
        prod.append((start, start + load))
        engine_free = start + (load if issue_gap is None else issue_gap)
        for c in range(consumers):
            prev = cons[c][i - 1][1] if i else 0.0
            s = max(prod[i][1], prev)
            cons[c].append((s, s + mma))
    return {"producer": prod, "consumers": cons}


def schedules(ring: dict, names: tuple[str, ...] | None = None) -> dict:
    """{name: [(load_start, load_end, mma_start, mma_end), ...]} per consumer, for
    judge.draw.timeline.draw: the copy row is the producer's loads, the compute row that consumer's MMAs."""
    prod, cons = ring["producer"], ring["consumers"]
    names = names or tuple(f"consumer {c}" for c in range(len(cons)))
    return {name: [(*prod[i], *cons[c][i]) for i in range(min(len(prod), len(cons[c])))]
            for c, name in enumerate(names)}
