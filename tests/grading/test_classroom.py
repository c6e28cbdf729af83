"""grade-class and the gradebook: a class of 10 learners graded on Dask, killed and restarted (release: test_release.py).

The class is judge.grading.class_sample's: built from the exercises' solutions and fixtures (every CPU
exercise, a few GPU ones that the CPU model grades here, one submission that hangs), each file made
unique by a comment naming its learner, so that every file is a grading of its own. Its verdicts are
PASS, WRONG and HANG, from Python checks, the CPU model and the sm_100a simulation; every fixture's own
verdict is tests/grading/test_exercises.py's. Run:
    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/grading/test_classroom.py -q
The browser test needs Debian's chromium (`apt-get install -y chromium`) and the playwright package;
without them it skips and says so (CI installs chromium: .ci/run).
"""
import collections
import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge import gpu
from judge.grading import class_sample, classroom, exercise, grade, gradebook
from judge.grading.result import Result, Verdict
from tests.browser import chromium

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, str(ROOT / "practice" / "judge.py")]
LEARNERS = 10     # a class, not every fixture again: tests/grading/test_exercises.py grades each one on its own
GPU_FILES = [("tma_tiles", class_sample.SOLUTION), ("tma_tiles", "wrong_coord_order.cu"),
             ("tcgen05_gemm", "wrong_alloc_96.cu"), ("dsmem_histogram", "wrong_no_sync_before_dsmem.cu")]
HANG = ("pipeline_timeline", "hang_spin_for_free_buffer.py")


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")


