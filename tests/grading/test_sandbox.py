"""The learner's code runs apart from the grader (judge.grading.learner_process): it cannot reach the answers or the verdict.

Each cheat in tests/grading/probes/cheats/ is graded as a learner would have it graded (grade.check, the
same path as `course check`), and must get the verdict its code deserves, not PASS. The escapes of
issue 18 (dir_fd, __main__.__file__, frame locals, /proc/<ppid>, a forged result then the worker
killed) and others (code planted for the grader's next run, native code past the audit hook
unmounting or bind-mounting around what hides the course) are tried behind the kernel's
namespaces, and each probe is first shown to work where nothing stops it. The best-effort fallback (JUDGE_ISOLATION=best-effort)
is forced and must say so in the verdict. The boundary's cost per check is measured.
The proxy that check.py files use (sub.learner_module) is tested on its own: exceptions, values,
output, limits.
Run: .venv/bin/python -m pytest tests/grading/test_sandbox.py -q -s     (-s prints the measured cost)
"""
import os
import secrets
import statistics
import subprocess
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from judge import config
from judge.grading import exercise, grade, learner_process as sandbox
from judge.grading.result import Stop, Verdict
from judge.grading.submission import Submission

ROOT = Path(__file__).resolve().parents[2]
CHEATS = Path(__file__).parent / "probes" / "cheats"


def _check(ex_id, file, **kw):
    return grade.check(ex_id, file, quiet=True, **kw)


def _isolation_here() -> str:
    """What the learner process runs behind on this machine (a trivial file, the default mode)."""
    f = Path(__file__).parent / "probes" / "cheats" / "exits_in_call.py"
    p = sandbox.LearnerProcess(f, call_limit=30)
    try:
        p.module()
        return p.isolation
    finally:
        p.close()


def _require_boundary() -> str:
    text = _isolation_here()
    if text.startswith("best effort"):
        pytest.skip(f"needs Linux with unprivileged user namespaces: {text}")
    return text


@pytest.fixture(scope="module")
def boundary():
    """Skip (with the reason) where the kernel offers no namespaces: those tests are about them."""
    return _require_boundary()


def _filled(name: str, tmp_path: Path, learner_name: str = "timeline.py") -> Path:
    src = (CHEATS / name).read_text().replace("@ROOT@", str(ROOT))
    f = tmp_path / learner_name
    f.write_text(src)
    return f


# ------------------------------------------------------------------ cheats, as `course check` sees them
def test_a_file_that_forges_the_result_is_still_graded_on_its_answers(tmp_path):
    r = _check("pipeline_timeline", CHEATS / "write_result.py")
    assert r.verdict == Verdict.WRONG, r
    assert "returned 0 tiles" in r.message, r.message


@pytest.mark.parametrize("mode", ["os", "best-effort"])
@pytest.mark.parametrize("way", ["judge", "path", "syspath"])
def test_a_file_cannot_import_the_reference_solution(tmp_path, way, mode, monkeypatch):
    if mode == "best-effort":
        monkeypatch.setenv("JUDGE_ISOLATION", "best-effort")
    src = (CHEATS / "import_solution.py").read_text().replace("@ROOT@", str(ROOT))
    src = src.replace('("judge", "path", "syspath")', f'("{way}",)')
    f = tmp_path / "timeline.py"
    f.write_text(src)
    r = _check("pipeline_timeline", f)
    assert r.verdict == Verdict.WRONG, r
    assert "importing your timeline.py raised ImportError" in r.message, r.message
    # the hook refuses it ("may not"), or behind the boundary the file is simply not there
    assert any(w in r.message for w in ("may not", "No module named", "No such file")), r.message


