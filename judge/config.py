"""Every default of the judge in one place, and the environment variables that change them.

All variables share the prefix JUDGE_:

    JUDGE_CACHE      where compiled kernels are cached     (default: ~/.cache/hopper-course)
    JUDGE_WORKSPACE  where learners' files and progress live (default: <course>/workspace)
    JUDGE_TIMEOUT    seconds a check may go without progress before it is a HANG (default: 10)
    JUDGE_NO_GPU     set to 1 to act as if no GPU were here (what a CPU learner sees)
    JUDGE_RECORD     set to 1 (by the Hopper record run only) to write measured figures into record/
    JUDGE_ISOLATION  best-effort: run a learner's Python without the kernel's namespaces (only a
                     process of its own and an audit hook), as on a system that offers none;
                     for tests of that fallback (default: the namespaces wherever Linux allows them)
    JUDGE_DRAW_BUDGET_S  seconds a Python check spends on inputs drawn at random, shared out among its
                     functions (judge.grading.cpu_flow; default: 2.0; the test suite sets less and
                     tests/conftest.py says why)
    JUDGE_FIGURES    set to 0 to grade without drawing figures (pipeline_timeline's timeline): the verdict
                     and its message are the same (default: drawn). The test suite sets 0 but in the tests
                     of the figures (tests/conftest.py)
    JUDGE_SEED       replay the inputs a Python check drew in run N (judge.grading.cpu_flow)
    JUDGE_CHECK_SERVER  set to 0 to start every check's child as a fresh interpreter (default: from a
                     process's second check on, forked by judge.grading.check_server, its imports done)
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent          # the course checkout
INCLUDE_DIR = Path(__file__).resolve().parent / "include"  # the course's own CUDA headers
EXERCISES_DIR = ROOT / "exercises"
CHAPTERS_DIR = ROOT / "chapters"
RECORD_DIR = ROOT / "record"

DEFAULT_TARGET = "sm_90a"        # wgmma and setmaxnreg need the "a" target; cp.async/TMA run on it too
CPU_TIMEOUT_S = 10.0             # a learner's Python that loops forever is a HANG after this
GPU_TIMEOUT_S = 10.0             # per step: checks report progress between compile, cases and timing
TOTAL_CHECK_LIMIT_S = 900.0      # no check may run longer than this, progress or not
GRADER_WORK_LIMIT_S = 180.0      # the grader's own work (compiling, one CPU-model case) may outlast the watchdog
                                 # by this much on a slow or loaded machine before it counts as no progress

# What a Hopper GPU can do at most (the vendor's datasheet for the H100/H200 SXM, dense): a timed figure
# above one of these is not a fast kernel but a wrong measurement (work skipped, output not written),
# and the judge says WRONG. Measured ceilings are lower (record/hopper.json: device.ceilings).
HOPPER_PEAK = {
    "hbm_bytes_per_s": 4.8e12,   # H200 HBM3e (the H100's 3.35e12 is lower)
    "fp32_flops": 67e12,         # non-tensor FP32
    "tf32_flops": 495e12,
    "bf16_flops": 989e12,        # tensor cores, dense
    "fp8_flops": 1979e12,
}
# A tier's line is crossed only by more than the measured spread of the timing: a figure within the
# spread of a line is reported as "on the line" with the lower tier, never as a coin toss.
TIER_SPREAD_FLOOR = 0.01         # the spread used when the measured one is smaller than this


def cache_dir() -> Path:
    return Path(os.environ.get("JUDGE_CACHE", Path.home() / ".cache" / "hopper-course"))


def workspace_dir() -> Path:
    return Path(os.environ.get("JUDGE_WORKSPACE", ROOT / "workspace"))


def timeout_s(needs_gpu: bool) -> float:
    if "JUDGE_TIMEOUT" in os.environ:
        return float(os.environ["JUDGE_TIMEOUT"])
    return GPU_TIMEOUT_S if needs_gpu else CPU_TIMEOUT_S


def gpu_disabled() -> bool:
    return os.environ.get("JUDGE_NO_GPU", "") not in ("", "0")


def recording() -> bool:
    return os.environ.get("JUDGE_RECORD", "") not in ("", "0")


def figures_wanted() -> bool:
    """Whether checks draw their figures (JUDGE_FIGURES=0: they do not)."""
    return os.environ.get("JUDGE_FIGURES", "").strip() not in ("0", "no", "off")

MAX_SOURCE_BYTES = 1 << 20       # a learner's file larger than this is refused before grading (1 MiB)
LEARNER_TMP_BYTES = 256 << 20    # the private /tmp a learner's Python may write (a tmpfs; memory)


def isolation_wanted() -> bool:
    """Whether to put a learner's Python behind the kernel's namespaces (JUDGE_ISOLATION)."""
    return os.environ.get("JUDGE_ISOLATION", "").strip().lower() not in ("best-effort", "best_effort", "off")