def _results(out: Path) -> int:
    return sum(1 for _ in (out / classroom.RESULTS).rglob("*.json")) if (out / classroom.RESULTS).exists() else 0


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once with the run killed part way (its whole process group, SIGKILL) and
    started again; then a third run over the finished class. Figures for the README are printed."""
    base = tmp_path_factory.mktemp("classroom")
    cls_dir, out = base / "class", base / "report"
    # 10 learners x 2 Python exercises, round-robin over every CPU exercise's solution, then its fixtures
    # (every CPU exercise's solution, and a wrong fixture); the first learners also hand in the hang and
    # the GPU files (graded by the CPU model without a GPU)
    cls = class_sample.make_class(cls_dir, LEARNERS, cpu=2, gpu=0, hangs=False,
                                  extra={0: [HANG], **{i + 1: [g] for i, g in enumerate(GPU_FILES)}})
    env = _env()
    env["JUDGE_WORKSPACE"] = str(base / "workspace")
    t0 = time.monotonic()
    first = subprocess.Popen(CLI + ["grade-class", str(cls_dir), "--out", str(out), "--quiet"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while _results(out) < len(cls) // 3 and first.poll() is None and time.monotonic() - t0 < 240:
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert first.returncode == -signal.SIGKILL, "the first run ended before it could be killed half way"
    stored_at_kill = _results(out)
    logged_at_kill = len(classroom.gradings_logged(out))
    assert 0 < stored_at_kill < len(cls), stored_at_kill
    t1 = time.monotonic()
    second = subprocess.run(CLI + ["grade-class", str(cls_dir), "--out", str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    t_second = time.monotonic() - t1
    assert second.returncode == 0, second.stdout + second.stderr
    logged_after_second = len(classroom.gradings_logged(out))
    third = subprocess.run(CLI + ["grade-class", str(cls_dir), "--out", str(out)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert third.returncode == 0, third.stdout + third.stderr
    rows = list(csv.DictReader((out / "grades.csv").open()))
    print(f"\nclass of {LEARNERS} learners, {len(cls)} files: killed after {stored_at_kill} results; "
          f"the restart graded {len(cls) - stored_at_kill} in {t_second:.1f} s "
          f"({(len(cls) - stored_at_kill) / t_second:.2f} files/s, cluster start included) on "
          f"{os.cpu_count()} cores; whole: {time.monotonic() - t0:.1f} s")
    return {"cls": cls, "cls_dir": cls_dir, "out": out, "rows": rows, "stored_at_kill": stored_at_kill,
            "logged_at_kill": logged_at_kill, "logged_after_second": logged_after_second,
            "second": second, "third": third}


def test_every_learner_and_file_gets_the_verdict_its_fixture_declares(graded):
    rows = {(r["learner"], r["exercise"]): r for r in graded["rows"]}
    assert set(rows) == set(graded["cls"]), set(graded["cls"]) ^ set(rows)
    assert len({r[0] for r in rows}) == LEARNERS
    wrong = [(k, rows[k]["verdict"], want) for k, (_, want, _) in graded["cls"].items() if rows[k]["verdict"] != want]
    assert not wrong, wrong[:5]
    assert class_sample.compare(graded["cls_dir"], graded["out"]) == []
    verdicts = collections.Counter(r["verdict"] for r in rows.values())
    assert verdicts["PASS"] and verdicts["WRONG"] and verdicts["HANG"] == 1, verdicts
    for r in rows.values():
        assert r["judge_version"] == classroom.judge_version() and r["where"] and r["source"], r
        assert float(r["seconds"]) > 0, r
    gpu_rows = [rows[k] for k in rows if k[1] in {g[0] for g in GPU_FILES}]
    assert len(gpu_rows) == len(GPU_FILES)
    if not gpu.available():
        assert {r["source"] for r in gpu_rows} == {"CPU model only", "simulated for sm_100a"}, gpu_rows


def _headline(message: str) -> str:
    """What a verdict's message names before its drawn case: the CPU model's rule ("[dsmem-unordered] thread 2
    of block rank 0 accesses shared [0x104] ..." gives "[dsmem-unordered]": the thread and the address
    depend on the case drawn), the output ("y, rows=89 cols=84 seed=...: ..." gives "y") or, for a message
    without a case, its text up to the first colon."""
    rule = re.match(r"\[[\w.-]+\]", message)
    if rule:
        return rule.group(0)
    head = message.split(":")[0]
    return head.split(",")[0] if "seed=" in head else head


def test_a_sample_of_verdicts_equals_a_single_check_of_the_same_file(graded):
    rows = {(r["learner"], r["exercise"]): r for r in graded["rows"]}
    rng = random.Random()                       # a fresh sample every run
    keys = [k for k in sorted(rows) if rows[k]["verdict"] != "HANG"]
    sample = rng.sample(keys, 4) + [k for k in keys if k[1] == "tma_tiles"][:1]
    for k in sample:
        path = graded["cls"][k][0]
        r = grade.check(k[1], path, quiet=True)
        assert (r.verdict.value, r.tier or "") == (rows[k]["verdict"], rows[k]["tier"]), (k, str(r))
        rec = json.loads(classroom.result_path(graded["out"], rows[k]["key"]).read_text())
        # Each check draws its own cases (shape and seed), so the figures in the two messages differ by
        # design; what they name must not: the same output, or the same headline where no case is named.
        assert _headline(rec["result"]["message"]) == _headline(r.message), (k, rec["result"]["message"], r.message)


def test_killed_and_restarted_nothing_is_graded_twice(graded):
    logged = classroom.gradings_logged(graded["out"])
    twice = [k for k, n in collections.Counter(logged).items() if n > 1]
    assert not twice, f"graded more than once: {twice}"
    keys = {r["key"] for r in graded["rows"]}
    assert len(keys) == len(graded["cls"])             # every file is unique by construction
    # each result is renamed into place before its log line is written: a kill between the two
    # leaves a result that is never logged (and never graded again), at most one per worker
    assert len(keys - set(logged)) <= 2 and set(logged) <= keys
    restart_graded = graded["logged_after_second"] - graded["logged_at_kill"]
    assert restart_graded == len(keys) - graded["stored_at_kill"], (restart_graded, graded["stored_at_kill"])
    assert f"{graded['stored_at_kill']} already graded" in graded["second"].stdout, graded["second"].stdout
    assert "0 graded" in graded["third"].stdout and f"{len(keys)} already graded" in graded["third"].stdout
    assert len(classroom.gradings_logged(graded["out"])) == graded["logged_after_second"]
    assert "graded" in graded["second"].stderr and "/" in graded["second"].stderr   # the progress bar
    leftovers = list((graded["out"] / classroom.RESULTS).rglob("*.tmp"))
    assert not leftovers, leftovers


def test_the_hang_is_that_files_verdict_not_the_runs_end(graded):
    hang = [r for r in graded["rows"] if r["verdict"] == "HANG"]
    assert [(r["learner"], r["exercise"]) for r in hang] == [("l000", HANG[0])]
    rec = json.loads(classroom.result_path(graded["out"], hang[0]["key"]).read_text())
    assert "did not finish within" in rec["result"]["message"] or "no progress" in rec["result"]["message"], rec
    assert rec["result"]["details"], "a HANG says what such a loop looks like"


def test_the_gradebook_in_a_real_browser_shows_everyone_and_opens_a_cell(graded):
    exe, sync_api = chromium()
    rows = graded["rows"]
    page_url = (graded["out"] / "index.html").resolve().as_uri()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            requests = []
            page.on("request", lambda req: requests.append(req.url))
            page.goto(page_url)
            shown_learners = page.locator("th.learner").all_inner_texts()
            assert sorted(shown_learners) == sorted({r["learner"] for r in rows})
            shown_ex = page.locator("th.ex").all_inner_texts()
            assert sorted(shown_ex) == sorted({r["exercise"] for r in rows})
            assert page.locator("td.cell").count() == len(rows)
            assert page.locator("#message").is_hidden()
            pick = random.Random().sample([r for r in rows if r["verdict"] != "PASS"], 2) + [rows[0]]
            for r in pick:
                cell = page.locator(f"td.cell[data-learner='{r['learner']}'][data-exercise='{r['exercise']}']")
                assert cell.get_attribute("data-verdict") == r["verdict"]
                cell.click()
                assert page.locator("#message").is_visible()
                text = page.locator("#message-text").inner_text()
                rec = json.loads(classroom.result_path(graded["out"], r["key"]).read_text())
                assert f"[{r['exercise']}] {r['verdict']}" in text and rec["result"]["message"][:60] in text, text
                assert page.locator("#message-title").inner_text() == f"{r['learner']} / {r['exercise']}"
                page.locator("#close").click()
                assert page.locator("#message").is_hidden()
            summary = page.locator(f"td.summary[data-exercise='{HANG[0]}']").inner_text()
            assert "HANG 1" in summary, summary
            assert requests == [page_url], f"the page fetched more than itself: {requests}"
        finally:
            browser.close()


# ------------------------------------------------------------------ pieces, without a cluster
def test_the_judge_version_changes_with_a_check_and_not_with_a_fixture(tmp_path):
    for rel in ("judge/a.py", "exercises/x/check.py", "exercises/x/exercise.toml", "exercises/x/fixtures/w.py",
                "exercises/x/README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    v0 = classroom.judge_version.__wrapped__(str(tmp_path))
    (tmp_path / "exercises/x/fixtures/w.py").write_text("# changed\n")
    (tmp_path / "exercises/x/README.md").write_text("# changed\n")
    assert classroom.judge_version.__wrapped__(str(tmp_path)) == v0
    (tmp_path / "exercises/x/check.py").write_text("# changed\n")
    v1 = classroom.judge_version.__wrapped__(str(tmp_path))
    (tmp_path / "judge/a.py").write_text("# changed\n")
    v2 = classroom.judge_version.__wrapped__(str(tmp_path))
    assert len({v0, v1, v2}) == 3 and all(v.startswith("0+") for v in (v0, v1, v2))
    assert classroom.judge_version().startswith("0.1.0+")


def test_scan_reads_flat_and_workspace_layouts_and_reports_what_it_cannot_grade(tmp_path):
    (tmp_path / "ada" / "tmem_plan").mkdir(parents=True)
    (tmp_path / "ada" / "swizzle.py").write_text("x = 1\n")
    (tmp_path / "ada" / "tmem_plan" / "plan.py").write_text("x = 2\n")
    (tmp_path / "ada" / "plan.py").write_text("x = 3\n")
    (tmp_path / "ada" / "notes.txt").write_text("hi\n")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "swizzle.py").write_text("x = 1\n")
    subs, ignored = classroom.scan(tmp_path, "v1")
    got = {(s.learner, s.exercise) for s in subs}
    assert got == {("ada", "swizzle_address"), ("ada", "tmem_plan"), ("bob", "swizzle_address")}
    assert any("plan.py is the file of multicast_plan and tmem_plan" in i for i in ignored), ignored
    assert any("notes.txt" in i for i in ignored)
    same = [s.key for s in subs if s.exercise == "swizzle_address"]
    assert same[0] == same[1], "the same bytes for the same exercise and judge are one grading"
    other, _ = classroom.scan(tmp_path, "v2")
    assert not {s.key for s in subs} & {s.key for s in other}, "another judge version grades again"


def test_results_are_written_whole_or_not_at_all(tmp_path):
    p = tmp_path / "r" / "k.json"
    classroom.write_atomic(p, '{"a": 1}')
    with pytest.raises(TypeError):
        classroom.write_atomic(p, None)                       # fails half way: the old file stays
    assert json.loads(p.read_text()) == {"a": 1}
    assert [q.name for q in p.parent.iterdir()] == ["k.json"]


def test_the_source_of_a_verdict_is_in_its_headline():
    r = Result(Verdict.PASS, "correct", tier="gold", source="H200 timed")
    assert r.headline() == "PASS (gold) [H200 timed]: correct"
    assert Result.from_json(r.to_json()).source == "H200 timed"
    by_id = {e.id: e for e in exercise.all_exercises()}
    assert classroom.verdict_source(by_id["swizzle_address"], r) == "Python check (any machine)"
    if not gpu.available():
        assert classroom.verdict_source(by_id["tma_tiles"], Result(Verdict.PASS)) == "CPU model only"
        assert classroom.verdict_source(by_id["tcgen05_gemm"], Result(Verdict.PASS)) == "simulated for sm_100a"


def test_the_gradebook_escapes_what_learners_wrote(tmp_path):
    f = classroom.ClassFile("<b>eve</b>", "swizzle_address", tmp_path / "swizzle.py", "k" * 32, False)
    r = Result(Verdict.WRONG, "</script><script>alert(1)</script>", exercise="swizzle_address")
    rec = classroom.make_record(f.key, f.exercise, "v", r, 1.0, "here")
    html = gradebook.page(gradebook.rows([f], {f.key: rec}), "v")
    assert "<b>eve</b>" not in html and "&lt;b&gt;eve&lt;/b&gt;" in html
    assert "</script><script>alert" not in html


def test_a_local_cluster_gives_each_gpu_a_worker_of_its_own():
    """Without a GPU here, ask for one: the cluster must start a worker with the resource GPU=1 that
    sees only device 0, beside the CPU worker (what runs on the H200 with the real count)."""
    from distributed import Client
    cluster, n = classroom.local_cluster(workers=1, gpus=1)
    try:
        with Client(cluster) as client:
            client.wait_for_workers(n, timeout=60)
            info = client.scheduler_info()["workers"]
            gpu_workers = [a for a, w in info.items() if (w.get("resources") or {}).get("GPU") == 1]
            assert n == 2 and len(info) == 2 and len(gpu_workers) == 1, info
            seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"), workers=gpu_workers)
            assert list(seen.values()) == ["0"]
            fut = client.submit(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"), resources={"GPU": 1}, pure=False)
            assert fut.result(timeout=60) == "0"
    finally:
        cluster.close()


def test_a_file_that_kills_its_worker_is_that_files_crash_not_the_runs_end(tmp_path, monkeypatch):
    """The check's own isolation keeps a learner's code away from the worker; should a grading take its
    Dask worker down all the same (here: a stand-in for grade_one that exits the worker process on one
    file), the file gets CRASH once it has taken down each worker it was tried on, and every other file
    its verdict.
    A grading that fails by a fault of the set-up (the stand-in raises) stores nothing: the next run
    grades that file, and only it."""
    real = classroom.grade_one

    def grade_or_die(ex_id, file_name, data, key, version, out):
        if b"TAKE THE WORKER DOWN" in data:
            os._exit(3)
        if b"NOT THIS TIME" in data:
            raise RuntimeError("this worker runs another judge")
        return real(ex_id, file_name, data, key, version, out)

    monkeypatch.setattr(classroom, "grade_one", grade_or_die)
    monkeypatch.setattr(classroom, "ALLOWED_FAILURES", 0)      # no second try: one worker lost, not three
    sol = (ROOT / "exercises" / "swizzle_address" / "solution.py").read_text()
    for who, extra in (("ada", ""), ("bob", "\n# TAKE THE WORKER DOWN\n"), ("cy", "\n# NOT THIS TIME\n")):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "swizzle.py").write_text(sol + extra)
    said = []
    s = classroom.grade_class(tmp_path / "class", tmp_path / "report", workers=2, progress=False, log=said.append)
    rows = {r["learner"]: r for r in csv.DictReader((tmp_path / "report" / "grades.csv").open())}
    assert s["graded"] == 2 and s["failed_workers"] == 1 and s["errors"] == 1, s
    assert rows["ada"]["verdict"] == "PASS", rows["ada"]
    assert rows["bob"]["verdict"] == "CRASH" and rows["bob"]["where"] == "lost worker", rows["bob"]
    rec = json.loads(classroom.result_path(tmp_path / "report", rows["bob"]["key"]).read_text())
    assert "killed the Dask worker" in rec["result"]["message"]
    assert rows["cy"]["verdict"] == "MISSING" and any("another judge" in x for x in said), (rows["cy"], said)
    monkeypatch.setattr(classroom, "grade_one", real)
    s = classroom.grade_class(tmp_path / "class", tmp_path / "report", workers=1, progress=False, log=said.append)
    assert (s["graded"], s["already"], s["errors"]) == (1, 2, 0), s
    rows = {r["learner"]: r for r in csv.DictReader((tmp_path / "report" / "grades.csv").open())}
    assert rows["cy"]["verdict"] == "PASS", rows["cy"]


def test_grade_class_uses_an_existing_cluster_given_by_its_address(tmp_path):
    """--scheduler ADDRESS: the workers of that cluster grade (here a LocalCluster started by the test,
    as an instructor's Slurm cluster would be), and no cluster of grade-class's own is started."""
    from distributed import LocalCluster
    sol = (ROOT / "exercises" / "swizzle_address" / "solution.py").read_text()
    for who in ("ada", "bob"):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "swizzle.py").write_text(sol + f"\n# {who}\n")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        r = subprocess.run(CLI + ["grade-class", str(tmp_path / "class"), "--out", str(tmp_path / "report"),
                                  "--scheduler", cluster.scheduler_address], cwd=ROOT, env=_env(),
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"on the cluster at {cluster.scheduler_address}" in r.stderr, r.stderr
    rows = list(csv.DictReader((tmp_path / "report" / "grades.csv").open()))
    assert [x["verdict"] for x in rows] == ["PASS", "PASS"], rows
    assert len({x["where"] for x in rows}) == 1, "one worker graded both"


def test_ctrl_c_during_grade_class_prints_one_line(tmp_path):
    # was: about 25 lines of Dask tracebacks (the workers heard Ctrl-C too) before the clean line
    pytest.importorskip("distributed")
    class_sample.make_class(tmp_path / "class", 1, cpu=0, gpu=0, hangs=False, extra={0: [HANG]})
    env = dict(_env(), JUDGE_WORKSPACE=str(tmp_path / "workspace"))
    p = subprocess.Popen(CLI + ["grade-class", str(tmp_path / "class"), "--out", str(tmp_path / "report"), "--quiet",
                                "--workers", "1"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        before = []
        for line in p.stderr:                    # the hang keeps it grading for its time limit
            before.append(line)
            if line.startswith("grading "):
                break
        time.sleep(1.0)
        os.killpg(p.pid, signal.SIGINT)          # Ctrl-C at a terminal: the whole foreground group
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    lines = [line for line in err.splitlines() if line.strip()]
    assert p.returncode == 130, (before, err)
    assert len(lines) == 1 and lines[0].startswith("interrupted: 0 file(s) graded by this run are kept in "), lines
