"""The learner's code runs apart from the grader (judge.grading.learner_process): it cannot reach the answers or the verdict.

Each cheat in tests/probes/cheats/ is graded as a learner would have it graded (grade.check, the
same path as `course check`), and must get the verdict its code deserves, not PASS. The proxy that
check.py files use (sub.learner_module) is tested on its own: exceptions, values, output, limits.
Run: .venv/bin/python -m pytest tests/test_sandbox.py -q
"""
import time
from pathlib import Path

import numpy as np
import pytest

from judge import config
from judge.grading import exercise, grade, learner_process as sandbox
from judge.grading.result import Stop, Verdict
from judge.grading.submission import Submission

ROOT = Path(__file__).resolve().parent.parent
CHEATS = Path(__file__).parent / "probes" / "cheats"


def _check(ex_id, file, **kw):
    return grade.check(ex_id, file, quiet=True, **kw)


# ------------------------------------------------------------------ cheats, as `course check` sees them
def test_a_file_that_forges_the_result_is_still_graded_on_its_answers(tmp_path):
    r = _check("pipeline_timeline", CHEATS / "write_result.py")
    assert r.verdict == Verdict.WRONG, r
    assert "returned 0 tiles" in r.message, r.message


@pytest.mark.parametrize("way", ["judge", "path", "syspath"])
def test_a_file_cannot_import_the_reference_solution(tmp_path, way):
    src = (CHEATS / "import_solution.py").read_text().replace("@ROOT@", str(ROOT))
    src = src.replace('("judge", "path", "syspath")', f'("{way}",)')
    f = tmp_path / "timeline.py"
    f.write_text(src)
    r = _check("pipeline_timeline", f)
    assert r.verdict == Verdict.WRONG, r
    assert "importing your timeline.py raised ImportError" in r.message, r.message
    assert "may not" in r.message or "No module named" in r.message, r.message


def test_a_file_cannot_ask_the_judges_simulator_for_the_answers():
    r = _check("group_accounting", CHEATS / "import_pipesim.py")
    assert r.verdict == Verdict.WRONG, r
    assert "may not import judge" in r.message, r.message


def test_printing_the_progress_marker_does_not_keep_an_endless_loop_alive(monkeypatch):
    monkeypatch.setenv("JUDGE_TIMEOUT", "2")
    t = time.monotonic()
    r = _check("pipeline_timeline", CHEATS / "progress_spam.py")
    took = time.monotonic() - t
    assert r.verdict == Verdict.HANG, r
    assert took < 12, took
    assert "schedule(4, 10, 10, 1) did not finish within 2 s" in r.message, r.message
    assert any(d.startswith("your output") for d in r.details)      # what it printed is shown as output


def test_sys_exit_while_importing_is_a_crash_that_says_so():
    r = _check("pipeline_timeline", CHEATS / "exits_on_import.py")
    assert r.verdict == Verdict.CRASH, r
    assert "sys.exit(3)" in r.message and "exits_on_import.py line 4" in r.message, r.message


def test_os_exit_in_a_call_is_a_crash_naming_the_call():
    r = _check("pipeline_timeline", CHEATS / "exits_in_call.py")
    assert r.verdict == Verdict.CRASH, r
    assert "schedule(4, 10, 10, 1)" in r.message and "exit 7" in r.message, r.message


def test_a_syntax_error_points_at_the_learners_line(tmp_path):
    f = tmp_path / "timeline.py"
    f.write_text('"""A file with a syntax error on line 5."""\n\n\ndef schedule(K, L, C, S):\n'
                 '    return [(0, L, L, L + C) for k in range(K)\n')
    r = _check("pipeline_timeline", f)
    assert r.verdict == Verdict.WRONG, r
    assert "does not parse" in r.message and "timeline.py line 5" in r.message, r.message
    assert "importlib" not in str(r) and "<frozen" not in str(r)


def test_naming_every_rule_does_not_name_the_broken_one(tmp_path):
    f = tmp_path / "tensormap.py"
    f.write_text('''
SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}
def encode_args(shape, dtype_bytes, strides_bytes, box, swizzle="none"):
    rank = len(shape)
    if not 1 <= rank <= 5:
        raise ValueError("tensorRank innermost stride globalStrides boxDim inner box bytes swizzle")
    if strides_bytes is None:
        strides_bytes, step = [], dtype_bytes
        for n in reversed(shape):
            strides_bytes.insert(0, step)
            step *= n
    inner = box[-1] * dtype_bytes
    if (strides_bytes[-1] != dtype_bytes or any(s % 16 for s in strides_bytes[:-1])
            or any(not 1 <= b <= 256 for b in box) or inner % 16
            or (SPAN[swizzle] and inner > SPAN[swizzle])):
        raise ValueError("tensorRank innermost stride globalStrides boxDim inner box bytes swizzle")
    return dict(dims=list(reversed(shape)), global_strides=list(reversed(strides_bytes[:-1])),
                box=list(reversed(box)), elem_strides=[1] * rank)
''')
    r = _check("tensormap_args", f)
    assert r.verdict == Verdict.WRONG, r
    assert "names other rules too" in r.message and "'tensorRank'" in r.message, r.message
    ref = _check("tensormap_args", exercise.get("tensormap_args").solution_path)
    assert ref.verdict == Verdict.PASS, ref     # its swizzle message also says "inner box bytes": allowed


