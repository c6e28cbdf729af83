"""Chapter 3 on an H200 in one go: every measurement of chapters/ch03_clusters/run.py and the grading
of exercise dsmem_histogram (solution and fixtures), with a short table at the end.

    PYTHONPATH=. PYTHONUNBUFFERED=1 python -m lab.ch03_device_check [OUT_DIR]

Writes OUT_DIR/ch03.json (default $OUT or /tmp) with every figure. Needs an sm_90 GPU.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent

from chapters.ch03_clusters import run as ch03

from judge import gpu

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp"))
res: dict = {"device": gpu.info().line() if gpu.info() else None, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def step(name, fn, *a, **kw):
    t0 = time.monotonic()
    print(f"== {name}", flush=True)
    try:
        v = fn(*a, **kw)
        res[name] = v
    except Exception as e:  # noqa: BLE001 - every step reports, the next one runs
        res[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=6)}
        print(res[name]["trace"], flush=True)
        v = None
    print(f"   ({time.monotonic() - t0:.1f} s)", flush=True)
    (OUT / "ch03.json").write_text(json.dumps(res, indent=1, default=str))
    return v


print(res["device"])
layout = step("gpc_layout", ch03.gpc_layout)
gsizes = layout["gpc_sizes"] if isinstance(layout, dict) and "gpc_sizes" in layout else None
step("occupancy", ch03.occupancy, gpc_sizes=gsizes)
step("residency", ch03.residency)
step("where_runtime_4", lambda: (lambda rows: {"bad": ch03.check_where(rows, 4), "rows": rows[:12]})(ch03.where(4, clusters=8)))
step("where_dims4", lambda: (lambda rows: {"bad": ch03.check_where(rows, 4), "rows": rows[:12]})(ch03.where(4, clusters=8, compile_time=True)))
step("where_16", lambda: (lambda rows: {"bad": ch03.check_where(rows, 16), "sms": sorted({r["sm"] for r in rows})})(ch03.where(16, clusters=1, shared_bytes=ch03.ONE_PER_SM)))
step("mapa_probe", ch03.mapa_probe)
step("cluster_sum", ch03.cluster_sum)
step("early_exit", ch03.early_exit)
step("early_exit_no_delay", ch03.early_exit, delay_ns=0)
step("dsmem_latency", ch03.dsmem_latency)
step("dsmem_bandwidth", ch03.dsmem_bandwidth)
step("dsmem_bandwidth_1024", ch03.dsmem_bandwidth, threads=1024)
step("histogram", ch03.histogram)
step("multicast", ch03.multicast)
step("multicast_in_l2", ch03.multicast, flush=False)


def grade_all():
    from judge.grading import exercise, grade
    ex = exercise.get("dsmem_histogram")
    out = {}
    for name in ["<solution>", *ex.fixtures]:
        path = ex.solution_path if name == "<solution>" else ex.fixture_path(name)
        t0 = time.monotonic()
        r = grade.check(ex.id, path, quiet=True)
        out[name] = {"verdict": r.verdict.value, "tier": r.tier, "message": r.message[:400],
                     "want": "PASS" if name == "<solution>" else ex.fixtures[name],
                     "measurements": r.measurements, "seconds": round(time.monotonic() - t0, 1)}
        print(f"   {name}: {r.verdict.value} {r.tier or ''} {r.message[:160]}", flush=True)
    return out


step("dsmem_histogram_grades", grade_all)
res["launch_failures"] = ch03.LAUNCH_FAILURES
(OUT / "ch03.json").write_text(json.dumps(res, indent=1, default=str))

print("\n==================== summary")
print("launch failures:", [f[:300] for f in ch03.LAUNCH_FAILURES] or "none")
if isinstance(layout, dict) and "gpc_sizes" in layout:
    print("GPC sizes:", layout["gpc_sizes"], "fits at 1 block/SM:", layout["fits_one_per_sm"], layout["errors"])
    print("GPCs:", layout["gpcs"])
for key in ("residency", "occupancy", "cluster_sum", "dsmem_latency", "dsmem_bandwidth", "dsmem_bandwidth_1024",
            "histogram", "multicast", "multicast_in_l2"):
    v = res.get(key)
    print(f"-- {key}")
    if isinstance(v, list):
        for row in v:
            print("  ", {k: (round(x, 3) if isinstance(x, float) else x) for k, x in row.items() if k != "message"})
    else:
        print("  ", str(v)[:600])
for key in ("early_exit", "early_exit_no_delay", "where_16", "mapa_probe", "where_dims4"):
    print(f"-- {key}", str(res.get(key))[:500])
g = res.get("dsmem_histogram_grades")
if isinstance(g, dict):
    for k, v in g.items():
        if isinstance(v, dict):
            print(f"   {k}: got {v['verdict']} {v.get('tier') or ''} want {v['want']} | {v['message'][:120]}")
