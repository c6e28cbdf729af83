"""Chapter 5: the block-scaled formats of judge.hw.formats against ml_dtypes and the rules they name.

Run: python -m pytest tests/hw/test_formats.py -q
"""
import ml_dtypes
import numpy as np
import pytest

from judge.hw import formats as F

ALL = list(F.ELEMENTS)


@pytest.mark.parametrize("name", ALL)
def test_every_code_decodes_as_ml_dtypes_says(name):
    e = F.ELEMENTS[name]
    codes = np.arange(1 << e.bits, dtype=np.uint8)
    ours = F.decode(codes, name)
    ref = codes.view(e.dtype).astype(np.float64)
    assert np.array_equal(ours, ref, equal_nan=True)


@pytest.mark.parametrize("name", ALL)
def test_rounding_agrees_with_ml_dtypes_on_float32_inputs(name):
    """ml_dtypes casts float32 with round-to-nearest-even: ours must give the same value, saturating aside."""
    e = F.ELEMENTS[name]
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(20000) * e.max / 4,
                        rng.standard_normal(5000) * e.min_normal,          # subnormals
                        F.decode(np.arange(1 << e.bits, dtype=np.uint8), name)]).astype(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) <= e.max)]
    # midpoints between neighbouring codes: the ties
    vals = np.unique(F.decode(np.arange(1 << e.bits, dtype=np.uint8), name))
    vals = vals[np.isfinite(vals)]
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    x = np.concatenate([x, mids])
    ours = F.round_to_element(x, name)
    ref = x.astype(e.dtype).astype(np.float64)
    bad = ~((ours == ref) | (np.isnan(ours) & np.isnan(ref)))
    assert not bad.any(), f"{name}: x={x[bad][:4]} ours={ours[bad][:4]} ml_dtypes={ref[bad][:4]}"


def test_fp4_ties_round_to_even():
    x = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert list(F.round_to_element(x, "e2m1")) == want
    assert list(F.round_to_element(np.negative(x), "e2m1")) == [-w for w in want]


def test_overflow_saturates_or_becomes_nan_and_inf():
    assert F.round_to_element([470.0, 1e6], "e4m3").tolist() == [448.0, 448.0]
    r = F.round_to_element([460.0, 470.0], "e4m3", overflow="nan")
    assert r[0] == 448.0 and np.isnan(r[1])           # 460 rounds down to 448; 470 rounds to 480
    assert F.round_to_element([61440.0], "e5m2", overflow="nan")[0] == np.inf   # tie rounds up to 2^16
    with pytest.raises(ValueError, match="no Inf or NaN"):
        F.round_to_element([1.0], "e2m1", overflow="nan")


def test_e8m0_matches_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8)
    ref = codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    assert np.array_equal(F.e8m0_decode(codes), ref, equal_nan=True)
    assert F.e8m0_encode([-127, 0, 127]).tolist() == [0, 127, 254]


@pytest.mark.parametrize("name", ALL)
def test_floor_and_ceil_scale_rules(name):
    e = F.ELEMENTS[name]
    rng = np.random.default_rng(1)
    amax = np.abs(rng.standard_normal(2000)) * 10.0 ** rng.integers(-6, 6, 2000)
    amax = np.concatenate([amax, [e.max, e.max * 2, e.max * 1.01, 2.0 ** e.emax, 1.0]])
    fl = F.scale_exponent(amax, name, "floor")
    assert np.array_equal(fl, np.floor(np.log2(amax)).astype(int) - e.emax)
    ce = F.scale_exponent(amax, name, "ceil")
    assert (amax / np.exp2(ce) <= e.max).all()                 # nothing overflows
    assert (amax / np.exp2(ce - 1) > e.max).all()              # and it is the smallest such scale
    assert ((ce - fl >= 0) & (ce - fl <= 1)).all()


