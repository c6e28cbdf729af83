"""Grader of umma_descriptor: python practice/judge.py check umma_descriptor

The three functions are called through the Python flow (judge.grading.cpu_flow) and compared bit for
bit with judge.hw.umma (the PTX ISA's tcgen05 shared-memory and instruction descriptors; the operand
addresses from judge.hw.mma_layout, tested against the ISA's canonical-layout table in tests/hw/test_umma.py):
1. smem_descriptor() on the statement's fields (every swizzle, base offsets, the largest values), then
   on field sets drawn per run;
2. tile_descriptor() for every swizzle, major and slice at tiles on and off their swizzle's repeat
   (one above 64 KiB), then on tiles drawn per run;
3. instr_descriptor() on the statement's example and both majors of A and B, then on shapes drawn per run.
A wrong descriptor is decoded field by field and the first differing field named with its bits. For
tile_descriptor the judge also follows the descriptor the way the MMA does (judge.hw.umma.operand_address)
and names the first element of the slice it would read from a byte where the tile does not hold it.
"""
import numbers

import numpy as np
from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import mma_layout, umma

SWIZZLES = ("none", "128B_base32B", "128B", "64B", "32B")
TILE_SWIZZLES = ("none", "32B", "64B", "128B")
MAJORS = ("K", "MN")
SMEM = 228 * 1024
TILE_BYTES = 128 * 64 * 2
FIXED = [
    (0x400, 16, 1024, "128B", 0), (0x400, 16, 512, "64B", 0), (0x400, 16, 256, "32B", 0),
    (0x400, 128, 1024, "none", 0), (0, 0, 0, "none", 0), (0x3FFF0, 0x3FFF0, 0x3FFF0, "32B", 7),
    (0x8480, 8192, 1024, "128B", 1), (0x1200, 4096, 512, "64B", 4), (0x36000, 2048, 512, "128B_base32B", 0),
]
STARTS = (0x400, 0x480, 0x8300, 0x30180)
IDESC_MEANING = {"sparse_id": "sparsity selector", "sparse": "sparse flag", "saturate": "saturate",
                 "dtype": "D format (1 = F32)", "atype": "A format (1 = BF16)", "btype": "B format (1 = BF16)",
                 "neg_a": "negate A", "neg_b": "negate B", "mn_a": "transpose A (1 = MN-major)",
                 "mn_b": "transpose B (1 = MN-major)", "n_shr3": "N >> 3", "m_shr4": "M >> 4",
                 "max_shift": "max shift"}


def tile_reference(start, swizzle, major, ks):
    """Slice ks of the canonical 128 x 64 bf16 tile at `start`, its pattern starting at `start`."""
    return umma.tile_descriptor(start, swizzle, major, rows=128, k_elems=64, ks=ks,
                                base_offset=umma.base_offset_for(start, swizzle))


def idesc_reference(M, N, a_major, b_major):
    return umma.encode_idesc("kind::f16", "bf16", "bf16", M=M, N=N, a_major=a_major, b_major=b_major)


