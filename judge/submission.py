"""What a check.py receives: the learner's file, as the grader sees it (inside the child process).

    def check(sub: Submission) -> Result:
        mod = sub.learner_module("pipeline_time", "schedule")   # WRONG with a reason if it cannot
        sub.progress("case 3/6")                                # shown to the learner; resets the watchdog
        b = sub.build()                                         # CUDA exercises: build for the exercise's target
"""
from __future__ import annotations

import traceback
from pathlib import Path

from . import exercise as _ex
from .result import Result, Stop, Verdict


class Submission:
    """A learner's file as the exercise's check.py sees it (inside the child process)."""

    def __init__(self, ex: _ex.Exercise, path: Path, figure_dir: Path):
        self.exercise, self.path, self.figure_dir = ex, Path(path), Path(figure_dir)

    def progress(self, text: str) -> None:
        """Report progress (also resets the HANG watchdog): shown to the learner as it happens."""
        print(f"@@progress {text}", flush=True)

    def load_module(self):
        """Import the learner's Python file as a fresh module."""
        return _ex.import_file(self.path, f"learner_{self.exercise.id}")

    def learner_module(self, *names: str):
        """Import the learner's file and check that it defines these functions; return the module.

        Stops the check with WRONG (saying what to fix) when the file does not import or lacks one.
        """
        try:
            mod = self.load_module()
        except Exception as e:  # noqa: BLE001 - any learner error is reported, not raised
            raise Stop(Result(Verdict.WRONG, learner_error(e, f"importing your {self.exercise.learner_file}")))
        missing = [n for n in names if not callable(getattr(mod, n, None))]
        if missing:
            raise Stop(Result(Verdict.WRONG, f"{self.exercise.learner_file} defines no function "
                                             + " and no ".join(missing)))
        return mod

    def build(self, **kw):
        from . import build
        return build.compile(self.path, **kw)

    def figure(self, name: str) -> Path:
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        return self.figure_dir / name


def learner_error(e: BaseException, what: str) -> str:
    """'what raised X: msg (file line N)' pointing at the learner's own frame."""
    tb = traceback.extract_tb(e.__traceback__)
    where = ""
    for fr in reversed(tb):
        if "judge" not in Path(fr.filename).parts and "exercises" not in Path(fr.filename).parts[-3:-1]:
            where = f" ({Path(fr.filename).name} line {fr.lineno})"
            break
    return f"{what} raised {type(e).__name__}: {e}{where}"
