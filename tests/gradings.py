"""tests/gradings.py - one grading per file and settings in a test run, read by every test module that asks for it.

    def test_x(shared_gradings):                                  # the session fixture of tests/conftest.py
        r = shared_gradings.check("mx_quantize", path)            # grade.check(id, path, quiet=True, timeout=None)

Several modules grade the same files under the same settings: every fixture's verdict is
tests/grading/test_exercises.py's (and test_exercise_kernels.py's), and the modules of tests/exercises/ read the
messages of some of the same fixtures (test_blackwell_exercises.py, test_tma_exercises.py,
test_wgmma_cpu_exercises.py). Such a file is graded once, by judge.grading.grade.check as before, and every test
that asks for it reads that Result, whichever module (and pytest-xdist worker) asked first.

The key: the exercise, the file's path and bytes, the time limit, and every JUDGE_* variable of the
environment but JUDGE_WORKSPACE (which only decides where a learner's own file draws; a solution or a
fixture never draws there): a test that sets another limit or setting grades afresh. The workers share a
folder of the run (the parent of each worker's basetemp, pytest-xdist's own recipe); a lock file per key
makes a second worker wait for the first one's Result rather than grade the file again.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from pathlib import Path

from judge.grading import grade


class SharedGradings:
    """Results of grade.check kept in `root` for the test run, one per key (see above)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def key(ex_id: str, path, timeout: float | None) -> str:
        p = Path(path).resolve()
        env = sorted((k, v) for k, v in os.environ.items() if k.startswith("JUDGE_") and k != "JUDGE_WORKSPACE")
        h = hashlib.sha256(repr((ex_id, str(p), timeout, env)).encode())
        h.update(p.read_bytes())
        return h.hexdigest()[:32]

    def check(self, ex_id: str, path, *, timeout: float | None = None):
        """grade.check(ex_id, path, quiet=True, timeout=timeout), or the Result it gave earlier in this run."""
        key = self.key(ex_id, path, timeout)
        done = self.root / f"{key}.pickle"
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)                  # held while this file is graded here
            if not done.exists():
                r = grade.check(ex_id, path, quiet=True, timeout=timeout)
                tmp = done.with_suffix(".tmp")
                tmp.write_bytes(pickle.dumps(r))
                os.replace(tmp, done)
            return pickle.loads(done.read_bytes())          # a copy of its own for each test
