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
    def busy(self, limit_s: float = config.GRADER_WORK_LIMIT_S):
        """The grader's own work, which a slow or loaded machine can stretch past the watchdog's seconds:
        NVRTC compiling the learner's file, the CPU model running it (its step budget already turns a
        kernel's endless loop into HANG). Inside, heartbeats (two a second) keep the watchdog off for at most
        limit_s; past that it judges as usual. Never around a launch on the GPU: there the watchdog is
        what stops a kernel spinning on a barrier."""
        stop = threading.Event()

        def beat():                                   # the channel passes at most two beats a second
            end = time.monotonic() + limit_s
            while time.monotonic() < end:
                if _channel is not None:
                    _channel.heartbeat()
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
            raise Stop(Result(Verdict.WRONG, f"{self.exercise.learner_file} defines no function "
                                             + " and no ".join(missing)))
        return mod

    def close(self) -> None:
        if self._learner is not None:
            self._learner.close()

    def build(self, **kw):
        """Compile the learner's file (NVRTC; the watchdog waits for it up to config.GRADER_WORK_LIMIT_S)."""
        from judge.gpu import build
        with self.busy():
            return build.compile(self.path, **kw)

    def figure(self, name: str) -> Path:
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        return self.figure_dir / name


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
