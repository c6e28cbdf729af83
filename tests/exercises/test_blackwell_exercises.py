"""Chapter 5 exercises: what their verdicts say (the verdicts themselves are tests/grading/test_exercises.py's).

Run: python -m pytest tests/exercises/test_blackwell_exercises.py -q

e8m0_scale, mx_quantize and tmem_plan run on the CPU. tcgen05_gemm targets sm_100a, which no
machine of the course has: its check compiles, reads the SASS and runs the kernel's PTX on the CPU
model (judge.model.ops.tcgen05), so its verdicts are the same on every machine, and a PASS says it was
not run on a GPU.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from judge.grading import exercise
from judge.grading.result import Verdict

from tests.checking import graded_here

IDS = ["e8m0_scale", "mx_quantize", "tmem_plan", "tcgen05_gemm"]
EXS = {i: exercise.get(i) for i in IDS}


READ = [("tcgen05_gemm", n) for n in ("wrong_no_commit.cu", "wrong_no_wait.cu", "wrong_alloc_96.cu",
                                       "wrong_no_dealloc.cu", "wrong_warp_quarter.cu", "correct_lane_by_cases.cu",
                                       "wrong_cuda_core_decoy.cu")] \
    + [("mx_quantize", n) for n in ("wrong_round_half_up.py", "wrong_nibble_order.py", "wrong_misses_negative_inf.py",
                                    "wrong_float32_log2.py", "wrong_tensor_scale_not_finite.py")] \
    + [("e8m0_scale", n) for n in ("wrong_ceil_log2.py", "wrong_float_log2.py", "wrong_dequantize_block_32.py")] \
    + [("tmem_plan", "wrong_uneven_buffers.py")]


def _jobs():
    """The files whose results the tests below read: starters, tcgen05's solution, and the fixtures in READ."""
    for i, ex in EXS.items():
        yield i, ex.starter_path, None
    yield "tcgen05_gemm", EXS["tcgen05_gemm"].solution_path, "PASS"
    for i, name in READ:
        yield i, EXS[i].fixture_path(name), EXS[i].fixtures[name]


@pytest.fixture(scope="module")
def graded(shared_gradings):
    """Each file graded as a learner's is (grade.check), once for every module that reads it (tests/gradings.py)."""
    jobs = list(_jobs())
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda j: shared_gradings.check(j[0], j[1]), jobs))
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
    assert "not run on a GPU" in r.message and "CPU model" in r.message
    assert re.search(r"m=\d+ n=\d+ k=\d+", r.message), r.message      # the case drawn from its [domain], named
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
    assert "x = 1.0625" in r.message and "ties to even" in " ".join(r.details)
    _, r = graded[("mx_quantize", "wrong_nibble_order.py")]
    assert "nibbles are swapped" in r.message
    _, r = graded[("e8m0_scale", "wrong_ceil_log2.py")]
    assert "448.0" in r.message and "OCP floor rule" in r.details[0]


def test_a_decoy_that_computes_c_on_cuda_cores_is_told_what_it_bypassed(graded):
    _, r = graded[("tcgen05_gemm", "wrong_cuda_core_decoy.cu")]
    assert r.verdict.value == "MISSING FEATURE" and "tcgen05.ld" in r.message and "0%" in r.message, str(r)
    assert any("tmem.ld (16)" in c for c in r.checked), str(r)          # the SASS has it: the model decides


def test_failures_on_the_listed_edge_cases_name_their_rule(graded):
    _, r = graded[("mx_quantize", "wrong_misses_negative_inf.py")]
    assert "holds -inf" in r.message and "+Inf or -Inf" in " ".join(r.details)
    _, r = graded[("mx_quantize", "wrong_float32_log2.py")]
    assert "amax 15.99999904" in r.message and "rounds up just below a power of two" in " ".join(r.details)
    _, r = graded[("mx_quantize", "wrong_tensor_scale_not_finite.py")]
    assert "tensor_scale float32(inf)" in r.message and "finite elements only" in " ".join(r.details)
    _, r = graded[("e8m0_scale", "wrong_float_log2.py")]
    assert "off by one just below a power of two" in " ".join(r.details), str(r)
    _, r = graded[("e8m0_scale", "wrong_dequantize_block_32.py")]
    assert "block=16" in r.message and "a block size other than 32" in " ".join(r.details)
    _, r = graded[("tmem_plan", "wrong_uneven_buffers.py")]
    assert "allocates 512 columns where 256 suffice" in r.message and "buffer counts" in " ".join(r.details)
    for (ex_id, name), (want, r) in graded.items():
        if ex_id in CPU_IDS and want == "WRONG" and "drawn at random" not in " ".join(r.details):
            assert any(d.startswith("listed case: ") or d.startswith("seed ") for d in r.details) or \
                ex_id == "tmem_plan", str(r)


