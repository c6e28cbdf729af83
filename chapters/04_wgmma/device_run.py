"""Chapter 4 on an H200, in one script: every ladder rung checked against float64, the ladder timed
against cuBLAS bf16 in the same process, the instrumented timeline and its cost, and exercise
ws_gemm's solution and fixtures graded the way the engine grades them (compile -> SASS features
-> compile-log and SASS rules -> cases against float64 with NaN-poisoned outputs -> timing with
the timed output checked -> tier), each in a child process so that a hang is a verdict.

    PYTHONPATH=. python chapters/04_wgmma/device_run.py          # prints a table; details in $OUT

Results go to $OUT/ch04_device.json (or ./ch04_device.json).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
EX = ROOT / "exercises" / "ws_gemm"
OUT = Path(os.environ.get("OUT", "."))


def child(args, timeout):
    """Run this script with `args` in a fresh process (own session); (returncode | 'HANG', output)."""
    try:
        p = subprocess.run([sys.executable, __file__, *args], check=False, capture_output=True,
                           text=True, timeout=timeout, start_new_session=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        return p.returncode, (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "HANG", out[-1500:]


# ----------------------------------------------------------------------------- exercise grading
def grade(path: str) -> tuple[str, str]:
    """Grade one .cu as the engine does; returns (verdict, message). Runs inside a child."""
    import cupy
    import numpy as np

    from judge import build, compare, exercise, timing
    from judge.build import CompileError
    meta = tomllib.loads((EX / "exercise.toml").read_text())
    mod = exercise.import_file(EX / "check.py", "ws_gemm_check")
    try:
        b = build.compile(path, target=meta["target"])
    except CompileError as e:
        return "COMPILE ERROR", e.first_error()
    missing = [f for f in meta["features"] if not b.uses(f, meta["kernel"])]
    if missing:
        return "MISSING FEATURE", "SASS lacks " + ", ".join(missing)
    probs = mod.static_checks(b)
    if probs:
        return probs[0]
    rng = cupy.random.default_rng(int.from_bytes(os.urandom(4), "little"))

    def run_case(case, timed=False):
        ins = mod.inputs(case, cupy, rng)
        outs = mod.outputs(case, ins, cupy)
        for o in outs.values():
            compare.poison(o)
        t = None
        if timed:
            w = mod.work(case)
            t = timing.bench(lambda: mod.launch(b, case, ins, outs), flops=w["flops"], reps=20)
        else:
            mod.launch(b, case, ins, outs)
        cupy.cuda.get_current_stream().synchronize()
        ref = mod.reference(case, {k: compare.to_numpy(v) for k, v in ins.items()})
        tol = mod.tolerance(case)
        for k, r in ref.items():
            c = compare.compare(outs[k], r, case=str(case), **tol)
            if not c.ok:
                return c, t
        return c, t

    for case in meta["cases"]["list"]:
        c, _ = run_case(case)
        if not c.ok:
            return "WRONG", c.message
    c, t = run_case(meta["timing"]["case"], timed=True)
    if not c.ok:
        return "WRONG", "timed output: " + c.message
    n = meta["timing"]["case"]["m"]
    import torch
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    bb = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    cc = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    cub = timing.bench(lambda: torch.matmul(a, bb.T, out=cc), flops=2.0 * n ** 3, reps=20)
    frac = t.tflops / cub.tflops
    if t.tflops > 1000:
        return "WRONG", f"{t.tflops:.0f} TFLOPS is above what an H200 can do"
    tiers = meta["tiers"]
    tier = next((k for k in ("gold", "silver", "bronze") if frac >= tiers[k]), None)
    np.seterr(all="ignore")
    msg = (f"{t.tflops:.1f} TFLOPS = {frac:.3f} of cuBLAS bf16 ({cub.tflops:.1f}), spread {t.spread:.3f} "
           f"-> {tier or 'below bronze'}")
    return ("PASS" if tier else "TOO SLOW"), msg


def exercise_all() -> list[dict]:
    meta = tomllib.loads((EX / "exercise.toml").read_text())
    files = [("solution.cu", "PASS")] + [(f"fixtures/{k}", v["verdict"]) for k, v in meta["fixtures"].items()]
    rows = []
    for f, want in files:
        t = time.time()
        rc, out = child(["grade", str(EX / f)], timeout=25)
        if rc == "HANG":
            got, msg = "HANG", "no answer in 25 s"
        else:
            line = next((l for l in out.splitlines() if l.startswith("VERDICT ")), None)
            if line:
                got, msg = line[8:].split(" | ", 1)
            else:
                got, msg = "CRASH", out[-600:]
        rows.append({"file": f, "want": want, "got": got, "msg": msg, "s": round(time.time() - t, 1)})
        print(f"  {f:38s} want {want:16s} got {got:16s} {msg[:150]}", flush=True)
    return rows


# ----------------------------------------------------------------------------- main
def main() -> int:
    import ladder
    report = {}
    t0 = time.time()
    print("== ladder: every rung against float64 (child per rung)", flush=True)
    with ThreadPoolExecutor(4) as pool:
        res = list(pool.map(lambda r: (r["name"], child(["check", r["name"]], timeout=60)), ladder.RUNGS))
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


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        import ladder
        sys.exit(ladder.main(["check", sys.argv[2]]))
    if len(sys.argv) > 1 and sys.argv[1] == "grade":
        v, m = grade(sys.argv[2])
        print(f"VERDICT {v} | {m}", flush=True)
        sys.exit(0)
    sys.exit(main())
