"""Grader of wgmma_mn_descriptor: python practice/judge.py check wgmma_mn_descriptor

Both functions are called through the Python flow (judge.grading.cpu_flow) and compared with
reference.py beside this file (mnmajor_slice_descriptor, assembled from judge.hw.wgmma's parts, and
judge.hw.wgmma.operand_address with major "MN": the PTX ISA's descriptor
format and canonical MN-major layouts; tests/chapters/ch04_wgmma/test_mn_descriptor.py holds them to
gemm_mn_major.cu's desc_b_nmajor and to where TMA puts each element):
1. nmajor_slice_descriptor() on listed tiles, in four groups, each with what it is there for:
     the statement's tiles   every swizzle x k = 0..3 at 0x400: the strides' roles, SBO's size, the
                             slice step and the layout codes fail here first;
     other widths            n = 64 and 256: n does not enter the descriptor (no fixture is found by
                             this group alone);
     above 64 KiB            0x10000 and 0x30000: the only tiles that find wrong_start_16_bits;
     off the repeat          0x8480, 0x8680, 0x8300, base offsets 1, 5, 6 (0 for 32B at 0x8300, on its
                             256-byte repeat): the only tiles that find wrong_base_offset_zero;
   then on tiles drawn per run (any swizzle, width, slice, start a multiple of 128 anywhere).
2. byte_of() on points of slices on and off the repeat (the off ones there for a XOR that ignores the
   base offset: wrong_byte_of_line_from_address), then on points of slices drawn per run, their boxes
   16 to 128 k-rows tall so that LBO must be read from the descriptor.
A wrong descriptor is decoded field by field and the first differing field named with its bits; the
judge then follows it as wgmma does and names the first element of the slice it would read from a
byte where the tile does not hold it (and what the tile holds there). A wrong byte_of is shown the
reference's walk (block, group, k-row, line XOR) and which element wgmma reads from the byte returned.
"""
import numbers

import numpy as np
from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import mma_layout, wgmma

from judge.grading import exercise

mn_ref = exercise.get("wgmma_mn_descriptor").reference_module()   # the exercise's reference rules

SWIZZLES = ("128B", "64B", "32B")
SMEM = 228 * 1024                          # Hopper's shared memory per SM
K_ROWS = 64                                # the tile's k-rows (four k16 slices)


def descriptor_reference(start, swizzle, k, n=128):
    """Slice k of the N-major 64 x n bf16 tile at `start`, its swizzle pattern starting there."""
    return mn_ref.mnmajor_slice_descriptor(start, swizzle, k, rows=n, k_elems=K_ROWS)


def byte_reference(desc, n, k):
    return int(wgmma.operand_address(desc, n, k, major="MN"))


def tile_bytes(n, k_rows=K_ROWS):
    return 2 * n * k_rows


# ----------------------------------------------------------------------------- the descriptor
as_descriptor = wgmma.as_descriptor      # any Python or NumPy integer holding the 64 bits


def differs(got: int, want: int) -> list[str]:
    """The fields (with their bits) in which two descriptors differ, stray bits last."""
    if not 0 <= got < 1 << 64:
        return [f"{got:#x} does not fit in 64 bits"]
    out = []
    for name, lo, hi, g, w in wgmma.field_differences(got, want):
        if name == "stray":
            out.append(f"bits {g} are set, but they belong to no field and must be 0")
            continue
        shift = 4 if name in ("start", "lbo", "sbo") else 0
        unit = (lambda v: f" ({v << shift} bytes)") if shift else (lambda v: "")
        width = hi - lo + 1
        out.append(f"field {wgmma.FIELD_MEANING[name]}, bits {lo}-{hi}: you have {g} = {wgmma.as_bits(g, width)}"
                   f"{unit(g)}, expected {w} = {wgmma.as_bits(w, width)}{unit(w)}")
    return out


def compare_descriptor(got, want):
    g = as_descriptor(got)
    if g is None:
        return (f"got {checks.show(got)}: a descriptor is an integer below 2**64 (a Python int or any NumPy integer "
                f"type holding its 64 bits)")
    return None if g == want else differs(g, want)[0]


