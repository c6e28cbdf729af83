"""tests/hw/test_wgmma_mn_major.py - judge.hw.wgmma's MN-major slice descriptor, its step-by-step read, and
the field comparison that messages about a wrong descriptor use.

Run: python -m pytest tests/hw/test_wgmma_mn_major.py -q

The slice descriptor of a swizzled MN-major tile (boxes one span wide along M/N, each holding every
k-row) must make operand_address() read every element of the slice where the tile holds it, for tiles
on and off their swizzle's repeat (base offset, PTX ISA "Matrix Descriptor Format": (pattern start >> 7)
& 7), in every slice; mnmajor_read_steps() must be that same address with its parts named, and the
ISA's canonical MN-major layout written out by hand here gives the same bytes.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.grading import exercise
from judge.hw import mma_layout as L
from judge.hw import tma, wgmma

mn_ref = exercise.get("wgmma_mn_descriptor").reference_module()   # the exercise's reference rules

SPANS = {"128B": 128, "64B": 64, "32B": 32}


@st.composite
def tiles(draw):
    sw = draw(st.sampled_from(list(SPANS)))
    cols = SPANS[sw] // 2
    rows = cols * draw(st.integers(1, 256 // cols))
    k_elems = draw(st.sampled_from((16, 32, 64, 128)))
    start = 128 * draw(st.integers(0, (228 * 1024 - 2 * rows * k_elems) // 128))
    return sw, rows, k_elems, start, draw(st.integers(0, k_elems // 16 - 1))


def by_hand(start, sw, rows, k_elems, mn, k):
    """Where the tile holds [mn][k] when its swizzle pattern starts at `start`: box mn // (span / 2), k-row k,
    the 16-byte chunk XORed with the line counted from `start` (tma.swizzle_offset on the offset)."""
    span = SPANS[sw]
    return start + tma.swizzle_offset((mn * 2 // span) * k_elems * span + k * span + (mn * 2) % span, sw)


@settings(max_examples=60, deadline=None)
@given(tiles())
def test_a_slice_descriptor_reads_its_slice_where_the_tile_holds_it(t):
    sw, rows, k_elems, start, ks = t
    d = mn_ref.mnmajor_slice_descriptor(start, sw, ks, rows=rows, k_elems=k_elems)
    f = wgmma.decode(d)
    assert (f.lbo, f.sbo, f.swizzle) == (k_elems * SPANS[sw], 8 * SPANS[sw], sw)
    assert f.start == start + 16 * SPANS[sw] * ks
    assert f.base_offset == (0 if start % (8 * SPANS[sw]) == 0 else (start >> 7) & 7)
    mn, k = np.arange(rows)[:, None], np.arange(16)[None, :]
    got = wgmma.operand_address(d, mn, k, major="MN")
    assert np.array_equal(got, by_hand(start, sw, rows, k_elems, mn, 16 * ks + k))
    assert np.array_equal(got, start + L.tile_offset(mn, 16 * ks + k, sw, "MN", rows=rows, k_elems=k_elems))


@pytest.mark.parametrize("sw", list(SPANS))
def test_off_the_repeat_every_slice_carries_the_tiles_base_offset_and_zero_would_misread(sw):
    start = 0x8680                                   # 128B: 0x280 past 1024; 64B, 32B: 0x80 past theirs
    bo = wgmma.base_offset_for(start, sw)
    assert bo == (start >> 7) & 7 == 5
    for ks in range(4):
        d = mn_ref.mnmajor_slice_descriptor(start, sw, ks, rows=128)
        assert wgmma.decode(d).base_offset == bo
        zero = d & ~(7 << 49)
        mn, k = np.arange(128)[:, None], np.arange(16)[None, :]
        assert not np.array_equal(wgmma.operand_address(zero, mn, k, major="MN"),
                                  wgmma.operand_address(d, mn, k, major="MN"))


def test_a_slice_descriptor_refuses_what_it_does_not_describe():
    with pytest.raises(ValueError, match="32B, 64B or 128B"):
        mn_ref.mnmajor_slice_descriptor(0x400, "none", 0, rows=64)
    with pytest.raises(ValueError, match="slices 0..3"):
        mn_ref.mnmajor_slice_descriptor(0x400, "128B", 4, rows=64)
    with pytest.raises(ValueError, match="swizzled"):
        mn_ref.mnmajor_read_steps(wgmma.encode(0x400, 2048, 128, "none"), 0, 0)


@settings(max_examples=60, deadline=None)
@given(tiles(), st.integers(0, 255), st.integers(0, 15))
def test_the_read_steps_add_up_to_the_address_wgmma_reads(t, mn, k):
    sw, rows, k_elems, start, ks = t
    mn %= rows
    d = mn_ref.mnmajor_slice_descriptor(start, sw, ks, rows=rows, k_elems=k_elems)
    s = mn_ref.mnmajor_read_steps(d, mn, k)
    assert s["plain"] == s["start"] + s["block"] * s["lbo"] + s["group"] * s["sbo"] + s["row"] * s["span"] + s["byte"]
    assert s["address"] == s["plain"] ^ (s["line"] << 4) == wgmma.operand_address(d, mn, k, major="MN")
    assert (s["block"], s["group"], s["row"], s["byte"]) == (2 * mn // SPANS[sw], k // 8, k % 8, 2 * mn % SPANS[sw])


def test_field_differences_name_each_field_with_its_bits_and_stray_bits():
    a = wgmma.encode(0x400, 8192, 1024, "128B")
    b = wgmma.encode(0x400, 1024, 8192, "32B", 3)
    assert wgmma.field_differences(a, a) == []
    assert wgmma.field_differences(b, a) == [("lbo", 16, 29, 64, 512), ("sbo", 32, 45, 512, 64),
                                             ("base_offset", 49, 51, 3, 0), ("swizzle", 62, 63, 3, 1)]
    assert wgmma.field_differences(a | 1 << 61, a) == [("stray", 0, 63, [61], [])]
    assert wgmma.fields(a | 1 << 47)["stray"] == 1 << 47
    assert wgmma.as_bits(3, 2) == "0b11" and wgmma.as_bits(1, 3) == "0b001"
    assert set(wgmma.FIELD_MEANING) == {name for name, *_ in wgmma.FIELDS}
