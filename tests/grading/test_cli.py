"""What a learner types: `course` (or python3 practice/judge.py) list / start / check / hint / solution / sass / progress.

Every command runs as a subprocess, as a learner runs it; bad input must give one clear line and
exit 2, never a traceback. Run: .venv/bin/python -m pytest tests/grading/test_cli.py -q
"""
import json
import os
import re
import signal
import time
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_gpu_exercise_without_a_gpu_says_what_was_checked_and_what_was_not():
    from judge import gpu
    if gpu.meets("sm_90"):
        pytest.skip("a Hopper GPU is here")
    r = judge("check", "cp_async_sgemm", str(ROOT / "exercises" / "cp_async_sgemm" / "solution.cu"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compiled for sm_90a" in r.stdout and "not checked here" in r.stdout, r.stdout
    assert "timing" in r.stdout.split("not checked here")[1].splitlines()[0]


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


def test_hints_come_one_at_a_time_then_say_there_are_no_more():
    from judge.grading import exercise
    n = len(exercise.get("pipeline_timeline").hints)
    r1 = judge("hint", "pipeline_timeline")
    r2 = judge("hint", "pipeline_timeline")
    assert r1.returncode == r2.returncode == 0
    assert "Hint 1 of" in r1.stdout and "Hint 2 of" in r2.stdout
    for _ in range(n - 2):
        last = judge("hint", "pipeline_timeline")
    assert f"Hint {n} of {n}" in last.stdout and "last hint" in last.stdout
    more = judge("hint", "pipeline_timeline")
    assert more.returncode == 0 and "No more hints" in more.stdout and "Hint" not in more.stdout.split(":")[0]
    assert f"Hint 2 of {n}" in judge("hint", "pipeline_timeline", "2").stdout     # any hint again, by number
    assert judge("hint", "pipeline_timeline", "99").returncode == 2


def test_reading_a_hint_does_not_start_an_exercise():
    judge("hint", "group_accounting")
    assert "group_accounting" not in judge("progress").stdout
    row = next(l for l in judge("list").stdout.splitlines() if l.startswith("group_accounting"))
    assert row.rstrip().endswith("-"), row


def test_solution_prints_the_reference_as_clean_code():
    r = judge("solution", "cp_async_sgemm")
    assert r.returncode == 0 and "__pipeline_wait_prior(STAGES - 2)" in r.stdout
    for ex in ("cp_async_sgemm", "pipeline_timeline"):
        out = judge("solution", ex).stdout
        assert "BEGIN SOLUTION" not in out and "END SOLUTION" not in out
        assert not re.search(r"^\s*(//>|#>)", out, re.M), out
    code = judge("solution", "pipeline_timeline").stdout.split("\n", 2)[2]
    compile(code, "solution.py", "exec")                 # what is printed is Python that parses


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


# ------------------------------------------------------------------ the commands work as README.md prints them
def _readme_section(title):
    text = (ROOT / "README.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_command_of_the_readme_exercises_section_works():
    block = _readme_section("Exercises").split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [l.split("#", 1)[0].strip() for l in block.splitlines() if l.strip() and not l.startswith("#")]
    assert commands, block
    for c in commands:
        argv = c.split()
        assert argv[0] in ("python3", "course", ".venv/bin/course"), c
        if argv[0] == "python3":
            cmd = [sys.executable] + argv[1:]
        else:
            cmd = [str(Path(sys.executable).parent / "course")] + argv[1:]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode in (0, 1), f"{c}: {r.stdout}{r.stderr}"
        assert "Traceback" not in r.stdout + r.stderr, c


def test_the_course_console_script_is_installed_and_works():
    course = Path(sys.executable).parent / "course"
    if not course.exists():
        pytest.skip("the course is not pip-installed into this interpreter's environment")
    r = subprocess.run([str(course), "list"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and "pipeline_timeline" in r.stdout, r.stderr


def test_practice_judge_runs_under_a_python_without_the_packages():
    venv = ROOT / ".venv" / "bin" / "python"
    if not venv.exists():
        pytest.skip("no .venv in this checkout")
    # -S: no site-packages, so no numpy or cupy: the script must run itself again with .venv's python
    r = subprocess.run([sys.executable, "-S", str(ROOT / "practice" / "judge.py"), "list"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "pipeline_timeline" in r.stdout, r.stderr
    env = dict(os.environ, COURSE_REEXEC="1")       # as if .venv lacked them too: a clear message
    r = subprocess.run([sys.executable, "-S", str(ROOT / "practice" / "judge.py"), "list"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "lacks what the course needs" in r.stderr and "pip install" in r.stderr


def test_jupyter_opens_at_the_course_root_with_the_first_chapter():
    line = next(l for l in _readme_section("Quick start").splitlines() if "jupyter lab" in l)
    assert "--notebook-dir=." in line and "--config=practice/jupyter_config.py" in line, line
    nb = line.split("jupyter lab", 1)[1].split()[-1]
    assert (ROOT / nb).is_file() and nb.endswith(".ipynb"), nb


# ------------------------------------------------------------------ bad input: one line, exit 2, no traceback
def _refused(r, *words):
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), r.stderr
    for w in words:
        assert w in err[0], err[0]


def test_files_that_cannot_be_graded_are_refused_with_what_to_do(tmp_path):
    (tmp_path / "adir.py").mkdir()
    _refused(judge("check", "pipeline_timeline", str(tmp_path / "adir.py")), "is a folder")
    garbage = tmp_path / "garbage.py"
    garbage.write_bytes(bytes(range(256)) * 8)
    _refused(judge("check", "pipeline_timeline", str(garbage)), "not a text file")
    latin = tmp_path / "latin.py"
    latin.write_bytes("def schedule():\n    return 'caf\xe9'\n".encode("latin-1"))
    _refused(judge("check", "pipeline_timeline", str(latin)), "not UTF-8", "line 2")
    _refused(judge("check", "pipeline_timeline", str(ROOT / "exercises" / "cp_async_sgemm" / "solution.cu")),
             "grades a Python file", "CUDA file")
    _refused(judge("check", "cp_async_sgemm", str(ROOT / "exercises" / "pipeline_timeline" / "solution.py")),
             "grades a CUDA file", "Python file")
    big = tmp_path / "timeline.py"
    big.write_text("# padding\n" * 3_500_000)            # 35 MB
    t = time.monotonic()
    _refused(judge("check", "pipeline_timeline", str(big)), "35.0 MB", "at most")
    assert time.monotonic() - t < 10                    # refused at once, not a HANG


def test_a_syntax_error_names_the_learners_line_not_importlib(tmp_path):
    f = tmp_path / "timeline.py"
    f.write_text("def schedule(K, L, C, S):\n    return [\n\ndef pipeline_time(K, L, C, S):\n    return 0\n")
    r = judge("check", "pipeline_timeline", str(f))
    assert r.returncode == 1 and "WRONG" in r.stdout
    assert "timeline.py line 2" in r.stdout and "importlib" not in r.stdout, r.stdout


def test_progress_of_the_wrong_shape_is_kept_aside_and_the_good_entries_kept():
    ws = Path(os.environ["JUDGE_WORKSPACE"])
    ws.mkdir(parents=True, exist_ok=True)
    good = {"status": "passed", "verdict": "PASS", "tier": None, "last": "PASS", "when": "2026-01-01 10:00"}
    (ws / "progress.json").write_text(json.dumps({"pipeline_timeline": good, "smem_budget": 5,
                                                  "group_accounting": {"status": ["x"]}}))
    r = judge("progress")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "could not be read" in r.stderr and "1 of" in r.stdout
    assert len(list(ws.glob("progress.json.corrupt-*"))) == 1
    for shape in ("[1, 2]", '"text"', "null"):
        (ws / "progress.json").write_text(shape)
        for cmd in ("list", "progress", "hint"):
            r = judge(*([cmd, "smem_budget"] if cmd == "hint" else [cmd]))
            assert r.returncode == 0 and "Traceback" not in r.stderr, (shape, cmd, r.stderr)


def test_two_corrupt_progress_files_in_one_second_keep_both_copies():
    ws = Path(os.environ["JUDGE_WORKSPACE"])
    ws.mkdir(parents=True, exist_ok=True)
    for text in ("{ first broken", "{ second broken"):
        (ws / "progress.json").write_text(text)
        assert judge("progress").returncode == 0
    kept = sorted(p.read_text() for p in ws.glob("progress.json.corrupt-*"))
    assert kept == ["{ first broken", "{ second broken"], kept


def test_output_piped_into_a_reader_that_leaves_is_not_a_traceback():
    # the reader closes the pipe before anything is written: every print is a BrokenPipeError
    code = ("import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
            "from judge import cli; "                  # run in the course root, which -c puts first on the path
            "sys.exit(cli.main(['solution', 'cp_async_sgemm']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.returncode == 0
    r = subprocess.run(f"{sys.executable} {ROOT / 'practice' / 'judge.py'} solution cp_async_sgemm | head -1",
                       shell=True, capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.startswith("# The reference solution") and "Traceback" not in r.stderr


def _descendants(pid):
    kids = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_ctrl_c_during_a_check_ends_every_process_and_prints_one_line():
    env = dict(os.environ, JUDGE_TIMEOUT="60")
    from judge.grading import exercise
    fixture = exercise.get("pipeline_timeline").fixture_path("hang_spin_for_free_buffer.py")
    p = subprocess.Popen(CLI + ["check", "pipeline_timeline", str(fixture)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    procs = []
    while time.monotonic() < deadline:          # the CLI, its worker and the learner's process
        procs = _descendants(p.pid)
        if len(procs) >= 2:
            break
        time.sleep(0.2)
    assert len(procs) >= 2, procs
    time.sleep(1.0)
    procs = _descendants(p.pid)
    p.send_signal(signal.SIGINT)                 # what Ctrl-C sends to the terminal's foreground process
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if not l.startswith(("checking ", "  .. "))]
    assert lines == ["interrupted: the check and every process it started were stopped"], err
    time.sleep(0.5)
    assert not [q for q in procs if _alive(q)], procs


# ------------------------------------------------------------------ sass
def test_sass_shows_the_learners_kernel_with_the_required_instructions_marked():
    r = judge("sass", "cp_async_sgemm", str(ROOT / "exercises" / "cp_async_sgemm" / "solution.cu"))
    assert r.returncode == 0, r.stdout + r.stderr
    marked = [l for l in r.stdout.splitlines() if l.startswith(">> ")]
    assert any("LDGSTS" in l and "[cp.async]" in l for l in marked), r.stdout[:2000]
    assert re.search(r"^cp\.async: \d+ instruction", r.stdout, re.M)
    starter = judge("sass", "cp_async_sgemm", str(ROOT / "exercises" / "cp_async_sgemm" / "starter.cu"))
    assert starter.returncode == 1 and "cp.async: NONE" in starter.stdout
    _refused(judge("sass", "pipeline_timeline"), "Python exercise")


def test_progress_says_where_each_verdict_came_from():
    import os
    from judge import gpu
    ws = Path(os.environ["JUDGE_WORKSPACE"])
    judge("start", "swizzle_address")
    (ws / "swizzle_address" / "swizzle.py").write_text(
        (ROOT / "exercises" / "swizzle_address" / "solution.py").read_text())
    r = judge("check", "swizzle_address")
    assert r.returncode == 0 and "PASS [Python check (any machine)]" in r.stdout, r.stdout
    judge("start", "tma_tiles")
    (ws / "tma_tiles" / "tma_tiles.cu").write_text((ROOT / "exercises" / "tma_tiles" / "solution.cu").read_text())
    r = judge("check", "tma_tiles")
    where = "CPU model only" if not gpu.meets("sm_90") else "timed"
    assert where in r.stdout, r.stdout
    p = judge("progress").stdout
    line = next(l for l in p.splitlines() if "tma_tiles" in l)
    assert where in line and "[Python check (any machine)]" in next(l for l in p.splitlines() if "swizzle" in l), p


def test_grade_class_and_release_refuse_bad_folders_in_one_line(tmp_path):
    r = judge("grade-class", str(tmp_path / "nowhere"), "--out", str(tmp_path / "report"))
    assert r.returncode == 2 and "no class folder" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = judge("grade-class", str(tmp_path))
    assert r.returncode == 2 and "--out" in r.stderr
    r = judge("release", str(tmp_path))
    assert r.returncode == 2 and "exists" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = judge("release", str(ROOT / "inside"))
    assert r.returncode == 2 and "inside the course" in r.stderr and not (ROOT / "inside").exists()


def test_grade_class_of_an_empty_class_grades_nothing_and_writes_an_empty_report(tmp_path):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    (tmp_path / "class" / "ada" / "notes.txt").write_text("nothing to grade\n")
    r = judge("grade-class", str(tmp_path / "class"), "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 files" in r.stdout and "not graded: ada/notes.txt" in r.stdout
    assert (tmp_path / "report" / "grades.csv").read_text().startswith("learner,exercise,verdict")
    assert (tmp_path / "report" / "index.html").exists()