# ------------------------------------------------------------------ the proxy check.py files use
@pytest.fixture
def learner(tmp_path):
    ex = exercise.get("pipeline_timeline")
    sub = Submission(ex, CHEATS / "custom_errors.py", tmp_path / "figures", call_limit=3)
    yield sub.learner_module("raises_custom", "returns_plain")
    sub.close()


def test_a_learner_exception_comes_back_as_its_type_with_its_line(learner):
    with pytest.raises(ValueError) as ei:
        learner.raises_custom(3)
    e = ei.value
    assert type(e).__name__ == "BufferBusy" and str(e) == "buffer 3 is busy"
    assert e.learner_where == "custom_errors.py line 15"
    assert grade.learner_error(e, "raises_custom(3)") == \
        "raises_custom(3) raised BufferBusy: buffer 3 is busy (custom_errors.py line 15)"
    with pytest.raises(KeyError) as ei:
        learner.raises_key("tile")
    assert ei.value.args == ("tile",) and ei.value.learner_where == "custom_errors.py line 19"


def test_plain_values_come_back_and_others_are_opaque(learner):
    got = learner.returns_plain()
    assert got["list"] == [1, 2.5, "x"] and got["set"] == {1, 2} and got["tuple"] == ((1, 2),)
    assert got["big"] == 2 ** 80 and got["scalar"] == np.float32(1.5)
    np.testing.assert_array_equal(got["arr"], np.arange(4, dtype=np.int32))
    odd = learner.returns_object()
    assert isinstance(odd, sandbox.Opaque) and odd != odd and "Tile" in repr(odd)
    assert learner.LIMIT == 7
    assert learner.raises_custom.__name__ == "raises_custom"
    with pytest.raises(AttributeError):
        _ = learner.not_defined


def test_the_learner_process_cannot_read_the_course_files(learner):
    with pytest.raises(PermissionError) as ei:
        learner.reads(str(ROOT / "exercises" / "pipeline_timeline" / "solution.py"))
    assert "may not read" in str(ei.value)
    with pytest.raises(PermissionError):
        learner.reads(str(ROOT / "judge" / "hw" / "pipesim.py"))
    assert learner.reads("/proc/self/status").startswith("Name:")    # its own process: fine


def test_writing_into_the_answer_pipe_is_a_crash_not_an_answer(learner):
    with pytest.raises(sandbox.Ended) as ei:
        learner.scribble()
    assert ei.value.result.verdict == Verdict.CRASH
    assert "wrote into the pipe that carries its answers" in ei.value.result.message


def test_sys_exit_in_a_call_ends_the_check_as_a_crash(learner):
    with pytest.raises(sandbox.Ended) as ei:
        learner.exits()
    assert ei.value.result.verdict == Verdict.CRASH
    assert "sys.exit('bye')" in ei.value.result.message
    with pytest.raises(sandbox.Ended):        # the process is gone: every later call says so
        learner.returns_plain()


def test_a_missing_function_is_wrong_and_named(tmp_path):
    ex = exercise.get("pipeline_timeline")
    sub = Submission(ex, CHEATS / "custom_errors.py", tmp_path)
    with pytest.raises(Stop) as ei:
        sub.learner_module("schedule", "pipeline_time")
    assert ei.value.result.verdict == Verdict.WRONG
    assert "defines no function schedule and no pipeline_time" in ei.value.result.message
    sub.close()


# ------------------------------------------------------------------ figures: only your own file draws in workspace/
def test_grading_the_reference_or_a_fixture_never_writes_into_the_workspace():
    ex = exercise.get("pipeline_timeline")
    ws = config.workspace_dir()
    for f in (ex.solution_path, ex.fixture_path("wrong_copies_overlap.py")):
        r = _check(ex.id, f)
        assert r.figures and Path(r.figures[0]).exists()
        assert not Path(r.figures[0]).is_relative_to(ws), r.figures
    assert not (ws / ex.id / "figures").exists()


def test_the_learners_own_file_draws_into_its_workspace_folder():
    from judge.grading import workspace
    ex = exercise.get("pipeline_timeline")
    mine, _ = workspace.start(ex)
    mine.write_text(ex.solution_path.read_text())
    r = _check(ex.id, None)
    assert r.verdict == Verdict.PASS, r
    assert Path(r.figures[0]).parent == config.workspace_dir() / ex.id / "figures"


def test_a_file_that_loops_forever_while_imported_is_a_hang(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_TIMEOUT", "2")
    f = tmp_path / "timeline.py"
    f.write_text("while True:\n    print('@@progress still importing', flush=True)\n")
    t = time.monotonic()
    r = _check("pipeline_timeline", f)
    assert r.verdict == Verdict.HANG and "importing your timeline.py did not finish within 2 s" in r.message, r
    assert time.monotonic() - t < 12


def test_a_notebook_gets_a_clear_error_for_a_file_that_cannot_be_graded(tmp_path):
    from judge.grading import workspace
    big = tmp_path / "timeline.py"
    big.write_text("x = 1\n" * 400_000)                       # 2.4 MB: not a learner's source
    with pytest.raises(workspace.BadFile, match="at most"):
        _check("pipeline_timeline", big)
    with pytest.raises(workspace.BadFile, match="grades a Python file"):
        _check("pipeline_timeline", exercise.get("cp_async_sgemm").solution_path)
