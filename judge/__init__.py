"""The course's engine: build CUDA for Hopper, run it, check it, time it, grade exercises.

    import judge
    judge.gpu.summary()                       # what is here
    b = judge.build.compile("kernel.cu")      # NVRTC -> cubin for sm_90a, SASS on any machine
    judge.check("pipeline_timeline")          # grade your workspace file, in a child process

Modules: config (defaults), toolkit (where NVRTC, headers, disassemblers are), build (NVRTC -> cubin
and PTX), sass (features, rules the SASS proves broken), gpu (what is here), launch (the one launch
layer: clusters, shared-memory opt-in), compare (against references), timing (the protocol, ceilings),
result and submission (verdicts; what a check receives), cuda_flow (the one GPU-exercise case loop),
grade, isolate, worker and sandbox (child processes; learner code apart), exercise and workspace
(exercises, the learner's files), cli (the command line), record and recorded (the Hopper record:
writing, reading; python -m judge prints it), model (the CPU model of the async machine), pipesim and
timeline (pipeline protocol and drawings), tma and tma_plan (tensor maps, swizzle, descriptor planning),
wgmma (descriptors, fragments), formats and tmem (Blackwell's block-scaled formats, tensor memory),
show (notebook display).
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