# ----------------------------------------------------------------------------- the checks themselves
CPU_IDS = ["e8m0_scale", "mx_quantize", "tmem_plan"]
#: wrong fixtures whose mistake the inputs drawn per run must find without the statement's listed cases
#: (e8m0_value has no drawn inputs: its 256 codes are all listed, so wrong_nan_scale is left out)
FOUND_BY_DRAWING = {
    "e8m0_scale": ["wrong_ceil_log2.py", "wrong_ceil_rule.py", "wrong_no_clamp.py", "wrong_float_log2.py",
                   "wrong_dequantize_block_32.py"],
    "mx_quantize": [n for n in EXS["mx_quantize"].fixtures if n.startswith("wrong_")],
    "tmem_plan": [n for n in EXS["tmem_plan"].fixtures if n.startswith("wrong_")],
}


@pytest.mark.parametrize("job", [(i, n) for i in CPU_IDS for n in FOUND_BY_DRAWING[i]], ids=lambda j: f"{j[0]}/{j[1]}")
def test_drawn_inputs_alone_find_each_listed_mistake(job):
    ex_id, name = job
    r = graded_here(ex_id, EXS[ex_id].fixture_path(name), drawn_only=True, seed=20261201)
    assert r.verdict == Verdict.WRONG, str(r)
    if ex_id != "tmem_plan" or name != "wrong_no_limit.py":
        assert "drawn at random and shrunk" in " ".join(r.details) and "seed 20261201" in " ".join(r.details), str(r)


@pytest.mark.parametrize("ex_id", CPU_IDS)
def test_the_solution_passes_on_drawn_inputs_and_the_checks_need_no_solution_file(ex_id):
    r = graded_here(ex_id, EXS[ex_id].solution_path, drawn_only=True, seed=7)
    assert r.verdict == Verdict.PASS and "seed 7" in r.message, str(r)
    assert "reference()" not in (EXS[ex_id].folder / "check.py").read_text()


@pytest.mark.parametrize("ex_id", CPU_IDS)
def test_numpy_scalars_are_numbers(ex_id):
    """A right answer returning NumPy scalars (int64, float32 NaN, ...) passes, called in this very process too."""
    assert EXS[ex_id].fixtures["correct_numpy_scalars.py"] == "PASS"
    r = graded_here(ex_id, EXS[ex_id].fixture_path("correct_numpy_scalars.py"), seed=3)
    assert r.verdict == Verdict.PASS, str(r)


def test_the_mx_solution_rounds_once_where_a_float32_step_rounds_twice():
    """2.5 + 2^-30 is above the FP4 tie 2.5: nearest is 3. Through float32 it becomes 2.5 first, then goes
    to even (2) - what ml_dtypes before 0.7 did with every float64, and what any float32 step on the way does."""
    import ml_dtypes
    import numpy as np

    from judge.hw import formats
    v = np.array([2.5 + 2.0 ** -30, 0.75 + 2.0 ** -40, -(1.25 + 2.0 ** -35)])
    mx = EXS["mx_quantize"].reference()
    assert list(formats.decode(mx.to_codes(v, "e2m1"), "e2m1")) == [3.0, 1.0, -1.5]
    assert list(v.astype(np.float32).astype(ml_dtypes.float4_e2m1fn).astype(np.float64)) == [2.0, 1.0, -1.0]


def test_lanes_picked_through_branches_are_followed_per_warp(graded):
    _, r = graded[("tcgen05_gemm", "correct_lane_by_cases.cu")]
    assert r.verdict.value == "PASS" and "CPU model" in r.message, str(r)
