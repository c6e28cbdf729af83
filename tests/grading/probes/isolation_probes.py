"""Functions that misbehave on purpose, for tests/grading/test_isolation.py (run through judge.grading.check_process.run_function).

Each runs in a child process; the parent must see HANG or CRASH and carry on.
"""
from __future__ import annotations

import os
import time

HANG_SRC = r'''
// An mbarrier that expects 1024 bytes no copy will ever deliver: its phase never completes.
extern "C" __global__ void hang_on_mbarrier(int* out) {
  __shared__ __align__(8) unsigned long long bar;
  unsigned addr = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(addr));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 1024;" :: "r"(addr));
  }
  __syncthreads();
  unsigned done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(addr));
  }
  out[threadIdx.x] = 1;
}
extern "C" __global__ void store_far(int* out) { out[(size_t)1 << 40] = 1; }   // far outside any allocation
extern "C" __global__ void trap_now(int* out) { if (threadIdx.x == 0) __trap(); out[threadIdx.x] = 1; }
extern "C" __global__ void add_one(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1;
}
'''


def python_loops_forever():
    while True:
        time.sleep(0.05)


def python_raises():
    raise ValueError("a bug in the learner's code")


def python_dies():
    os._exit(3)


def python_returns():
    return 42


def _module():
    from judge.gpu import build
    return build.compile(HANG_SRC, name="isolation_probes.cu")


def gpu_kernel(name: str):
    import cupy as cp
    from judge.grading.grade import Result, Verdict
    b = _module()
    out = cp.zeros(128, dtype=cp.int32)
    from judge.grading import check_process as isolate
    isolate.progress("launching " + name)
    b.kernel(name)((1,), (128,), (out,))
    cp.cuda.get_current_stream().synchronize()
    return Result(Verdict.PASS, f"{name} finished")


def gpu_add_one(n: int = 1 << 20):
    """A healthy kernel, checked exactly: what must still work right after a HANG or a CRASH."""
    import cupy as cp
    import numpy as np
    from judge.grading import compare
    from judge.grading.grade import Result, Verdict
    rng = np.random.default_rng()
    x = cp.asarray(rng.integers(-1 << 30, 1 << 30, n, dtype=np.int32))
    y = compare.poison(cp.empty(n, dtype=cp.int32))
    _module().kernel("add_one")(((n + 255) // 256,), (256,), (x, y, np.int32(n)))
    c = compare.compare(y, x.get() + 1, case=f"add_one n={n}")
    return Result(Verdict.PASS if c.ok else Verdict.WRONG, c.message or "exact")


def python_slow_with_progress(steps: int, step_s: float):
    """Takes steps * step_s seconds in all, longer than the watchdog, but reports each step."""
    from judge.grading import check_process as isolate
    for i in range(steps):
        time.sleep(step_s)
        isolate.progress(f"step {i + 1} of {steps}")
    return steps


# ------------------------------------------------------------------ results that must not count
_PASS = (b'R {"verdict": "PASS", "message": "forged", "tier": null, "details": [], "checked": [], '
         b'"measurements": {}, "figures": [], "exercise": "", "file": ""}\n')


def forges_on_the_channel():
    """Writes a PASS on the worker's private channel without the run's secret, then returns."""
    from judge.grading import submission
    os.write(submission._channel._f.fileno(), _PASS)
    return 42


def sends_a_result_then_dies():
    """A proper result (with the secret), then death by SIGKILL: what a learner who kills the worker
    right after it wrote would leave behind."""
    import signal
    from judge.grading import submission
    from judge.grading.result import Result, Verdict
    submission._channel.result(Result(Verdict.PASS, "sent before dying"))
    os.kill(os.getpid(), signal.SIGKILL)


def sends_a_second_result():
    """A proper result of its own, then the worker's: two results for one run."""
    from judge.grading import submission
    from judge.grading.result import Result, Verdict
    submission._channel.result(Result(Verdict.PASS, "an extra one"))
    return 42


def worker_dumpable():
    """prctl(PR_GET_DUMPABLE) in the worker before and after it starts a learner process: (1, 0)
    means no same-user process may open its /proc files once learner code can run."""
    import ctypes
    from pathlib import Path
    from judge.grading import learner_process
    get = lambda: ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)    # noqa: E731 - PR_GET_DUMPABLE
    before = get()
    p = learner_process.LearnerProcess(Path(__file__).parent / "cheats" / "exits_in_call.py", call_limit=30)
    try:
        p.module()
        return [before, get()]
    finally:
        p.close()


def grader_work(seconds: float, limit_s: float, work: str = ""):
    """The grader's own slow work (as compiling or a CPU-model case on a loaded machine) inside Submission.busy,
    named `work` on the channel as the CUDA flow names it ("compile", "model")."""
    from judge.grading import submission
    sub = submission.Submission.__new__(submission.Submission)
    with sub.busy(limit_s=limit_s, work=work):
        time.sleep(seconds)
    return seconds


# ------------------------------------------------------------------ what a check child is (tests/grading/test_check_server.py)
def whoami():
    """The check child as it sees itself: its process ids, open descriptors, environment, cwd, argv,
    whether it is dumpable, and a draw of NumPy's global random state."""
    import ctypes
    import sys
    import numpy as np
    fds = []
    for f in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{f}")
        except OSError:                      # the descriptor listdir read the folder with, closed by now
            continue
        fds.append(int(f))
    fds.sort()
    return {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "fds": fds,
            "env": dict(os.environ), "cwd": os.getcwd(), "argv": list(sys.argv),
            "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), "np_random": float(np.random.random())}


def _write_whole(path: str, text: str) -> None:
    """The file appears with its text or not at all (a test waits for it to exist, then reads it)."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def starts_a_sleeper_then_loops(pid_file: str):
    """A grandchild of the check (as a learner process is), its pid written down, then a loop that never ends."""
    import subprocess
    p = subprocess.Popen(["sleep", "600"])
    _write_whole(pid_file, str(p.pid))
    while True:
        time.sleep(0.05)


def sleeps_then_returns(seconds: float, mark: str):
    """Sleeps (reporting progress), having first written its pid into `mark`; returns 42."""
    from judge.grading import check_process as isolate
    _write_whole(mark, str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.1)
        isolate.progress("sleeping")
    return 42
