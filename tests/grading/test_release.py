"""tests/grading/test_release.py - a learners' release holds no exercise's answer, and its checks still run.

One release is built into a temporary folder (judge.grading.release) and each point is proved on it:
no solution, fixture, reference.py or Python check.py, no lab/, tests/ or .hypothesis/, no path of the
course that built it; no function of its judge/hw computes a Python exercise's worked examples but the
ones named in KNOWN (with the reason each is still there); grade-class in the copy gives every starter a
verdict, a Python exercise's solution PASS on its statement's examples only (said in the verdict), and
grading a withheld solution (as notebook cells do) SKIP with the reason. Every worked example the release
grades with is the solution's answer in the full course; and on a small course of its own, the copy leaves
lab/ and tests/ out and keeps the chapters. Chapter 1's notebook runs top to bottom in the copy under nbval;
every release notebook is a command run once, not part of CI: see judge/grading/release.py.

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_release.py -q
"""
from __future__ import annotations

import csv
import importlib
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from judge import config
from judge.grading import cpu_flow as flow, exercise, grade, release, worked_examples

ROOT = config.ROOT
PY = [e for e in exercise.all_exercises() if not e.needs_gpu]

#: judge.hw functions that still give a Python exercise's worked examples in a release, and why they stay:
#: the CPU model needs them, and the course's own kernels (which the chapters teach, so the release ships
#: them) compute the same rule in CUDA; no release that teaches those kernels can hold less (a list that
#: only shrinks)
KNOWN = {
    "e8m0_scale": "judge.hw.formats.e8m0_decode: the CPU model's block-scaled MMA decodes E8M0 scales with "
                  "it, and the statement itself defines the format (2^(code - 127), 0xFF NaN)",
    "wgmma_fragment": "judge.hw.wgmma.fragment_coord / fragment_owner: the CPU model's wgmma places D with them, "
                      "and every chapter 4 kernel's epilogue stores its accumulators by the same layout",
    "wgmma_descriptor": "judge.hw.wgmma.encode: the CPU model decodes with its fields, and judge/include/wgmma.cuh "
                        "(desc_kmajor, included by every chapter 4 kernel) sets the same fields",
    "umma_descriptor": "judge.hw.umma.encode / encode_idesc: chapter 5 demonstrates both, and "
                       "judge/include/tcgen05.cuh (smem_desc, idesc_bf16_f32) encodes the same for its kernels",
}
#: The probe finds a function that takes the statement's call as written. Rules the copy keeps under another
#: signature escape it, and stay because the CPU model or a chapter runs them: judge.hw.pipesim (chapter 1's
#: replay of the cp.async loop: pipeline_timeline, group_accounting), judge.hw.tma.swizzle_offset (the model's
#: TMA: swizzle_address), judge.hw.wgmma.fragment_coord / fragment_owner (the model's wgmma: wgmma_fragment),
#: judge.hw.formats (the model's block-scaled MMA: e8m0_scale, mx_quantize), judge.hw.tma_plan (tma_plan),
#: judge.hw.tmem (tmem_plan).


def _env(**kw):
    return dict(os.environ, MPLBACKEND="Agg", **kw)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    dest = tmp_path_factory.mktemp("release") / "learners"
    summary = release.release(dest)
    return dest, summary


def test_the_copy_holds_no_solution_fixture_reference_or_python_check(copy):
    dest, s = copy
    for ex in exercise.all_exercises():
        folder = dest / "exercises" / ex.folder.name
        assert not list(folder.glob("solution.*")) and not (folder / "fixtures").exists(), ex.id
        assert not (folder / "reference.py").exists(), ex.id
        assert (folder / "check.py").exists() == ex.needs_gpu, ex.id
        assert (folder / ex.starter_path.name).exists() and (folder / "README.md").exists(), ex.id
    assert set(s["checks_removed"]) == {e.id for e in PY}
    assert s["fixtures_removed"] > 0 and len(s["solutions_removed"]) == len(exercise.all_exercises())
    for top in ("tests", ".ci", "lab", "workspace", ".git"):
        assert not (dest / top).exists(), top
    assert not [p for p in dest.rglob("*") if p.name in (".hypothesis", ".pytest_cache", "__pycache__")]
    assert "holds no exercise's answer" in (dest / release.MARK).read_text()
    if (ROOT / ".git").exists():      # nothing git ignores (caches, the judge's materialized fixtures, venvs)
        rel = "\n".join(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input=rel,
                                 capture_output=True, text=True).stdout.split()
        assert not ignored, ignored[:10]


