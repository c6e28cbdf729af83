"""The GPU exercises' domains (exercise.toml [domain]) and the cases drawn from them; mutants of a solution.

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_domain.py -q

Every class of every domain holds in the model's cases of any seed, and in the H200's list; the same
seed draws the same cases; a sampled grid compares what its blocks wrote, wherever it lies, and names
the statement's rule where the statement fixes it. Two mutants (a sample of judge.grading.mutate's,
the whole run is a command: docs/mutations.txt) are graded and must not pass.
"""
from __future__ import annotations

import numpy as np
import pytest

from judge.grading import compare, domain, exercise

GPU = ["cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm", "tcgen05_gemm", "tcgen05_ring"]


@pytest.mark.parametrize("eid", GPU)
def test_every_class_holds_in_the_cases_of_any_seed_within_the_statement(eid):
    ex = exercise.get(eid)
    assert ex.domain.classes, f"{eid} states no domain"
    drawn = {}
    for seed in range(2):
        cases = drawn[seed] = domain.draw(ex.domain, seed, ex.model.max_blocks)
        held = {n for c in cases for n in domain.classes_of(ex.domain, c, ex.model.max_blocks)}
        assert held == {c.name for c in ex.domain.classes}, (seed, cases)
        for c in cases:
            assert not domain.in_free(ex.domain, c), (c, domain.in_free(ex.domain, c))
            assert ex.domain.max_cost == 0 or domain.cost(ex.domain, c, ex.model.max_blocks) <= ex.domain.max_cost
    assert domain.draw(ex.domain, 0, ex.model.max_blocks) == drawn[0], "one seed, the same cases"
    assert drawn[0] != drawn[1]


@pytest.mark.parametrize("eid", GPU)
def test_every_class_is_drawn_often_enough_that_a_check_never_runs_out(eid):
    """Each class holds in 2 % or more of the candidates drawn for it (its pin within free, under max_cost):
    the draw tries 1,500 of them (then up to 30,000), so a class that holds rarely would, now and then, make
    a check fail to draw its cases. A narrow class gets a pin."""
    ex = exercise.get(eid)
    rng = np.random.default_rng(0)
    for cls in ex.domain.classes:
        spec = {**ex.domain.free, **cls.pin}
        hits = 0
        for _ in range(500):
            case = domain._complete(ex.domain, domain._draw_free(spec, rng), ex.model.max_blocks)
            hits += (domain.holds(cls, domain.values(ex.domain, case, ex.model.max_blocks))
                     and (not ex.domain.max_cost
                          or domain.cost(ex.domain, case, ex.model.max_blocks) <= ex.domain.max_cost))
        assert hits >= 10, f"{eid}: {cls.name!r} held in {hits} of 500 draws: pin it"


@pytest.mark.parametrize("eid", [e for e in GPU if exercise.get(e).cases.list])
def test_the_h200_cases_hold_every_class_but_the_models_own(eid):
    ex = exercise.get(eid)
    assert domain.uncovered(ex.domain, ex.cases.list) == []
    for c in ex.cases.list:
        assert not domain.in_free(ex.domain, dict(c)), c


def test_a_class_no_case_can_hold_is_refused_by_name():
    dom = exercise.Domain(free={"K": {"min": 8, "max": 64, "step": 8}},
                          classes=[exercise.DomainClass(name="odd K", when="K % 2 == 1")])
    with pytest.raises(domain.DomainError, match="odd K"):
        domain.draw(dom, 0)


class _Mod:
    """A check whose block (bx, 0) owns columns 4 bx .. 4 bx + 3 of a 2 x 16 output."""
    @staticmethod
    def owned(case, name, ctaids):
        keep = np.zeros((2, 16), bool)
        for bx, _, _ in ctaids:
            keep[:, 4 * bx:4 * bx + 4] = True
        return keep


class _Ex:
    def __init__(self, mapping=""):
        self.domain = exercise.Domain(mapping=mapping)


def _sampled(writes, mapping=""):
    ref = {"y": np.arange(32, dtype=np.float64).reshape(2, 16)}
    got = np.full((2, 16), np.nan, np.float32)
    for cols, value in writes:
        got[:, cols] = value
    outs, failed = domain.follow_sample(_Mod, _Ex(mapping), {"n": 16}, ref, {"y": got}, [(1, 0, 0)])
    return [compare.compare(outs["y"], ref["y"], rtol=0, atol=0)], failed


