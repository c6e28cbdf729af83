"""`course release DIR`: a copy of the course for learners that holds no exercise's answer, whose
checks still run (nbgrader's release step).

    python practice/judge.py release ../course-for-learners
    from judge.grading import release; summary = release.release("../course-for-learners")

Copied: the chapters, the judge, practice/, record/ (the figures the H200 measured), every exercise's
statement, starter and exercise.toml, a GPU exercise's check.py (its reference is NumPy's product or
copy, not the kernel the exercise asks for), and the files at the top (README.md, pyproject.toml ...).
Left out, for every exercise: its solution, exercises/*/fixtures/ (the wrong answers the judge must
reject), its reference.py (a rule written for the check alone) and, for a Python exercise, its
check.py (it computes the answer, or imports it). Also left out: tests/ and .ci/ (they grade the
fixtures and solutions), lab/ (how figures were found), workspace/, .judge-cache/, .hypothesis/ and other caches,
.git, virtual environments and whatever else git ignores in the instructor's checkout.

In the copy, a Python exercise is graded on its statement's worked examples
(judge.grading.worked_examples), and the verdict says the full grading is the instructor's; a GPU
exercise is graded as in the full course. A notebook cell that grades a reference solution says that
the copy holds none and goes on (judge.grading.grade.check). On the full course, grade-class grades
everything as before. Recorded notebook outputs name course files relative to the course, never by the
path of the machine that recorded them.

Every notebook of a release runs top to bottom without a GPU; to see it (a few minutes, not part of CI):
    python3 practice/judge.py release /tmp/learners && cd /tmp/learners && \
        PYTHONPATH=$PWD python3 -m pytest chapters --nbval-lax --nbval-current-env -q -p no:cacheprovider
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from judge import config
from judge.grading import exercise as _ex

SKIP_TOP = {".git", ".venv", "venv", "workspace", "tests", ".ci", "lab", "build", "dist",
            ".judge-cache", ".whl", ".gl"}      # the judge's cache holds fixtures it materialized
SKIP_ANYWHERE = {"__pycache__", ".ipynb_checkpoints", ".hypothesis", ".pytest_cache", ".ruff_cache"}
MARK = "RELEASE.md"     # at the top of a learners' copy: judge.grading.grade knows it by this file
WITHHELD = ("fixtures", "reference.py")    # in every exercise's folder, besides its solution


def _git_ignored(root: Path) -> set[Path]:
    """What git ignores in the instructor's checkout (its .gitignore and .git/info/exclude: scratch folders,
    venvs, caches), as paths relative to root; empty where root is not a git checkout or git is missing."""
    import subprocess
    try:
        p = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--directory"],
                           cwd=root, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {Path(line.rstrip("/")) for line in p.stdout.splitlines() if line} if p.returncode == 0 else set()


def _ignore(root: Path):
    ignored = _git_ignored(root)

    def ignore(folder, names):
        rel = Path(folder).resolve().relative_to(root)
        out = {n for n in names if n in SKIP_ANYWHERE or n.endswith(".egg-info") or rel / n in ignored}
        if rel == Path("."):
            out |= {n for n in names if n in SKIP_TOP}
        if len(rel.parts) == 2 and rel.parts[0] == "exercises":
            out |= {n for n in names if n in WITHHELD}
        return out
    return ignore


def release(dest, *, root: Path | None = None) -> dict:
    """Write the learners' copy of the course into `dest` (which must not exist yet). Returns
    {"dest", "exercises", "solutions_removed" (ids), "checks_removed" (ids of the Python exercises, graded on
    their statement's worked examples in the copy), "fixtures_removed" (count)}."""
    root = Path(root or config.ROOT).resolve()
    dest = Path(dest).resolve()
    if dest.exists():
        raise FileExistsError(f"{dest} exists: release writes a new folder, give one that does not exist")
    if dest.is_relative_to(root):
        raise ValueError(f"{dest} is inside the course ({root}): release into a folder outside it")
    shutil.copytree(root, dest, ignore=_ignore(root), symlinks=False)
    removed, checks, fixtures = [], [], 0
    exercises = [_ex.load(p.parent) for p in sorted((root / "exercises").glob("*/exercise.toml"))]
    for ex in exercises:
        src_fix = ex.folder / "fixtures"
        if src_fix.is_dir():
            fixtures += sum(1 for p in src_fix.iterdir() if p.is_file())
        folder = dest / "exercises" / ex.folder.name
        for p in folder.glob("solution.*"):
            p.unlink()
            removed.append(ex.id)
        if not ex.needs_gpu and (folder / "check.py").exists():   # a Python check computes its answer
            (folder / "check.py").unlink()
            checks.append(ex.id)
    for nb in sorted((dest / "chapters").glob("*.ipynb")):      # no machine's path in what a notebook shows
        _outputs_without_paths(nb)
    note = ["# This copy of the course is for learners",
            "",
            "Made by `course release`: it holds no exercise's answer. The reference solutions, the judge's",
            "wrong-answer fixtures and the Python exercises' checks (they compute the answers) are left out.",
            "`python3 practice/judge.py check ID` grades a GPU exercise as the full course does, and a Python",
            "exercise on its statement's worked examples only: the full grading is your instructor's.",
            ""]
    (dest / MARK).write_text("\n".join(note) + "\n")
    return {"dest": str(dest), "exercises": len(exercises), "solutions_removed": sorted(set(removed)),
            "checks_removed": checks, "fixtures_removed": fixtures}


#: an absolute path to a file of a course (the machine that recorded a notebook's outputs named its own)
_COURSE_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+?(?=(?:chapters|exercises|judge|record|practice|workspace)/)")


def _outputs_without_paths(nb: Path) -> bool:
    """Rewrite the recorded outputs of notebook `nb` with course paths made relative (/work/x/chapters/a.cu ->
    chapters/a.cu); the cells' sources stay as written. Returns whether anything changed."""
    try:
        doc = json.loads(nb.read_text())
    except ValueError:          # not a notebook's JSON: left as it is
        return False
    changed = False

    def clean(v):
        nonlocal changed
        if isinstance(v, str):
            new = _COURSE_PATH.sub("", v)
            changed |= new != v
            return new
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: (clean(x) if k not in ("image/png", "image/jpeg") else x) for k, x in v.items()}
        return v

    for cell in doc.get("cells", []):
        if "outputs" in cell:
            cell["outputs"] = clean(cell["outputs"])
    if changed:
        nb.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return changed


def is_release(root: Path | None = None) -> bool:
    """Whether `root` (default: this course) is a learners' copy made by release()."""
    return (Path(root or config.ROOT) / MARK).is_file()
