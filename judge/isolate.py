"""Run a check in a child process, so a hang or a crash cannot take the caller down.

The child (python -m judge.worker) imports the exercise's check.py and calls check(sub).
It reports progress lines as it goes; the parent's watchdog restarts on each one.

  HANG   the child reported nothing for `timeout` seconds (JUDGE_TIMEOUT; default 10 s
         for CPU exercises, 60 s for GPU ones): its whole process group gets SIGKILL,
         so a kernel spinning on an mbarrier is stopped and the GPU is free again.
  CRASH  the child died or raised a CUDA error (illegal address, launch failure, trap):
         that context is unusable, but the next child starts on a fresh one.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import config
from .grade import Result, Verdict

TOTAL_LIMIT_S = 900.0   # no check may run longer than this, progress or not


def run_check(ex, path: Path, *, progress=None, timeout: float | None = None) -> Result:
    """Run exercises/<id>/check.py on `path` in a child process."""
    timeout = timeout if timeout is not None else config.timeout_s(ex.needs_gpu)
    fig_dir = config.workspace_dir() / ex.id / "figures"
    return _run({"exercise": ex.id, "file": str(path), "figures": str(fig_dir)}, progress, timeout)


def run_function(file, function: str, *, timeout: float = 10.0, progress=None, **kwargs) -> Result:
    """Call function(**kwargs) from a Python file in a child process, under the same watchdog.

    For demonstrations and tests of hangs and faults: a function that returns a Result gives that
    Result; one that returns anything else (JSON-able) gives PASS with it in measurements["value"].
    """
    req = {"call": {"file": str(Path(file).resolve()), "function": function, "kwargs": kwargs}}
    return _run(req, progress, timeout)


def _run(req: dict, progress, timeout: float) -> Result:
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp:
        out = Path(tmp) / "result.json"
        req = dict(req, result=str(out), figures=req.get("figures", str(Path(tmp) / "figures")))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(config.ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
            PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
        proc = subprocess.Popen([sys.executable, "-m", "judge.worker", json.dumps(req)],
                                cwd=str(config.ROOT), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        lines: "queue.Queue[str | None]" = queue.Queue()

        def pump():
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        output, last_progress = [], "starting"
        start = deadline = time.monotonic()
        deadline += timeout
        hung = False
        while True:
            try:
                line = lines.get(timeout=max(0.05, min(deadline, start + TOTAL_LIMIT_S) - time.monotonic()))
            except queue.Empty:
                hung = True
                break
            if line is None:
                break
            if line.startswith("@@progress "):
                last_progress = line[len("@@progress "):]
                deadline = time.monotonic() + timeout
                if progress:
                    progress(last_progress)
            else:
                output.append(line)
        if hung:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return Result(Verdict.HANG,
                          f"no progress for {timeout:.0f} s during '{last_progress}'; the process was killed",
                          details=["a loop that never ends looks like this: in Python, a condition that never "
                                   "becomes true; in a kernel, a wait on something that never comes (an "
                                   "mbarrier whose expected bytes never arrive) or a counter that stops "
                                   "advancing"] + output[-5:])
        rc = proc.wait()
        if out.exists():
            r = Result.from_json(out.read_text())
            if output:
                r.details = r.details + [f"your output: {l}" for l in output[-5:]]
            return r
        tail = [l for l in output if l.strip()][-8:]
        why = next((l for l in reversed(tail) if "CUDA" in l or "Error" in l), tail[-1] if tail else "")
        return Result(Verdict.CRASH, f"the check process died (exit {rc}) during '{last_progress}': {why}",
                      details=tail)