# ------------------------------------------------------------------ issue 18's escapes, behind the boundary
def test_the_reach_probe_reaches_the_solution_where_nothing_stops_it(tmp_path):
    """The probe is real: run as a plain script it finds the course and the solution."""
    out = subprocess.run([sys.executable, str(CHEATS / "reach_solution.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout
    assert "reached exercises/pipeline_timeline/solution.py" in out, out
    assert "reached judge/hw/pipesim.py" in out, out


@pytest.mark.parametrize("given_root", [True, False])
def test_no_route_reaches_the_course_from_the_learner_process(boundary, tmp_path, given_root):
    """dir_fd, __main__.__file__, frame locals, argv, environment, cwd, /proc/<ppid>, a known ROOT."""
    ex = exercise.get("pipeline_timeline")
    f = _filled("reach_solution.py", tmp_path) if given_root else CHEATS / "reach_solution.py"
    sub = Submission(ex, f, tmp_path / "figures", call_limit=30)
    try:
        mod = sub.learner_module("schedule")
        assert mod.REACHED == {}, mod.REACHED
        assert mod.schedule(4, 10, 10, 1) == []                 # so it answers wrong
        cands = mod._candidates()
    finally:
        sub.close()
    # nothing the judge hands it names the course; its Python environment (sys.prefix: the venv,
    # which may lie in the course) is the one thing it may see, read-only
    # (with ROOT given, its own globals hold it: only the unaided run can show a leak)
    venv = next(p for p, why in cands if why == "sys.prefix")
    leaks = [(p, why) for p, why in cands if str(ROOT) in p and not p.startswith(venv)]
    assert given_root or not leaks, leaks
    assert not any("judge/grading" in p or "check_child" in p for p, _ in cands), cands


def test_reaching_for_the_solution_is_graded_wrong(boundary, tmp_path):
    r = _check("pipeline_timeline", _filled("reach_solution.py", tmp_path))
    assert r.verdict == Verdict.WRONG, r
    assert not any("best effort" in d for d in r.details), r.details


def test_the_forge_probe_writes_into_a_parents_pipe_where_nothing_stops_it(tmp_path):
    """The probe is real: a child of a process holding a pipe finds it in /proc and writes a PASS.

    The parent is a small process of its own that holds only that pipe and /dev/null (never this
    test process, whose descriptors the probe would scribble on).
    """
    r, w = os.pipe()
    try:
        child = f"import runpy; runpy.run_path({str(CHEATS / 'forge_via_proc.py')!r})"
        parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
        subprocess.run([sys.executable, "-c", parent], pass_fds=(w,), stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        os.close(w)
        w = None
        got = os.read(r, 1 << 16).decode()
        assert got.startswith("R ") and '"verdict": "PASS"' in got, got[:200]
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


@pytest.mark.parametrize("mode", ["os", "best-effort"])
def test_a_pass_forged_through_proc_is_never_taken(tmp_path, mode, monkeypatch):
    if mode == "best-effort":
        monkeypatch.setenv("JUDGE_ISOLATION", "best-effort")
    else:
        _require_boundary()
    r = _check("pipeline_timeline", _filled("forge_via_proc.py", tmp_path))
    assert r.verdict != Verdict.PASS, r
    if mode == "os":               # the channel is out of its reach: its answers are simply graded
        assert r.verdict == Verdict.WRONG, r
    else:                          # a forged line on the channel voids the run at worst
        assert r.verdict in (Verdict.WRONG, Verdict.CRASH), r


@pytest.mark.parametrize("mode", ["os", "best-effort"])
def test_killing_the_worker_after_forging_is_never_a_pass(tmp_path, mode, monkeypatch):
    if mode == "best-effort":
        monkeypatch.setenv("JUDGE_ISOLATION", "best-effort")
    else:
        _require_boundary()
    src = (CHEATS / "forge_via_proc.py").read_text() + "\n" + (CHEATS / "kill_worker.py").read_text()
    f = tmp_path / "timeline.py"
    f.write_text(src)
    r = _check("pipeline_timeline", f)
    if mode == "os":     # no pid of the grader exists in its namespace: its answers are graded
        assert r.verdict == Verdict.WRONG and "returned 0 tiles" in r.message, r
    else:                # the worker dies: whatever it forged first does not count
        assert r.verdict == Verdict.CRASH, r


def test_nothing_can_be_planted_for_the_graders_next_run(boundary, tmp_path):
    ex = exercise.get("pipeline_timeline")
    marker = f"judge_probe_{secrets.token_hex(6)}.txt"
    sub = Submission(ex, _filled("plant_for_grader.py", tmp_path), tmp_path / "figures", call_limit=30)
    try:
        mod = sub.learner_module("plant")
        places = mod.places()
        wrote = mod.plant(marker)
    finally:
        sub.close()
    leaked = [str(Path(d) / marker) for d in places if (Path(d) / marker).exists()]
    for f in leaked:                                  # never leave a marker behind, even on failure
        Path(f).unlink()
    assert len(places) >= 5, places
    # what it wrote stayed in its own private /tmp (a course cloned under /tmp lies, hidden, below it):
    # nothing reached the grader's files
    assert leaked == [] and all(w.startswith("/tmp/") for w in wrote), (wrote, leaked)


def test_native_code_past_the_hook_still_cannot_uncover_the_course(boundary, tmp_path):
    """The audit hook is not the boundary: syscall(2) through a raw function pointer gets past it,
    and umount / a non-recursive bind of the course's parent (from its own namespace too) must fail."""
    ex = exercise.get("pipeline_timeline")
    sub = Submission(ex, _filled("native_mount.py", tmp_path), tmp_path / "figures", call_limit=30)
    try:
        mod = sub.learner_module("attack")
        assert mod.hook_bypassed() is True             # the probe really runs native code
        steps = mod.attack()
    finally:
        sub.close()
    assert len(steps) == 7, steps
    assert all(seen == [] for _, _, seen in steps), steps
    refused = {step: rc for step, rc, _ in steps if step.startswith(("umount", "bind the parent"))}
    assert len(refused) == 4 and all(rc < 0 for rc in refused.values()), steps


def test_the_learner_cannot_see_or_signal_the_grader(boundary, tmp_path):
    f = tmp_path / "timeline.py"
    f.write_text("import os\n"
                 "def pids():\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
                 "def parent():\n    return os.getppid()\n"
                 "def tmp_is_private():\n    return os.listdir('/tmp')\n")
    ex = exercise.get("pipeline_timeline")
    sub = Submission(ex, f, tmp_path / "figures", call_limit=30)
    try:
        mod = sub.learner_module("pids")
        # its own namespace: itself only (or, where a container refuses a fresh /proc, no /proc at all)
        assert mod.pids() == ([] if "no /proc" in boundary else [1]), mod.pids()
        assert mod.parent() == 0                        # its parent is outside: no pid to name
        # its own /tmp: its folder, and where a course cloned under /tmp lies, the empty mount that hides it
        hidden = [config.ROOT.relative_to("/tmp").parts[0]] if Path("/tmp") in config.ROOT.parents else []
        assert sorted(mod.tmp_is_private()) == sorted(["learner", *hidden])
    finally:
        sub.close()


def test_best_effort_isolation_says_so_in_the_verdict(monkeypatch):
    monkeypatch.setenv("JUDGE_ISOLATION", "best-effort")
    ex = exercise.get("pipeline_timeline")
    r = _check(ex.id, ex.solution_path)
    assert r.verdict == Verdict.PASS, r
    assert any(d.startswith("isolation: best effort on this system (the boundary was turned off: "
                            "JUDGE_ISOLATION=best-effort): your code ran") for d in r.details), r.details


@pytest.mark.parametrize("cheat", ["reach_solution.py", "forge_via_proc.py"])
def test_the_command_line_grades_the_escapes_wrong(boundary, tmp_path, cheat):
    """The learner's own command: python practice/judge.py check ID FILE (exit 1, WRONG)."""
    f = _filled(cheat, tmp_path)
    out = subprocess.run([sys.executable, str(ROOT / "practice" / "judge.py"), "check", "pipeline_timeline", str(f)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "[pipeline_timeline] WRONG" in out.stdout and "schedule(K=4, L=10, C=10, S=1): returned 0 tiles" in out.stdout, out.stdout
    assert "best effort" not in out.stdout


def test_the_boundary_costs_under_0_3_s_per_check(boundary, tmp_path, monkeypatch):
    """One learner process per check: its start, import and one call, with and without the boundary.

    Median of 7 interleaved runs each; the bound is the issue's 0.3 s (measured here about 0.08 s
    on two busy cores).
    """
    f = tmp_path / "triv.py"
    f.write_text("def f(x):\n    return x + 1\n")

    def once():
        t = time.perf_counter()
        p = sandbox.LearnerProcess(f, call_limit=30)
        try:
            assert p.module().f(41) == 42
        finally:
            p.close()
        return time.perf_counter() - t, p.isolation

    runs = {"os": [], "best-effort": []}
    for _ in range(7):
        for mode in runs:
            monkeypatch.setenv("JUDGE_ISOLATION", mode)
            dt, iso = once()
            assert iso.startswith("best effort") == (mode == "best-effort"), iso
            runs[mode].append(dt)
    med = {m: statistics.median(v) for m, v in runs.items()}
    cost = med["os"] - med["best-effort"]
    print(f"\nisolation cost per check: {cost * 1e3:.0f} ms (median of 7: {med['os'] * 1e3:.0f} ms behind "
          f"namespaces, {med['best-effort'] * 1e3:.0f} ms best effort)")
    assert cost < 0.3, (cost, runs)


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
    # the place first: the learner's file, a line of its loop and its function (lines 7-11 of the probe)
    assert re.match(r"progress_spam\.py line (7|8|9|10|11), in schedule \(`", r.message), r.message
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


@pytest.mark.parametrize("mode", ["os", "best-effort"])
def test_the_learner_process_cannot_read_the_course_files(tmp_path, mode, monkeypatch):
    own_proc = mode == "best-effort" or "no /proc" not in _require_boundary()
    monkeypatch.setenv("JUDGE_ISOLATION", mode)
    ex = exercise.get("pipeline_timeline")
    sub = Submission(ex, CHEATS / "custom_errors.py", tmp_path / "figures", call_limit=30)
    try:
        learner = sub.learner_module("reads")
        hidden = FileNotFoundError if mode == "os" else PermissionError   # not there / refused
        for f in (ROOT / "exercises" / "pipeline_timeline" / "solution.py", ROOT / "judge" / "hw" / "pipesim.py"):
            with pytest.raises(hidden) as ei:
                learner.reads(str(f))
            assert mode == "os" or "may not read" in str(ei.value)
        if own_proc:
            assert learner.reads("/proc/self/status").startswith("Name:")    # its own process: fine
    finally:
        sub.close()


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
def test_grading_the_reference_or_a_fixture_never_writes_into_the_workspace(monkeypatch):
    monkeypatch.setenv("JUDGE_FIGURES", "1")                 # the suite's default is none (tests/conftest.py)
    ex = exercise.get("pipeline_timeline")
    ws = config.workspace_dir()
    for f in (ex.solution_path, ex.fixture_path("wrong_copies_overlap.py")):
        r = _check(ex.id, f)
        assert r.figures and Path(r.figures[0]).exists()
        assert not Path(r.figures[0]).is_relative_to(ws), r.figures
    assert not (ws / ex.id / "figures").exists()


def test_the_learners_own_file_draws_into_its_workspace_folder(monkeypatch):
    monkeypatch.setenv("JUDGE_FIGURES", "1")
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
    assert re.match(r"timeline\.py line [12] \(`", r.message), r.message       # no function: the file's own code
    assert time.monotonic() - t < 12


def test_a_python_hang_names_the_learner_s_file_line_and_function_first(monkeypatch):
    # the fixture spins in `while k >= S and ...: pass`; the HANG once named no file or line
    monkeypatch.setenv("JUDGE_TIMEOUT", "1")
    ex = exercise.get("pipeline_timeline")
    path = ex.fixture_path("hang_spin_for_free_buffer.py")
    r = _check(ex.id, path)
    assert r.verdict == Verdict.HANG, r
    line = next(i for i, text in enumerate(Path(path).read_text().splitlines(), 1) if "THE MISTAKE" in text)
    assert re.match(rf"hang_spin_for_free_buffer\.py line ({line}|{line + 1}), in schedule \(`", r.message), r.message


def test_a_notebook_gets_a_clear_error_for_a_file_that_cannot_be_graded(tmp_path):
    from judge.grading import workspace
    big = tmp_path / "timeline.py"
    big.write_text("x = 1\n" * 400_000)                       # 2.4 MB: not a learner's source
    with pytest.raises(workspace.BadFile, match="at most"):
        _check("pipeline_timeline", big)
    with pytest.raises(workspace.BadFile, match="grades a Python file"):
        _check("pipeline_timeline", exercise.get("cp_async_sgemm").solution_path)
