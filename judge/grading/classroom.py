"""Grading a whole class on Dask: every learner's file for every exercise, resumable, never twice.

    python practice/judge.py grade-class CLASS --out REPORT      (or: course grade-class CLASS --out REPORT)
    python practice/judge.py grade-class CLASS --out REPORT --scheduler tcp://host:8786   (an existing cluster)

    from judge.grading import classroom
    summary = classroom.grade_class("CLASS", "REPORT")

CLASS holds one folder per learner, each holding files named as the exercises' `learner_file`
(CLASS/ada/swizzle.py, CLASS/ada/ws_gemm.cu), or, as in a learner's workspace/, in folders named after
the exercises (CLASS/ada/tmem_plan/plan.py: the form a name two exercises share needs). Every file found is graded by judge.grading.grade.check,
the same function as `course check`, so each grading runs in the isolation of a single check (a child
process with a watchdog; the learner's code in a process of its own): a hang is that file's HANG, a
crash its CRASH. A file whose grading kills the Dask worker itself gets CRASH too, never the run's end.

Dask distributed does the scheduling. By default a LocalCluster on this machine: one single-threaded
worker per core for the CPU exercises and, per GPU, one more worker holding the Dask resource GPU=1
with CUDA_VISIBLE_DEVICES set to that GPU; a GPU exercise asks for GPU=1, so no two timed runs ever
share a GPU. Without a GPU (or with JUDGE_NO_GPU=1) GPU exercises are graded where any check would
grade them here: compiled, their SASS checked, their PTX run on the CPU model (judge.model).
With --scheduler ADDRESS the workers of that cluster grade; those announcing a GPU resource take the
GPU exercises (README.md shows a Slurm cluster started with dask-jobqueue).

Nothing lost, nothing twice. A result is keyed by the submission's content hash and the judge version
(judge_version(): the package version and a hash of every judge source and every exercise's
check.py, exercise.toml and solution, so a change to any of them grades again). Each result is written
atomically, by the worker as soon as it is graded (temp file, then rename) into REPORT/results/, and
again by this process if the worker could not reach that folder. A run killed half way and started
again grades only the keys that have no result yet; a run over a finished class grades nothing.
Identical files (two learners submitting the untouched starter) share one grading.

REPORT/ holds grades.csv, index.html (judge.grading.gradebook), results/ and logs/: gradings.log
(one line per grading, written by the worker that graded it) and run.log (this process and Dask).
"""
from __future__ import annotations

import hashlib
import json
import contextlib
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from judge.grading.gradebook import write_atomic  # noqa: F401 - results are written whole or not at all
from judge import config
from judge.grading import exercise as _ex
from judge.grading.result import Result, Verdict

RESULTS = "results"
LOGS = "logs"
GRADINGS_LOG = "gradings.log"
ALLOWED_FAILURES = 2     # a grading that kills its worker is tried on this many more before it is a CRASH


# ------------------------------------------------------------------ what a class is
@dataclass(frozen=True)
class ClassFile:
    learner: str
    exercise: str
    path: Path
    key: str             # sha256 of (exercise, judge version, file bytes): the name of its result
    needs_gpu: bool


def learner_files() -> dict[str, list[_ex.Exercise]]:
    """learner_file -> the exercises that take a file of that name (plan.py: two of them)."""
    out: dict[str, list[_ex.Exercise]] = {}
    for e in _ex.all_exercises():
        out.setdefault(e.learner_file, []).append(e)
    return out


def submission_key(ex_id: str, version: str, data: bytes) -> str:
    h = hashlib.sha256()
    for part in (ex_id.encode(), version.encode(), data):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:32]


