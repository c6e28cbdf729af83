"""The canonical shared-memory layouts of MMA operands (wgmma on sm_90a, tcgen05.mma on sm_100a).

    from judge.hw import mma_layout as L
    L.read_address(start=0x400, lbo=16, sbo=1024, swizzle="128B", major="K", mn=9, k=3)   # the byte the MMA reads
    L.tile_offset(9, 3, "128B", "K", rows=128, k_elems=64)      # where the canonical tile holds [9][3]
    L.tile_strides("128B", "MN", rows=128, k_elems=64)          # (lbo, sbo) of that tile: MN-major swaps roles
    L.swizzle_address(0x480, "128B")                            # the XOR of address bits
    L.draw_tile("64B", "MN")                                    # a matplotlib Figure of the core matrices

Both instructions read an operand tile through a descriptor of the same three numbers (start, leading
byte offset LBO, stride byte offset SBO) and a swizzle mode; judge.hw.wgmma and judge.hw.umma encode
those into their two different 64-bit formats and call this module for the addresses. Sources: the PTX
ISA's "Shared Memory Matrix Layout" / canonical layouts tables (wgmma, and tcgen05 "Shared memory
descriptor"), written in CuTe notation in units of 16 bytes (T = 16 bytes of elements):

  K-major,  no swizzle : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))    core matrix = 8 rows x 16 bytes of K
  K-major,  swizzled   : ((8,m),(T,2k)) : ((W T,SBO),(1,T))     W = 2, 4, 8 chunks for 32B, 64B, 128B
  MN-major, no swizzle : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO)) core matrix = 8 k-rows x 16 bytes of MN
  MN-major, swizzled   : ((T,W,m),(8,k)) : ((1,T,LBO),(W T,SBO))

So without a swizzle SBO always steps along M/N and LBO along K, whichever is major; with a swizzle the
two swap in MN-major: LBO steps from one span-wide block of M/N to the next and SBO from one group of
8 k-rows to the next (in K-major, SBO steps 8 rows of M/N and LBO is unused because a k-slice of 32
bytes never leaves its row). CUTLASS's make_gmma_desc / make_umma_desc (cute/atom/mma_traits_sm90_gmma.hpp,
mma_traits_sm100.hpp) build the same numbers from the same tables.

The swizzles act on address bits (the same rule as TMA's, judge.hw.tma.swizzle_offset): the 16-byte
chunk index (bits 4-6) is XORed with the 128-byte line index (bits 7-9), 1, 2 or 3 bits of each for
32B, 64B, 128B. tcgen05 adds "128B with 32-byte atoms" (mode 1 of its descriptor): 32-byte units (bits
5-6) XORed with bits 7-8, a pattern of 4 lines (512 bytes); CUTLASS names it Swizzle<2,5,2> and uses it
for MN-major tf32 only, its atom 4 k-rows of 128 bytes.

The base offset (3 bits in both descriptors; PTX ISA: "when the matrix start address is not aligned to
the byte boundary of the repeating pattern", 1024/512/256 bytes, base offset = (pattern start >> 7) & 7)
tells the hardware where the swizzle pattern began. The ISA gives the field's value, not the hardware's
arithmetic; this module takes its plain reading: the line index XORed in counts lines from the pattern
start, ((address >> 7) - base_offset), so a tile written with the pattern starting at its own first byte
is read back correctly from anywhere. Tests check that reading against tiles laid out at such starts.
"""
from __future__ import annotations

SWIZZLES = ("none", "32B", "64B", "128B", "128B_base32B")
MAJORS = ("K", "MN")
#: bytes of one row of a swizzle atom (the swizzle's span); 16 without swizzle (one core-matrix row)
SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128, "128B_base32B": 128}
#: bytes after which the swizzle pattern repeats (a tile starting there needs base offset 0)
REPEAT = {"none": 128, "32B": 256, "64B": 512, "128B": 1024, "128B_base32B": 512}
#: (lowest bit of the unit that moves, number of bits XORed): chunk bits ^= line bits (from bit 7)
_XOR = {"32B": (4, 1), "64B": (4, 2), "128B": (4, 3), "128B_base32B": (5, 2)}


def _check(swizzle, major):
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle {swizzle!r}: use one of {', '.join(SWIZZLES)}")
    if major not in MAJORS:
        raise ValueError(f"major {major!r}: use 'K' (K contiguous) or 'MN' (M or N contiguous)")


def atom_rows(swizzle: str, major: str) -> int:
    """Rows of one swizzle atom: 8 (rows of M/N for K-major, k-rows for MN-major); 4 k-rows for 128B_base32B."""
    _check(swizzle, major)
    return 4 if swizzle == "128B_base32B" else 8


