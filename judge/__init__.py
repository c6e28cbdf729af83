"""The course's engine: build CUDA for Hopper, run it, check it, time it, grade exercises.

    import judge
    judge.gpu.summary()                       # what is here
    b = judge.build.compile("kernel.cu")      # NVRTC -> cubin for sm_90a, SASS on any machine
    judge.check("pipeline_timeline")          # grade your workspace file, in a child process

Modules: config (defaults), build, sass, gpu, compare, timing, grade, isolate,
exercise, workspace, record, timeline (drawings), show (notebook display helpers).
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
