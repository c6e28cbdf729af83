"""tests/checking.py - a Python exercise's check.py run in the test's own process, for tests that read its
messages or drive its drawn inputs (the isolated path is judge.grading.grade.check, tested elsewhere).

    from tests.checking import graded_here
    r = graded_here("e8m0_scale", path, drawn_only=True, seed=7)     # a judge.grading.result.Result
"""
from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import pytest

from judge.grading import cpu_flow as flow
from judge.grading import exercise
from judge.grading.result import Result, Stop, Verdict


class StandIn:
    """What a check needs of a Submission, with the learner's file imported here and no solution on offer
    (released copies of the course ship without one)."""

    def __init__(self, ex, learner):
        self.exercise = types.SimpleNamespace(id=ex.id, learner_file=ex.learner_file)
        self._learner = learner

    def learner_module(self, *names):
        missing = [n for n in names if not callable(getattr(self._learner, n, None))]
        if missing:
            raise Stop(Result(Verdict.WRONG, f"{self.exercise.learner_file} defines no function "
                                             + " and no ".join(missing)))
        return self._learner

    def progress(self, text):
        pass

    def figure(self, name):
        return Path("/nonexistent") / name      # not tested here (nor drawn: JUDGE_FIGURES=0, tests/conftest.py)


def graded_here(ex_id, file, *, drawn_only=False, seed=1):
    """The exercise's check.py on `file`, in this process; drawn_only drops the statement's listed cases,
    so that only inputs drawn with `seed` remain. Every drawn input gets its time, however busy the machine."""
    ex = exercise.get(ex_id)
    check = exercise.import_file(ex.folder / "check.py", f"check_{ex_id}_here")
    learner = exercise.import_file(file, f"learner_{ex_id}_{Path(file).stem}")
    run = flow.run

    def drawn(s, functions, **kw):
        return run(s, [dataclasses.replace(f, edges=[]) for f in functions], **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(flow.SEED_ENV, str(seed))
        mp.setenv(flow.BUDGET_ENV, "60")
        if drawn_only:
            mp.setattr(flow, "run", drawn)
        try:
            return check.check(StandIn(ex, learner))
        except Stop as stop:
            return stop.result
