"""The lab's explorations of chapter 5's FP8 GEMM (lab/patches/explore_fp8_*.patch on
chapters/ch05_blackwell/gemm_fp8.cu, and lab/explore_h200.py's stream-K and ping-pong builds): each one must still
apply to the kernel as it is and match float64 on the CPU model, and the model must catch the mistake each one
guards against. The timings of these designs are the lab's (lab/README.md); the chapter quotes none of them.

Run: python -m pytest tests/lab/test_explore_fp8.py -q       (no GPU)
"""
import re

import pytest

from chapters.ch05_blackwell import fp8
from judge import config

PATCHES = config.ROOT / "lab" / "patches"


def test_the_turns_exploration_matches_float64_and_its_unmatched_signal_hangs_on_the_model():
    # explore_fp8_turns.patch: the consumers alternate through named barriers; consumer 1 does not signal
    # after its last half. A consumer 0 that waits before its first half too waits for a signal never sent.
    pytest.importorskip("ml_dtypes")
    from judge.model.errors import Hang
    d = {"PROMOTE": 2, "TURNS": 1}
    assert fp8.model_check(200, 264, 272, promote=2, build=fp8.edited_build(patch=PATCHES / "explore_fp8_turns.patch", defines=d)).ok
    b = fp8.edited_build([("if (TURNS && !(c == 0 && h == 0))", "if (TURNS)")], patch=PATCHES / "explore_fp8_turns.patch", defines=d)
    with pytest.raises(Hang):
        fp8.model_check(200, 264, 272, promote=2, build=b)


def test_promote2_on_cublas_tiles_matches_float64_on_the_model():
    # explore_fp8_128.patch (round18): PROMOTE=2 with BN = 128, one half per slice, released after it
    pytest.importorskip("ml_dtypes")
    fp8.FP8_TILE[6], fp8.FP8_STAGES[6], fp8.FP8_CLUSTER[6] = (128, 128), 6, 1
    try:
        d = {"PROMOTE": 2, "BN": 128, "BM": 128, "BK": 128, "STAGES": 6, "GROUP_M": 16}
        b = fp8.edited_build(patch=PATCHES / "explore_fp8_128.patch", defines=d)
        assert fp8.model_check(200, 392, 272, promote=6, build=b).ok
    finally:
        for table in (fp8.FP8_TILE, fp8.FP8_STAGES, fp8.FP8_CLUSTER):
            table.pop(6)


AHEAD = {"PROMOTE": 2, "EPI_AHEAD": 1}
UNDER = ("      if (EPI_AHEAD && kt == 0 && pt >= 0) {         // under the four wgmma just issued\n"
         "        epilogue(pt, pm0, pn0);\n#pragma unroll\n        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;\n      }\n")


def test_the_epilogue_ahead_keeps_its_wgmma_in_flight_through_the_epilogue():
    # explore_fp8_ahead.patch: no wait injected by ptxas, and the epilogue's shared-memory stores sit between
    # the next tile's first QGMMAs and the wait for them
    b = fp8.edited_build(patch=PATCHES / "explore_fp8_ahead.patch", defines=AHEAD)
    assert not [line for line in b.log.splitlines() if "C7517" in line], b.log
    sass = [ln for ln in b.sass_of("gemm_fp8").splitlines() if re.search(r"QGMMA|WARPGROUP\.DEPBAR|\bSTS\b", ln)]
    ops = ["Q" if "QGMMA" in ln else "W" if "DEPBAR" in ln else "S" for ln in sass]
    assert re.search(r"QS{32,}", "".join(ops)), "".join(ops)     # a half of 64 x 128 bf16 pairs: 32 STS


def test_in_the_flat_loop_thread_0_branches_in_the_epilogue_do_not_make_ptxas_wait():
    # the patch's header: the back edge, not the epilogue's `if (thread 0)`, is why ptxas waited
    b = fp8.edited_build([("        store_halves_if(t128 == 0, &mapC, nb, m0 + c * 64, myC);",
                           "        if (t128 == 0) store_halves_if(true, &mapC, nb, m0 + c * 64, myC);"),
                          ('" cp.async.bulk.commit_group;\\n}"', '" @p cp.async.bulk.commit_group;\\n}"')],
                         patch=PATCHES / "explore_fp8_ahead.patch", defines=AHEAD)
    assert "@p cp.async.bulk.commit_group" in b.ptx
    assert not [line for line in b.log.splitlines() if "C7517" in line], b.log


@pytest.mark.parametrize("fine", [False, True])
def test_the_epilogue_ahead_matches_float64_over_several_tiles_on_the_model(fine):
    # 200 x 776: four tiles for each of the model's two blocks, each epilogue under the next tile's wgmma
    pytest.importorskip("ml_dtypes")
    b = fp8.edited_build(patch=PATCHES / "explore_fp8_ahead.patch", defines={**AHEAD, **({"FINE": 1} if fine else {})})
    assert fp8.model_check(200, 776, 272, promote=2, fine=fine, build=b).ok


