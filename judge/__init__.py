"""The course's engine: build CUDA for Hopper, run it, check it, time it, grade exercises.

    import judge
    judge.gpu.summary()                       # what is here
    b = judge.build.compile("kernel.cu")      # NVRTC -> cubin for sm_90a, SASS on any machine
    judge.check("pipeline_timeline")          # grade your workspace file, in a child process

Modules: config (defaults), build (NVRTC -> cubin), sass (features), gpu (what is here),
compare (against references), timing (the protocol), grade and isolate (verdicts, child
processes), exercise and workspace (exercises, the learner's files), record (the Hopper
record; python -m judge prints it), pipesim (the cp.async protocol simulator),
timeline (pipeline drawings), tma (tensor maps and swizzle), show (notebook display).
"""
from . import config, build, sass, gpu, compare, exercise, grade, record, workspace  # noqa: F401
from .grade import Verdict, Result  # noqa: F401


def check(ex_id: str, file=None, **kw):
    """Grade an exercise from a notebook cell; the result displays itself."""
    r = grade.check(ex_id, file, **kw)
    if file is None:
        workspace.record_progress(ex_id, status={"PASS": "passed", "SKIP": "skipped"}.get(
            r.verdict.value, "failed"), verdict=r.verdict.value, tier=r.tier)
    return r
