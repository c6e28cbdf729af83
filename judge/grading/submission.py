"""What a check.py receives: the learner's file, as the grader sees it (inside the worker process).

    def check(sub: Submission) -> Result:
        mod = sub.learner_module("pipeline_time", "schedule")   # WRONG with a reason if it cannot
        mod.schedule(4, 10, 10, 1)                              # runs in the learner's own process
        sub.progress("case 3/6")                                # shown to the learner; resets the watchdog
        b = sub.build()                                         # CUDA exercises: build for the exercise's target

The learner's Python never runs in the grader's process: learner_module() starts it in a process
of its own (judge.grading.learner_process) and returns a proxy whose functions are called there, each within the
exercise's time limit (JUDGE_TIMEOUT). Progress goes to judge.grading.check_process on a private channel.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from pathlib import Path

from judge import config
from judge.grading import exercise as _ex
from judge.grading.result import Result, Stop, Verdict

_channel = None        # set by judge.grading.check_child: progress(text) and heartbeat() to judge.grading.check_process


def set_channel(channel) -> None:
    global _channel
    _channel = channel


class Submission:
    """A learner's file as the exercise's check.py sees it (inside the worker process)."""

    def __init__(self, ex: _ex.Exercise, path: Path, figure_dir: Path, *, call_limit: float | None = None):
        self.exercise, self.path, self.figure_dir = ex, Path(path), Path(figure_dir)
        self.call_limit = call_limit if call_limit is not None else config.timeout_s(False)
        self._learner = None

    def progress(self, text: str) -> None:
        """Report progress (also resets the HANG watchdog): shown to the learner as it happens."""
        if _channel is not None:
            _channel.progress(text)

    @contextlib.contextmanager
    def busy(self, limit_s: float = config.GRADER_WORK_LIMIT_S, work: str = ""):
        """The grader's own work, which a slow or loaded machine can stretch past the watchdog's seconds:
        NVRTC compiling the learner's file, the CPU model running it (its step budget already turns a
        kernel's endless loop into HANG). Inside, heartbeats (two a second) keep the watchdog off for at most
        limit_s; past that it judges as usual. Never around a launch on the GPU: there the watchdog is
        what stops a kernel spinning on a barrier. `work` names it on the channel ("compile", "model"),
        so that a watchdog that fires after it says what was running."""
        stop = threading.Event()

        def beat():                                   # the channel passes at most two beats a second
            end = time.monotonic() + limit_s
            while time.monotonic() < end:
                if _channel is not None:
                    _channel.heartbeat(work)
                if stop.wait(0.25):
                    return

        t = threading.Thread(target=beat, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def load_module(self):
        """The learner's file, imported in its own process (the proxy of learner_module)."""
        return self.learner_module()

    def learner_module(self, *names: str):
        """Import the learner's file in its own process and check that it defines these functions.

        Returns a proxy: mod.f(...) runs f in the learner's process (arguments pickled, plain values
        back; the learner's exceptions raised again here with their line). Stops the check with
        WRONG (saying what to fix) when the file does not import or lacks one of the names; a file
        that hangs or ends its process while importing gives HANG or CRASH.
        """
        from judge.grading import learner_process as sandbox
        if self._learner is None:
            self._learner = sandbox.LearnerProcess(
                self.path, call_limit=self.call_limit, label=self.exercise.learner_file,
                on_call=_channel.heartbeat if _channel is not None else None)
        try:
            mod = self._learner.module()
        except SyntaxError as e:
            raise Stop(Result(Verdict.WRONG, syntax_error(e, self.exercise.learner_file))) from None
        except Exception as e:  # noqa: BLE001 - any learner error is reported, not raised
            raise Stop(Result(Verdict.WRONG, learner_error(e, f"importing your {self.exercise.learner_file}"),
                              details=_learner_tb(e))) from None
        missing = [n for n in names if n not in dir(mod) or not callable(getattr(mod, n, None))]
        if missing:
            given = self.path.name
            named = given if given == self.exercise.learner_file else \
                f"{given} (checked as {self.exercise.id}'s {self.exercise.learner_file})"
            other = whose_file(self.path, set(dir(mod)), self.exercise)
            details = []
            if other is not None:
                shown = os.path.relpath(self.path) if not os.path.relpath(self.path).startswith("..") else str(self.path)
                details = [f"check it with: python practice/judge.py check {other.id} {shown}",
                           f"{self.exercise.id}'s file is {self.exercise.learner_file}: "
                           f"python practice/judge.py start {self.exercise.id} gives you one"]
                raise Stop(Result(Verdict.WRONG, f"{named} holds {other.id}'s code (its {other.learner_file}): it defines "
                                  f"{', '.join(sorted(_functions(other)))}, not {self.exercise.id}'s "
                                  + ", ".join(names), details=details))
            raise Stop(Result(Verdict.WRONG, f"{named} defines no function " + " and no ".join(missing)))
        return mod

    def close(self) -> None:
        if self._learner is not None:
            self._learner.close()

    def build(self, **kw):
        """Compile the learner's file (NVRTC; the watchdog waits for it up to config.GRADER_WORK_LIMIT_S)."""
        from judge.gpu import build
        with self.busy(work="compile"):
            return build.compile(self.path, **kw)

    def figure(self, name: str) -> Path:
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        return self.figure_dir / name


def _functions(ex: _ex.Exercise) -> set[str]:
    """The functions an exercise's statement asks for: the top-level defs of its starter (or solution)."""
    import ast
    for path in (ex.starter_path, ex.solution_path):
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    return set()


def whose_file(path: Path, defined: set[str], ex: _ex.Exercise):
    """The other Python exercise this file belongs to, or None: the one whose functions it defines (all of
    them, the most if several), else the one whose learner file has its name or whose folder holds it."""
    best, best_n = None, 0
    for other in _ex.all_exercises():
        if other.id == ex.id or not other.learner_file.endswith(".py"):
            continue
        want = _functions(other)
        if want and want <= defined and len(want) > best_n:
            best, best_n = other, len(want)
    if best is not None:
        return best
    path = Path(path).resolve()
    for other in _ex.all_exercises():
        if other.id != ex.id and (path.name == other.learner_file or other.folder.resolve() in path.parents):
            return other
    return None


def _learner_tb(e: BaseException) -> list[str]:
    tb = getattr(e, "learner_traceback", "")
    return [l for l in tb.splitlines() if l.strip()][-6:] if tb else []


def syntax_error(e: SyntaxError, file: str) -> str:
    """'your f.py does not parse: line N: msg' with the line itself and a caret."""
    where = getattr(e, "learner_where", "") or f"{file} line {e.lineno}"
    line = getattr(e, "learner_line", "") or (e.text or "")
    msg = e.msg if hasattr(e, "msg") and e.msg else str(e)
    text = f"your {file} does not parse: {where}: {msg}"
    return text + (f": `{line.strip()}`" if line.strip() else "")


def learner_error(e: BaseException, what: str) -> str:
    """'what raised X: msg (file line N)' pointing at the learner's own frame."""
    where = getattr(e, "learner_where", None)
    if where is None:
        where = ""
        for fr in reversed(traceback.extract_tb(e.__traceback__)):
            if "judge" not in Path(fr.filename).parts and "exercises" not in Path(fr.filename).parts[-3:-1]:
                where = f"{Path(fr.filename).name} line {fr.lineno}"
                break
    where = f" ({where})" if where else ""
    return f"{what} raised {type(e).__name__}: {e}{where}"
