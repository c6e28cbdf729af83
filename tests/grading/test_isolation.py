"""Isolation: a check that hangs becomes HANG, one that dies becomes CRASH, and the caller carries on.

(What a learner's own code may not do, apart from the grader, is tests/grading/test_sandbox.py.)

CPU tests run everywhere; the GPU tests (a kernel spinning on an mbarrier, an illegal address,
a trap, then a healthy kernel in the next child) need an sm_90 GPU and skip elsewhere. A result
counts only from a clean run: with the run's secret, alone, and from a worker that exits 0.
"""
import sys
import time
from pathlib import Path

import pytest

from judge import gpu
from judge.grading import check_process as isolate
from judge.grading.grade import Verdict

PROBES = Path(__file__).parent / "probes" / "isolation_probes.py"


def test_a_python_loop_that_never_ends_is_a_hang_within_the_limit():
    t = time.monotonic()
    r = isolate.run_function(PROBES, "python_loops_forever", timeout=2)
    assert r.verdict == Verdict.HANG
    assert time.monotonic() - t < 8
    assert "no progress for 2 s" in r.message


def test_printing_the_old_progress_marker_resets_nothing():
    """Progress travels on a private pipe; what a function prints is only output."""
    cheat = Path(__file__).parent / "probes" / "cheats" / "progress_spam.py"
    t = time.monotonic()
    r = isolate.run_function(cheat, "schedule", timeout=2, K=4, L=10, C=10, S=1)
    assert r.verdict == Verdict.HANG, r
    assert time.monotonic() - t < 12


def test_an_exception_is_a_crash_that_names_it():
    r = isolate.run_function(PROBES, "python_raises")
    assert r.verdict == Verdict.CRASH
    assert "ValueError" in r.message and "learner" in r.message


def test_a_dying_process_is_a_crash_with_its_exit_status():
    r = isolate.run_function(PROBES, "python_dies")
    assert r.verdict == Verdict.CRASH and "exit 3" in r.message


def test_the_graders_own_slow_work_is_not_taken_for_a_hang():
    """Compiling or a CPU-model case can outlast the watchdog on a slow or loaded machine: Submission.busy
    beats it (threaded heartbeats on the private channel) for a bounded time."""
    r = isolate.run_function(PROBES, "grader_work", timeout=1, seconds=3.0, limit_s=30.0)
    assert r.verdict == Verdict.PASS and r.measurements["value"] == 3.0, r


def test_the_graders_work_past_its_limit_is_a_hang_again():
    t = time.monotonic()
    r = isolate.run_function(PROBES, "grader_work", timeout=1, seconds=30.0, limit_s=1.0)
    assert r.verdict == Verdict.HANG, r
    assert time.monotonic() - t < 10
    assert "compiler" not in " ".join(r.details), r


def test_a_compile_past_its_limit_is_said_to_be_the_compiler_s_from_the_heartbeat_s_name():
    """What ran when the watchdog fired is the typed name the last heartbeat carried, never a progress text."""
    r = isolate.run_function(PROBES, "grader_work", timeout=1, seconds=30.0, limit_s=1.0, work="compile")
    assert r.verdict == Verdict.HANG and "the compiler worked on your file" in r.details[0], r


def test_the_next_call_after_a_hang_works():
    assert isolate.run_function(PROBES, "python_loops_forever", timeout=1).verdict == Verdict.HANG
    r = isolate.run_function(PROBES, "python_returns")
    assert r.verdict == Verdict.PASS and r.measurements["value"] == 42


def test_gpu_kernel_waiting_on_an_mbarrier_forever_is_a_hang_and_the_gpu_recovers():
    gpu.need("sm_90")
    t = time.monotonic()
    r = isolate.run_function(PROBES, "gpu_kernel", name="hang_on_mbarrier", timeout=10)
    took = time.monotonic() - t
    assert r.verdict == Verdict.HANG, r
    assert took < 25, took
    ok = isolate.run_function(PROBES, "gpu_add_one", timeout=30)
    assert ok.verdict == Verdict.PASS, ok


def test_gpu_illegal_address_is_a_crash_naming_the_cuda_error():
    gpu.need("sm_90")
    r = isolate.run_function(PROBES, "gpu_kernel", name="store_far", timeout=30)
    assert r.verdict == Verdict.CRASH, r
    assert "ILLEGAL_ADDRESS" in r.message.upper().replace(" ", "_") or "illegal" in r.message.lower(), r.message
    assert isolate.run_function(PROBES, "gpu_add_one", timeout=30).verdict == Verdict.PASS


def test_gpu_trap_is_a_crash():
    gpu.need("sm_90")
    r = isolate.run_function(PROBES, "gpu_kernel", name="trap_now", timeout=30)
    assert r.verdict == Verdict.CRASH, r
    assert isolate.run_function(PROBES, "gpu_add_one", timeout=30).verdict == Verdict.PASS


def test_progress_from_a_child_keeps_a_slow_function_alive():
    slow = Path(__file__).parent / "probes" / "isolation_probes.py"
    r = isolate.run_function(slow, "python_slow_with_progress", timeout=1, steps=4, step_s=0.6)
    assert r.verdict == Verdict.PASS and r.measurements["value"] == 4, r


# ------------------------------------------------------------------ a result counts only from a clean run
def test_a_line_without_the_runs_secret_voids_the_run():
    r = isolate.run_function(PROBES, "forges_on_the_channel")
    assert r.verdict == Verdict.CRASH, r
    assert "without this run's secret" in r.message, r.message


def test_a_result_followed_by_the_workers_death_is_a_crash():
    r = isolate.run_function(PROBES, "sends_a_result_then_dies")
    assert r.verdict == Verdict.CRASH, r
    assert "killed by signal 9" in r.message and "after sending its result" in r.message, r.message


def test_two_results_for_one_run_void_it():
    r = isolate.run_function(PROBES, "sends_a_second_result")
    assert r.verdict == Verdict.CRASH and "2 results" in r.message, r


def test_the_worker_is_not_dumpable_once_learner_code_can_run():
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_DUMPABLE is Linux's")
    r = isolate.run_function(PROBES, "worker_dumpable")
    assert r.verdict == Verdict.PASS and r.measurements["value"] == [1, 0], r
