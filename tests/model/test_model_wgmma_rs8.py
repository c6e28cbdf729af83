"""wgmma with an 8-bit A in registers (the RS form of .m64nNk32 .e4m3) on the CPU model.

Run: python -m pytest tests/model/test_model_wgmma_rs8.py -q
The fragment: register j of lane l in warp w holds the four bytes (row, k .. k + 3), row = 16 w + l / 4
+ 8 (j % 2), k = 4 (l % 4) + 16 (j / 2) (judge.hw.wgmma.a_fragment_coord(t, j, 32)). The kernel that
uses it is gemm_fp8.cu's PROMOTE=2 with lab/patches/explore_fp8_a_regs.patch; that build matched
float64 on the H200 (2026-12-02, 4096^3 and 8192^3, rel. error 1.67e-3 like torch._scaled_mm's), so
the layout below is the hardware's, and the model must agree with it.
"""

import pytest

from chapters.ch05_blackwell import fp8
from judge import config
from judge.hw import wgmma as hw_wgmma

PATCH = config.ROOT / "lab" / "patches" / "explore_fp8_a_regs.patch"
DEFINES = {"PROMOTE": 2, "A_REGS": 1}


def test_the_8bit_fragment_is_the_16bit_one_with_elements_half_as_wide():
    for t in range(128):
        for j in range(4):
            row, k = hw_wgmma.a_fragment_coord(t, j, 32)
            row16, k16 = hw_wgmma.a_fragment_coord(t, j, 16)
            assert row == row16 and k == 2 * k16        # the same bytes of a 64 x 32-byte slice
    assert hw_wgmma.a_fragment_coord(37, 3, 32) == (16 + 1 + 8, 4 + 16)    # warp 1, lane 5
    every = {(r, k + i) for t in range(128) for j in range(4) for r, k in [hw_wgmma.a_fragment_coord(t, j, 32)]
             for i in range(4)}
    assert len(every) == 64 * 32                       # each of A's 64 x 32 elements once
    with pytest.raises(ValueError, match="K is 16"):
        hw_wgmma.a_fragment_coord(0, 0, 64)


def test_the_register_form_gemm_matches_float64_on_the_model():
    pytest.importorskip("ml_dtypes")
    b = fp8.edited_build(patch=PATCH, defines=DEFINES)
    assert "QGMMA.64x128x32.F32.E4M3.E4M3 R" in b.sass_of("gemm_fp8")      # A named by registers
    r = fp8.model_check(200, 264, 272, promote=2, build=b)
    assert r.ok, r.message


def test_a_fragment_read_with_its_k_halves_swapped_is_wrong_on_the_model():
    pytest.importorskip("ml_dtypes")
    b = fp8.edited_build([("byte = 32 * ks + 4 * (l % 4) + 16 * (j / 2);", "byte = 32 * ks + 4 * (l % 4) + 16 * (j % 2);")],
                         patch=PATCH, defines=DEFINES)
    assert not fp8.model_check(200, 264, 272, promote=2, build=b).ok
