"""Every exercise is complete, its starter is generated from its solution, and every fixture gets its verdict.

On a machine without a Hopper GPU, a GPU exercise's fixtures that only need the compiler
(MISSING FEATURE, COMPILE ERROR) get their verdict; the others must get SKIP, saying what was checked.
The H200 verdicts of the GPU fixtures are in record/hopper.json (judge.hopper_record).
"""
import pytest

from judge import exercise, gpu, grade
from judge.grade import Verdict

EXERCISES = exercise.all_exercises()
COMPILER_ONLY = {"MISSING FEATURE", "COMPILE ERROR"}


def test_exercise_ids_are_unique_and_match_their_folders():
    ids = [e.id for e in EXERCISES]
    assert len(ids) == len(set(ids))
    for e in EXERCISES:
        assert e.folder.name == e.id


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_exercise_folder_is_complete(ex):
    for p in (ex.statement_path, ex.solution_path, ex.starter_path, ex.folder / "check.py"):
        assert p.exists(), f"{ex.id}: missing {p.name}"
    assert ex.hints, f"{ex.id}: no hints"
    assert ex.fixtures, f"{ex.id}: no fixtures"
    declared = set(ex.fixtures)
    on_disk = {p.name for p in (ex.folder / "fixtures").iterdir() if p.is_file() and p.suffix in (".py", ".cu")}
    assert declared == on_disk, f"{ex.id}: fixtures declared {declared - on_disk} / undeclared {on_disk - declared}"
    assert any(v != "PASS" for v in ex.fixtures.values())
    for v in ex.fixtures.values():
        Verdict(v)
    if ex.needs_gpu:
        assert ex.features, f"{ex.id}: a GPU exercise must name the SASS features it requires"
        assert {"bronze", "silver", "gold"} <= set(ex.tiers)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_the_starter_is_the_solution_with_its_answers_removed(ex):
    assert ex.starter_path.read_text() == ex.starter_text(), \
        f"{ex.id}: starter is out of date; regenerate it from the solution with judge.exercise.make_starter"
    assert ex.starter_text() != ex.solution_path.read_text()


def _expected_here(ex, verdict: str) -> str:
    if ex.needs_gpu and not gpu.meets("sm_90") and verdict not in COMPILER_ONLY:
        return "SKIP"
    return verdict


GPU_CASES = [(e, name) for e in EXERCISES if e.needs_gpu for name in ["<solution>", *e.fixtures]]


@pytest.mark.parametrize("ex,name", GPU_CASES, ids=lambda x: x if isinstance(x, str) else x.id)
def test_gpu_exercise_solution_and_fixtures_get_their_verdicts(ex, name):
    path = ex.solution_path if name == "<solution>" else ex.fixture_path(name)
    want = _expected_here(ex, "PASS" if name == "<solution>" else ex.fixtures[name])
    r = grade.check(ex.id, path, quiet=True)
    assert r.verdict.value == want, str(r)
    if r.verdict == Verdict.SKIP:
        assert any("compiled for sm_90a" in c for c in r.checked)
        assert any("SASS shows" in c for c in r.checked)
    if want == "PASS" and ex.needs_gpu:
        assert r.tier in grade.TIERS, str(r)
