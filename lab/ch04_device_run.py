"""Chapter 4 on an H200, in one script: every ladder rung checked against float64, the ladder timed
against cuBLAS bf16 in the same process, the instrumented timeline and its cost, and exercise
ws_gemm's solution and fixtures graded by the engine (judge.grading.grade.check: a child process each,
so that a hang is a verdict).

    PYTHONPATH=. python -m lab.ch04_device_run          # prints a table; details in $OUT
    PYTHONPATH=. python -m lab.ch04_device_run top      # the best rung, its variants, the timeline

Results go to $OUT/ch04_device.json (or ./ch04_device.json).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EX = ROOT / "exercises" / "ws_gemm"
OUT = Path(os.environ.get("OUT", "."))


def child(args, timeout):
    """Run this script with `args` in a fresh process (own session); (returncode | 'HANG', output)."""
    try:
        p = subprocess.run([sys.executable, "-m", "lab.ch04_device_run", *args], check=False, capture_output=True,
                           text=True, timeout=timeout, start_new_session=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        return p.returncode, (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "HANG", out[-1500:]


# ----------------------------------------------------------------------------- exercise grading
def exercise_all() -> list[dict]:
    """The solution and every fixture of ws_gemm through the engine (judge.grading.grade.check, a child each)."""
    from judge.grading import exercise, grade
    ex = exercise.get("ws_gemm")
    files = [("<solution>", ex.solution_path, "PASS")] + [(n, ex.fixture_path(n), v) for n, v in ex.fixtures.items()]
    rows = []
    for name, path, want in files:
        t = time.time()
        r = grade.check("ws_gemm", path, quiet=True, timeout=30)
        rows.append({"file": name, "want": want, "got": r.verdict.value, "tier": r.tier, "msg": r.message,
                     "measurements": r.measurements, "s": round(time.time() - t, 1)})
        print(f"  {name:34s} want {want:16s} got {r.verdict.value:16s} {r.tier or '':7s} {r.message[:140]}",
              flush=True)
    return rows


# ----------------------------------------------------------------------------- main
def main() -> int:
    from chapters.ch04_wgmma import ladder
    report = {}
    t0 = time.time()
    print("== ladder: every rung against float64 (child per rung)", flush=True)
    with ThreadPoolExecutor(4) as pool:
        res = list(pool.map(lambda r: (r["name"], child(["check", r["name"]], timeout=60)),
                            ladder.RUNGS + ladder.VARIANTS))
    checks = {}
    for name, (rc, out) in res:
        ok = rc == 0 and "WRONG" not in out and "Error" not in out
        checks[name] = "ok" if ok else ("HANG" if rc == "HANG" else "FAILED")
        print(out.rstrip() if ok else f"  {name}: {checks[name]}\n{out}", flush=True)
    report["checks"] = checks
    (OUT / "ch04_device.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"== ladder timing ({time.time() - t0:.0f} s so far)", flush=True)
    good = [n for n, v in checks.items() if v == "ok"]
    rows = ladder.measure_ladder(rungs=good)
    report["rows"] = rows
    print(ladder.table(rows), flush=True)
    (OUT / "ch04_device.json").write_text(json.dumps(report, indent=1, default=str))
    if ladder.BEST in good:
        tl = ladder.timeline()
        report["timeline"] = tl
        print(f"timeline: {len(tl['producer'])} producer events, {len(tl['consumers'][0])} consumer-1 events, "
              f"cost {100 * tl['cost']:.2f} % ({tl['ms_plain']:.4f} -> {tl['ms_timed']:.4f} ms); {tl['check']}",
              flush=True)
        (OUT / "ch04_device.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"== exercise ws_gemm ({time.time() - t0:.0f} s so far)", flush=True)
    report["exercise"] = exercise_all()
    (OUT / "ch04_device.json").write_text(json.dumps(report, indent=1, default=str))
    print(ladder.table(rows))
    print("checks:", checks)
    print(f"done in {time.time() - t0:.0f} s")
    return 0


def top() -> int:
    """Only the top of the ladder: the best rung and its variants against cuBLAS, and the timeline."""
    from chapters.ch04_wgmma import ladder
    names = [ladder.BEST] + [v["name"] for v in ladder.VARIANTS]
    for n in names:
        for M, N, K in [(1000, 1032, 520), (4096, 4096, 4096)]:
            c = ladder.check_rung(n, M, N, K)
            print(f"  {n:40s} {M}x{N}x{K}: {'ok' if c.ok else c.message}", flush=True)
    rows = ladder.measure_ladder(rungs=names)
    print(ladder.table(rows), flush=True)
    tl = ladder.timeline()
    print(f"timeline: cost {100 * tl['cost']:.2f} % ({tl['ms_plain']:.4f} -> {tl['ms_timed']:.4f} ms); {tl['check']}")
    (OUT / "ch04_top.json").write_text(json.dumps({"rows": rows, "timeline": tl}, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "top":
        sys.exit(top())
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        from chapters.ch04_wgmma import ladder
        sys.exit(ladder.main(["check", sys.argv[2]]))
    sys.exit(main())