def _tile_holds(start, swizzle, n):
    """{shared byte: (k-row, column)} of the whole 64 x n tile at `start`."""
    kk, nn = np.meshgrid(np.arange(K_ROWS), np.arange(n), indexing="ij")
    at = start + mma_layout.tile_offset(nn, kk, swizzle, "MN", rows=n, k_elems=K_ROWS)
    return {int(a): (int(r), int(c)) for a, r, c in zip(at.ravel(), kk.ravel(), nn.ravel())}


def consequence(desc, start, swizzle, k, n) -> str | None:
    """What wgmma would read through this descriptor: the first element of the slice read from a byte
    where the tile does not hold it, and what the tile holds there."""
    try:
        wgmma.decode(desc)
        if wgmma.decode(desc).swizzle == "none":
            return ("layout 0 is no swizzle: wgmma would read this tile as 8 x 16-byte core matrices, "
                    "not as span-wide swizzled k-rows")
        cols = np.arange(n)[None, :]
        rows = np.arange(16)[:, None]
        have = np.asarray(wgmma.operand_address(desc, cols, rows, major="MN"))
        want = start + mma_layout.tile_offset(cols, 16 * k + rows, swizzle, "MN", rows=n, k_elems=K_ROWS)
    except (ValueError, TypeError, OverflowError, KeyError):
        return None
    bad = np.argwhere(have != want)
    if not len(bad):
        return None
    r, c = (int(x) for x in bad[0])
    at = int(have[r, c])
    held = _tile_holds(start, swizzle, n).get(at)
    there = f"that byte holds B[{held[0]}][{held[1]}]" if held else "that byte is outside the tile"
    return (f"with it, wgmma would read B[{16 * k + r}][{c}] from shared byte {at:#x}; the tile holds it at "
            f"{int(want[r, c]):#x} ({there})")


def descriptor_why(call, got, want):
    args = dict(zip(("start", "swizzle", "k", "n"), call.args)) | call.kwargs
    start, swizzle, k, n = args["start"], args["swizzle"], args["k"], args.get("n", 128)
    g = as_descriptor(got)
    if g is None or not 0 <= g < 1 << 64:
        return []
    out = [f"got {g:#018x}", f"expected {want:#018x}", *differs(g, want)[1:]]
    why = consequence(g, start, swizzle, k, n)
    f, w = wgmma.fields(g), wgmma.fields(want)
    if why:
        out.insert(0, why)
    else:
        out.insert(0, f"for this tile (n = {n}) wgmma would read the same bytes, but not for every tile: "
                      f"the descriptor must say what the layout is")
    if (f["lbo"], f["sbo"]) == (w["sbo"], w["lbo"]):
        out.append("LBO and SBO are exchanged: in a swizzled MN-major tile LBO steps along N (one box, "
                   "64 k-rows x span bytes, to the next) and SBO along K (8 k-rows); without a swizzle it is "
                   "the other way round")
    if f["base_offset"] != w["base_offset"]:
        rep = 8 * wgmma.SPAN[swizzle]
        out.append(f"the tile starts at {start:#x}, {start % rep} bytes past its swizzle's repeat ({rep} bytes): "
                   f"base offset = (start >> 7) & 7 there, 0 on it; the tile's own, in every slice")
    if start >= 1 << 16 and f["start"] != w["start"] and (f["start"] - w["start"]) % (1 << 12) == 0:
        out.append(f"the tile starts at {start:#x}, above 64 KiB: a shared address has 18 bits here "
                   f"(228 KiB of shared memory), and the start field keeps bits 4-17")
    return out


# ----------------------------------------------------------------------------- byte_of
def _is_int(v) -> bool:
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))


def compare_byte(got, want):
    if not _is_int(got):
        return f"got {checks.show(got)}: an address is an integer (a Python int or any NumPy integer type)"
    return None if int(got) == want else f"got {int(got):#x}, expected {want:#x}"


