"""Chapter 5 exercises: what their verdicts say (the verdicts themselves are tests/test_exercises.py's).

Run: python -m pytest tests/test_ch05_exercises.py -q

e8m0_scale, mx_quantize and tmem_plan run on the CPU. tcgen05_gemm targets sm_100a, which no
machine of the course has: its check compiles, reads the SASS and runs the kernel's PTX on the CPU
model (judge.model.ops.tcgen05), so its verdicts are the same on every machine, and a PASS says it was
not run on a GPU.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

from judge.grading import exercise, grade

IDS = ["e8m0_scale", "mx_quantize", "tmem_plan", "tcgen05_gemm"]
EXS = {i: exercise.get(i) for i in IDS}


READ = [("tcgen05_gemm", n) for n in ("wrong_no_commit.cu", "wrong_no_wait.cu", "wrong_alloc_96.cu",
                                       "wrong_no_dealloc.cu", "wrong_warp_quarter.cu", "correct_lane_by_cases.cu",
                                       "wrong_cuda_core_decoy.cu")] \
    + [("mx_quantize", "wrong_round_half_up.py"), ("mx_quantize", "wrong_nibble_order.py"),
       ("e8m0_scale", "wrong_ceil_log2.py")]


def _jobs():
    """The files whose results the tests below read: starters, tcgen05's solution, and the fixtures in READ."""
    for i, ex in EXS.items():
        yield i, ex.starter_path, None
    yield "tcgen05_gemm", EXS["tcgen05_gemm"].solution_path, "PASS"
    for i, name in READ:
        yield i, EXS[i].fixture_path(name), EXS[i].fixtures[name]


@pytest.fixture(scope="module")
def graded():
    jobs = list(_jobs())
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda j: grade.check(j[0], j[1], quiet=True), jobs))
    return {(i, p.name): (want, r) for (i, p, want), r in zip(jobs, results)}


def test_chapter_5_metadata():
    assert [(EXS[i].chapter, EXS[i].order) for i in IDS] == [(5, 1), (5, 2), (5, 3), (5, 4)]
    assert [EXS[i].needs_gpu for i in IDS] == [False, False, False, True]
    assert EXS["tcgen05_gemm"].target == "sm_100a"


@pytest.mark.parametrize("job", [(i, p.name) for i, p, _ in _jobs()], ids=lambda j: f"{j[0]}/{j[1]}")
def test_the_files_read_below_get_their_verdicts_and_starters_never_pass(graded, job):
    want, r = graded[job]
    if want is None:                                  # the untouched starter never passes
        assert r.verdict.value in ("WRONG", "MISSING FEATURE"), str(r)
        assert "untouched starter" in " ".join(r.details) or r.verdict.value == "MISSING FEATURE"
    else:
        assert r.verdict.value == want, str(r)


def test_a_tcgen05_pass_names_what_ran_and_says_it_was_not_run_on_a_gpu(graded):
    _, r = graded[("tcgen05_gemm", "solution.cu")]
    assert "not run on a GPU" in r.message and "CPU model" in r.message and "m=128 n=256 k=192" in r.message
    assert any("compiled for sm_100a" in c for c in r.checked)
    assert any("correct under the CPU model" in c for c in r.checked)


@pytest.mark.parametrize("fixture,rule", [("wrong_no_wait.cu", "tcgen05-ld-in-flight"),
                                          ("wrong_alloc_96.cu", "tcgen05-alloc-size"),
                                          ("wrong_no_dealloc.cu", "tcgen05-leak"),
                                          ("wrong_warp_quarter.cu", "tcgen05-lane-quarter")])
def test_tcgen05_fixtures_name_the_rule_they_break(graded, fixture, rule):
    _, r = graded[("tcgen05_gemm", fixture)]
    assert f"[{rule}]" in r.message and "PTX" in r.message, str(r)


def test_a_kernel_without_commit_hangs_and_says_on_what(graded):
    _, r = graded[("tcgen05_gemm", "wrong_no_commit.cu")]
    assert r.verdict.value == "HANG" and "mbarrier" in r.message + " ".join(r.details), str(r)


def test_failures_name_the_element_and_the_rule(graded):
    _, r = graded[("mx_quantize", "wrong_round_half_up.py")]
    assert "x = 0.25" in r.message and "ties to even" in " ".join(r.details)
    _, r = graded[("mx_quantize", "wrong_nibble_order.py")]
    assert "nibbles are swapped" in r.message
    _, r = graded[("e8m0_scale", "wrong_ceil_log2.py")]
    assert "448.0" in r.message and "OCP floor rule" in r.details[0]


def test_a_decoy_that_computes_c_on_cuda_cores_is_told_what_it_bypassed(graded):
    _, r = graded[("tcgen05_gemm", "wrong_cuda_core_decoy.cu")]
    assert r.verdict.value == "MISSING FEATURE" and "tcgen05.ld" in r.message and "0%" in r.message, str(r)
    assert any("tmem.ld (16)" in c for c in r.checked), str(r)          # the SASS has it: the model decides


def test_lanes_picked_through_branches_are_followed_per_warp(graded):
    _, r = graded[("tcgen05_gemm", "correct_lane_by_cases.cu")]
    assert r.verdict.value == "PASS" and "CPU model" in r.message, str(r)
