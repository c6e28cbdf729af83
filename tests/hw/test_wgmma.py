"""judge.hw.wgmma's models of chapter 4 against the PTX ISA's statements and the SASS: the matrix descriptor's
fields, the operand layouts it reads, the accumulator fragment, the descriptor bits in chapter 4's compiled
wgmma_tile.cu, and the ring model the chapter draws.

Run: python -m pytest tests/hw/test_wgmma.py -q      (no GPU)
"""
import random

import numpy as np
import pytest

from judge.gpu import build
from judge.hw import tma, wgmma


TILE_CU = "chapters/ch04_wgmma/wgmma_tile.cu"


# ----------------------------------------------------------------------------- the descriptor
def test_descriptor_fields_sit_where_the_isa_puts_them():
    # one field at a time: start at bit 0, LBO at 16, SBO at 32 (all bytes >> 4), base offset at 49, layout at 62
    assert wgmma.encode(16, 0, 0, "none") == 1
    assert wgmma.encode(0, 16, 0, "none") == 1 << 16
    assert wgmma.encode(0, 0, 16, "none") == 1 << 32
    assert wgmma.encode(0, 0, 0, "none", base_offset=1) == 1 << 49
    assert [wgmma.encode(0, 0, 0, s) >> 62 for s in ("none", "128B", "64B", "32B")] == [0, 1, 2, 3]
    # the descriptor of a 128B-swizzled K-major tile at 0x400: the one CUTLASS and the course's header build
    assert wgmma.encode(0x400, 16, 1024, "128B") == 0x4000004000010040
    assert wgmma.FIELD_BITS == {"start": (0, 13), "lbo": (16, 29), "sbo": (32, 45), "base_offset": (49, 51),
                                "swizzle": (62, 63)}


def test_encode_decode_round_trip():
    rng = random.Random(4)
    for _ in range(500):
        d = wgmma.Descriptor(16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14),
                             rng.randrange(8), rng.choice(list(wgmma.SWIZZLE_MODE)))
        assert wgmma.decode(int(d)) == d
        assert int(wgmma.decode(int(d))) == int(d)


@pytest.mark.parametrize("kwargs,field", [
    ({"start": 0x408}, "start"),            # not a multiple of 16
    ({"sbo": 1 << 18}, "sbo"),              # 14 bits of bytes >> 4 hold at most 2^18 - 16
    ({"lbo": -16}, "lbo"),
    ({"base_offset": 8}, "base_offset"),
    ({"swizzle": "16B"}, "swizzle"),
])
def test_encode_names_the_field_it_cannot_hold(kwargs, field):
    args = {"start": 0x400, "lbo": 16, "sbo": 1024, "swizzle": "128B", "base_offset": 0} | kwargs
    with pytest.raises(wgmma.DescriptorError) as e:
        wgmma.encode(**args)
    assert e.value.field == field and field in str(e.value)


def test_decode_refuses_bits_outside_the_fields():
    with pytest.raises(ValueError, match="outside its fields"):
        wgmma.decode(wgmma.encode(0x400, 16, 1024, "128B") | 1 << 61)


