"""tests/chapters/ch05_blackwell/test_gemm_clc.py - chapter 5's persistent-tile GEMM by cluster launch control (gemm_clc.cu) on
the CPU model: correct with fresh random inputs, each tile computed exactly once, and the two mistakes a
try_cancel loop invites caught, while the same loop written another way passes.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/chapters/ch05_blackwell/test_gemm_clc.py -q      (no GPU; none can run it)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge import model

ROOT = Path(__file__).resolve().parents[3]
from chapters.ch05_blackwell import gemm_clc  # noqa: E402

TEXT = gemm_clc.SOURCE.read_text()
WAIT = "    tma::wait(&bar, phase);                   // the response is in shared memory only after this\n"
SYNC = "    __syncthreads();                          // every thread has read it before the next request\n"


def _check(res, M, N, K):
    """C against the float64 product: an fp32 FMA chain of K terms errs by at most K u sum_k |a_ik b_kj|
    (u = 2^-24; 1 % room for the float64 reference's own rounding)."""
    C, ref = res["C"], res["reference"]
    assert not np.isnan(C).any(), "some of C was never written (poison left)"
    bound = 1.01 * K * 2.0 ** -24 * (np.abs(res["A"]).astype(np.float64) @ np.abs(res["B"]).astype(np.float64))
    err = np.abs(C - ref)
    assert (err <= bound).all(), f"max error {err.max():.3g} at {np.unravel_index(np.argmax(err - bound), err.shape)}"
    assert (res["tiles_done"] == 1).all(), f"tiles computed other than once:\n{res['tiles_done']}"
    assert res["blocks_run"] + len(res["cancelled"]) == res["blocks_total"]


def test_the_kernel_asks_for_work_with_try_cancel_in_its_sass():
    assert gemm_clc.try_cancel_sass(gemm_clc.build_kernel())


def test_every_tile_is_computed_once_and_c_is_the_product():
    rng = np.random.default_rng()
    M, N, K = (int(x) for x in rng.integers(17, 70, 3))       # ragged edges: tiles past M, N compute nothing
    res = gemm_clc.run_on_model(M, N, K)
    _check(res, M, N, K)
    assert res["cancelled"], "no block was taken by try_cancel: the persistent loop was not exercised"


def test_reading_the_response_before_its_mbarrier_phase_is_caught():
    assert TEXT.count(WAIT) == 1
    b = gemm_clc.build_kernel(TEXT.replace(WAIT, "    // MISTAKE: no wait on the mbarrier before reading the response\n"))
    with pytest.raises(model.Violation) as e:
        gemm_clc.run_on_model(32, 32, 8, b=b)
    assert e.value.rule == "tma-read-before-complete"
    assert "try_cancel response" in e.value.message


def test_a_next_request_before_every_thread_read_the_response_is_caught():
    assert TEXT.count(SYNC) == 1
    b = gemm_clc.build_kernel(TEXT.replace(SYNC, "    // MISTAKE: no barrier between reading the response and the next request\n"))
    with pytest.raises(model.Violation) as e:
        gemm_clc.run_on_model(48, 32, 8, b=b)
    assert e.value.rule == "async-overwrite-race"


# The same loop written another way: one thread waits for and decodes the response, and hands the next
# tile to the block through shared memory (no other thread touches the response).
ONE_READER = (
    "    __shared__ unsigned next[3];\n"
    "    if (threadIdx.x == 0) {\n"
    "      tma::wait(&bar, phase);\n"
    "      unsigned x, y;\n"
    "      next[0] = clc_query(response, x, y);\n"
    "      next[1] = x;\n"
    "      next[2] = y;\n"
    "    }\n"
    "    phase ^= 1;\n"
    "    __syncthreads();\n"
    "    const unsigned cancelled = next[0], nx = next[1], ny = next[2];\n"
    "    __syncthreads();\n")


def test_the_loop_written_with_one_reader_is_correct_too():
    start = TEXT.index(WAIT)
    end = TEXT.index(SYNC) + len(SYNC)
    b = gemm_clc.build_kernel(TEXT[:start] + ONE_READER + TEXT[end:])
    rng = np.random.default_rng()
    M, N, K = (int(x) for x in rng.integers(17, 60, 3))
    _check(gemm_clc.run_on_model(M, N, K, b=b), M, N, K)