def scan(class_dir, version: str | None = None) -> tuple[list[ClassFile], list[str]]:
    """Every submission in CLASS (learner folders in name order), and the files that were not graded.

    A learner's file sits either flat in the learner's folder (ada/swizzle.py) or, as in a workspace,
    in a folder named after its exercise (ada/swizzle_address/swizzle.py). A name that two exercises
    take (plan.py) must use the second form; the first is then reported and not graded.
    """
    class_dir = Path(class_dir)
    if not class_dir.is_dir():
        raise FileNotFoundError(f"no class folder {class_dir}: it must hold one folder per learner")
    version = version or judge_version()
    by_file = learner_files()
    by_id = {e.id: e for exs in by_file.values() for e in exs}
    subs, ignored = [], []

    def add(learner: str, ex, f: Path):
        key = submission_key(ex.id, version, f.read_bytes())
        subs.append(ClassFile(learner, ex.id, f.resolve(), key, ex.needs_gpu))

    for learner in sorted(p for p in class_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        seen: set[str] = set()
        for f in sorted(learner.iterdir()):
            if f.name.startswith("."):
                continue
            if f.is_dir() and f.name in by_id:
                ex = by_id[f.name]
                g = f / ex.learner_file
                if g.is_file():
                    add(learner.name, ex, g)
                    seen.add(ex.id)
                else:
                    ignored.append(f"{learner.name}/{f.name}/: no {ex.learner_file} in it")
                continue
            exs = by_file.get(f.name, []) if f.is_file() else []
            if len(exs) == 1 and exs[0].id not in seen:
                add(learner.name, exs[0], f)
                seen.add(exs[0].id)
            elif len(exs) > 1:
                ignored.append(f"{learner.name}/{f.name}: {f.name} is the file of "
                               f"{' and '.join(e.id for e in exs)}: put it in a folder named after its exercise "
                               f"({learner.name}/{exs[0].id}/{f.name})")
            elif exs:
                ignored.append(f"{learner.name}/{f.name}: {exs[0].id} is given twice; graded the one in "
                               f"{learner.name}/{exs[0].id}/")
            else:
                ignored.append(f"{learner.name}/{f.name}: no exercise takes a file of this name")
    return subs, ignored


# ------------------------------------------------------------------ the judge version
@lru_cache(None)
def judge_version(root: str | None = None) -> str:
    """`<package version>+<12 hex>`: the hex is the sha256 of every file the verdicts depend on:
    judge/**/*.py, judge/include/*, and each exercise's check.py, exercise.toml and solution.

    Not `git describe`: a released copy (course release) or a tarball has no git, and an uncommitted
    change to a check must still count as another judge.
    """
    root = Path(root) if root else config.ROOT
    files = sorted(p for p in (root / "judge").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and (p.suffix == ".py" or "include" in p.parts))
    for folder in sorted((root / "exercises").glob("*/")):
        files += sorted(p for p in folder.iterdir()
                        if p.is_file() and (p.name in ("check.py", "exercise.toml") or p.stem == "solution"))
    h = hashlib.sha256()
    for p in files:
        rel = p.relative_to(root).as_posix().encode()
        data = p.read_bytes()
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little") + data)
    try:
        import tomllib
        pkg = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, ValueError):
        pkg = "0"
    return f"{pkg}+{h.hexdigest()[:12]}"


# ------------------------------------------------------------------ where a verdict came from
def verdict_source(ex: _ex.Exercise, r: Result) -> str:
    """Where this machine's verdict for `ex` came from, in a few words (Result.source).

    Read from what the check left in the Result: a GPU exercise's result carries `median_ms` only when
    it was timed on a GPU. A Python exercise's verdict is the same on any machine.
    """
    if not ex.needs_gpu:
        return "Python check (any machine)"
    from judge import gpu
    info = gpu.info()
    if info is not None and gpu.meets(ex.target):
        name = info.name.replace("NVIDIA ", "")
        return f"{name} timed" if "median_ms" in r.measurements else f"{name} (not timed)"
    if not ex.target.startswith("sm_90"):
        return f"simulated for {ex.target}"
    return "CPU model only"


# ------------------------------------------------------------------ the store: one file per result
def result_path(out: Path, key: str) -> Path:
    return Path(out) / RESULTS / key[:2] / f"{key}.json"


def load_result(out: Path, key: str) -> dict | None:
    p = result_path(out, key)
    try:
        rec = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("key") == key else None


# ------------------------------------------------------------------ one grading (runs on a Dask worker)
def grade_one(ex_id: str, file_name: str, data: bytes, key: str, version: str, out: str) -> dict:
    """Grade one file exactly as `course check` does and store its record; return the record.

    The file's bytes travel with the task (the key is their hash), so what is graded is what was hashed,
    and a worker on another machine needs no access to CLASS.
    """
    from judge.grading import grade, workspace
    mine = judge_version()
    if mine != version:
        raise RuntimeError(f"this worker runs judge {mine}, the run asked for {version}: "
                           f"install the same course checkout on every worker")
    ex = _ex.get(ex_id)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="judge-class-") as tmp:
        path = Path(tmp) / file_name
        path.write_bytes(data)
        try:
            r = grade.check(ex_id, path, quiet=True)
        except workspace.BadFile as e:
            r = Result(Verdict.COMPILE_ERROR, f"this file cannot be graded: {e}")
        except Exception as e:  # noqa: BLE001 - the judge failing on one file is that file's verdict
            r = Result(Verdict.CRASH, f"the judge failed on this file ({type(e).__name__}: {e})",
                       details=["this is a fault of the judge, not of the submission: report it"])
    r.exercise, r.file = ex_id, file_name
    r.source = r.source or verdict_source(ex, r)      # a check may say it itself (a release's examples)
    seconds = time.monotonic() - t0
    try:
        from distributed import get_worker
        worker = get_worker().name
    except (ImportError, ValueError):
        worker = "local"
    rec = make_record(key, ex_id, version, r, seconds, f"{socket.gethostname()}/{worker}")
    try:
        write_atomic(result_path(Path(out), key), json.dumps(rec))
        log_grading(Path(out), rec)
        rec["stored_by_worker"] = True
    except OSError:
        rec["stored_by_worker"] = False      # not a shared folder: the client stores it
    return rec


