"""Run a check in a child process, so a hang or a crash cannot take the caller down.

The child (python -m judge.grading.check_child) imports the exercise's check.py and calls check(sub); the
learner's Python runs in a further process of its own (judge.grading.learner_process). From a process's
second check on, the child is forked from a server that has the judge's modules imported already
(judge.grading.check_server: the same child, in the same session of its own, its exit status relayed),
not started as a fresh interpreter. The worker reports progress on a private pipe that learner code
does not hold; the parent's watchdog restarts on each report. Everything printed on stdout/stderr is
"your output", never progress.

  HANG   the child reported nothing for `timeout` seconds (JUDGE_TIMEOUT; default 10 s),
         or one call into the learner's code took longer than that: the whole process group
         gets SIGKILL, so a kernel spinning on an mbarrier is stopped and the GPU is free again.
  CRASH  the child died or raised a CUDA error (illegal address, launch failure, trap):
         that context is unusable, but the next child starts on a fresh one.

A result counts only when all of this holds: it came on the private channel, on a line opening
with this run's secret (a fresh token sent to the child on its stdin, never in its argv or
environment), it was the only result, and the child then exited with status 0. A result followed
by the child's death (a learner that kills the worker with -9 after forging one), a second result,
or any line on the channel without the secret makes the verdict CRASH, never PASS.

Ctrl-C while a check runs ends the child's whole process group and raises KeyboardInterrupt.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from judge import config
from judge.grading import check_server
from judge.grading.result import Result, Verdict

TOTAL_LIMIT_S = config.TOTAL_CHECK_LIMIT_S   # no check may run longer than this, progress or not
GRACE_S = 5.0           # the worker's own limit on a learner call fires first; this is the backstop
OUTPUT_LINES = 200      # lines of the learner's output kept (the last ones)
LINE_CHARS = 2000       # characters kept of one output line


def figure_dir(ex, path: Path) -> Path:
    """Where a check draws: the learner's workspace for their own file, else a fresh temp folder.

    A notebook grading the reference or a fixture never writes into workspace/.
    """
    from judge.grading import workspace
    try:
        own = Path(path).resolve() == workspace.learner_path(ex).resolve()
    except OSError:
        own = False
    if own:
        return config.workspace_dir() / ex.id / "figures"
    return Path(tempfile.gettempdir()) / f"judge-figures-{ex.id}-{secrets.token_hex(6)}"   # made when drawn


def run_check(ex, path: Path, *, progress=None, timeout: float | None = None) -> Result:
    """Run exercises/<id>/check.py on `path` in a child process.

    A file that cannot be graded (a folder, not UTF-8 text, the wrong language, over
    config.MAX_SOURCE_BYTES) raises judge.grading.workspace.BadFile saying what to do, before any child starts.
    """
    from judge.grading import workspace
    workspace.validate_file(ex, path)
    timeout = timeout if timeout is not None else config.timeout_s(ex.needs_gpu)
    req = {"exercise": ex.id, "file": str(path), "figures": str(figure_dir(ex, path)),
           "call_limit": timeout}
    r = _run(req, progress, timeout, grace=0.0 if ex.needs_gpu else GRACE_S)
    if r.verdict == Verdict.SKIP and not r.unchecked:     # the flow says what it left; else the engine does
        r.unchecked = [not_checked(ex)]
    return r


def not_checked(ex) -> str:
    """What a SKIP leaves unchecked: said as plainly as what was checked."""
    cases = ex.cases.list
    parts = [f"the kernel's output on {len(cases) or 'its'} correctness case(s) against the reference, "
             f"on fresh random inputs"]
    if ex.timing is not None or ex.tiers:
        tiers = ", ".join(f"{k} {v}" for k, v in ex.tiers.items())
        parts.append("its speed at the timed case" + (f" (tiers: {tiers} of the ceiling)" if tiers else ""))
    return f"not checked here (needs a {ex.target.rstrip('a')} GPU): " + "; ".join(parts)


def run_function(file, function: str, *, timeout: float = 10.0, progress=None, **kwargs) -> Result:
    """Call function(**kwargs) from a Python file in a child process, under the same watchdog.

    For demonstrations and tests of hangs and faults: a function that returns a Result gives that
    Result; one that returns anything else (JSON-able) gives PASS with it in measurements["value"].
    """
    req = {"call": {"file": str(Path(file).resolve()), "function": function, "kwargs": kwargs}}
    return _run(req, progress, timeout)


def progress(text: str) -> None:
    """Inside a run_function child: report progress (resets the watchdog). Printing does not."""
    from judge.grading import submission
    if submission._channel is not None:
        submission._channel.progress(text)


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _run(req: dict, progress, timeout: float, grace: float = 0.0) -> Result:
    secret = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp:
        req = dict(req, figures=req.get("figures", str(Path(tmp) / "figures")), secret=secret)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(config.ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
            PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
        chan_r, chan_w = os.pipe()
        try:      # forked by this process's check server (the same child, its imports done), or a fresh one
            proc = check_server.spawn(env, str(config.ROOT), chan_w) or subprocess.Popen(
                [sys.executable, "-m", "judge.grading.check_child", str(chan_w)],
                cwd=str(config.ROOT), env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(chan_w,), start_new_session=True)
        finally:
            os.close(chan_w)
        events: "queue.Queue[tuple[str, str | None]]" = queue.Queue()

        def pump_output():
            while True:
                line = proc.stdout.readline(LINE_CHARS)
                if not line:
                    break
                events.put(("out", line.decode("utf-8", "replace").rstrip("\r\n")))
            events.put(("out", None))

        def pump_channel():
            with os.fdopen(chan_r, "r", encoding="utf-8", errors="replace") as f:
                for line in f:
                    events.put(("chan", line.rstrip("\n")))
            events.put(("chan", None))

        threading.Thread(target=pump_output, daemon=True).start()
        threading.Thread(target=pump_channel, daemon=True).start()
        try:
            proc.stdin.write(json.dumps(req).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        output: collections.deque = collections.deque(maxlen=OUTPUT_LINES)
        n_output, last_progress, result_json = 0, "starting", None
        busy_with = ""                   # the grader's own work the last heartbeat named ("compile", "model")
        n_results, forged = 0, []                 # results seen; channel lines without the secret
        mark = secret + " "
        limit = timeout + grace
        start = time.monotonic()
        deadline = start + limit
        open_streams, hung = 2, False
        try:
            while open_streams:
                wait = min(deadline, start + TOTAL_LIMIT_S) - time.monotonic()
                try:
                    kind, line = events.get(timeout=max(0.05, wait))
                except queue.Empty:
                    hung = True
                    break
                if line is None:
                    open_streams -= 1
                    continue
                if kind == "out" and time.monotonic() > min(deadline, start + TOTAL_LIMIT_S):
                    hung = True                  # output alone is no progress, however much of it
                    break
                if kind == "out":
                    output.append(line)
                    n_output += 1
                    continue
                if not line.startswith(mark):
                    forged.append(line[:200])
                    continue
                line = line[len(mark):]
                if line.startswith("P "):
                    last_progress, busy_with = line[2:], ""
                    deadline = time.monotonic() + limit
                    if progress:
                        progress(last_progress)
                elif line == "B" or line.startswith("B "):
                    busy_with = line[2:]
                    deadline = time.monotonic() + limit
                elif line.startswith("R "):
                    result_json = line[2:]
                    n_results += 1
        except KeyboardInterrupt:
            _kill(proc)
            raise
        if hung:
            _kill(proc)
            if busy_with == "compile":
                why = [f"the compiler worked on your file for over {config.GRADER_WORK_LIMIT_S:.0f} s: a loop "
                       "unrolled thousands of times or a huge constant array makes NVRTC this slow"]
            else:
                why = ["a loop that never ends looks like this: in Python, a condition that never becomes "
                       "true; in a kernel, a wait on something that never comes (an mbarrier whose expected "
                       "bytes never arrive) or a counter that stops advancing"]
            return Result(Verdict.HANG,
                          f"no progress for {limit:.0f} s during '{last_progress}'; the process was killed",
                          details=why + _yours(output, n_output))
        rc = proc.wait()
        void = _void(rc, n_results, forged)
        if void:
            return Result(Verdict.CRASH, void, details=[f"on the channel: {l}" for l in forged[:3]]
                          + _yours(output, n_output))
        if result_json is not None:
            r = Result.from_json(result_json)
            r.details = r.details + _yours(output, n_output)
            return r
        tail = [l for l in output if l.strip()][-8:]
        why = next((l for l in reversed(tail) if "CUDA" in l or "Error" in l), tail[-1] if tail else "")
        why = why or (f"killed by signal {-rc}" if rc < 0 else "it printed nothing")
        return Result(Verdict.CRASH, f"the check process died (exit {rc}) during '{last_progress}': {why}",
                      details=tail)


def _void(rc: int, n_results: int, forged: list[str]) -> str | None:
    """Why a run's result cannot count (None when it can): see the module's docstring."""
    if forged:
        return (f"{len(forged)} line(s) without this run's secret arrived on the grader's private "
                f"channel: something other than the check wrote there, so no result of this run counts")
    if n_results > 1:
        return f"{n_results} results arrived for one run: no result of this run counts"
    if n_results == 1 and rc != 0:
        how = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
        return (f"the check process ended abnormally ({how}) after sending its result: a result counts "
                f"only from a check that ends cleanly")
    return None


def _yours(output, n: int) -> list[str]:
    lines = [f"your output: {l}" for l in list(output)[-5:]]
    if n > 5:
        lines.insert(0, f"your output ({n} lines; the last 5):")
    return lines
