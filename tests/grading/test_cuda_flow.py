"""tests/grading/test_cuda_flow.py - the CUDA grading flow is a list of steps over one Grading, its data in the open.

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_cuda_flow.py -q

What is held here (each fixture's whole verdict is tests/grading/test_exercise_kernels.py's):
  - the flow is cuda_flow.STEPS, in the documented order, each step a function of the Grading alone;
  - the verdict without a GPU comes from the model's typed outcome, whatever the messages say;
  - a launch on the CPU model returns the model's report and runs with the build's own settings:
    judge.gpu.launch keeps no module state for a run's options or results.
"""
from __future__ import annotations

import contextlib
import inspect
import types

import numpy as np

from judge.gpu import build, launch
from judge.grading import cuda_flow, exercise
from judge.grading.result import Verdict


def test_the_flow_is_its_steps_in_order_each_a_function_of_the_grading():
    assert [s.__name__ for s in cuda_flow.STEPS] == [
        "compile_kernel", "log_rules", "sass_features", "model_cases", "cpu_model", "sass_rules", "without_gpu",
        "exercise_gpu_checks", "gpu_cases", "timing"]
    for step in cuda_flow.STEPS:
        assert list(inspect.signature(step).parameters) == ["g"], step.__name__


class _Sub:
    def __init__(self, ex):
        self.exercise = ex

    def progress(self, text):
        pass

    def busy(self, **kw):
        return contextlib.nullcontext()


def _grading(ex_id: str, **kw) -> cuda_flow.Grading:
    ex = exercise.get(ex_id)
    return cuda_flow.Grading(sub=_Sub(ex), check=types.SimpleNamespace(), ex=ex, **kw)


def test_the_verdict_without_a_gpu_is_read_from_the_model_outcome_not_from_messages():
    g = _grading("ws_gemm", checked=["nothing here names the model"],
                 model=cuda_flow.ModelOutcome(verdict="correct"))
    cuda_flow.without_gpu(g)
    assert g.result.verdict == Verdict.PASS, g.result
    g = _grading("ws_gemm", checked=["correct under the CPU model of the async machine (a message, not a fact)"],
                 model=cuda_flow.ModelOutcome(why="it cannot run this kernel"))
    cuda_flow.without_gpu(g)
    assert g.result.verdict == Verdict.SKIP and g.result.unchecked, g.result
    # sm_100a with model cases the model could not run: no verdict either way
    g = _grading("tcgen05_gemm", model_cases=[{"m": 128, "n": 128, "k": 64}],
                 model=cuda_flow.ModelOutcome(why="no CPU model in this installation"))
    cuda_flow.without_gpu(g)
    assert g.result.verdict == Verdict.SKIP, g.result


def test_the_model_cases_are_drawn_once_into_the_grading():
    from judge.grading import domain
    g = _grading("dsmem_histogram")
    cuda_flow.model_cases(g)                     # drawn from its [domain]: every class held by some case
    assert g.model_cases and all(isinstance(c["n"], int) for c in g.model_cases)
    assert not domain.uncovered(g.ex.domain, g.model_cases, g.ex.model.max_blocks)


NSMID = r'''
extern "C" __global__ void nsmid(unsigned* out) {
  unsigned v;
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v));
  out[blockIdx.x] = v;
}
'''


def test_a_model_launch_returns_its_report_and_runs_with_the_build_s_settings():
    assert not hasattr(launch, "model_options") and not hasattr(launch, "last_model_report")
    b = build.compile(NSMID, target="sm_90a", name="nsmid.cu")
    out = np.zeros(4, np.uint32)
    rep = launch.launch(b, "nsmid", grid=(4,), block=(32,), args=(out,))
    assert rep is not None and rep.blocks_total == 4 and (out == 132).all()      # an H200 by default
    rep = launch.launch(b.for_model(sms=8), "nsmid", grid=(4,), block=(32,), args=(out,))
    assert (out == 8).all() and b.model_options == {}, "the settings travel with that build alone"