def test_an_epilogue_run_after_the_next_tiles_first_add_is_wrong_on_the_model():
    # the pending epilogue moved after add_half<0>: the tile it writes already holds the next tile's first half
    pytest.importorskip("ml_dtypes")
    late = "      add_half<0>(acc, part, sa0 * sb0, sa1 * sb0);\n"
    b = fp8.edited_build([(UNDER, ""), (late, late + UNDER)], patch=PATCHES / "explore_fp8_ahead.patch", defines=AHEAD)
    assert not fp8.model_check(200, 776, 272, promote=2, build=b).ok


@pytest.mark.parametrize("promote", [0, 2])
def test_the_stmatrix_epilogue_matches_float64_and_a_row_named_by_the_wrong_lane_is_wrong(promote):
    # explore_fp8_stsm.patch: lane 8 i + r names row r of matrix i (chunk j + i / 2, rows 8 (i % 2) + r); naming
    # rows 8 (i / 2) + r instead puts the right values in the wrong rows
    pytest.importorskip("ml_dtypes")
    d = {"PROMOTE": promote} if promote else None
    b = fp8.edited_build(patch=PATCHES / "explore_fp8_stsm.patch", defines=d)
    assert len(re.findall(r"\bSTSM\b", b.sass_of("gemm_fp8"))) == 16 and not re.search(r"\bSTS\b", b.sass_of("gemm_fp8"))
    assert fp8.model_check(200, 264, 272, promote=promote, build=b).ok
    bad = fp8.edited_build([("row = 16 * w + 8 * (i % 2) + r;", "row = 16 * w + 8 * (i / 2) + r;")],
                           patch=PATCHES / "explore_fp8_stsm.patch", defines=d)
    assert not fp8.model_check(200, 264, 272, promote=promote, build=bad).ok


def _explore():
    from lab import explore_h200
    return explore_h200


@pytest.mark.parametrize("promote, shape, blocks", [(2, (640, 256, 512), 3), (2, (1280, 512, 1024), 6),
                                                    (0, (1280, 256, 1024), 6)])
def test_the_stream_k_exploration_matches_float64_with_tiles_split_between_blocks(promote, shape, blocks):
    # explore_fp8_sk.patch: rung 10's stream-K tail on gemm_fp8.cu; the plan splits the last tiles' K slices
    # over every block, so some tiles are summed from two or three blocks' partials through the workspace
    pytest.importorskip("ml_dtypes")
    r, plan = _explore().sk_model_check(*shape, blocks, promote=promote)
    assert plan["sk_tiles"] >= 1 and plan["sk_clusters"] > plan["sk_tiles"], plan
    assert r.ok, r.message


def test_a_stream_k_owner_that_does_not_add_the_partials_is_wrong_on_the_model():
    pytest.importorskip("ml_dtypes")
    e = _explore()
    b = e.sk_build(2, edits=[("            acc[4 * q] += v.x; acc[4 * q + 1] += v.y; acc[4 * q + 2] += v.z; "
                              "acc[4 * q + 3] += v.w;", "")])
    r, plan = e.sk_model_check(640, 256, 512, 3, build=b)
    assert plan["sk_tiles"] >= 1 and not r.ok


def test_the_fp8_ping_pong_exploration_matches_float64_over_several_tiles_on_the_model():
    # explore_fp8_pingpong.patch (round20): 512 x 384 gives each of the model's two clusters three 128 x 128 tiles,
    # so both consumers take turns twice; 200 x 264 clips at both edges
    pytest.importorskip("ml_dtypes")
    b = _explore().pingpong_fp8_build()
    try:
        for shape in ((512, 384, 640), (200, 264, 272)):
            r = fp8.model_check(*shape, promote=7, build=b)
            assert r.ok, r.message
    finally:
        for table in (fp8.FP8_TILE, fp8.FP8_STAGES, fp8.FP8_CLUSTER):
            table.pop(7, None)


@pytest.mark.parametrize("patch", ["explore_fp8_a_regs.patch", "explore_fp8_part192.patch", "explore_fp8_turns.patch",
                                   "explore_fp8_boxes.patch", "explore_fp8_128.patch", "explore_fp8_ahead.patch",
                                   "explore_fp8_sk.patch", "explore_fp8_stsm.patch"])
def test_the_exploration_patches_still_apply_to_the_kernel(patch):
    # explore_h200.py builds them from gemm_fp8.cu as it is; a kernel edit that breaks one says so here
    assert fp8.edited_source(patch=PATCHES / patch) != fp8._fp8_source().read_text()
