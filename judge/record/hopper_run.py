"""The Hopper record run: on an H200, build, run and measure everything, and write record/hopper.json.

    python -m judge.record.hopper_run                       # everything (about 6 minutes on an H200)
    python -m judge.record.hopper_run --part tests,exercises
    python -m judge.record.hopper_run --part notebooks --out $OUT

Parts:
  ceilings   device copy bandwidth; cuBLAS FP32, bf16 and FP8 at 4096^3 and 8192^3 (section "device.ceilings")
  compile    every kernel whose target no GPU here runs (sm_100a): compiler version, registers and the
             SASS features it shows (sections "compile.<target>.<file>", recorded as compile-only)
  tests      every test file that holds GPU tests, with them running (section "tests")
  exercises  every GPU exercise's solution and fixtures through the judge; each verdict must be
             the declared one (sections "exercise.<id>")
  notebooks  every chapter executed top to bottom with JUDGE_RECORD=1 (nbclient): the notebooks save
             their own figures (sections "ch01.*", ...), a section "notebook.<name>" when every cell
             ran, and, with --out, the executed notebooks (outputs included) in notebooks.tar.gz
  counters   Nsight Compute counters of the chapter 1, 3 and 4 kernels, a separate profiling pass
             (judge.record.counters; sections "ch01.counters", ...; OUT/counters.json); not in the default
It ends with a short table. With --out DIR, record/hopper.json and the logs are copied there.
Needs a Hopper GPU; elsewhere it says so and exits 2. Only this run writes the record.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from judge import config, gpu
from judge.grading import exercise
from judge import record
from judge.gpu import timing

ROWS: list[tuple[str, str, str]] = []     # (what, result, figures) for the closing table


def row(what, result, figs=""):
    ROWS.append((what, result, figs))
    print(f"== {what}: {result} {figs}", flush=True)


def part_ceilings():
    c = timing.copy_ceiling()
    figs = {"copy_gbps": c.gbps, "copy_ms": c.median_ms, "copy_bytes": c.bytes, "copy_spread": c.spread}
    for name, fn in (("sgemm", timing.sgemm_ceiling), ("bf16", timing.bf16_gemm_ceiling),
                     ("fp8", timing.fp8_gemm_ceiling)):
        for n in (4096, 8192):
            t = fn(n)
            figs.update({f"{name}{n}_tflops": t.tflops, f"{name}{n}_ms": t.median_ms, f"{name}{n}_spread": t.spread})
        row(f"cuBLAS {name} 4096^3 / 8192^3", "measured",
            f"{figs[f'{name}4096_tflops']:.1f} / {figs[f'{name}8192_tflops']:.1f} TFLOPS")
    record.save("device.ceilings", figs)
    row("device copy (2 GiB, read+write)", "measured", f"{c.gbps:.0f} GB/s")


def part_compile():
    """Kernels for targets this GPU cannot run (sm_100a): what the compiler made of them."""
    from judge.gpu import build
    from judge.hw import sass
    for path in build.course_kernels():
        target = build.judge_line(path)["target"]
        if gpu.meets(target):
            continue
        b = build.compile(path, target=target)
        figs = {"target": target, "nvrtc": build.nvrtc_version(), "kernels": {
            k: {"resources": b.resources[k], "features": sass.feature_counts(b.sass_of(k))} for k in b.kernels}}
        rel = path.relative_to(config.ROOT)
        record.save(f"compile.{target}.{rel.parent.name}.{path.stem}", figs, sources=[path], compile_only=target)
        row(f"compile {rel} for {target}", "ok", ", ".join(sorted({f for k in figs["kernels"].values()
                                                                    for f in k["features"]})))


def part_tests(log_dir: Path):
    """The test files that hold GPU tests, with those tests running (CI runs every file without a GPU).
    Exercise verdicts are the exercises part's job (graded there, once); the record's test waits for it."""
    t = time.time()
    log = log_dir / "pytest.log"
    with open(log, "w") as f:
        gpu_tests = sorted(str(f.relative_to(config.ROOT)) for f in (config.ROOT / "tests").rglob("test_*.py")
                           if "gpu.need(" in f.read_text() and f.name not in ("test_record.py", "test_exercises.py"))
        rc = subprocess.call([sys.executable, "-m", "pytest", *gpu_tests, "-q", "-rs", "-p", "no:cacheprovider"],
                             cwd=config.ROOT, stdout=f, stderr=subprocess.STDOUT)
    tail = [l for l in log.read_text().splitlines() if l.strip()][-1:]
    summary = tail[0] if tail else "?"
    record.save("tests", {"rc": rc, "summary": summary, "seconds": time.time() - t})
    row("pytest tests/ (GPU tests included)", "ok" if rc == 0 else f"FAILED rc={rc}", summary)


def _timed(ex, name) -> bool:
    """Fixtures whose verdict depends on a clean timing run alone: the solution and the passing ones."""
    return name == "solution" or ex.fixtures.get(name) in ("PASS", "TOO SLOW")


def exercise_sources(ex) -> list[Path]:
    """The files of an exercise a record run grades with: everything in its folder but the statement and
    the starter, which no run reads (a fixture stored as a patch counts as its patch)."""
    return [p for p in ex.sources() if p not in (ex.statement_path, ex.starter_path)]


def part_exercises(log_dir: Path, only: str = ""):
    """Every GPU exercise's solution and fixtures through the judge. Fixtures that never reach the timing
    run side by side (each in its own process); the solution and passing fixtures run alone, so that
    nothing else shares the GPU while they are timed."""
    from concurrent.futures import ThreadPoolExecutor
    from judge.grading import grade
    for ex in exercise.all_exercises():
        if not ex.needs_gpu or (only and only not in ex.id):
            continue
        compile_only = None if gpu.meets(ex.target) else ex.target
        t0 = time.time()
        names = ["solution", *ex.fixtures]
        path = {n: ex.solution_path if n == "solution" else ex.fixture_path(n) for n in names}

        def grade_one(n):
            t = time.time()
            return n, grade.check(ex.id, path[n], quiet=True), time.time() - t

        results = {}
        with ThreadPoolExecutor(max_workers=6) as pool:
            for n, r, secs in pool.map(grade_one, [n for n in names if not _timed(ex, n)]):
                results[n] = (r, secs)
        for n in [n for n in names if _timed(ex, n)]:
            _, r, secs = grade_one(n)
            results[n] = (r, secs)
        verdicts, ok = {}, True
        for n in names:
            r, secs = results[n]
            want = "PASS" if n == "solution" else ex.fixtures[n]
            verdicts[n] = {"verdict": r.verdict.value, "expected": want, "message": r.message, "tier": r.tier,
                           "measurements": r.measurements, "seconds": round(secs, 1)}
            ok &= r.verdict.value == want
            row(f"{ex.id} {n}", f"{r.verdict.value}" + (f" ({r.tier})" if r.tier else "") + f" (declared {want})"
                + ("" if r.verdict.value == want else "  <-- MISMATCH: " + r.message[:120]), f"{secs:.1f} s")
        # measured with: the exercise's own files, the course's headers, the launch layer and the timing
        # protocol; graded by: the CPU model and the grading wing (judge.record sorts them by kind)
        extra = sorted(Path(config.INCLUDE_DIR).glob("*.cuh"))
        extra += [config.ROOT / "judge" / "gpu" / f for f in ("launch.py", "timing.py")]
        extra += sorted((config.ROOT / "judge" / "model").rglob("*.py"))
        extra += sorted((config.ROOT / "judge" / "grading").glob("*.py"))
        record.save(f"exercise.{ex.id}", {"verdicts": verdicts, "all_as_declared": ok,
                                          "seconds": time.time() - t0},
                    sources=exercise_sources(ex) + extra, compile_only=compile_only)


def part_notebooks(log_dir: Path, only: str = ""):
    """Execute every chapter (or those whose name contains one of the comma-separated words of `only`) and
    keep the executed copies."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    os.environ["JUDGE_RECORD"] = "1"
    import tempfile
    done = Path(tempfile.mkdtemp(prefix="notebooks-"))
    for path in sorted(config.CHAPTERS_DIR.glob("*.ipynb")):
        if only and not any(w and w in path.stem for w in only.split(",")):
            continue
        t = time.time()
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(config.ROOT)}})
        err = ""
        try:
            client.execute()
        except CellExecutionError as e:
            err = str(e).strip().splitlines()[-1][:300]
        secs = time.time() - t
        nbformat.write(nb, done / path.name)
        if not err:
            record.save(f"notebook.{path.stem}", {"nbval": "passed", "executed": "every cell, top to bottom",
                                                   "seconds": secs}, sources=[path])
        row(f"notebook {path.name}", "passed" if not err else f"FAILED: {err}", f"{secs:.0f} s")
    if done.exists():
        import tarfile
        with tarfile.open(log_dir / "notebooks.tar.gz", "w:gz") as tf:
            for f in sorted(done.glob("*.ipynb")):
                tf.add(f, arcname=f.name)