def swizzle_address(addr, swizzle: str, base_offset: int = 0):
    """The swizzle as the hardware applies it to a shared-memory byte address: the unit index (16-byte
    chunk, 32-byte for 128B_base32B) XORed with the 128-byte line index counted from the pattern start
    (line = (addr >> 7) - base_offset). Works on ints and on NumPy integer arrays."""
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle {swizzle!r}: use one of {', '.join(SWIZZLES)}")
    if swizzle == "none":
        return addr
    lo, bits = _XOR[swizzle]
    mask = (1 << bits) - 1
    line = ((addr >> 7) - base_offset) & mask
    return addr ^ (line << lo)


def read_address(start: int, lbo: int, sbo: int, swizzle: str, major: str, mn, k, *, elem_bytes: int = 2,
                 base_offset: int = 0):
    """The shared-memory byte address an MMA reads element [mn][k] of its operand from (mn: row of A
    or column of B, i.e. M or N; k along K), given the descriptor's fields in bytes. The canonical
    layouts above, as address arithmetic:
      K-major,  none:     start + (mn // 8) SBO + (kb // 16) LBO + (mn % 8) 16 + kb % 16
      K-major,  swizzled: swz(start + (mn // 8) SBO + (mn % 8) span + kb)             kb < span
      MN-major, none:     start + (mb // 16) SBO + (k // 8) LBO + (k % 8) 16 + mb % 16
      MN-major, swizzled: swz(start + (mb // span) LBO + (k // R) SBO + (k % R) span + mb % span)
    with kb = k * elem_bytes, mb = mn * elem_bytes, R = atom_rows(), swz = swizzle_address. Works on
    ints and on NumPy integer arrays (broadcast)."""
    _check(swizzle, major)
    span = SPAN[swizzle]
    if major == "K":
        if swizzle == "128B_base32B":
            raise ValueError("128B_base32B is an MN-major layout (CUTLASS's make_umma_desc refuses it for K-major)")
        kb = k * elem_bytes
        if swizzle == "none":
            return start + (mn // 8) * sbo + (kb // 16) * lbo + (mn % 8) * 16 + kb % 16
        return swizzle_address(start + (mn // 8) * sbo + (mn % 8) * span + kb, swizzle, base_offset)
    mb = mn * elem_bytes
    if swizzle == "none":
        return start + (mb // 16) * sbo + (k // 8) * lbo + (k % 8) * 16 + mb % 16
    R = atom_rows(swizzle, major)
    return swizzle_address(start + (mb // span) * lbo + (k // R) * sbo + (k % R) * span + mb % span,
                           swizzle, base_offset)


def tile_offset(mn, k, swizzle: str, major: str, *, rows: int, k_elems: int, elem_bytes: int = 2):
    """Byte offset, from a tile's first byte (which lies on the swizzle's repeat), of element [mn][k]
    of a rows x k_elems operand tile in the canonical layout the course writes (the one a TMA box
    with this swizzle lands in):
      K-major, swizzled: column blocks one span wide along K, each holding all rows, one span per row;
      K-major, none: 8 x 16-byte core matrices, K fastest (core (r, c) at (r * k_bytes/16 + c) * 128);
      MN-major, swizzled: blocks one span wide along M/N, each holding all k-rows, one span per k-row;
      MN-major, none: 8 k-rows x 16-byte core matrices, M/N fastest (core (c, g) at (g * mn_bytes/16 + c) * 128).
    Swizzled offsets then go through the swizzle (the tile starts on its repeat, base offset 0)."""
    _check(swizzle, major)
    span = SPAN[swizzle]
    if major == "K":
        if swizzle == "128B_base32B":
            raise ValueError("128B_base32B is an MN-major layout")
        kb, kbytes, mnv = k * elem_bytes, k_elems * elem_bytes, mn
        if swizzle == "none":
            return ((mnv // 8) * (kbytes // 16) + kb // 16) * 128 + (mnv % 8) * 16 + kb % 16
        plain = ((kb // span) * rows + mnv) * span + kb % span
    else:
        mb, mbytes = mn * elem_bytes, rows * elem_bytes
        if swizzle == "none":
            return ((k // 8) * (mbytes // 16) + mb // 16) * 128 + (k % 8) * 16 + mb % 16
        plain = ((mb // span) * k_elems + k) * span + mb % span
    return swizzle_address(plain, swizzle)


def tile_strides(swizzle: str, major: str, *, rows: int, k_elems: int, elem_bytes: int = 2) -> tuple[int, int]:
    """(lbo, sbo) in bytes of the canonical tile tile_offset() lays out.
      K-major swizzled: LBO unused (the course sets 16, as CUTLASS does), SBO = 8 rows x span;
      K-major none: LBO = 128 (next core matrix along K), SBO = k_bytes / 16 x 128 (next 8 rows);
      MN-major swizzled: LBO = k_elems x span (next span-wide block of M/N), SBO = R x span (next R k-rows);
      MN-major none: LBO = mn_bytes / 16 x 128 (next 8 k-rows), SBO = 128 (next 16 bytes of M/N)."""
    _check(swizzle, major)
    span = SPAN[swizzle]
    if major == "K":
        if swizzle == "none":
            return 128, (k_elems * elem_bytes // 16) * 128
        return 16, 8 * span
    if swizzle == "none":
        return (rows * elem_bytes // 16) * 128, 128
    return k_elems * span, atom_rows(swizzle, major) * span


def slice_start(ks: int, k_step: int, swizzle: str, major: str, *, rows: int, k_elems: int,
                elem_bytes: int = 2) -> int:
    """Byte offset, from the tile's start, that the descriptor of K-slice `ks` (elements
    ks*k_step .. ks*k_step + k_step - 1, 32 bytes of K for every kind) starts at: the unswizzled offset
    of element [0][ks * k_step]. K-major swizzled: ks * 32 bytes inside a span (the row does not change,
    so bits 7-9 do not either, and the hardware's XOR of the advanced address is the tile's own
    pattern), then the next column block. MN-major: whole groups of k-rows (SBO) further on."""
    _check(swizzle, major)
    k0 = ks * k_step
    span = SPAN[swizzle]
    if major == "K":
        kb = k0 * elem_bytes
        if swizzle == "none":
            return (kb // 16) * 128
        return (kb // span) * rows * span + kb % span
    if swizzle == "none":
        return (k0 // 8) * (rows * elem_bytes // 16) * 128
    return k0 * span


# ----------------------------------------------------------------------------- drawing
def draw_tile(swizzle: str = "128B", major: str = "K", *, rows: int | None = None, k_elems: int | None = None,
              elem_bytes: int = 2, ax=None):
    """A matplotlib Figure (or draw into `ax`): the canonical tile with its contiguous dimension across
    (K-major: rows of M/N down, K across; MN-major: k-rows down, M/N across), each 16-byte chunk of
    elements one cell, coloured by the core matrix (8 rows x 16 bytes) it belongs to and labelled with
    the 16-byte slot of shared memory it lies in. No pyplot."""
    import numpy as np
    from matplotlib.figure import Figure

    _check(swizzle, major)
    epc = 16 // elem_bytes                                   # elements per 16-byte chunk
    if major == "K":
        rows = rows or 16
        k_elems = k_elems or max(SPAN[swizzle], 32) // elem_bytes
        grid_r, grid_c = rows, k_elems // epc                # one cell per (row, 16 bytes of K)
        cell = lambda r, c: tile_offset(r, c * epc, swizzle, major, rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)
        core = lambda r, c: (r // 8, c)
    else:                                                    # k-rows down, M/N across: as the bytes lie
        rows = rows or max(SPAN[swizzle], 32) // elem_bytes
        k_elems = k_elems or 16
        grid_r, grid_c = k_elems, rows // epc                # one cell per (k, 16 bytes of M/N)
        cell = lambda r, c: tile_offset(c * epc, r, swizzle, major, rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)
        core = lambda r, c: (c, r // 8)
    slot = np.array([[cell(r, c) // 16 for c in range(grid_c)] for r in range(grid_r)])
    cores = sorted({core(r, c) for r in range(grid_r) for c in range(grid_c)})
    index = {cm: i for i, cm in enumerate(cores)}
    colour = np.array([[index[core(r, c)] for c in range(grid_c)] for r in range(grid_r)])
    fig = None
    if ax is None:
        fig = Figure(figsize=(1.2 + 0.45 * grid_c, 0.8 + 0.28 * grid_r), layout="constrained")
        ax = fig.subplots()
    ax.imshow(colour % 20, cmap="tab20", vmin=0, vmax=19, aspect="auto", interpolation="nearest")
    for r in range(grid_r):
        for c in range(grid_c):
            ax.text(c, r, str(slot[r, c]), ha="center", va="center", fontsize=6)
    if major == "K":
        ax.set_xlabel(f"K, 16 bytes ({epc} elements) per cell")
        ax.set_ylabel("row (M of A, N of B)")
    else:
        ax.set_xlabel(f"M or N, 16 bytes ({epc} elements) per cell")
        ax.set_ylabel("k-row (K)")
    ax.set_title(f"{major}-major, {swizzle}", fontsize=9)
    if fig is not None:
        fig.suptitle("number = the 16-byte slot of shared memory the chunk lies in; colour = core matrix "
                     "(8 rows x 16 bytes)", fontsize=8)
    return fig if fig is not None else ax
