"""tests/grading/test_exercises.py - every exercise follows the course's policy, and every fixture gets its verdict.

Run: python -m pytest tests/grading/test_exercises.py -q -n 2     (no GPU needed; each grade runs in a child process)

One parametrized module for every exercise, CPU and GPU alike: a new exercise needs no edit here.
  - the policy (CONTRIBUTING.md, "The exercise policy"): a statement, a starter generated from the
    solution, a solution, a grader, hints, and at least one wrong fixture for each verdict class the
    exercise can give (REQUIRED_CLASSES below, from the exercise's kind);
  - fixtures are the mistake itself: a patch against the solution that applies cleanly, or a file
    kept whole with its reason (judge.grading.fixtures);
  - every fixture gets the verdict its exercise.toml declares (the kernel exercises' in
    tests/grading/test_exercise_kernels.py, with check_case below). Where this machine cannot give it:
    a GPU exercise (sm_90a) without a Hopper GPU is graded by the CPU model of the machine
    (judge.model): a fixture may declare what it gets there with `cpu = "..."` (e.g. a timing verdict,
    which the model cannot give); an sm_100a exercise runs on the CPU model on every machine (no
    Blackwell GPU), so its verdicts are the same everywhere.
The H200's own verdicts are in record/hopper.json (judge.record.hopper_run), checked by tests/record/test_record.py.
"""
import re

import pytest

from judge import config, gpu
from judge.grading import exercise, fixtures, grade
from judge.grading.result import Verdict

EXERCISES = exercise.all_exercises()
COMPILER_ONLY = {"MISSING FEATURE", "COMPILE ERROR"}

# ------------------------------------------------------------------------------------------- the policy
#: the verdict classes an exercise can give, by its kind; each needs at least one fixture that gets it.
#: (kind, condition on the exercise) -> the class it requires and why
REQUIRED_CLASSES = [
    ("every exercise", lambda ex: True,
     "WRONG", "a wrong answer is the one mistake every exercise can be given"),
    ("GPU exercise with SASS features", lambda ex: ex.needs_gpu and bool(ex.features),
     "MISSING FEATURE", "the judge refuses a kernel whose SASS lacks what the exercise teaches"),
    ("GPU exercise waiting on an mbarrier", lambda ex: ex.needs_gpu and any(f.startswith("mbarrier") for f in ex.features),
     "HANG", "a wait on a phase that never completes is a hang the judge must end"),
    ("GPU exercise for a compile-only target", lambda ex: ex.needs_gpu and not ex.target.startswith("sm_90"),
     "COMPILE ERROR", "compiling is the one step checked in full without that GPU"),
    ("GPU exercise with [log] rules", lambda ex: bool(ex.log.rules),
     "<each [log] rule's verdict>", "a compiler message that decides a verdict needs a fixture that draws it"),
    ("GPU exercise that is timed", lambda ex: ex.timing is not None,
     "TOO SLOW", "a correct kernel below bronze is TOO SLOW"),
]

#: classes an exercise does not have a fixture for yet, each with the reason; the list only shrinks
WAIVED = {
    ("cp_async_sgemm", "TOO SLOW"): "a fixture below bronze exists only once an H200 run has measured it",
    ("tma_tiles", "TOO SLOW"): "a fixture below bronze exists only once an H200 run has measured it",
    ("dsmem_histogram", "TOO SLOW"): "a fixture below bronze exists only once an H200 run has measured it",
    ("ws_gemm", "TOO SLOW"): "a fixture below bronze exists only once an H200 run has measured it",
    ("attention_softmax", "TOO SLOW"): "a fixture below bronze exists only once an H200 run has measured it",
}

#: exercises whose wrong fixtures are still whole copies: converted with
#: `python -m judge.grading.fixtures --to-patches ID` (then removed from here)
NOT_YET_PATCHES: set[str] = set()          # every exercise is converted


def required_classes(ex) -> dict[str, str]:
    """verdict class -> why this exercise must have a fixture that gets it"""
    out = {}
    for kind, applies, cls, why in REQUIRED_CLASSES:
        if not applies(ex):
            continue
        if cls.startswith("<"):
            for code, rule in ex.log.rules.items():
                out.setdefault(rule.verdict, f"{kind}: {code} gives {rule.verdict}")
        else:
            out[cls] = f"{kind}: {why}"
    return out


