"""`course release DIR`: a copy of the course for learners, without the reference solutions and the
wrong fixtures, whose checks still run (nbgrader's release step).

    python practice/judge.py release ../course-for-learners
    from judge.grading import release; summary = release.release("../course-for-learners")

Copied: the chapters, the judge, practice/, record/ (the figures the H200 measured), every exercise's
statement, starter, check.py and exercise.toml, and the files at the top (README.md, pyproject.toml ...).
Left out: exercises/*/fixtures/ (the wrong answers the judge must reject), every solution whose check
does not read it, tests/ and .ci/ (they grade the fixtures and solutions), workspace/, .git and virtual
environments.

A check that grades against its solution (sub.exercise.reference(), ex.solution_path) cannot run
without it: that solution is kept, and the copy's RELEASE.md and the summary name the exercise, so an
instructor knows which answers a learner can still read (those checks would have to carry a table of
expected values instead to be released without it).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from judge import config
from judge.grading import exercise as _ex

SKIP_TOP = {".git", ".venv", "venv", "workspace", "tests", ".ci", ".pytest_cache", ".ruff_cache", "build", "dist"}
SKIP_ANYWHERE = {"__pycache__", ".ipynb_checkpoints"}
_READS_SOLUTION = re.compile(r"\.reference\(\)|solution_path|\bimport_file\([^)]*solution")


def check_reads_solution(ex: _ex.Exercise) -> bool:
    """Whether the exercise's check.py reads its solution (read from the check's own source)."""
    return bool(_READS_SOLUTION.search((ex.folder / "check.py").read_text()))


def _ignore(root: Path):
    def ignore(folder, names):
        rel = Path(folder).resolve().relative_to(root)
        out = {n for n in names if n in SKIP_ANYWHERE or n.endswith(".egg-info")}
        if rel == Path("."):
            out |= {n for n in names if n in SKIP_TOP}
        if len(rel.parts) == 2 and rel.parts[0] == "exercises":
            out |= {n for n in names if n == "fixtures"}
        return out
    return ignore


def release(dest, *, root: Path | None = None) -> dict:
    """Write the learners' copy of the course into `dest` (which must not exist yet). Returns
    {"dest", "exercises", "solutions_removed", "solutions_kept" (ids whose check reads its solution),
    "fixtures_removed" (count)}."""
    root = Path(root or config.ROOT).resolve()
    dest = Path(dest).resolve()
    if dest.exists():
        raise FileExistsError(f"{dest} exists: release writes a new folder, give one that does not exist")
    if dest.is_relative_to(root):
        raise ValueError(f"{dest} is inside the course ({root}): release into a folder outside it")
    shutil.copytree(root, dest, ignore=_ignore(root), symlinks=False)
    removed, kept, fixtures = [], [], 0
    for ex in _ex.all_exercises():
        src_fix = ex.folder / "fixtures"
        if src_fix.is_dir():
            fixtures += sum(1 for p in src_fix.iterdir() if p.is_file())
        sol = dest / "exercises" / ex.folder.name / ex.solution_path.name
        if check_reads_solution(ex):
            kept.append(ex.id)
        elif sol.exists():
            sol.unlink()
            removed.append(ex.id)
    note = ["# This copy of the course is for learners",
            "",
            "Made by `course release`: the reference solutions and the judge's wrong-answer fixtures are",
            "left out; `python practice/judge.py check ID` grades your file as in the full course.",
            ""]
    if kept:
        note += ["These exercises' checks grade against their reference solution, so it is still here",
                 "(`exercises/<id>/solution.py`): " + ", ".join(kept) + "."]
    (dest / "RELEASE.md").write_text("\n".join(note) + "\n")
    return {"dest": str(dest), "exercises": len(removed) + len(kept), "solutions_removed": removed,
            "solutions_kept": kept, "fixtures_removed": fixtures}
