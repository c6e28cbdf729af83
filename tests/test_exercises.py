"""Every exercise is complete, its starter is generated from its solution, and every fixture gets its verdict.

One parametrized module for every exercise, CPU and GPU alike: a new exercise needs no edit here.
A fixture's verdict is declared in its exercise.toml. Where this machine cannot give it:
  - a GPU exercise (sm_90a) without a Hopper GPU is graded by the CPU model of the machine
    (judge.model): a fixture may declare what it gets there with `cpu = "..."` (e.g. a timing verdict,
    which the model cannot give, or SKIP where the model does not know an instruction);
  - an sm_100a exercise runs on the CPU model on every machine (no Blackwell GPU): its verdicts are the same everywhere.
The H200's own verdicts are in record/hopper.json (judge.record.hopper_run), checked by tests/test_record.py.
"""
import pytest

from judge.grading import exercise, grade
from judge import gpu
from judge.grading.result import Verdict

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
    assert ex.statement().lstrip().startswith("# "), f"{ex.id}: README.md should open with a title"
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
        assert ex.meta.get("kernel"), f"{ex.id}: a GPU exercise names the kernel it grades (kernel = ...)"
        if ex.target.startswith("sm_90"):
            assert {"bronze", "silver", "gold"} <= set(ex.tiers)
            assert ex.meta.get("cases", {}).get("list"), f"{ex.id}: no [cases] list"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_the_starter_is_the_solution_with_its_answers_removed(ex):
    assert ex.starter_path.read_text() == ex.starter_text(), \
        f"{ex.id}: starter is out of date; regenerate it from the solution with judge.grading.exercise.make_starter"
    assert ex.starter_text() != ex.solution_path.read_text()


def _model_available() -> bool:
    try:
        from judge import model
    except ImportError:
        return False
    return all(hasattr(model, n) for n in ("run", "Violation", "Hang", "Unsupported"))


def expected_here(ex, name: str) -> str:
    """The verdict this machine must give a fixture ("<solution>": the reference solution)."""
    declared = "PASS" if name == "<solution>" else ex.fixtures[name]
    if not ex.needs_gpu or gpu.meets(ex.target) or not ex.target.startswith("sm_90"):
        return declared
    if declared in COMPILER_ONLY:
        return declared
    if not _model_available():
        return "SKIP"
    cpu = ex.meta.get("fixtures", {}).get(name, {})
    if isinstance(cpu, dict) and "cpu" in cpu:
        return cpu["cpu"]
    return ex.meta.get("solution_cpu", "PASS") if name == "<solution>" else declared


CASES = [(e, name) for e in EXERCISES for name in ["<solution>", *e.fixtures]]


@pytest.mark.parametrize("ex,name", CASES, ids=lambda x: x if isinstance(x, str) else x.id)
def test_solution_and_fixtures_get_their_verdicts(ex, name):
    path = ex.solution_path if name == "<solution>" else ex.fixture_path(name)
    want = expected_here(ex, name)
    r = grade.check(ex.id, path, quiet=True)
    assert r.verdict.value == want, str(r)
    if r.verdict == Verdict.SKIP:
        assert any(f"compiled for {ex.target}" in c for c in r.checked), str(r)
        assert any("SASS shows" in c for c in r.checked), str(r)
        assert any("not checked" in d for d in r.details), str(r)
    if want == "PASS" and ex.needs_gpu and gpu.meets(ex.target):
        assert r.tier in grade.TIERS, str(r)