def test_the_copy_names_no_path_of_the_course_that_built_it(copy):
    dest, _ = copy
    root = str(ROOT.resolve())
    hits = [str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and p.stat().st_size < 50_000_000
            and root.encode() in p.read_bytes()]
    assert not hits, hits
    machine = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+(?:chapters|exercises)/")
    named = [nb.name for nb in (dest / "chapters").glob("*.ipynb") if machine.search(nb.read_text())]
    assert not named, f"recorded outputs that name a machine's path to a course file: {named}"


def _hw_functions(root):
    """Every public function of the judge/hw modules the copy holds (its files are this course's, so they are
    imported from here, by the names the copy has); drawing functions aside."""
    names = sorted(p.stem for p in (root / "judge" / "hw").glob("*.py") if p.stem != "__init__")
    for name in names:
        mod = importlib.import_module(f"judge.hw.{name}")
        for fname, fn in vars(mod).items():
            if inspect.isfunction(fn) and not fname.startswith(("_", "draw")) and fn.__module__ == mod.__name__:
                yield f"judge.hw.{name}.{fname}", fn


class _TooLong(Exception):
    pass


def _raise(*_):
    raise _TooLong


def _computes(fn, found):
    """Whether fn gives every example's value; a call that takes over 0.2 s (a loop over a huge argument) or
    raises does not compute it."""
    old = signal.signal(signal.SIGALRM, _raise)
    try:
        for e in found:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            try:
                if flow.same(fn(*e.args, **e.kwargs), e.value) is not None:
                    return False
            except Exception:  # noqa: BLE001 - _TooLong included
                return False
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        return True
    finally:
        signal.signal(signal.SIGALRM, old)


def test_no_function_the_copy_ships_computes_a_python_exercises_worked_examples(copy):
    """For each function of each Python exercise with worked examples: no function of the copy's judge/hw
    gives all of them (the statement's examples are the only answers the copy can grade with)."""
    dest, _ = copy
    assert not (dest / "judge" / "hw" / "regalloc.py").exists()
    funcs = list(_hw_functions(dest))
    leaks = {}
    for ex in PY:
        found = worked_examples.examples(ex)
        for name in dict.fromkeys(e.function for e in found):
            mine = [e for e in found if e.function == name]
            hit = [q for q, fn in funcs if _computes(fn, mine)]
            if hit:
                leaks.setdefault(ex.id, []).extend(f"{name} = {h}" for h in hit)
    assert set(leaks) <= set(KNOWN), {k: v for k, v in leaks.items() if k not in KNOWN}
    assert set(KNOWN) - set(leaks) == set(), f"no longer computed in the copy: drop from KNOWN {set(KNOWN) - set(leaks)}"


def test_every_worked_example_is_the_solutions_answer():
    read = 0
    for ex in PY:
        sol = ex.reference()
        for e in worked_examples.examples(ex):
            got = getattr(sol, e.function)(*e.args, **e.kwargs)
            assert flow.same(got, e.value) is None, (ex.id, e.call, got, e.value)
            assert e.call in ex.statement_path.read_text(), (ex.id, e.call)
            read += 1
    assert read >= 45, read        # the statements state 45 in a form read here today