def part_counters(log_dir: Path, only: str = ""):
    from judge.record import counters
    rows = counters.profile_all(log_dir, only=only)
    row("ncu counters (chapters 1, 3, 4, 5)", f"{sum('summary' in r for r in rows)}/{len(rows)} profiled, "
        f"{sum(bool(r.get('ok')) for r in rows)} checked ok", str(log_dir / "counters.json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.record.hopper_run")
    ap.add_argument("--part", default="ceilings,compile,exercises,notebooks,tests")
    ap.add_argument("--only", default="", help="only the chapters / exercises whose name contains this")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args(argv)
    if not gpu.meets("sm_90"):
        print(f"The Hopper record needs an H100/H200: {gpu.why_not('sm_90')}", file=sys.stderr)
        return 2
    os.environ["JUDGE_RECORD"] = "1"
    log_dir = Path(args.out) if args.out else config.ROOT / "record" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"Hopper record on {gpu.info().line()}", flush=True)
    parts = args.part.split(",")
    for p in parts:
        t = time.time()
        try:
            {"ceilings": part_ceilings, "compile": part_compile, "tests": lambda: part_tests(log_dir),
             "exercises": lambda: part_exercises(log_dir, args.only),
             "notebooks": lambda: part_notebooks(log_dir, args.only),
             "counters": lambda: part_counters(log_dir, args.only)}[p]()
        except Exception as e:  # noqa: BLE001 - one broken part must not cost the others their run
            import traceback
            traceback.print_exc()
            row(f"part {p}", f"FAILED: {type(e).__name__}: {e}"[:160])
        print(f"-- part {p}: {time.time() - t:.0f} s", flush=True)
        if args.out:                 # after every part, so a run cut short still brings back what it did
            shutil.copy(record.RECORD, Path(args.out) / "hopper.json")
    print("\n" + "\n".join(f"{w:<48} {r:<40} {f}" for w, r, f in ROWS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
