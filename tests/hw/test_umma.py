"""The MMA operand layouts and descriptors (judge.hw.mma_layout, judge.hw.umma, wgmma's MN-major side).

Run: python -m pytest tests/hw/test_umma.py -q
Property-based (hypothesis): every tile shape, element size, swizzle, major and start drawn per run.
Each address the descriptors name is checked against statements written another way: the swizzle as
an XOR of address bits per mode, TMA's swizzle (judge.hw.tma) for the modes TMA shares, and the PTX
ISA's canonical-layout table evaluated as a CuTe layout (shape : stride in 16-byte units).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.hw import mma_layout as L
from judge.hw import tma, umma, wgmma

PAIRS = [(sw, mj) for mj in L.MAJORS for sw in L.SWIZZLES if not (mj == "K" and sw == "128B_base32B")]


def xor_statement(a, swizzle):
    """The swizzles as the bits they XOR, one line per mode (independent of judge.hw)."""
    return {"none": a,
            "32B": a ^ (((a >> 7) & 1) << 4),
            "64B": a ^ (((a >> 7) & 3) << 4),
            "128B": a ^ (((a >> 7) & 7) << 4),
            "128B_base32B": a ^ (((a >> 7) & 3) << 5)}[swizzle]


def cute_statement(start, lbo, sbo, swizzle, major, mn, k, eb):
    """The PTX ISA's canonical layouts table, evaluated as written (units of 16 bytes, T elements each):
    K-major none ((8,m),(T,2k)):((1T,SBO),(1,LBO)); swizzled ((8,m),(T,2k)):((W T,SBO),(1,T));
    MN-major none ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)); swizzled ((T,W,m),(8,k)):((1,T,LBO),(W T,SBO)),
    then the XOR of address bits."""
    T = 16 // eb
    W = {"none": 1, "32B": 2, "64B": 4, "128B": 8, "128B_base32B": 8}[swizzle]
    R = 4 if swizzle == "128B_base32B" else 8
    e = eb                                               # bytes per element: strides below in bytes
    if major == "K":
        r0, r1 = mn % 8, mn // 8
        k0, k1 = k % T, k // T                           # element in chunk, chunk along K
        if swizzle == "none":
            off = r0 * 16 + r1 * sbo + k0 * e + k1 * lbo
        else:
            off = r0 * W * 16 + r1 * sbo + k0 * e + k1 * 16
    else:
        m0, m1, m2 = mn % T, (mn // T) % W, mn // (T * W)
        k0, k1 = k % R, k // R
        if swizzle == "none":
            off = m0 * e + m2 * sbo + k0 * 16 + k1 * lbo     # W = 1: m1 is always 0
        else:
            off = m0 * e + m1 * 16 + m2 * lbo + k0 * W * 16 + k1 * sbo
    return xor_statement(start + off, swizzle)


@st.composite
def tiles(draw):
    sw, major = draw(st.sampled_from(PAIRS))
    eb = draw(st.sampled_from((1, 2, 4)))
    span = L.SPAN[sw]
    rows = draw(st.integers(1, 4)) * max(8, span // eb if major == "MN" else 8)
    k_elems = draw(st.integers(1, 3)) * (max(32, span) // eb if major == "K" else 32 // eb)
    start = L.REPEAT[sw] * draw(st.integers(0, 100))
    return sw, major, eb, rows, k_elems, start


@settings(max_examples=60, deadline=None)
@given(tiles())
def test_slice_descriptors_read_the_tile_once_each_byte_and_as_the_isa_table_says(t):
    sw, major, eb, rows, k_elems, start = t
    kstep = 32 // eb
    mn = np.arange(rows)[:, None]
    kk = np.arange(kstep)[None, :]
    want = start + L.tile_offset(mn, np.arange(k_elems)[None, :], sw, major, rows=rows, k_elems=k_elems, elem_bytes=eb)
    seen = []
    for ks in range(k_elems // kstep):
        d = umma.tile_descriptor(start, sw, major, rows=rows, k_elems=k_elems, ks=ks, elem_bytes=eb)
        got = np.asarray(umma.operand_address(d, mn, kk, major, elem_bytes=eb))
        assert np.array_equal(got, want[:, ks * kstep:(ks + 1) * kstep]), (ks, sw, major)
        f = umma.decode(d)
        assert np.array_equal(got, cute_statement(f.start, f.lbo, f.sbo, sw, major, mn, kk, eb))
        seen.append((got[..., None] + np.arange(eb)).ravel())
    allb = np.sort(np.concatenate(seen))
    assert np.array_equal(allb, np.arange(start, start + rows * k_elems * eb)), "not a bijection onto the tile"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(L.SWIZZLES), st.integers(0, (1 << 18) - 1))
def test_swizzle_is_the_xor_of_address_bits(sw, a):
    assert L.swizzle_address(a, sw) == xor_statement(a, sw)
    if sw in ("32B", "64B", "128B"):
        assert L.swizzle_address(a, sw) == tma.swizzle_offset(a, sw)      # what TMA writes


@settings(max_examples=40, deadline=None)
@given(tiles(), st.integers(1, 7))
def test_base_offset_reads_a_tile_whose_pattern_starts_off_the_repeat(t, line):
    sw, major, eb, rows, k_elems, start = t
    if sw == "none":
        return
    P = start + 128 * line if L.REPEAT[sw] > 128 * line else start + 128
    if P % L.REPEAT[sw] == 0:
        return
    bo = umma.base_offset_for(P, sw)
    assert bo == (P >> 7) & 7
    kstep = 32 // eb
    mn = np.arange(rows)[:, None]
    kk = np.arange(kstep)[None, :]
    want = P + L.tile_offset(mn, kk, sw, major, rows=rows, k_elems=k_elems, elem_bytes=eb)   # pattern from P
    right = umma.tile_descriptor(P, sw, major, rows=rows, k_elems=k_elems, elem_bytes=eb, base_offset=bo)
    wrong = umma.tile_descriptor(P, sw, major, rows=rows, k_elems=k_elems, elem_bytes=eb, base_offset=0)
    assert np.array_equal(umma.operand_address(right, mn, kk, major, elem_bytes=eb), want)
    assert not np.array_equal(umma.operand_address(wrong, mn, kk, major, elem_bytes=eb), want)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
       st.sampled_from(list(umma.SWIZZLE_MODE)), st.integers(0, 7), st.integers(0, 1))
def test_smem_descriptor_round_trips_at_the_isa_bits(s, lbo, sbo, sw, bo, mode):
    d = umma.encode(16 * s, 16 * lbo, 16 * sbo, sw, bo, mode)
    assert d == s | lbo << 16 | sbo << 32 | 1 << 46 | bo << 49 | mode << 52 | umma.SWIZZLE_MODE[sw] << 61
    assert umma.decode(d) == umma.Descriptor(16 * s, 16 * lbo, 16 * sbo, bo, mode, sw)


def test_smem_descriptor_refuses_what_the_hardware_would_not_read():
    assert umma.encode(0x400, 16, 1024, "128B") == 0x4000404000010040
    with pytest.raises(ValueError, match="0b001"):
        umma.decode(wgmma.encode(0x400, 16, 1024, "128B"))       # a wgmma descriptor: version bits 0
    with pytest.raises(ValueError, match="swizzle code"):
        umma.decode(umma.encode(0, 16, 16, "none") | 3 << 61)
    with pytest.raises(umma.DescriptorError, match="multiple of 16"):
        umma.encode(0x408, 16, 1024)
    assert "bits 61-63" in umma.explain(umma.encode(0x400, 16, 1024, "64B"))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([("kind::f16", "bf16"), ("kind::f16", "f16"), ("kind::tf32", "tf32"),
                        ("kind::f8f6f4", "e4m3"), ("kind::f8f6f4", "e5m2"), ("kind::f8f6f4", "e2m1")]),
       st.sampled_from((64, 128)), st.integers(1, 32), st.sampled_from(L.MAJORS), st.sampled_from(L.MAJORS),
       st.booleans(), st.booleans())
def test_instruction_descriptor_round_trips(kf, M, n8, am, bm, na, nb):
    kind, fmt = kf
    N = 8 * n8
    if fmt == "e2m1" and "MN" in (am, bm):
        with pytest.raises(ValueError, match="K-major"):
            umma.encode_idesc(kind, fmt, fmt, M=M, N=N, a_major=am, b_major=bm)
        return
    i = umma.encode_idesc(kind, fmt, fmt, M=M, N=N, a_major=am, b_major=bm, neg_a=na, neg_b=nb)
    code = umma.FORMATS[kind][fmt]
    assert i == 1 << 4 | code << 7 | code << 10 | na << 13 | nb << 14 | (am == "MN") << 15 | (bm == "MN") << 16 \
        | (N >> 3) << 17 | (M >> 4) << 24
    f = umma.decode_idesc(i, kind)
    assert (f["m"], f["n"], f["a"], f["b"], f["a_major"], f["b_major"], f["d"]) == (M, N, fmt, fmt, am, bm, "f32")
    assert (f["neg_a"], f["neg_b"], f["sparse"]) == (na, nb, 0)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(("none", "32B", "64B", "128B")), st.sampled_from((64, 128, 256)), st.integers(0, 50))
def test_wgmma_mn_major_descriptors_read_the_canonical_tile(sw, rows, n):
    start = 1024 * n
    d = wgmma.mnmajor_descriptor(start, sw, rows=rows, k_elems=16)
    lbo, sbo = wgmma.mnmajor_strides(sw, rows=rows, k_elems=16)
    if sw != "none":
        assert (lbo, sbo) == (16 * wgmma.SPAN[sw], 8 * wgmma.SPAN[sw])   # LBO along M/N, SBO along K
    else:
        assert (lbo, sbo) == (rows * 2 // 16 * 128, 128)
    r, k = np.arange(rows)[:, None], np.arange(16)[None, :]
    got = wgmma.operand_address(d, r, k, major="MN")
    assert np.array_equal(got, start + wgmma.mnmajor_offset(r, k, sw, rows=rows, k_elems=16))
    assert np.array_equal(got, cute_statement(start, lbo, sbo, sw, "MN", r, k, 2))
    # the K-major reading of the same descriptor is another tile: the transpose bit matters
    assert not np.array_equal(wgmma.operand_address(d, r[:64], k, major="K"), got[:64])


def test_swapping_lbo_and_sbo_of_an_mn_major_tile_reads_wrong_bytes():
    r, k = np.arange(128)[:, None], np.arange(16)[None, :]
    lbo, sbo = wgmma.mnmajor_strides("128B", rows=128)
    good = wgmma.operand_address(wgmma.encode(0x800, lbo, sbo, "128B"), r, k, major="MN")
    bad = wgmma.operand_address(wgmma.encode(0x800, sbo, lbo, "128B"), r, k, major="MN")
    assert np.array_equal(good, 0x800 + wgmma.mnmajor_offset(r, k, "128B", rows=128))
    assert (bad != good).mean() > 0.4


def test_drawings_label_every_chunk_with_its_slot():
    fig = umma.draw_layouts()
    assert len(fig.axes) == 8
    ax = fig.axes[4]                                       # MN-major, no swizzle
    labels = {t.get_text() for t in ax.texts}
    rows, k_elems = 16, 16                                 # the default MN tile: 32 bytes of M/N, 16 k-rows
    assert labels == {str(s) for s in range(rows * k_elems * 2 // 16)}
    fig2 = wgmma.draw_layout("128B", "MN")
    assert len(fig2.axes[0].texts) == 8 * 16
