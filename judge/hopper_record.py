"""The Hopper record run: on an H200, build, run and measure everything, and write record/hopper.json.

    python -m judge.hopper_record                       # everything (about 8 minutes)
    python -m judge.hopper_record --part tests,exercises
    python -m judge.hopper_record --part notebooks --out $OUT

Parts:
  ceilings   device copy bandwidth and cuBLAS FP32 at 4096^3 (section "device.ceilings")
  tests      the whole pytest suite, GPU tests included (section "tests")
  exercises  every GPU exercise's solution and fixtures through the judge; each verdict must be
             the declared one (sections "exercise.<id>")
  notebooks  every chapter executed under nbval with JUDGE_RECORD=1: the notebooks save their
             own figures (sections "ch01.*", ...) and a section "notebook.<name>" when they pass
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

from . import config, exercise, gpu, record, timing

ROWS: list[tuple[str, str, str]] = []     # (what, result, figures) for the closing table


def row(what, result, figs=""):
    ROWS.append((what, result, figs))
    print(f"== {what}: {result} {figs}", flush=True)


def part_ceilings():
    c = timing.copy_ceiling()
    g = timing.sgemm_ceiling(4096)
    g8 = timing.sgemm_ceiling(8192)
    record.save("device.ceilings", {
        "copy_gbps": c.gbps, "copy_ms": c.median_ms, "copy_bytes": c.bytes,
        "sgemm4096_tflops": g.tflops, "sgemm4096_ms": g.median_ms,
        "sgemm8192_tflops": g8.tflops, "sgemm8192_ms": g8.median_ms})
    row("device copy (2 GiB, read+write)", "measured", f"{c.gbps:.0f} GB/s")
    row("cuBLAS FP32 4096^3 / 8192^3", "measured", f"{g.tflops:.1f} / {g8.tflops:.1f} TFLOPS")


def part_tests(log_dir: Path):
    t = time.time()
    log = log_dir / "pytest.log"
    with open(log, "w") as f:
        rc = subprocess.call([sys.executable, "-m", "pytest", "tests", "-q", "-rs", "-p", "no:cacheprovider",
                              "--ignore=tests/test_record.py"],          # the record is being written
                             cwd=config.ROOT, stdout=f, stderr=subprocess.STDOUT)
    tail = [l for l in log.read_text().splitlines() if l.strip()][-1:]
    summary = tail[0] if tail else "?"
    record.save("tests", {"rc": rc, "summary": summary, "seconds": time.time() - t})
    row("pytest tests/ (GPU tests included)", "ok" if rc == 0 else f"FAILED rc={rc}", summary)


def part_exercises(log_dir: Path):
    from . import grade
    for ex in exercise.all_exercises():
        if not ex.needs_gpu:
            continue
        verdicts, ok = {}, True
        t0 = time.time()
        r = grade.check(ex.id, ex.solution_path, quiet=True)
        verdicts["solution"] = {"verdict": r.verdict.value, "tier": r.tier, "message": r.message,
                                "measurements": r.measurements}
        ok &= r.verdict == grade.Verdict.PASS
        row(f"{ex.id} solution", r.headline()[:90])
        for name, want in ex.fixtures.items():
            t = time.time()
            fr = grade.check(ex.id, ex.fixture_path(name), quiet=True)
            verdicts[name] = {"verdict": fr.verdict.value, "expected": want, "message": fr.message,
                              "tier": fr.tier, "seconds": round(time.time() - t, 1)}
            ok &= fr.verdict.value == want
            row(f"{ex.id} {name}", f"{fr.verdict.value} (declared {want})"
                + ("" if fr.verdict.value == want else "  <-- MISMATCH"), f"{time.time() - t:.1f} s")
        extra = [p for p in Path(config.INCLUDE_DIR).glob("*.cuh")]
        record.save(f"exercise.{ex.id}", {"verdicts": verdicts, "all_as_declared": ok,
                                          "seconds": time.time() - t0},
                    sources=ex.sources() + extra)


def part_notebooks(log_dir: Path):
    env = dict(os.environ, JUDGE_RECORD="1")
    for nb in sorted(config.CHAPTERS_DIR.glob("*.ipynb")):
        t = time.time()
        log = log_dir / f"nbval-{nb.stem}.log"
        with open(log, "w") as f:
            rc = subprocess.call([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
                                  "--nbval-cell-timeout=600", "-q", "-p", "no:cacheprovider", str(nb)],
                                 cwd=config.ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
        secs = time.time() - t
        tail = [l for l in log.read_text().splitlines() if l.strip()][-1:]
        if rc == 0:
            record.save(f"notebook.{nb.stem}", {"nbval": "passed", "seconds": secs,
                                                "summary": tail[0] if tail else ""},
                        sources=[nb])
        row(f"nbval {nb.name}", "passed" if rc == 0 else f"FAILED rc={rc}", f"{secs:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.hopper_record")
    ap.add_argument("--part", default="ceilings,exercises,notebooks,tests")
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
        {"ceilings": part_ceilings, "tests": lambda: part_tests(log_dir),
         "exercises": lambda: part_exercises(log_dir), "notebooks": lambda: part_notebooks(log_dir)}[p]()
        print(f"-- part {p}: {time.time() - t:.0f} s", flush=True)
        if args.out:                 # after every part, so a run cut short still brings back what it did
            shutil.copy(record.RECORD, Path(args.out) / "hopper.json")
    print("\n" + "\n".join(f"{w:<48} {r:<40} {f}" for w, r, f in ROWS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
