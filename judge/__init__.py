"""The course's engine: build CUDA for Hopper, run it, check it, time it, grade exercises.

    import judge
    from judge import gpu
    from judge.gpu import build
    gpu.summary()                             # what is here
    b = build.compile("kernel.cu")            # NVRTC -> cubin for the file's `// judge: target=`, SASS anywhere
    judge.check("pipeline_timeline")          # grade your workspace file, in a child process

The house, one wing a folder (each opens with what it is):

    judge/hw/        the hardware's rules in Python, no GPU needed: tma, tma_plan, wgmma, tmem, formats,
                     mbarrier (the one phase model), pipesim (the cp.async protocol), sass (reading SASS)
    judge/model/     the CPU model of the machine: runs a kernel's own PTX, every async op as late as allowed
    judge/gpu/       building and running: toolkit (where NVRTC and headers are), build, launch, timing;
                     judge.gpu itself says what GPU is here
    judge/grading/   exercises and their schema (exercise), fixtures as patches (fixtures, patches), starters,
                     the CUDA and Python flows, the three processes of a check
                     (check_process -> check_child -> learner_process), compare, results, the workspace
    judge/record/    the Hopper record: reading (provenance in two kinds: measured with, graded by), write
                     (save, the README table from each chapter's figures.toml), hopper_run (the H200 run)
    judge/draw/      timelines, tables and SASS excerpts for notebooks; house (the picture of this house)
    config.py        every default; cli.py the command line (`course ...`, practice/judge.py)

The wings stand in layers, floor first: config < hw < draw < model < gpu < grading < record < top
(judge, __main__, cli). A module imports its own wing and those below it, never above, and no
import cycle, function-level imports included: tests/test_house.py checks it and lists what still
breaks it; docs/house.png is the picture (python -m judge.draw.house).
"""
from judge import gpu  # noqa: F401 - judge.gpu.summary(), the first line of every notebook


def check(ex_id: str, file=None, **kw):
    """Grade an exercise from a notebook cell; the result displays itself."""
    from judge.grading import grade, workspace
    r = grade.check(ex_id, file, **kw)
    if file is None:
        workspace.record_progress(ex_id, status={"PASS": "passed", "SKIP": "skipped"}.get(
            r.verdict.value, "failed"), verdict=r.verdict.value, tier=r.tier)
    return r