# ----------------------------------------------------------------------------- operand layouts
@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B"])
def test_swizzled_kmajor_layout_is_the_tma_swizzle_of_span_wide_rows(swizzle):
    span = wgmma.SPAN[swizzle]
    for row in range(64):
        for k in range(span // 2):
            plain = row * span + 2 * k
            assert wgmma.kmajor_offset(row, k, swizzle) == tma.swizzle_offset(plain, swizzle)
    # every row keeps its bytes (the swizzle permutes 16-byte chunks within the row) ...
    offs = np.array([[wgmma.kmajor_offset(r, k, swizzle) for k in range(span // 2)] for r in range(64)])
    assert all(sorted(offs[r]) == list(range(r * span, (r + 1) * span, 2)) for r in range(64))
    # ... and the pattern repeats every 8 rows: the 8-row group is the unit the stride byte offset steps
    assert (offs[8:] - offs[:-8] == 8 * span).all()


@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B", "none"])
def test_descriptor_reads_each_element_where_the_layout_put_it(swizzle):
    """Following the descriptor as the hardware does lands on the canonical layout, for every k16 slice."""
    start = 0x2000
    for ks in range(4):
        if swizzle == "none":
            desc = wgmma.encode(start + 256 * ks, *wgmma.kmajor_strides("none", k_bytes=128), "none")
        else:
            span = wgmma.SPAN[swizzle]
            off = (32 * ks // span) * 64 * span + (32 * ks) % span
            desc = wgmma.kmajor_descriptor(start + off, swizzle)
        for row in range(64):
            for k in range(16):
                assert wgmma.operand_address(desc, row, k) == \
                    start + wgmma.kmajor_offset(row, 16 * ks + k, swizzle, k_elems=64), (ks, row, k)


def test_no_swizzle_core_matrices_are_8_rows_of_16_contiguous_bytes():
    for row in range(8):
        for k in range(8):
            assert wgmma.kmajor_offset(row, k, "none") == 16 * row + 2 * k     # one 128-byte core matrix
    assert wgmma.kmajor_offset(0, 8, "none") == 128                            # the next along K
    assert wgmma.kmajor_offset(8, 0, "none") == 256                            # the next along M (k16: 2 per group)


# ----------------------------------------------------------------------------- the accumulator fragment
@pytest.mark.parametrize("n", wgmma.SHAPES_N)
def test_fragment_is_a_bijection_and_owner_inverts_coord(n):
    seen = set()
    for t in range(128):
        for i in range(n // 2):
            rc = wgmma.fragment_coord(t, i, n)
            seen.add(rc)
            assert wgmma.fragment_owner(*rc, n) == (t, i)
    assert len(seen) == 64 * n


def test_fragment_matches_the_isa_statement_and_the_cute_layout():
    # ISA: warp w owns rows 16w..16w+15; lane l holds rows 16w + l/4 and + 8, columns 8j + 2(l%4) + {0, 1}
    for t in range(128):
        w, l = divmod(t, 32)
        cells = {wgmma.fragment_coord(t, i, 64) for i in range(32)}
        assert cells == {(16 * w + l // 4 + 8 * h, 8 * j + 2 * (l % 4) + b)
                         for h in (0, 1) for j in range(8) for b in (0, 1)}
    # CuTe's CLayout_64xN: thread (4, 8, 4) : (128, 1, 16), value (2, 2, N/8) : (64, 8, 512), index = row + 64 col
    for t in range(128):
        for i in range(64):
            idx = (t % 4) * 128 + (t // 4 % 8) * 1 + (t // 32) * 16 + (i % 2) * 64 + (i // 2 % 2) * 8 + (i // 4) * 512
            assert wgmma.fragment_coord(t, i, 128) == (idx % 64, idx // 64)


def test_fragment_rejects_what_no_warpgroup_has():
    for bad in [(128, 0, 64), (0, 32, 64), (0, 0, 12)]:
        with pytest.raises(ValueError):
            wgmma.fragment_coord(*bad)


def test_fragment_drawing_renders():
    fig = wgmma.draw_fragment(16)
    assert fig.axes and fig.axes[0].get_title()


# ----------------------------------------------------------------------------- the SASS
@pytest.mark.parametrize("swizzle", [128, 64, 32])
def test_sass_carries_the_descriptor_bits_encode_gives(swizzle):
    """wgmma_tile.cu builds its descriptors by hand; ptxas folds their high words into immediates,
    and those are exactly encode()'s bits 32-63: SBO = 8 rows x span, layout 1/2/3."""
    b = build.compile(TILE_CU, defines={"SWIZZLE": swizzle})
    words = wgmma.sass_descriptor_words(b.sass_of("wgmma_tile"))
    want = wgmma.kmajor_descriptor(0x400, f"{swizzle}B") >> 32
    assert len(words) == 4                                       # K = 64: four k16 slices
    assert all(a == want and bb == want for a, bb in words), (words, hex(want))
    assert b.uses("wgmma") and b.uses("proxy.fence")
    assert "WARPGROUP.ARRIVE" in b.sass and "WARPGROUP.DEPBAR" in b.sass
    assert b.resources["wgmma_tile"]["spill_stores"] == 0


# ----------------------------------------------------------------------------- the ring model
def test_ring_model_one_slot_is_serial_and_many_slots_hide_the_shorter_side():
    one = wgmma.ring_schedule(tiles=6, S=1, load=3, mma=2, consumers=2)
    assert one["consumers"][0][-1][1] == 6 * (3 + 2)                    # load, compute, load, compute...
    deep = wgmma.ring_schedule(tiles=6, S=4, load=3, mma=2, consumers=2)
    assert deep["consumers"][1][-1][1] == 6 * 3 + 2                     # load-bound: loads back to back
    mma_bound = wgmma.ring_schedule(tiles=6, S=4, load=1, mma=3)
    assert mma_bound["consumers"][0][-1][1] == 1 + 6 * 3                # MMA-bound: computes back to back
    for ring in (one, deep, mma_bound):                                 # no slot refilled before release
        S = 1 if ring is one else 4
        for i in range(S, 6):
            assert ring["producer"][i][0] >= max(c[i - S][1] for c in ring["consumers"])
    sched = wgmma.schedules(deep)
    assert list(sched) == ["consumer 0", "consumer 1"] and len(sched["consumer 0"][0]) == 4


def test_base_offset_is_zero_on_the_pattern_boundary_and_the_isa_formula_elsewhere():
    assert [wgmma.base_offset_for(a, "128B") for a in (0, 1024, 0x8400)] == [0, 0, 0]
    assert wgmma.base_offset_for(1024 + 3 * 128, "128B") == 3
    assert wgmma.base_offset_for(512, "64B") == 0 and wgmma.base_offset_for(256, "32B") == 0
    assert wgmma.base_offset_for(128, "64B") == 1