def test_grade_class_in_the_copy_grades_starters_and_python_solutions_on_the_examples(copy, tmp_path):
    """The copy's checks run (grade-class, as an instructor would try it): every starter gets a verdict, never
    a crash, and no Python starter passes; a Python solution passes on the statement's examples, said so, or
    is SKIP where its statement states none in a form read here."""
    dest, _ = copy
    cls = tmp_path / "class"
    for ex in exercise.all_exercises():
        (cls / "starter" / ex.id).mkdir(parents=True)
        shutil.copy(ex.starter_path, cls / "starter" / ex.id / ex.learner_file)
        if not ex.needs_gpu:
            (cls / "answer" / ex.id).mkdir(parents=True)
            shutil.copy(ex.solution_path, cls / "answer" / ex.id / ex.learner_file)
    out = tmp_path / "report"
    env = _env(PYTHONPATH=str(dest), JUDGE_WORKSPACE=str(tmp_path / "ws"))
    r = subprocess.run([sys.executable, str(dest / "practice" / "judge.py"), "grade-class", str(cls), "--out", str(out),
                        "--quiet"], cwd=dest, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader((out / "grades.csv").open()))
    got = {(x["learner"], x["exercise"]): x for x in rows}
    assert {e for _, e in got} == {e.id for e in exercise.all_exercises()}
    crashed = [(k, x["verdict"]) for k, x in got.items() if x["verdict"] in ("CRASH", "MISSING")]
    assert not crashed, crashed
    for ex in PY:
        st, ans = got[("starter", ex.id)], got[("answer", ex.id)]
        assert st["verdict"] != "PASS", st
        want = "PASS" if worked_examples.examples(ex) else "SKIP"
        assert ans["verdict"] == want and ans["source"] == worked_examples.SOURCE, ans


def test_a_withheld_solution_graded_in_the_copy_is_skip_with_the_reason(copy):
    """Notebook cells grade reference solutions (chapters 1, 4 and 5): in the copy they say it holds none, and go on."""
    dest, _ = copy
    code = ("from judge.grading import exercise, grade\n"
            "for i in ('pipeline_timeline', 'tcgen05_ring'):\n"
            "    r = grade.check(i, exercise.get(i).solution_path, quiet=True)\n"
            "    print(r.verdict, '|', r.message)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=dest, env=_env(PYTHONPATH=str(dest)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and all(x.startswith("SKIP |") and "holds no solution" in x for x in lines), lines
    with pytest.raises(FileNotFoundError):      # in the full course a missing file is still the caller's error
        grade.check("pipeline_timeline", ROOT / "exercises" / "pipeline_timeline" / "no_such.py", quiet=True)


def test_release_leaves_the_lab_out_and_keeps_the_chapters(tmp_path):
    root = tmp_path / "course"
    for rel in ("README.md", "chapters/ch01_x/k.cu", "chapters/ch01_x.ipynb", "lab/explore.py",
                "lab/patches/explore_x.patch", "tests/test_x.py", "practice/judge.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    dest = tmp_path / "learners"
    release.release(dest, root=root)
    assert not (dest / "lab").exists() and not (dest / "tests").exists()
    for rel in ("README.md", "chapters/ch01_x/k.cu", "chapters/ch01_x.ipynb", "practice/judge.py"):
        assert (dest / rel).read_text() == f"{rel}\n", rel


def test_chapter_1_runs_top_to_bottom_in_the_copy(copy, tmp_path):
    """One release notebook under nbval, as CI can afford (every one: the command in release.py's docstring).
    Chapter 1 grades pipeline_timeline's solution and replays cp_async_sgemm's solution and a fixture on the
    CPU model: in the copy each of those cells says it holds none, and the notebook goes on."""
    dest, _ = copy
    r = subprocess.run([sys.executable, "-m", "pytest", "chapters/ch01_cp_async.ipynb", "--nbval-lax",
                        "--nbval-current-env", "-q", "-p", "no:cacheprovider"], cwd=dest,
                       env=_env(PYTHONPATH=str(dest), JUDGE_WORKSPACE=str(tmp_path / "ws")),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-500:]