def make_record(key: str, ex_id: str, version: str, r: Result, seconds: float, where: str) -> dict:
    return {"key": key, "exercise": ex_id, "judge_version": version, "seconds": round(seconds, 3),
            "where": where, "source": r.source, "verdict": r.verdict.value, "tier": r.tier,
            "figure": figure_of(r), "result": json.loads(r.to_json()),
            "graded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def figure_of(r: Result) -> str:
    m = r.measurements or {}
    if isinstance(m.get("fraction"), (int, float)):
        rate = (f", {m['tflops']:.1f} TFLOPS" if m.get("tflops") else
                f", {m['gbps']:.0f} GB/s" if m.get("gbps") else "")
        return f"{m['fraction']:.2f} of {m.get('ceiling') or 'the ceiling'}{rate}"
    return ""


def log_grading(out: Path, rec: dict) -> None:
    """One line per finished grading, appended in one write (O_APPEND: lines from workers never mix)."""
    line = (f"{rec['graded_at']}\t{rec['key']}\t{rec['exercise']}\t{rec['verdict']}\t"
            f"{rec['seconds']:.2f}s\t{rec['where']}\t{rec['source']}\n")
    d = out / LOGS
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / GRADINGS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def gradings_logged(out) -> list[str]:
    """The keys in logs/gradings.log, one per grading ever finished into this report (tests count them)."""
    p = Path(out) / LOGS / GRADINGS_LOG
    if not p.exists():
        return []
    return [l.split("\t")[1] for l in p.read_text().splitlines() if l.count("\t") >= 2]


# ------------------------------------------------------------------ the cluster
def gpu_count() -> int:
    from judge import gpu
    if not gpu.available():
        return 0
    from cupy.cuda import runtime
    return int(runtime.getDeviceCount())


def local_cluster(workers: int | None = None, gpus: int | None = None):
    """A LocalCluster: `workers` single-threaded CPU workers (default: the cores left after one per GPU),
    plus one worker per GPU holding the resource GPU=1 and seeing only its own GPU."""
    import dask
    from distributed import LocalCluster, Nanny
    gpus = gpu_count() if gpus is None else gpus
    cores = os.cpu_count() or 1
    workers = workers if workers is not None else max(1, cores - gpus)
    # A file whose grading kills its worker is tried on ALLOWED_FAILURES more, then it is that file's CRASH;
    # a worker holds one task at a time (saturation 1.0), so only the file it was grading is blamed.
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                     "distributed.scheduler.worker-saturation": 1.0,
                     "distributed.worker.daemon": False})     # a worker starts check processes of its own
    # Ctrl-C at the terminal reaches the whole process group: the workers (and the nannies that restart
    # them) start with SIGINT ignored, so that only this process hears it and ends them quietly (each
    # worker would otherwise print its own traceback); a process started with SIGINT ignored keeps it so
    with _sigint_ignored():
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, scheduler_port=0, silence_logs=logging.WARNING)
    if gpus:
        base = dict(cluster.new_spec["options"])
        for i in range(gpus):
            opts = dict(base, nthreads=1, resources={"GPU": 1}, env={"CUDA_VISIBLE_DEVICES": str(i)})
            cluster.worker_spec[f"gpu{i}"] = {"cls": Nanny, "options": opts}
        cluster.loop.add_callback(cluster._correct_state)
    return cluster, workers + gpus


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while the block runs (in the main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def _quiet():
    """Dask's loggers and stderr silenced: the teardown after Ctrl-C says nothing (its log is run.log)."""
    loggers = [logging.getLogger(n) for n in ("distributed", "dask", "tornado", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _silence_dask() -> None:
    """On a worker, after Ctrl-C: Dask's loggers say nothing more while the run is torn down."""
    for name in ("distributed", "dask", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class Interrupted(Exception):
    """Ctrl-C during grade-class: the graded results are kept; `graded` counts those of this run."""

    def __init__(self, graded: int):
        super().__init__(graded)
        self.graded = graded


def _cluster_has_gpus(client) -> bool:
    info = client.scheduler_info()
    return any((w.get("resources") or {}).get("GPU") for w in info.get("workers", {}).values())


# ------------------------------------------------------------------ the progress bar
class Bar:
    """`[#####.....] 34/70 graded, 0:41 elapsed, ~0:44 left` on stderr: redrawn in place on a terminal,
    a line per tenth of the work otherwise (a log file stays short)."""

    def __init__(self, total: int, stream=None, enabled: bool = True):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self._last_tenth = -1

    def step(self, note: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        left = el / self.done * (self.total - self.done)
        w = 30
        fill = int(w * self.done / self.total)
        text = (f"[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} graded, "
                f"{_clock(el)} elapsed, ~{_clock(left)} left" + (f"  {note}" if note else ""))
        if self.tty:
            print("\r" + text[:150].ljust(150), end="", file=self.stream, flush=True)
            if self.done == self.total:
                print(file=self.stream)
        elif self.done * 10 // self.total != self._last_tenth or self.done == self.total:
            self._last_tenth = self.done * 10 // self.total
            print(text, file=self.stream, flush=True)


def _clock(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# ------------------------------------------------------------------ a class
def grade_class(class_dir, out, *, scheduler: str | None = None, workers: int | None = None,
                progress: bool = True, log=None) -> dict:
    """Grade every file of CLASS into REPORT (see the module docstring). Returns a summary:
    submissions, distinct (files to grade after identical ones are merged), graded (this run),
    already (found in REPORT/results), failed_workers, errors (files left ungraded by a fault of the
    set-up, e.g. a worker running another judge version: nothing is stored for them, a new run tries
    again), seconds, files_per_s, version, ignored."""
    from judge.grading import gradebook
    out = Path(out)
    (out / LOGS).mkdir(parents=True, exist_ok=True)
    run_log = _run_logger(out)
    say = log or (lambda s: print(s, file=sys.stderr, flush=True))
    version = judge_version()
    subs, ignored = scan(class_dir, version)
    for line in ignored:
        run_log.info("not graded: %s", line)
    distinct = {s.key: s for s in subs}
    todo = [s for k, s in distinct.items() if load_result(out, k) is None]
    t0 = time.monotonic()
    summary = {"submissions": len(subs), "distinct": len(distinct), "already": len(distinct) - len(todo),
               "graded": 0, "failed_workers": 0, "errors": 0, "version": version, "ignored": ignored}
    run_log.info("judge %s: %d files from %s, %d distinct, %d already graded, %d to grade",
                 version, len(subs), class_dir, len(distinct), summary["already"], len(todo))
    say(f"judge {version}: {len(subs)} files of {len({s.learner for s in subs})} learners, "
        f"{len(distinct)} distinct; {summary['already']} already graded in {out}, {len(todo)} to grade")
    if todo:
        summary.update(_run(todo, out, version, scheduler, workers, progress, run_log, say))
    summary["seconds"] = round(time.monotonic() - t0, 2)
    summary["files_per_s"] = round(summary["graded"] / summary["seconds"], 3) if summary["graded"] else 0.0
    records = {k: load_result(out, k) for k in distinct}
    gradebook.write_report(out, subs, records, version)
    run_log.info("done: %s", json.dumps({k: v for k, v in summary.items() if k != "ignored"}))
    for h in list(run_log.handlers):          # this report's log is closed; Dask's loggers let go of it
        for name in ("distributed", "dask"):
            logging.getLogger(name).removeHandler(h)
        run_log.removeHandler(h)
        h.close()
    return summary


def _run(todo, out, version, scheduler, workers, progress, run_log, say) -> dict:
    from distributed import Client, as_completed
    from distributed.client import FutureCancelledError
    try:
        from distributed.scheduler import KilledWorker
    except ImportError:                               # older distributed
        from distributed import KilledWorker
    client = cluster = None
    done = {"graded": 0, "failed_workers": 0, "errors": 0}
    try:
        if scheduler:
            client = Client(scheduler, timeout="30s")
            where = f"the cluster at {scheduler}"
        else:
            cluster, n = local_cluster(workers)
            client = Client(cluster)
            client.wait_for_workers(n, timeout=120)
            where = f"a LocalCluster of {n} worker(s)"
        gpus = _cluster_has_gpus(client)
        run_log.info("grading on %s; GPU exercises %s", where,
                     "each hold one GPU (resource GPU=1)" if gpus else "graded without a GPU (CPU model)")
        say(f"grading {len(todo)} file(s) on {where}"
            + ("; each GPU exercise holds one GPU" if gpus else ""))
        # GPU exercises are all submitted at once: their resource GPU=1 lets one run per GPU. CPU exercises
        # go out in a window of as many as there are worker threads, so that a worker holds only the file
        # it grades: when a worker dies, Dask blames every task it held, and an innocent file must not
        # collect the blame of the file that took the worker down.
        gpu_todo = [s for s in todo if gpus and s.needs_gpu]
        cpu_todo = sorted((s for s in todo if not (gpus and s.needs_gpu)), key=lambda s: (s.exercise, s.key),
                          reverse=True)
        futures = {}

        def submit(s):
            fut = client.submit(grade_one, s.exercise, s.path.name, s.path.read_bytes(), s.key, version, str(out),
                                key=f"grade-{s.exercise}-{s.key}", pure=False,
                                resources={"GPU": 1} if (gpus and s.needs_gpu) else None, retries=0)
            futures[fut] = s
            return fut

        pending = as_completed([submit(s) for s in gpu_todo])

        def top_up():
            room = max(1, sum(client.nthreads().values())) - sum(
                1 for f, s in futures.items() if not f.done() and not (gpus and s.needs_gpu))
            while cpu_todo and room > 0:
                pending.add(submit(cpu_todo.pop()))
                room -= 1

        top_up()
        bar = Bar(len(todo), enabled=progress)
        for fut in pending:
            s = futures.pop(fut)
            top_up()
            try:
                rec = fut.result()
            except (KilledWorker, FutureCancelledError) as e:
                done["failed_workers"] += 1
                r = Result(Verdict.CRASH, "grading this file killed the Dask worker that graded it, "
                                          "each time it was tried",
                           details=[f"{type(e).__name__}: {e}",
                                    "a check runs in a child process of its own: a file that takes its worker "
                                    "down with it is a fault of the judge's isolation as well; report it"])
                r.exercise, r.file = s.exercise, s.path.name
                r.source = "no verdict: the worker died"
                rec = make_record(s.key, s.exercise, version, r, 0.0, "lost worker")
                rec["stored_by_worker"] = False
            except Exception as e:  # noqa: BLE001 - a fault of the set-up (another judge on a worker): no verdict
                done["errors"] += 1
                if done["errors"] == 1:
                    say(f"error: {s.learner}/{s.path.name} could not be graded: {type(e).__name__}: {e}")
                run_log.info("%s %s %s: not graded: %s: %s", s.learner, s.exercise, s.key, type(e).__name__, e)
                bar.step(f"{s.learner}/{s.path.name}: not graded")
                continue
            if not rec.get("stored_by_worker"):
                write_atomic(result_path(out, s.key), json.dumps(rec))
                log_grading(out, rec)
            done["graded"] += 1
            run_log.info("%s %s %s: %s (%.1f s on %s)", s.learner, s.exercise, s.key, rec["verdict"],
                         rec["seconds"], rec["where"])
            bar.step(f"{s.learner}/{s.path.name}: {rec['verdict']}")
    except KeyboardInterrupt:
        run_log.info("interrupted (Ctrl-C) after %d gradings of this run", done["graded"])
        with _quiet():
            if client is not None:
                try:                                 # the workers' own warnings about cancelled tasks too
                    client.run(_silence_dask, wait=True)
                except Exception:  # noqa: BLE001 - a worker already gone says nothing either
                    pass
            _close(client, cluster)
        client = cluster = None
        raise Interrupted(done["graded"]) from None
    finally:
        if client is not None or cluster is not None:
            _close(client, cluster)
    return done


def _close(client, cluster) -> None:
    with _sigint_ignored():                          # a second Ctrl-C does not cut the teardown short
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _run_logger(out: Path) -> logging.Logger:
    lg = logging.getLogger(f"judge.classroom.{out.resolve()}")
    lg.setLevel(logging.INFO)
    lg.propagate = False
    if not lg.handlers:
        h = logging.FileHandler(out / LOGS / "run.log", encoding="utf-8")
        h.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        lg.addHandler(h)
        for name in ("distributed", "dask"):               # Dask's own warnings go to the same log
            dl = logging.getLogger(name)
            dl.addHandler(h)
    return lg