def test_exercise_ids_are_unique_and_match_their_folders():
    ids = [e.id for e in EXERCISES]
    assert len(ids) == len(set(ids))
    for e in EXERCISES:
        assert e.folder.name == e.id


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_exercise_follows_the_policy(ex):
    for p in (ex.statement_path, ex.solution_path, ex.starter_path, ex.folder / "check.py"):
        assert p.exists(), f"{ex.id}: missing {p.name} (CONTRIBUTING.md, 'The exercise policy')"
    assert ex.statement().lstrip().startswith("# "), f"{ex.id}: README.md should open with a title"
    assert len(ex.hints) >= 2 and all(h.strip() for h in ex.hints), f"{ex.id}: at least two hints"
    assert all(ex.fixture_notes[f].strip() for f in ex.fixtures), f"{ex.id}: every fixture says why (why = ...)"
    declared, stored = set(ex.fixtures), fixtures.on_disk(ex)
    assert declared == stored, f"{ex.id}: fixtures declared but not stored {declared - stored}, " \
                               f"stored but not declared {stored - declared}"
    if ex.needs_gpu:
        assert ex.features, f"{ex.id}: a GPU exercise names the SASS features it requires (features = [...])"
        assert ex.kernel, f"{ex.id}: a GPU exercise names the kernel it grades (kernel = ...)"
        if ex.target.startswith("sm_90"):
            assert {"bronze", "silver", "gold"} <= set(ex.tiers), f"{ex.id}: [tiers] bronze, silver, gold"
            assert ex.cases.list, f"{ex.id}: no [cases] list"
            assert ex.timing is not None, f"{ex.id}: no [timing] case"
    given = set(ex.fixtures.values())
    missing = {c: why for c, why in required_classes(ex).items() if c not in given and (ex.id, c) not in WAIVED}
    assert not missing, f"{ex.id}: no fixture gets " + "; ".join(f"{c} ({why})" for c, why in missing.items())


def test_waivers_are_still_needed():
    """A waiver whose class now has a fixture must go (the list only shrinks)."""
    by_id = {e.id: e for e in EXERCISES}
    for (ex_id, cls), why in WAIVED.items():
        assert ex_id in by_id and why
        assert cls not in set(by_id[ex_id].fixtures.values()), f"{ex_id} has a {cls} fixture now: drop its waiver"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_the_starter_is_the_solution_with_its_answers_removed(ex):
    assert ex.starter_path.read_text() == ex.starter_text(), \
        f"{ex.id}: starter is out of date: python -m judge.grading.starters {ex.id}"
    assert ex.starter_text() != ex.solution_path.read_text()


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_wrong_fixtures_are_patches_that_apply_to_the_solution(ex):
    """No wrong fixture is a whole copy of its solution: each is a patch that applies cleanly, or is
    kept whole with its reason in exercise.toml (whole = "..."), because it is written another way."""
    for name, spec in ex.fixture_specs.items():
        src = fixtures.text(ex, name)                  # a patch that does not apply raises PatchError here
        if fixtures.is_patch(ex, name):
            assert src != ex.solution_path.read_text(), f"{ex.id}: {name}.patch changes nothing"
            patch = fixtures.patch_path(ex, name).read_text()
            assert fixtures.changed_lines(patch) <= max(4, fixtures.MAX_CHANGED * len(src.splitlines())), \
                f"{ex.id}: {name}.patch changes too much to be one mistake"
    if ex.id in NOT_YET_PATCHES:
        return
    problems = fixtures.check(ex)
    assert not problems, "\n".join(problems)


def test_not_yet_converted_exercises_still_hold_whole_copies():
    """The list of exercises still to convert only shrinks: once one has no whole wrong copy, it leaves it."""
    for e in EXERCISES:
        if e.id in NOT_YET_PATCHES:
            assert fixtures.check(e), f"{e.id} needs no conversion any more: remove it from NOT_YET_PATCHES"


def test_a_patch_that_no_longer_matches_the_solution_is_refused(tmp_path):
    sol = "a\nb\nc\nd\ne\nf\ng\n"
    patch = fixtures.make_patch(sol, sol.replace("d\n", "D  // THE MISTAKE\n"), "wrong.cu", "solution.cu")
    assert fixtures.apply_patch(sol, patch) == sol.replace("d\n", "D  // THE MISTAKE\n")
    assert fixtures.apply_patch("x\ny\n" + sol, patch) == "x\ny\n" + sol.replace("d\n", "D  // THE MISTAKE\n")
    with pytest.raises(fixtures.PatchError, match="does not match"):
        fixtures.apply_patch(sol.replace("c\n", "C\n"), patch)
    last = fixtures.make_patch("a\nb", "a\nB", "w.cu")               # no newline at the end of either
    assert fixtures.apply_patch("a\nb", last) == "a\nB"


