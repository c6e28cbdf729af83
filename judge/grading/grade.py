"""Grading: the one function that checks a learner's file (the entry point of CLI and notebooks).

    from judge.grading import grade
    r = grade.check("pipeline_timeline")                 # the learner's workspace file
    r = grade.check("pipeline_timeline", "my_try.py")    # or any file
    r.verdict, r.tier, r.message

Every check runs in a child process (judge.grading.check_process): a learner's loop that never ends
is a HANG, a kernel that faults is a CRASH, and the caller (CLI or notebook) carries on.

Verdicts and results live in judge.grading.result, what a check receives in judge.grading.submission, the CUDA
grading flow in judge.grading.cuda_flow; this module re-exports the names checks use (Verdict, Result, ...).
"""
from __future__ import annotations

import sys
from pathlib import Path

from judge.grading import exercise as _ex, check_process as isolate, workspace
from judge.grading.result import TIERS, Result, Stop, Verdict, tier_for  # noqa: F401 - re-exported
from judge.grading.submission import Submission, learner_error  # noqa: F401 - re-exported


# ------------------------------------------------------------------ the entry point
def _withheld(ex, path: Path) -> bool:
    """Whether `path` is a file of ex's folder that a learners' release leaves out (its solution, a fixture)."""
    from judge.grading import release
    p = path.resolve()
    return release.is_release() and p.is_relative_to(ex.folder.resolve()) and \
        (p.name.startswith("solution.") or "fixtures" in p.relative_to(ex.folder.resolve()).parts)


def check(ex_id: str, file: str | Path | None = None, *, progress=None, timeout: float | None = None,
          quiet: bool = False) -> Result:
    """Grade a file for an exercise (default: the learner's workspace copy), in a child process."""
    ex = _ex.get(ex_id)
    path = Path(file) if file is not None else workspace.learner_path(ex)
    if not path.exists() and file is not None and _withheld(ex, path):
        return Result(Verdict.SKIP, f"this copy of the course holds no {path.name} of {ex.id} (a learners' release "
                                    f"holds no answer): the cell that grades it goes on without it; your own file is "
                                    f"graded by `python3 practice/judge.py check {ex.id}`",
                      exercise=ex.id, file=str(path))
    if not path.exists():
        hint = (f"run `python practice/judge.py start {ex.id}` first" if file is None
                else "check the path")
        raise FileNotFoundError(f"no file {path}: {hint}")
    if progress is None and not quiet:
        progress = lambda s: print(f"  .. {s}", file=sys.stderr, flush=True)
    result = isolate.run_check(ex, path.resolve(), progress=progress, timeout=timeout)
    result.exercise, result.file = ex.id, str(path)
    if result.verdict not in (Verdict.PASS, Verdict.SKIP) and path.read_text() == ex.starter_path.read_text():
        result.details.insert(0, f"this is still the untouched starter: write the parts it marks "
                                 f"(the statement is {ex.statement_path.relative_to(ex.folder.parent.parent)})")
    return result
