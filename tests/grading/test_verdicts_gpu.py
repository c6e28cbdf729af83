"""Fair verdicts for the GPU exercises without a GPU: the grading flow's own pieces (issue 17, classes 2-7).

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/grading/test_verdicts_gpu.py -q -p no:cacheprovider

What is proven here, each against a kernel written for it (the fixtures under exercises/*/fixtures,
whose whole verdicts tests/grading/test_exercises.py checks):
  - model cases are families drawn per run (judge.grading.cuda_flow.draw_case), so a kernel cannot
    special-case one fixed shape;
  - the SASS rules (judge.hw.sass.rule_violations) report only what is broken on every path: a
    CUTLASS-style store wait passes, a kernel that never waits does not, and a kernel that hangs later
    is told HANG, not a rule;
  - C7515 / C7508 messages name the cause found in the PTX;
  - exercise.toml [uses] with a counter (the feature carries the data) is MISSING FEATURE below its share.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge.grading import cuda_flow, exercise, grade
from judge.grading.result import Verdict
from judge.gpu import build
from judge.hw import sass

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "exercises"


def _compile(ex: str, name: str):
    path = EX / ex / "solution.cu" if name == "solution" else exercise.get(ex).fixture_path(name)   # a patch, applied
    return build.compile(path, target="sm_90a")


# ------------------------------------------------------------------ case families
def test_a_case_family_draws_within_its_ranges_and_varies_from_run_to_run():
    spec = {"M": 128, "N": [128, 256], "K": {"min": 24, "max": 104, "step": 16}}
    seen = set()
    for seed in range(200):
        c = cuda_flow.draw_case(spec, np.random.default_rng(seed))
        assert c["M"] == 128
        assert c["N"] in (128, 256)
        assert 24 <= c["K"] <= 104 and (c["K"] - 24) % 16 == 0
        seen.add((c["N"], c["K"]))
    assert len(seen) == 2 * 6, f"every combination is drawn in 200 runs, got {sorted(seen)}"


def test_every_gpu_exercise_draws_a_tail_and_a_single_tile_or_small_case():
    """The model's families cover the shapes fixtures were built to dodge: n % 4 != 0 in the histogram,
    a single k-tile in the SGEMM, a K under one slice in the wgmma GEMM, a tensor under one box."""
    from judge.grading import exercise
    rng = np.random.default_rng(7)

    def drawn(eid):
        ex = exercise.get(eid)
        return cuda_flow.draw_model_cases(None, ex, seed=int(rng.integers(1 << 31)))
    assert any(c["n"] % 4 for c in drawn("dsmem_histogram"))
    assert any(c["K"] == 8 for c in drawn("cp_async_sgemm"))
    assert any(c["k"] < 64 for c in drawn("ws_gemm"))
    assert any(c["rows"] < 32 and c["cols"] < 64 for c in drawn("tma_tiles"))


# ------------------------------------------------------------------ the SASS rules, path-aware
def test_cutlass_style_store_wait_is_not_an_exit_before_the_read():
    b = _compile("tma_tiles", "correct_store_wait_later.cu")
    k = b.sass_of("tma_affine")
    ins, succ = sass.control_flow(k)
    store = next(i for i, (_, t) in enumerate(ins) if "UTMASTG" in t)
    exits = [i for i, (_, t) in enumerate(ins) if t.strip().endswith("EXIT") or " EXIT" in t]
    # the reason a path-blind rule failed it: an exit of the other threads lies between store and wait
    assert any(store < x for x in exits if ins[x][1].startswith("@")), "expected a predicated EXIT after the store"
    assert sass.rule_violations(k) == []


def test_a_store_never_waited_for_and_a_missing_fence_are_still_named():
    r = sass.rule_violations(_compile("tma_tiles", "wrong_exit_before_store_read.cu").sass_of("tma_affine"))
    assert len(r) == 1 and r[0].startswith("store before exit")
    r = sass.rule_violations(_compile("tma_tiles", "wrong_no_proxy_fence.cu").sass_of("tma_affine"))
    assert len(r) == 1 and r[0].startswith("proxy fence")
    assert sass.rule_violations(_compile("tma_tiles", "solution").sass_of("tma_affine")) == []


def test_a_kernel_that_hangs_after_a_store_is_a_hang_not_a_sass_rule():
    r = grade.check("tma_tiles", exercise.get("tma_tiles").fixture_path("wrong_hang_after_store.cu"), quiet=True)
    assert r.verdict == Verdict.HANG, str(r)


# ------------------------------------------------------------------ compile-log causes
def test_c7515_names_the_zeroing_in_a_wait1_pipeline_and_the_missing_wait_otherwise():
    b = _compile("ws_gemm", "wrong_wait1_zeroed.cu")
    assert "C7515" in b.log
    why = cuda_flow.diagnose_c7515(b.ptx, "ws_gemm")
    assert "zeroed with plain instructions" in why and "scale-d 0" in why and "wait_group 1" in why
    b = _compile("ws_gemm", "wrong_wgmma_serialized.cu")
    assert "C7515" in b.log
    why = cuda_flow.diagnose_c7515(b.ptx, "ws_gemm")
    assert "no wgmma.wait_group in it" in why
    # the cure the message names does cure it
    assert "C7515" not in _compile("ws_gemm", "correct_wait1_scale_d.cu").log


def test_c7508_says_which_launch_bounds_to_add():
    b = _compile("ws_gemm", "wrong_setmaxnreg_ignored.cu")
    assert "C7508" in b.log
    why = cuda_flow.diagnose_c7508(b.ptx, "ws_gemm", 384)
    assert "__launch_bounds__(384, 1)" in why and "no __launch_bounds__" in why
    src = (EX / "ws_gemm/solution.cu").read_text().replace("__launch_bounds__(128 * (CONSUMERS + 1), 1)",
                                                          "__launch_bounds__(128 * (CONSUMERS + 1))")
    b2 = build.compile(src, target="sm_90a", name="ws_gemm_no_min.cu",
                       options=(f"-I{EX / 'ws_gemm'}",))
    assert "C7508" not in b2.log, "a thread bound alone gives ptxas the entry register count"
    assert cuda_flow.diagnose_c7508(b2.ptx, "ws_gemm", 384) == ""


def test_the_log_verdict_carries_the_diagnosed_cause():
    r = grade.check("ws_gemm", exercise.get("ws_gemm").fixture_path("wrong_wait1_zeroed.cu"), quiet=True)
    assert r.verdict == Verdict.MISSING_FEATURE and "zeroed" in r.message, str(r)


# ------------------------------------------------------------------ the feature carries the data
class _Ex:
    def __init__(self, uses):
        self.uses = uses


def test_uses_with_a_counter_asks_for_its_share_of_the_case():
    ex = _Ex({"dsmem.peer": {"per": "n", "share": 0.25, "what": "adds into a peer's slice"}})
    assert cuda_flow._unused_features(ex, {"dsmem.peer": 300}, {"n": 1001}) == ""
    msg = cuda_flow._unused_features(ex, {"dsmem.peer": 0}, {"n": 1001})
    assert msg.startswith("adds into a peer's slice") and "250.25" in msg
    ex = _Ex({"wgmma.flops": {"per": "work.flops", "share": 0.9, "what": "wgmma"}})
    assert cuda_flow._unused_features(ex, {"wgmma.flops": 95}, {}, {"flops": 100}) == ""
    assert cuda_flow._unused_features(ex, {"wgmma.flops": 10}, {}, {"flops": 100}).startswith("wgmma")
    # the fill share form is unchanged
    ex = _Ex({"cp.async": 0.9})
    assert cuda_flow._unused_features(ex, {"smem_fill.cp.async.bytes": 95, "smem_fill.st.shared.bytes": 5}) == ""
    assert "only 50%" in cuda_flow._unused_features(ex, {"smem_fill.cp.async.bytes": 5,
                                                         "smem_fill.st.shared.bytes": 5})


@pytest.mark.parametrize("eid", ["cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm"])
def test_the_model_checks_the_solution_within_seven_seconds(eid):
    """The model's time per check (every model case of one check, drawn as a check draws them) stays
    under 7 s of CPU time; CPU time, because 8 engineers share this 2-core machine and wall time
    measures them. The solution is correct on every case. (dsmem_histogram's drawn cases took 4.1 to
    4.9 s alone and 5.3 s beside the rest of the suite on the 2-core machine, 2026-12-02: the bound
    leaves that margin and still catches a model half again as slow.)"""
    import time
    from judge.grading import exercise
    ex = exercise.get(eid)
    mod = exercise.import_file(ex.folder / "check.py", f"_timed_{eid}")
    b = build.compile(ex.solution_path, target="sm_90a")
    cases = cuda_flow.draw_model_cases(mod, ex)
    b = b.for_model(**cuda_flow.model_options(mod, ex))
    cpu = time.process_time()
    for case in cases:
        comps = cuda_flow.model_case(b, mod, ex, case).comparisons
        assert all(c.ok for c in comps), [c.message for c in comps if not c.ok]
    took = time.process_time() - cpu
    assert took < 7.0, f"{eid}: {took:.1f} s of CPU for {cases}"