def test_a_patched_fixture_is_graded_from_a_file_of_its_own_name():
    ex = exercise.get("cp_async_sgemm")
    p = ex.fixture_path("wrong_buffer.cu")
    assert p.name == "wrong_buffer.cu" and config.cache_dir() in p.parents
    src = p.read_text()
    assert "(kt + 1) % STAGES" in src and src != ex.solution_path.read_text()


# ------------------------------------------------------------------------------------------- the schema
def test_an_unknown_key_is_refused_naming_the_file_the_table_and_the_keys_allowed(tmp_path):
    src = (config.EXERCISES_DIR / "tma_tiles" / "exercise.toml").read_text()
    for table, bad in (("top level", 'kernal = "x"\n'), ("timing", None), ("fixtures", None)):
        folder = tmp_path / table.replace(" ", "_")
        folder.mkdir()
        text = src
        if table == "top level":
            text = bad + src
        elif table == "timing":
            text = src.replace("[timing]\n", "[timing]\nceil = 3\n")
        else:
            text = src.replace('verdict = "HANG"', 'verdict = "HANG", verdcit = "x"')
        (folder / "exercise.toml").write_text(text)
        with pytest.raises(exercise.SchemaError) as e:
            exercise.load(folder)
        msg = str(e.value)
        assert "exercise.toml" in msg and "keys allowed" in msg, msg
        assert {"top level": "'kernal'", "timing": "[timing]", "fixtures": "'verdcit'"}[table] in msg, msg
        assert {"top level": "learner_file", "timing": "max_fraction", "fixtures": "why"}[table] in msg, msg


def test_a_wrong_verdict_or_type_is_refused(tmp_path):
    src = (config.EXERCISES_DIR / "tma_tiles" / "exercise.toml").read_text()
    (tmp_path / "exercise.toml").write_text(src.replace('verdict = "HANG"', 'verdict = "HUNG"'))
    with pytest.raises(exercise.SchemaError, match="no verdict"):
        exercise.load(tmp_path)
    (tmp_path / "exercise.toml").write_text(src.replace("chapter = 2", 'chapter = "two"'))
    with pytest.raises(exercise.SchemaError, match="chapter"):
        exercise.load(tmp_path)


def test_an_exercise_is_its_typed_fields_only():
    """exercise.toml is read into the schema's dataclasses and nothing else: no raw TOML rides along."""
    ex = exercise.get("ws_gemm")
    assert ex.kernel == "ws_gemm" and ex.timing.case["m"] > 0
    assert not hasattr(ex, "meta")


def _schema_keys():
    out = []
    for cls, table in ((exercise.Exercise, ""), (exercise.Cases, "cases."), (exercise.Timing, "timing."),
                       (exercise.Tiers, "tiers."), (exercise.Tolerance, "tolerance."), (exercise.Fixture, "fixtures.*."),
                       (exercise.Log, "log."), (exercise.LogRule, "log.CODE."), (exercise.Domain, "domain."),
                       (exercise.DomainClass, "domain.classes.")):
        out += [table + k for k in exercise.toml_keys(cls)]
    return out


