"""Chapter 5: the sm_100a kernels' protocols read from their PTX, and the FP8 figures against what is possible.

Run: python -m pytest tests/chapters/ch05_blackwell/test_kernels.py -q
(tests/gpu/test_kernels.py already builds every kernel for its target and checks its SASS features.)
"""

import pytest

from judge.gpu import build
from judge.model import tiles
from judge import config
from judge import record

CH = config.CHAPTERS_DIR / "ch05_blackwell"
from chapters.ch05_blackwell import fp8  # noqa: E402 - chapters/ch05_blackwell/fp8.py

# Dense tensor-core peaks of an H200 (the H100 SXM's: same GH100 chip and clocks), TFLOPS.
H200_PEAK = {"bf16": 989.5, "fp8": 1979.0}


def test_the_chapter_tile_runs_on_the_model_and_matches_float64():
    """tcgen05_tile's own PTX on the CPU model (judge.model.ops.tcgen05): every tensor-memory rule checked
    thread by thread, C compared against float64 (run_tile raises otherwise), the output from TMEM."""
    b = build.compile(CH / "tcgen05_tile.cu", target="sm_100a")
    rep = tiles.run_tile(b, "tcgen05_tile", M=128, N=256, K=192, seed=3)
    assert rep.counts["tcgen05.mma"] == 2 * 12 and rep.counts["tcgen05.commit"] == 2 * 3
    assert rep.counts["tcgen05.alloc"] == rep.counts["tcgen05.dealloc"] == 2
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"] == 128 * 256 * 4


def test_the_predicted_fp8_error_is_an_e4m3_rounding_error():
    p = fp8.predicted_error(1024)
    assert 0.02 < p["fp8_rel_err"] < 0.06           # 3 mantissa bits: a few percent on each input
    assert p["bf16_rel_err"] < 0.005                 # 7 mantissa bits plus the bf16 output rounding
    assert p["fp8_rel_err"] > 8 * p["bf16_rel_err"]


def test_recorded_fp8_figures_are_possible_and_match_the_prediction():
    figs = record.figures("ch05.fp8")
    if figs is None:
        pytest.skip("ch05.fp8 not recorded yet (python -m judge.record.hopper_run on an H200)")
    for n, r in figs["sizes"].items():
        assert 0 < r["bf16_tflops"] < H200_PEAK["bf16"], f"bf16 at {n}: above the hardware's peak"
        assert 0 < r["fp8_tflops"] < H200_PEAK["fp8"], f"FP8 at {n}: above the hardware's peak"
        pred = fp8.predicted_error(int(n))
        assert 0.8 < r["fp8_rel_err"] / pred["fp8_rel_err"] < 1.25, (n, r, pred)
        assert 0.8 < r["bf16_rel_err"] / pred["bf16_rel_err"] < 1.25, (n, r, pred)


def test_block_scales_follow_rows_that_one_tensor_scale_loses():
    r = {x["format"]: x for x in fp8.gemm_error_by_format(k=1024, rows=32)}
    per_tensor, mx8 = r["E4M3, one scale per tensor"], r["MXFP8 E4M3 (E8M0 per 32)"]
    assert per_tensor["worst row error"] > 0.5            # small rows underflow to zero
    assert mx8["worst row error"] < 0.08                  # every row keeps its 3 mantissa bits
    assert r["bf16"]["worst row error"] < mx8["median row error"] / 5
