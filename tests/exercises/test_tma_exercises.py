"""Chapter 2 exercises (TMA): what their messages tell a learner, and the recorded swizzle table.

Run: python -m pytest tests/exercises/test_tma_exercises.py -q

Every exercise's starter, solution and fixture verdicts are tests/grading/test_exercises.py's (one module for
all); here the files are graded the way a learner's are (judge.grading.grade.check, in a child process), in
parallel once, and the tests read what the messages say.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

from judge.grading import exercise, grade
from judge import record
from judge.grading.grade import Verdict

IDS = ["tensormap_args", "swizzle_address", "barrier_phases", "tma_tiles"]
EXS = {i: exercise.get(i) for i in IDS}


STORIES = [("tensormap_args", "wrong_numpy_order.py"), ("tensormap_args", "wrong_box_within_tensor.py"),
           ("swizzle_address", "wrong_row_unwrapped.py"), ("barrier_phases", "wrong_same_parity.py"),
           ("barrier_phases", "wrong_consumer_starts_at_1.py"), ("barrier_phases", "wrong_producer_always_1.py"),
           ("tma_tiles", "cutensormap_type.cu")]


def _files():
    for i, ex in EXS.items():
        yield i, ex.starter_path
    for i, name in STORIES:
        yield i, EXS[i].fixture_path(name)


@pytest.fixture(scope="module")
def graded(shared_gradings):
    """(exercise id, file name) -> Result, for every starter and fixture read below (graded once for every
    module that reads the file: tests/gradings.py)."""
    jobs = list(_files())
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = pool.map(lambda job: shared_gradings.check(job[0], job[1]), jobs)
        return {(i, p.name): r for (i, p), r in zip(jobs, results)}


def test_chapter_2_metadata():
    assert [(EXS[i].chapter, EXS[i].order) for i in IDS] == [(2, 1), (2, 2), (2, 3), (2, 4)]
    assert EXS["tma_tiles"].features == ["tma.load", "tma.store", "mbarrier"]
    assert set(EXS["tma_tiles"].tiers) == {"bronze", "silver", "gold"}


# ------------------------------------------------------------------ grading
@pytest.mark.parametrize("ex_id", IDS)
def test_untouched_starter_fails_saying_what_is_missing(graded, ex_id):
    ex = EXS[ex_id]
    r = graded[(ex_id, ex.starter_path.name)]
    if ex_id == "tma_tiles":
        assert r.verdict == Verdict.MISSING_FEATURE, str(r)
        assert "UTMALDG" in r.message and "UTMASTG" in r.message and "SYNCS" in r.message
    else:
        assert r.verdict == Verdict.WRONG, str(r)
        assert "NotImplementedError" in r.message, r.message


def test_wrong_fixtures_tell_the_story(graded):
    """The messages a learner reads name the case and what went wrong, not just 'wrong'."""
    msg = lambda ex_id, name: str(graded[(ex_id, name)])  # noqa: E731 - the message and its details
    assert "innermost-first" in msg("tensormap_args", "wrong_numpy_order.py")
    assert "OOB" in msg("tensormap_args", "wrong_box_within_tensor.py")
    assert "swizzle128(row=9, col_bytes=0): got 1296, expected 1168" in msg("swizzle_address", "wrong_row_unwrapped.py")
    assert "deadlock" in msg("barrier_phases", "wrong_same_parity.py")
    assert "before that iteration's TMA load landed" in msg("barrier_phases", "wrong_consumer_starts_at_1.py")
    assert "not consumed yet" in msg("barrier_phases", "wrong_producer_always_1.py")
    assert "CUtensorMap" in msg("tma_tiles", "cutensormap_type.cu")


# ------------------------------------------------------------------ the recorded swizzle table
def _load_check(ex_id):
    return exercise.import_file(EXS[ex_id].folder / "check.py", f"check_{ex_id}")


@pytest.mark.parametrize("table,verdict", [
    ([[c ^ r for c in range(8)] for r in range(8)], Verdict.PASS),      # what the H200 should measure
    ([[c for c in range(8)] for r in range(8)], Verdict.WRONG),         # a table that disagrees
])
def test_swizzle_grades_against_the_recorded_table(monkeypatch, tmp_path, table, verdict):
    ex = EXS["swizzle_address"]
    section = {"device": "NVIDIA H200", "date": "2026-12-01 00:00 UTC", "figures": {"table_128B": table}}
    monkeypatch.setattr(record, "load", lambda name: section if name == "ch02.swizzle" else None)
    monkeypatch.setattr(record, "figures", lambda name: section["figures"] if name == "ch02.swizzle" else None)
    r = _load_check(ex.id).check(grade.Submission(ex, ex.solution_path, tmp_path))
    assert r.verdict == verdict, str(r)
    assert any("measured on NVIDIA H200" in c for c in r.checked), r.checked


def test_swizzle_without_a_record_says_so(graded):
    if record.figures("ch02.swizzle"):
        pytest.skip("the record holds a measured table")
    r = graded[("swizzle_address", "solution.py")]
    assert "reference formula" in r.message


def test_tensormap_args_rules_agree_with_judge_tma():
    """The grader's table of rules refuses exactly what judge.hw.tma's validation refuses (contiguous maps)."""
    import random
    from judge.hw import tma
    chk = _load_check("tensormap_args")
    name = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
    rng = random.Random()
    for case in chk.ILLEGAL:
        assert chk.broken_rules(*case[1:6]) == [case[6]], case      # each listed case breaks exactly one rule
    for case in chk.LEGAL:
        assert chk.broken_rules(*case[1:]) == []
    for _ in range(3000):
        rank, eb = rng.randint(1, 6), rng.choice([1, 2, 4, 8])
        shape = [rng.randint(1, 300) for _ in range(rank)]
        box = [rng.choice([rng.randint(0, 300), n]) for n in shape]
        strides = chk.row_major(shape, eb)
        if rng.random() < 0.5:                                     # padded rows
            strides = chk.row_major(shape[:-1] + [shape[-1] + rng.randint(0, 40)], eb)
        swz = rng.choice(["none", "32B", "64B", "128B"])
        spec = tma.TensorMapSpec(name[eb], 0, tuple(reversed(shape)), tuple(reversed(strides[:-1])),
                                 tuple(reversed(box)), (1,) * rank, swz, kind="host")
        try:
            spec.validate()
            legal = True
        except tma.TensorMapError:
            legal = False
        assert legal == (chk.broken_rules(shape, eb, strides, box, swz) == []), (shape, eb, strides, box, swz)