def as_int(v):
    """A returned descriptor as an int, or None when it is not an integer of any type."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, np.signedinteger) and v < 0:
        return int(v) + (1 << (8 * v.dtype.itemsize))     # the same bits, read unsigned
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return None


def smem_differs(got: int, want: int) -> list[str]:
    if not 0 <= got < 1 << 64:
        return [f"{got:#x} does not fit in 64 bits"]
    g, w = umma.fields(got), umma.fields(want)
    out = []
    for name, lo, width, shift in umma.FIELDS:
        if g[name] != w[name]:
            unit = (lambda v: f" ({v} bytes)") if shift else (lambda v: "")
            out.append(f"field {umma.MEANING[name]}, bits {lo}-{lo + width - 1}: you have {g[name] >> shift}"
                       f"{unit(g[name])}, expected {w[name] >> shift}{unit(w[name])}")
    if g["stray"]:
        out.append(f"bits {[b for b in range(64) if g['stray'] >> b & 1]} are set, but they belong to no field "
                   f"and must be 0")
    return out


def idesc_differs(got: int, want: int) -> list[str]:
    if not 0 <= got < 1 << 32:
        return [f"{got:#x} does not fit in 32 bits"]
    out = []
    for name, lo, width in umma.IDESC_FIELDS:
        mask = (1 << width) - 1
        g, w = (got >> lo) & mask, (want >> lo) & mask
        if g != w:
            out.append(f"field {IDESC_MEANING[name]}, bits {lo}-{lo + width - 1}: you have {g}, expected {w}")
    used = sum(((1 << w) - 1) << lo for _, lo, w in umma.IDESC_FIELDS)
    if got & ~used & 0xFFFFFFFF:
        out.append(f"bits {[b for b in range(32) if (got & ~used) >> b & 1]} are reserved and must be 0")
    return out


def _compare(differs, bits):
    def compare(got, want):
        g = as_int(got)
        if g is None:
            return (f"got {checks.show(got)}: a descriptor is an integer below 2**{bits} (a Python int or any NumPy "
                    f"integer type holding its bits)")
        return None if g == want else differs(g, want)[0]
    return compare


def _hex_lines(got, want, differs, width):
    g = as_int(got)
    if g is None:
        return []
    return [f"got {g:#0{width + 2}x}", f"expected {want:#0{width + 2}x}", *differs(g, want)[1:]]


def consequence(desc, start, swizzle, major, ks) -> str | None:
    """What the MMA would read with this descriptor: the first misplaced element of the slice."""
    try:
        umma.decode(desc)
    except ValueError as e:
        return f"the MMA cannot read through it: {e}"
    try:
        mn = np.arange(128)[:, None]
        kk = np.arange(16)[None, :]
        have = np.asarray(umma.operand_address(desc, mn, kk, major))
        want = start + mma_layout.tile_offset(mn, 16 * ks + kk, swizzle, major, rows=128, k_elems=64)
    except (ValueError, TypeError, OverflowError):
        return None
    bad = np.argwhere(have != want)
    if not len(bad):
        return None
    r, k = (int(x) for x in bad[0])
    what = "A or B" if major == "K" else "the operand"
    return (f"with it, the MMA would read element [{r}][{16 * ks + k}] of {what} ({major}-major) from shared byte "
            f"{int(have[r, k]):#x}; the tile holds it at {int(want[r, k]):#x}")


def tile_why(call, got, want):
    start, swizzle, major, ks = call.args[:4]
    out = _hex_lines(got, want, smem_differs, 16)
    g = as_int(got)
    if g is None:
        return out
    why = consequence(g, start, swizzle, major, ks)
    if why:
        out.insert(0, why)
    elif swizzle != "none" and major == "K" and all("leading" in d for d in smem_differs(g, want)):
        out.insert(0, "the MMA ignores this field for a swizzled K-major tile, but the exercise fixes it to 16 "
                      "bytes (field value 1), as CUTLASS does")
    f, w = umma.fields(g), umma.fields(want)
    if major == "MN" and swizzle != "none" and (f["lbo"], f["sbo"]) == (w["sbo"], w["lbo"]):
        out.append("LBO and SBO are exchanged: in a swizzled MN-major tile LBO steps along M/N (one span-wide "
                   "block to the next) and SBO along K (8 k-rows)")
    if f["base_offset"] != w["base_offset"]:
        out.append(f"the tile starts at {start:#x}, {start % mma_layout.REPEAT[swizzle]} bytes past its swizzle's "
                   f"repeat ({mma_layout.REPEAT[swizzle]} bytes): base offset = (start >> 7) & 7 there, 0 on it "
                   f"and without swizzle")
    return out


def idesc_why(call, got, want):
    out = _hex_lines(got, want, idesc_differs, 8)
    g = as_int(got)
    if g is not None and ((g >> 15) & 3, (want >> 15) & 3) in ((1, 2), (2, 1)):
        out.insert(0, "the two transpose bits are exchanged: bit 15 is A's major, bit 16 is B's")
    return out


BYTES_16 = st.integers(0, (1 << 14) - 1).map(lambda v: 16 * v)

SMEM_DESC = flow.Function(
    "smem_descriptor", reference=umma.encode, compare=_compare(smem_differs, 64),
    explain=lambda call, got, want: _hex_lines(got, want, smem_differs, 16),
    args=st.tuples(BYTES_16, BYTES_16, BYTES_16, st.sampled_from(SWIZZLES), st.integers(0, 7)),
    edges=[flow.Edge(f, "the statement's fields") for f in FIXED]
    + [flow.Edge(flow.Args(0x400, 16, 1024, "128B"), "the statement's example, base_offset left at its default")])


@st.composite
def _tiles(draw):
    sw = draw(st.sampled_from(TILE_SWIZZLES))
    start = 128 * draw(st.integers(0, (SMEM - TILE_BYTES) // 128))
    return (start, sw, draw(st.sampled_from(MAJORS)), draw(st.integers(0, 3)))


TILE = flow.Function(
    "tile_descriptor", reference=tile_reference, compare=_compare(smem_differs, 64), explain=tile_why,
    args=_tiles(),
    edges=[flow.Edge((s, sw, mj, k), f"every swizzle, major and slice at {s:#x}"
                     + (", off the swizzle's repeat" if s % 1024 else "") + (", above 64 KiB" if s >= 1 << 16 else ""))
           for s in STARTS for sw in TILE_SWIZZLES for mj in MAJORS for k in range(4)])


@st.composite
def _shapes(draw):
    M = draw(st.sampled_from((64, 128)))
    step = 8 if M == 64 else 16
    return (M, step * draw(st.integers(1, 256 // step)), draw(st.sampled_from(MAJORS)), draw(st.sampled_from(MAJORS)))


IDESC = flow.Function(
    "instr_descriptor", reference=idesc_reference, compare=_compare(idesc_differs, 32), explain=idesc_why,
    args=_shapes(),
    edges=[flow.Edge((128, 256, "K", "MN"), "the statement's example")]
    + [flow.Edge((128, 128, a, b), "A and B in each major") for a in MAJORS for b in MAJORS]
    + [flow.Edge((64, 8, "K", "K"), "the smallest shape")])


def check(sub):
    return flow.run(sub, [SMEM_DESC, TILE, IDESC],
                    checked=[f"smem_descriptor: {len(FIXED) + 1} field sets of the statement, then field sets drawn per run",
                             "tile_descriptor: none/32B/64B/128B x K/MN x ks = 0..3 x 4 addresses (3 off the 1024-byte repeat), "
                             "then tiles drawn per run",
                             "instr_descriptor: the example and the four majors, then shapes drawn per run"])