def test_a_sampled_block_that_writes_elsewhere_is_followed_not_assumed():
    ref = np.arange(32, dtype=np.float64).reshape(2, 16)
    comps, failed = _sampled([(slice(8, 12), ref[:, 8:12])])          # block 1 wrote block 2's columns
    assert comps[0].ok and not failed, "a grouped raster writes right values where it likes"
    comps, failed = _sampled([(slice(8, 12), ref[:, 8:12] + 1)])
    assert not comps[0].ok and not failed, "what it wrote is compared, wherever it lies"


def test_where_the_statement_fixes_the_mapping_a_break_names_the_rule():
    ref = np.arange(32, dtype=np.float64).reshape(2, 16)
    rule = "block bx owns columns 4 bx .. 4 bx + 3"
    comps, failed = _sampled([(slice(8, 12), ref[:, 8:12])], mapping=rule)
    assert failed and rule in failed[0].message and "never written" in failed[0].message
    comps, failed = _sampled([(slice(4, 8), ref[:, 4:8])], mapping=rule)
    assert comps[0].ok and not failed


@pytest.mark.parametrize("eid, operator", [("tma_tiles", "coord-swap"), ("tcgen05_gemm", "parity-toggle-once")])
def test_a_sample_of_mutants_does_not_pass(eid, operator, tmp_path):
    from judge.grading import mutate
    ex = exercise.get(eid)
    mu = next(m for m in mutate.mutants(ex, operator))
    r = mutate.grade_mutant(mu, ex, seed=int(np.random.default_rng().integers(1 << 31)), folder=tmp_path)
    assert r.verdict.value in mutate.KILLED, (mu.before, mu.after, r.verdict, r.message)


def test_a_correct_kernel_with_its_own_block_order_passes_on_a_sampled_grid(tmp_path):
    """cp_async_sgemm's solution with the tiles visited column-major (block (bx, by) computes the tile the
    row-major order gives block (by', bx')): correct, and the sampled grid follows what its blocks wrote."""
    import os
    from judge.grading import grade
    ex = exercise.get("cp_async_sgemm")
    src = ex.solution_path.read_text()
    head = "  extern __shared__ __align__(16) float smem[];      // STAGES buffers of STAGE_FLOATS\n"
    raster = ("  const int tile = blockIdx.y * gridDim.x + blockIdx.x;  // column-major raster\n"
              "  const int tx = tile / gridDim.y, ty = tile % gridDim.y;\n")
    assert head in src
    src = src.replace(head, head + raster)
    for line in ("A += (size_t)blockIdx.y * BM * K;", "B += (size_t)blockIdx.x * BN;",
                 "const int row0 = blockIdx.y * BM", "const int col0 = blockIdx.x * BN"):
        assert line in src
        src = src.replace(line, line.replace("blockIdx.y", "ty").replace("blockIdx.x", "tx"))
    path = tmp_path / ex.learner_file
    path.write_text(src)
    os.environ[domain.SEED_VAR] = "5"
    try:
        r = grade.check("cp_async_sgemm", path, quiet=True)
    finally:
        os.environ.pop(domain.SEED_VAR)
    assert r.verdict.value in ("PASS", "SKIP"), (r.verdict, r.message)
    assert any("random sample" in c for c in r.checked), r.checked


def test_a_check_runs_its_quickest_case_again_with_warps_running_ahead():
    # lockstep never lets one warp's arrivals all come before another's copies; [model] ahead (the default)
    # runs the quickest case once more under judge.model.scheduler.Ahead, and the result says so
    from judge.grading import exercise, grade
    ex = next(e for e in exercise.all_exercises() if e.id == "tma_tiles")
    assert ex.model.ahead
    r = grade.check(ex.id, ex.solution_path, quiet=True)
    line = next(c for c in r.checked if c.startswith("correct under the CPU model"))
    assert "the quickest once more with warps running ahead of each other" in line
    assert "again, warps running ahead of each other" in line