def test_every_key_of_the_schema_is_documented_in_contributing():
    text = (config.ROOT / "CONTRIBUTING.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    missing = [k for k in _schema_keys() if k not in documented]
    assert not missing, f"CONTRIBUTING.md's exercise.toml table lacks {missing}"


def test_no_engine_or_exercise_module_reads_the_raw_toml():
    """The engine and the checks read exercise.toml through the typed fields of judge.grading.exercise."""
    for path in [*(config.ROOT / "judge").rglob("*.py"), *config.EXERCISES_DIR.glob("*/check.py")]:
        text = path.read_text()
        assert not re.search(r"\b(ex|exercise)\.meta\b|meta\.get\(", text), \
            f"{path}: use the typed fields of judge.grading.exercise"


# ------------------------------------------------------------------------------------------- verdicts
def _model_available() -> bool:
    """The grading flow's own question (judge.model.available), so the two never disagree."""
    try:
        from judge import model
    except ImportError:
        return False
    return model.available()


def expected_here(ex, name: str) -> str:
    """The verdict this machine must give a fixture ("<solution>": the reference solution)."""
    declared = "PASS" if name == "<solution>" else ex.fixtures[name]
    if not ex.needs_gpu or gpu.meets(ex.target) or not ex.target.startswith("sm_90"):
        return declared
    if declared in COMPILER_ONLY:
        return declared
    if not _model_available():
        return "SKIP"
    if name == "<solution>":
        return ex.solution_cpu
    return ex.fixture_specs[name].cpu or declared


def cases(kernels: bool) -> list[tuple]:
    """(exercise, "<solution>" or fixture name) of every Python exercise, or of every kernel exercise. The
    kernel exercises' verdicts are tests/grading/test_exercise_kernels.py's: a module of their own, so that
    pytest-xdist (--dist loadfile) grades the two halves on two workers at once."""
    return [(e, name) for e in EXERCISES if e.needs_gpu == kernels for name in ["<solution>", *e.fixtures]]


@pytest.mark.parametrize("ex,name", cases(kernels=False), ids=lambda x: x if isinstance(x, str) else x.id)
def test_solution_and_fixtures_get_their_verdicts(ex, name, shared_gradings):
    check_case(ex, name, shared_gradings)


#: the time limit of a Python HANG fixture's calls here, not the default 10 s (JUDGE_TIMEOUT): the same verdict, by the
#: same watchdog, sooner (tests/grading/test_classroom.py grades a hang at the default)
PYTHON_HANG_TIMEOUT_S = 3.0


def check_case(ex, name: str, gradings) -> None:
    """Grade one file of an exercise as a learner's check would (grade.check, once for every module that reads
    the file: tests/gradings.py), and hold it to its declared verdict."""
    path = ex.solution_path if name == "<solution>" else ex.fixture_path(name)
    want = expected_here(ex, name)
    timeout = PYTHON_HANG_TIMEOUT_S if want == "HANG" and not ex.needs_gpu else None
    r = gradings.check(ex.id, path, timeout=timeout)
    assert r.verdict.value == want, str(r)
    if r.verdict == Verdict.SKIP:
        assert any(f"compiled for {ex.target}" in c for c in r.checked), str(r)
        assert any("SASS shows" in c for c in r.checked), str(r)
        assert any("not checked" in d for d in r.unchecked), str(r)
    if want == "PASS" and ex.needs_gpu and gpu.meets(ex.target):
        assert r.tier in grade.TIERS, str(r)


def test_the_starters_command_finds_and_rewrites_a_stale_starter(tmp_path, monkeypatch, capsys):
    import shutil
    from judge.grading import starters
    shutil.copytree(config.EXERCISES_DIR / "group_accounting", tmp_path / "group_accounting")
    monkeypatch.setattr(config, "EXERCISES_DIR", tmp_path)
    assert starters.main(["--check"]) == 0
    ex = exercise.get("group_accounting")
    ex.starter_path.write_text(ex.starter_path.read_text() + "# edited by hand\n")
    assert starters.main(["--check"]) == 1 and "group_accounting" in capsys.readouterr().out
    assert starters.main(["group_accounting"]) == 0
    assert ex.starter_path.read_text() == ex.starter_text() and starters.main(["--check"]) == 0


def test_converting_a_copy_keeps_the_solution_s_commentary_and_shows_the_mistake():
    sol = ('"""m.py - the module.\n\nLonger text.\n"""\n\n\ndef f(x):\n    """Twice x."""\n'
           '    # BEGIN SOLUTION\n    #> raise NotImplementedError\n    y = x + x\n    return y\n    # END SOLUTION\n')
    copy = '"""Fixture (WRONG): adds once."""\n\n\ndef f(x):\n    return x\n'
    fixed = fixtures.as_mistake(sol, copy, ".py")
    patch = fixtures.make_patch(sol, fixed, "wrong_once.py")
    assert fixtures.apply_patch(sol, patch) == fixed
    added = [l for l in patch.splitlines() if l.startswith("+") and not l.startswith("+++")]
    removed = [l for l in patch.splitlines() if l.startswith("-") and not l.startswith("---")]
    assert added == ["+# Fixture (WRONG): adds once.", "+    return x"], patch
    assert removed == ["-    y = x + x", "-    return y"], patch          # docstrings and markers stay
    ns = {}
    exec(compile(fixed, "wrong_once.py", "exec"), ns)
    assert ns["f"](3) == 3
