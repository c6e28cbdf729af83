"""The learner's messages on the fixtures that once pointed away from the cause: HANG and race messages of the
CPU model name the learner's file and line first, barriers by their name in the learner's source, never a
Python None; a race caused by the learner's early release blames that release's line.

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_messages.py -q
(the gradings are the ones tests/grading/test_exercises.py makes of the same fixtures: tests/gradings.py)
"""
from __future__ import annotations

import re
from pathlib import Path

from judge.grading import exercise
from judge.grading.result import Verdict


def _graded(shared_gradings, ex_id, name):
    path = exercise.get(ex_id).fixture_path(name)
    return shared_gradings.check(ex_id, path), Path(path)


def _mistake_line(path: Path) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "MISTAKE" in text)


def test_an_mbarrier_hang_opens_with_the_learner_s_line_and_names_the_barrier(shared_gradings):
    # was: "every live thread is blocked:" then "... wait for phase parity 0 of the mbarrier at shared 0x20
    # (block rank 0) ... (at judge/include/tma.cuh:96 (...), called from wrong_producer_phase.cu:82 [...])"
    r, path = _graded(shared_gradings, "ws_gemm", "wrong_producer_phase.cu")
    assert r.verdict == Verdict.HANG, r
    line = _mistake_line(path)
    assert r.message.startswith(f"wrong_producer_phase.cu:{line}: every live thread is blocked"), r.message
    waits = [d for d in r.details if "wait for phase parity" in d or "waits for phase parity" in d]
    assert waits[0].lstrip().startswith(f"wrong_producer_phase.cu:{line}, through judge/include/tma.cuh:"), waits
    assert "of `empty[0]` (shared 0x20)" in waits[0] and "of `full[0]` (shared 0x0)" in waits[1], waits


def test_a_barrier_without_a_count_says_how_many_it_waits_for(shared_gradings):
    # was: "62 threads wait at barrier 0 of block rank 0 (62 of None arrived)"
    r, path = _graded(shared_gradings, "tcgen05_ring", "wrong_no_acc_full_commit.cu")
    assert r.verdict == Verdict.HANG, r
    text = "\n".join([r.message] + r.details)
    assert "None" not in text, text
    assert re.search(r"threads wait at barrier 0 \(__syncthreads\) \(\d+ of the block's \d+ live threads arrived\)",
                     text), text
    # barriers carved out of dynamic shared memory are named from the learner's line that initialized them
    # (which other barriers a drawn case leaves threads waiting on depends on its size: none is unnamed)
    assert "of `acc_full[0]` (shared 0x" in text and "the mbarrier at shared 0x" not in text, text


def test_a_slot_released_too_early_is_blamed_on_the_release(shared_gradings):
    # was: "[async-read-overwritten] thread 0 (warp 0)'s TMA load at judge/include/tma.cuh:120 (in tma::load_2d),
    # called from wrong_arrive_not_commit.cu:156 ...": the producer's load, code the exercise gives
    r, path = _graded(shared_gradings, "tcgen05_ring", "wrong_arrive_not_commit.cu")
    assert r.verdict == Verdict.WRONG, r
    line = _mistake_line(path)
    assert r.message.startswith(f"[async-read-overwritten] wrong_arrive_not_commit.cu:{line}, through "), r.message
    assert "mbarrier.arrive here completed the phase of `empty[0]`" in r.message, r.message
    assert "tcgen05.commit" in r.message


def test_a_spin_hang_opens_with_the_learner_s_line(shared_gradings):
    # was: "the block ran 100000 instruction groups without finishing: ... (the threads were last at ...)"
    r, _ = _graded(shared_gradings, "cp_async_sgemm", "wrong_hang.cu")
    assert r.verdict == Verdict.HANG, r
    assert re.match(r"wrong_hang\.cu:\d+: the block ran \d+ instruction groups without finishing", r.message), r.message


def _missing(tmp_path, ex_id, path):
    """What learner_module says of a file that lacks the exercise's functions (the check's first step)."""
    import pytest
    from judge.grading.result import Stop
    from judge.grading.submission import Submission
    sub = Submission(exercise.get(ex_id), path, tmp_path / "figures")
    try:
        with pytest.raises(Stop) as ei:
            sub.learner_module("cta_pool", "best_split", "outcome")
    finally:
        sub.close()
    return ei.value.result


def test_a_file_of_another_exercise_is_recognised_and_named(tmp_path):
    # was: "regalloc.py defines no function cta_pool and no best_split and no outcome" (the wrong file named,
    # and not a word about whose file it is)
    mine = tmp_path / "umma_desc.py"
    mine.write_text(exercise.get("umma_descriptor").solution_path.read_text())
    r = _missing(tmp_path, "setmaxnreg_split", mine)
    assert r.verdict == Verdict.WRONG, r
    assert r.message.startswith("umma_desc.py (checked as setmaxnreg_split's regalloc.py) holds umma_descriptor's "
                                "code (its umma_desc.py)"), r.message
    assert "regalloc.py defines no function" not in r.message
    assert any(d.startswith("check it with: python practice/judge.py check umma_descriptor ") for d in r.details), r
    # a file of no exercise keeps the plain message, naming the file given
    other = tmp_path / "notes.py"
    other.write_text("x = 1\n")
    r = _missing(tmp_path, "setmaxnreg_split", other)
    assert r.message.startswith("notes.py (checked as setmaxnreg_split's regalloc.py) defines no function cta_pool"), r


def test_a_result_s_plain_text_names_its_figures_without_the_machine_s_path():
    # a notebook stores this text beside the HTML: it once held figures=['/tmp/judge-figures-.../timeline.png']
    from judge.grading.result import Result
    r = Result(Verdict.PASS, "right on 48 cases", figures=["/tmp/judge-figures-pipeline_timeline-5179/timeline.png"],
               exercise="pipeline_timeline")
    assert repr(r) == "Result([pipeline_timeline] PASS: right on 48 cases; figures: timeline.png)"
