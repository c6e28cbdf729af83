"""The child side of judge.grading.check_process: python -m judge.grading.check_child FD   (the request arrives on stdin).

Imports exercises/<id>/check.py, calls check(sub) and sends the Result as JSON on the private
channel FD, a pipe only this process holds (the learner's code runs in a further process,
judge.grading.learner_process, that does not inherit it). Progress goes on the same channel, each
line opening with the run's secret (it came on stdin, never in argv or the environment):

    <secret> P <text>      progress (resets judge.grading.check_process's watchdog, shown to the learner)
    <secret> B [<work>]    a heartbeat: a call into the learner's code came back, or the grader's own
                           work is still going (Submission.busy), named: "compile" (NVRTC), "model"
    <secret> R <json>      the Result (it counts only if this process then exits with status 0)

Before it starts a learner process, this process makes itself non-dumpable on Linux
(judge.grading.learner_process: prctl PR_SET_DUMPABLE 0): then no other process of the same user
without CAP_SYS_PTRACE may open its /proc/<pid>/fd, mem, environ or cwd, so even a learner process
outside any namespace cannot write into the channel through /proc. (GPU checks, which start no
learner process, leave it as it is.)
A learner's result in best-effort isolation (no namespaces on this system) carries a line saying so.

A CUDA error (illegal address, launch failure, trap) becomes CRASH with the error's text.
Not meant to be run by hand; judge.grading.grade.check() starts it.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path


class Channel:
    """The private pipe to judge.grading.check_process."""

    def __init__(self, fd: int, secret: str = ""):
        self._f = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")
        self._secret = secret
        self._last_beat = 0.0
        self._lock = threading.Lock()         # heartbeats may come from a thread (Submission.busy)

    def _send(self, line: str) -> None:
        with self._lock:
            self._f.write(self._secret + " " + line.replace("\n", " ") + "\n")
            self._f.flush()

    def progress(self, text: str) -> None:
        self._send("P " + str(text))

    def heartbeat(self, work: str = "") -> None:
        now = time.monotonic()
        if now - self._last_beat > 0.5:
            self._last_beat = now
            self._send("B " + work if work else "B")

    def result(self, r) -> None:
        self._send("R " + r.to_json())


def _is_cuda_error(e: BaseException) -> bool:
    return any("CUDA" in t.__name__ or "Cuda" in t.__name__ for t in type(e).__mro__)


BEST_EFFORT = ("isolation: best effort on this system ({why}): your code ran in a process of its own "
               "behind an audit hook, without the kernel's namespaces")


def main(argv: list[str]) -> int:
    req = json.loads(sys.stdin.read())
    chan = Channel(int(argv[1]), req.get("secret", ""))
    chan.progress("loading the check")
    from judge.grading import exercise, learner_process as sandbox, submission
    from judge.grading.result import Result, Stop, Verdict
    submission.set_channel(chan)
    sub = None
    try:
        if "call" in req:          # judge.grading.check_process.run_function: any function, isolated the same way
            call = req["call"]
            mod = exercise.import_file(call["file"], "isolated_call")
            result = getattr(mod, call["function"])(**call.get("kwargs", {}))
            if not isinstance(result, Result):
                result = Result(Verdict.PASS, "returned", measurements={"value": result})
        else:
            ex = exercise.get(req["exercise"])
            sub = submission.Submission(ex, Path(req["file"]), Path(req["figures"]),
                                        call_limit=req.get("call_limit"))
            if not (ex.folder / "check.py").is_file() and not ex.needs_gpu:   # a learners' release: no answer here
                from judge.grading import worked_examples
                result = worked_examples.check(sub)
            else:
                result = exercise.grader(ex)(sub)
    except Stop as s:
        result = s.result
    except sandbox.Ended as e:              # the learner's process hung or died
        result = e.result
    except Exception as e:  # noqa: BLE001
        if _is_cuda_error(e):
            result = Result(Verdict.CRASH, f"CUDA error: {e}",
                            details=["the kernel faulted; compute-sanitizer on the device names the "
                                     "first bad access"])
        else:
            tb = traceback.format_exc().strip().splitlines()
            result = Result(Verdict.CRASH, f"the check stopped with {type(e).__name__}: {e}",
                            details=tb[-6:])
    finally:
        if sub is not None:
            sub.close()
    if not isinstance(result, Result):
        result = Result(Verdict.CRASH, f"the check returned {type(result).__name__}, not a Result")
    learner = getattr(sub, "_learner", None)
    if learner is not None and learner.best_effort:
        result.details = list(result.details) + [BEST_EFFORT.format(why=learner.best_effort_why)]
    chan.result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