def test_floor_rule_clamps_the_block_max_and_ceil_does_not():
    x = np.full(32, 460.0)                 # floor: scale 2^0, 460 > 448 saturates
    q = F.mx_quantize(x, "e4m3", scale_rule="floor")
    assert q.scales.tolist() == [127] and q.dequantize()[0] == 448.0
    q = F.mx_quantize(x, "e4m3", scale_rule="ceil")
    assert q.scales.tolist() == [128] and q.dequantize()[0] == 448.0   # 230 -> 224 at scale 2: also 448
    x = np.full(32, 7.0)                   # FP4: floor 2^(2-2) = 1: 7 -> 6; ceil 2: 3.5 -> 4 -> 8
    assert F.mx_quantize(x, "e2m1", scale_rule="floor").dequantize()[0] == 6.0
    assert F.mx_quantize(x, "e2m1", scale_rule="ceil").dequantize()[0] == 8.0


def test_zero_nan_and_inf_blocks():
    x = np.zeros((2, 64))
    x[1, 40] = np.nan
    x[0, 33] = -np.inf
    q = F.mx_quantize(x, "e2m1")
    assert q.scales.tolist() == [[0, 255], [0, 255]]
    d = q.dequantize()
    assert (d[0, :32] == 0).all() and np.isnan(d[0, 32:]).all() and np.isnan(d[1, 32:]).all()


def test_subnormal_elements_survive_in_a_block_with_a_large_max():
    x = np.zeros(32)
    x[0] = 448.0                         # E4M3 block scale 2^0: the others keep their own values
    x[1] = 2.0 ** -8                     # a subnormal of E4M3 (smallest normal 2^-6, quantum 2^-9)
    x[2] = 3 * 2.0 ** -10                # 1.5 quanta: a tie, rounds to 2 quanta (even)
    x[3] = 2.0 ** -11                    # a quarter quantum: rounds to zero
    d = F.mx_quantize(x, "e4m3").dequantize()
    assert d[:4].tolist() == [448.0, 2.0 ** -8, 2.0 ** -8, 0.0]


def test_mx_roundtrip_error_is_bounded_by_half_an_ulp_of_the_block():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 256))
    for name in ALL:
        e = F.ELEMENTS[name]
        q = F.mx_quantize(x, name, scale_rule="ceil")
        s = F.e8m0_decode(q.scales).repeat(32, axis=-1)
        err = np.abs(q.dequantize() - x) / s
        # half a quantum of the element's top binade, relative to the scale
        assert (err <= 2.0 ** (e.emax - e.mbits - 1) + 1e-12).all(), name


def test_nvfp4_two_level_scales():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 128)) * 3
    n = F.nvfp4_quantize(x)
    assert n.tensor_scale == np.float32(np.abs(x).max() / (448 * 6))
    s = F.decode(n.scales, "e4m3")
    assert s.max() <= 448 and s.shape == (32, 8)
    d = n.dequantize()
    assert F.relative_error(x, d) < 0.15
    blk = np.abs(x).reshape(32, 8, 16).max(-1)
    assert np.all(np.abs(d).reshape(32, 8, 16).max(-1) <= 6 * s * np.float64(n.tensor_scale) + 1e-12)
    assert blk.shape == s.shape


def test_nvfp4_zero_and_nan_blocks():
    x = np.zeros(48)
    x[20] = np.nan
    x[40] = 1.0
    n = F.nvfp4_quantize(x)
    d = n.dequantize()
    assert (d[:16] == 0).all() and np.isnan(d[16:32]).all()
    assert abs(d[40] - 1.0) < 1e-6       # the FP32 tensor scale 1/2688 is not exact


def test_fp4_packing_puts_element_2i_in_the_low_nibble():
    codes = np.array([0x1, 0x2, 0xF, 0x8], dtype=np.uint8)
    p = F.pack_fp4(codes)
    assert p.tolist() == [0x21, 0x8F]
    assert F.unpack_fp4(p).tolist() == codes.tolist()


def test_block_size_must_divide_the_row():
    with pytest.raises(ValueError, match="multiple of the block size"):
        F.mx_quantize(np.ones(40), "e4m3")


def test_error_table_orders_the_formats_as_their_bits_say():
    x = np.random.default_rng(4).standard_normal((64, 512))
    rows = {(r["format"], r["block"]): r["rel_err"] for r in F.error_table(x, blocks=(32,))}
    assert rows[("bf16", None)] < rows[("MX e4m3", 32)] < rows[("MX e2m1", 32)]
    assert rows[("MX e2m3", 32)] < rows[("MX e3m2", 32)]      # normal data: mantissa beats range
    assert rows[("NVFP4", 16)] < rows[("MX e2m1", 32)]        # finer scales win
