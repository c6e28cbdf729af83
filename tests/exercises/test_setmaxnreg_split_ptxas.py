"""setmaxnreg's count rule (setmaxnreg_split's reference legal_count) against ptxas itself: the course's NVRTC assembles
exactly the counts the rule calls legal, and its messages are the ones the setmaxnreg_split statement quotes.

Run: PYTHONPATH=$PWD python -m pytest tests/exercises/test_setmaxnreg_split_ptxas.py -q      (no GPU: NVRTC compiles here)
"""
from __future__ import annotations

import pytest

from judge.gpu import build
from judge.grading import exercise

regalloc = exercise.get("setmaxnreg_split").reference_module()   # the exercise's reference rules

SRC = r'''
// judge: target=sm_90a
extern "C" __global__ void __launch_bounds__(384, 1) k(int* out) {
  if (threadIdx.x / 128 == 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(24));
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(COUNT));
  out[threadIdx.x] = threadIdx.x;
}
'''


@pytest.mark.parametrize("count", [16, 24, 28, 232, 256, 264])
def test_ptxas_assembles_exactly_the_counts_the_rule_calls_legal(count):
    try:
        b = build.compile(SRC.replace("COUNT", str(count)), target="sm_90a")
        taken, log = True, ""
    except build.CompileError as e:
        taken, log = False, str(e)
    assert taken == regalloc.legal_count(count), (count, log)
    if taken:
        assert "USETMAXREG" in b.sass
    elif count % 8:
        assert f"unexpected value '{count}', expected to be multiple of 8" in log, log
    else:
        assert f"value '{count}' out of range, expected to be in range [24..256]" in log, log
