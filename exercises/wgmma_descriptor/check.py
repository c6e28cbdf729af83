"""Grader of wgmma_descriptor: python practice/judge.py check wgmma_descriptor

Both functions are called directly, through the Python flow (judge.grading.cpu_flow), and compared
bit for bit with judge.hw.wgmma (the PTX ISA's Matrix Descriptor Format, checked against the SASS
in tests/hw/test_wgmma.py):
1. encode() on the statement's fields (every swizzle, base offsets, the largest values), then on
   field sets drawn per run;
2. tile_descriptor() for every swizzle, slice k = 0..3 and four tile addresses (one above 64 KiB),
   then on tile addresses, swizzles and slices drawn per run.
A wrong descriptor is decoded field by field and the first differing field is named with its bits.
For tile_descriptor the judge also says what wgmma would do with it: it follows the descriptor the
way the hardware does (judge.hw.wgmma.operand_address) and names the first element of the slice it
would read from a byte where the tile does not hold it.
"""
from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import wgmma

SWIZZLES = ("none", "32B", "64B", "128B")
REPEAT = {"none": 128, "32B": 256, "64B": 512, "128B": 1024}    # a tile starts on its swizzle's repeat
SMEM = 228 * 1024                                               # Hopper's shared memory per SM
TILE_BYTES = 64 * 64 * 2                                        # 64 x 64 bf16
FIXED = [
    (0x400, 16, 1024, "128B", 0), (0x400, 16, 512, "64B", 0), (0x400, 16, 256, "32B", 0),
    (0x400, 128, 1024, "none", 0), (0, 0, 0, "none", 0), (0x3FFF0, 0x3FFF0, 0x3FFF0, "32B", 7),
    (0x8420, 16, 1024, "128B", 0), (0x1230, 4096, 2048, "64B", 3), (0x36000, 16, 1024, "128B", 5),
]
STARTS = (0x400, 0x2000, 0x8400, 0x36000)
MEANING = wgmma.FIELD_MEANING


def tile_reference(start, swizzle, k):
    """Slice k of the canonical 64 x 64 bf16 K-major tile at `start`: where A[0][16k] lies, and the tile's strides."""
    first = start + wgmma.kmajor_offset(0, 16 * k, swizzle, k_elems=64)
    return wgmma.kmajor_descriptor(first, swizzle, k_bytes=128)


as_descriptor = wgmma.as_descriptor      # any Python or NumPy integer holding the 64 bits


def differs(got: int, want: int) -> list[str]:
    """The fields (with their bits) in which two descriptors differ, stray bits included."""
    if not 0 <= got < 1 << 64:
        return [f"{got:#x} does not fit in 64 bits"]
    out = []
    for name, lo, width, shift in wgmma.FIELDS:
        mask = (1 << width) - 1
        g, w = (got >> lo) & mask, (want >> lo) & mask
        if g != w:
            unit = f" ({g << shift} bytes)" if shift else ""
            wunit = f" ({w << shift} bytes)" if shift else ""
            out.append(f"field {MEANING[name]}, bits {lo}-{lo + width - 1}: you have {g}{unit}, expected {w}{wunit}")
    used = sum(((1 << w) - 1) << lo for _, lo, w, _ in wgmma.FIELDS)
    stray = got & ~used & ((1 << 64) - 1)
    if stray:
        out.append(f"bits {[b for b in range(64) if stray >> b & 1]} are set, but they belong to no field and must be 0")
    return out


def compare(got, want):
    g = as_descriptor(got)
    if g is None:
        return (f"got {checks.show(got)}: a descriptor is an integer below 2**64 (a Python int or any NumPy integer "
                f"type holding its 64 bits)")
    return None if g == want else differs(g, want)[0]


def _hex_lines(got, want):
    g = as_descriptor(got)
    if g is None:
        return []
    return [f"got {g:#018x}", f"expected {want:#018x}", *differs(g, want)[1:]]


def consequence(desc, start, swizzle, k) -> str | None:
    """What wgmma would read with this descriptor: the first misplaced element of the slice."""
    try:
        wgmma.decode(desc)
        for row in range(64):
            for kk in range(16):
                have = wgmma.operand_address(desc, row, kk)
                want = start + wgmma.kmajor_offset(row, 16 * k + kk, swizzle, k_elems=64)
                if have != want:
                    return (f"with it, wgmma would read A[{row}][{16 * k + kk}] from shared byte {have:#x}; "
                            f"the tile holds it at {want:#x}")
    except (ValueError, TypeError, OverflowError):
        return None
    return None


def tile_why(call, got, want):
    start, swizzle, k = call.args[:3]
    out = _hex_lines(got, want)
    g = as_descriptor(got)
    if g is None:
        return out
    why = consequence(g, start, swizzle, k)
    if why:
        out.insert(0, why)
    elif swizzle != "none" and all("leading" in d for d in differs(g, want)):
        out.insert(0, "the hardware ignores this field for a swizzled K-major tile, but the exercise fixes it to "
                      "16 bytes (field value 1), as CUTLASS does")
    if start >= 1 << 16 and consequence(g, start & 0xFFFF, swizzle, k) is None:
        out.append(f"the tile starts at {start:#x}, above 64 KiB: a shared address has 18 bits here "
                   f"(228 KiB of shared memory), and the start field keeps bits 4-17")
    return out


BYTES_16 = st.integers(0, (1 << 14) - 1).map(lambda v: 16 * v)       # what a 14-bit field of bytes >> 4 holds

ENCODE = flow.Function(
    "encode", reference=wgmma.encode, compare=compare, explain=lambda call, got, want: _hex_lines(got, want),
    args=st.tuples(BYTES_16, BYTES_16, BYTES_16, st.sampled_from(SWIZZLES), st.integers(0, 7)),
    edges=[flow.Edge(f, "the statement's fields") for f in FIXED]
    + [flow.Edge(flow.Args(0x400, 16, 1024, "128B"), "the statement's example, base_offset left at its default")])


@st.composite
def _tiles(draw):
    sw = draw(st.sampled_from(SWIZZLES))
    start = REPEAT[sw] * draw(st.integers(0, (SMEM - TILE_BYTES) // REPEAT[sw]))
    return (start, sw, draw(st.integers(0, 3)))


TILE = flow.Function(
    "tile_descriptor", reference=tile_reference, compare=compare, explain=tile_why, args=_tiles(),
    edges=[flow.Edge((s, sw, k), "every swizzle and slice" + (", a tile above 64 KiB" if s >= 1 << 16 else ""))
           for s in STARTS for sw in SWIZZLES for k in range(4)])


def check(sub):
    return flow.run(sub, [ENCODE, TILE],
                    checked=[f"encode: {len(FIXED) + 1} field sets of the statement, then field sets drawn per run",
                             "tile_descriptor: none/32B/64B/128B x k = 0..3 x 4 addresses, then tiles drawn per run"])