def byte_why(call, got, want):
    desc, n, k = call.args[:3]
    d = wgmma.decode(desc)
    s = mn_ref.mnmajor_read_steps(desc, n, k)
    out = [f"desc = {desc:#018x}: start {d.start:#x}, LBO {d.lbo}, SBO {d.sbo}, base offset {d.base_offset}, "
           f"layout {wgmma.SWIZZLE_MODE[d.swizzle]} ({d.swizzle})",
           f"B[{k}][{n}]: block {s['block']} x LBO {s['lbo']} + group {s['group']} x SBO {s['sbo']} + "
           f"k-row {s['row']} x {s['span']} + byte {s['byte']} = {s['plain']:#x} from start {s['start']:#x}; "
           f"line ({s['plain']:#x} >> 7) - base offset {s['base_offset']} = {s['line']} (mod {s['span'] // 16}), "
           f"XORed into the 16-byte chunk index: {s['address']:#x}"]
    if _is_int(got):
        cols, rows = np.meshgrid(np.arange(256), np.arange(16))
        at = np.asarray(wgmma.operand_address(desc, cols, rows, major="MN"))
        hit = np.argwhere(at == int(got))
        if len(hit):
            r, c = (int(x) for x in hit[0])
            out.append(f"following this descriptor, wgmma reads B[{r}][{c}] from {int(got):#x}")
    return out


# ----------------------------------------------------------------------------- what is drawn
@st.composite
def _tiles(draw):
    sw = draw(st.sampled_from(SWIZZLES))
    cols = wgmma.SPAN[sw] // 2                                    # columns per box
    n = cols * draw(st.integers(1, 256 // cols))
    start = 128 * draw(st.integers(0, (SMEM - tile_bytes(n)) // 128))
    return (start, sw, draw(st.integers(0, 3)), n)


@st.composite
def _points(draw):
    sw = draw(st.sampled_from(SWIZZLES))
    cols = wgmma.SPAN[sw] // 2
    n_tile = cols * draw(st.integers(1, 256 // cols))
    k_rows = draw(st.sampled_from((16, 32, 64, 64, 128)))        # box height: LBO = k_rows x span
    start = 128 * draw(st.integers(0, (SMEM - tile_bytes(n_tile, k_rows)) // 128))
    ks = draw(st.integers(0, k_rows // 16 - 1))
    desc = mn_ref.mnmajor_slice_descriptor(start, sw, ks, rows=n_tile, k_elems=k_rows)
    return (desc, draw(st.integers(0, n_tile - 1)), draw(st.integers(0, 15)))


# ----------------------------------------------------------------------------- the listed cases
DESC_EDGES = (
    [flow.Edge((0x400, sw, k), "the statement's tile, n left at its default") for sw in SWIZZLES for k in range(4)]
    + [flow.Edge((0x2000, sw, k, n), f"a tile {n} columns wide") for n in (64, 256) for sw in SWIZZLES for k in (0, 3)]
    + [flow.Edge((s, sw, k, 128), f"a tile at {s:#x}, above 64 KiB")
       for s in (0x10000, 0x30000) for sw in SWIZZLES for k in (0, 3)]
    + [flow.Edge((s, sw, k, 128), f"a tile at {s:#x}, off the 1024-byte repeat (base offset "
                 f"{wgmma.base_offset_for(s, sw)} for {sw})")
       for s in (0x8480, 0x8680, 0x8300) for sw in SWIZZLES for k in (0, 2)])


def _byte_edges():
    out = []
    for start, ks, n, where in ((0x400, 1, 128, "on the repeat"), (0x8680, 2, 256, "off the repeat")):
        for sw in SWIZZLES:
            desc = descriptor_reference(start, sw, ks, n)
            cols = wgmma.SPAN[sw] // 2
            for nn, kk in ((0, 0), (3, 5), (cols, 1), (cols + 5, 9), (n - 1, 15)):
                out.append(flow.Edge((desc, nn, kk), f"slice {ks} of the {sw} tile of {n} columns at {start:#x}, "
                                                     f"{where}"))
    return out


DESCRIPTOR = flow.Function(
    "nmajor_slice_descriptor", reference=descriptor_reference, compare=compare_descriptor,
    explain=descriptor_why, args=_tiles(), edges=DESC_EDGES)

BYTE_OF = flow.Function(
    "byte_of", reference=byte_reference, compare=compare_byte, explain=byte_why, args=_points(), edges=_byte_edges())


def check(sub):
    return flow.run(sub, [DESCRIPTOR, BYTE_OF],
                    checked=[f"nmajor_slice_descriptor: {len(DESC_EDGES)} listed tiles (every swizzle and slice, "
                             "n = 64/128/256, above 64 KiB, off the repeat), then tiles drawn per run",
                             f"byte_of: {len(BYTE_OF.edges)} listed points of slices on and off the repeat, then "
                             "points of slices drawn per run"])
