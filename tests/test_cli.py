"""What a learner types: python practice/judge.py list / start / check / hint / solution / progress."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, str(ROOT / "practice" / "judge.py")]


def judge(*args, **kw):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, cwd=ROOT, **kw)


def test_list_shows_every_exercise_with_its_chapter_and_gpu_need():
    r = judge("list")
    assert r.returncode == 0
    assert "pipeline_timeline" in r.stdout and "cp_async_sgemm" in r.stdout
    assert "needs sm_90" in r.stdout


def test_start_copies_the_starter_and_never_overwrites(tmp_path):
    ws = Path(__import__("os").environ["JUDGE_WORKSPACE"])
    r = judge("start", "pipeline_timeline")
    assert r.returncode == 0, r.stderr
    mine = ws / "pipeline_timeline" / "timeline.py"
    assert mine.read_text() == (ROOT / "exercises" / "pipeline_timeline" / "starter.py").read_text()
    mine.write_text("# my own work\n")
    r = judge("start", "pipeline_timeline")
    assert r.returncode == 0 and "left as it is" in r.stdout
    assert mine.read_text() == "# my own work\n"


def test_checking_the_untouched_starter_fails_and_says_what_is_wrong():
    judge("start", "pipeline_timeline")
    r = judge("check", "pipeline_timeline")
    assert r.returncode == 1
    assert "WRONG" in r.stdout and "NotImplementedError" in r.stdout


def test_checking_the_reference_passes():
    r = judge("check", "pipeline_timeline", str(ROOT / "exercises" / "pipeline_timeline" / "solution.py"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_a_gpu_exercise_without_a_gpu_is_skipped_with_what_was_checked():
    from judge import gpu
    if gpu.meets("sm_90"):
        pytest.skip("a Hopper GPU is here")
    r = judge("check", "cp_async_sgemm", str(ROOT / "exercises" / "cp_async_sgemm" / "solution.cu"))
    assert r.returncode == 0
    assert "SKIP" in r.stdout and "compiled for sm_90a" in r.stdout and "LDGSTS" not in r.stdout.split("checked")[0]


def test_bad_ids_and_missing_files_are_one_line_and_exit_2():
    r = judge("check", "pipline_timeline")
    assert r.returncode == 2
    assert "did you mean 'pipeline_timeline'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = judge("check", "pipeline_timeline", "no_such_file.py")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = judge("check", "pipeline_timeline")        # not started
    assert r.returncode == 2 and "start pipeline_timeline" in r.stderr
    assert judge("frobnicate").returncode == 2
    assert judge().returncode == 2


def test_hints_come_one_at_a_time():
    r1 = judge("hint", "pipeline_timeline")
    r2 = judge("hint", "pipeline_timeline")
    assert r1.returncode == r2.returncode == 0
    assert "Hint 1 of" in r1.stdout and "Hint 2 of" in r2.stdout
    assert judge("hint", "pipeline_timeline", "99").returncode == 2


def test_solution_prints_the_reference():
    r = judge("solution", "cp_async_sgemm")
    assert r.returncode == 0 and "__pipeline_wait_prior(STAGES - 2)" in r.stdout


def test_progress_survives_a_corrupted_progress_file():
    import os
    ws = Path(os.environ["JUDGE_WORKSPACE"])
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "progress.json").write_text("{ this is not json")
    r = judge("progress")
    assert r.returncode == 0 and "could not be read" in r.stderr
    assert list(ws.glob("progress.json.corrupt-*"))
    judge("check", "pipeline_timeline", str(ROOT / "exercises" / "pipeline_timeline" / "solution.py"))
    judge("start", "pipeline_timeline")
    (ws / "pipeline_timeline" / "timeline.py").write_text(
        (ROOT / "exercises" / "pipeline_timeline" / "solution.py").read_text())
    assert judge("check", "pipeline_timeline").returncode == 0
    data = json.loads((ws / "progress.json").read_text())
    assert data["pipeline_timeline"]["status"] == "passed"
    assert "1 of" in judge("progress").stdout


def test_the_untouched_starter_of_a_gpu_exercise_says_what_is_missing_on_any_machine():
    judge("start", "cp_async_sgemm")
    r = judge("check", "cp_async_sgemm")
    assert r.returncode == 1
    assert "MISSING FEATURE" in r.stdout and "LDGSTS" in r.stdout
    assert "untouched starter" in r.stdout and "exercises/cp_async_sgemm/README.md" in r.stdout
