"""Writing the Hopper record: what ran on the H200, with the hashes of what it ran, in two kinds.

record/hopper.json holds, per section (a notebook's figures, an exercise's verdicts):
    {"device": ..., "driver": ..., "date": ..., "figures": {...},
     "sources": {path: sha256},        what the figures were measured with (a change fails CI)
     "graded_by": {path: sha256}}      what graded them (a change warns; judge.record explains both)

    record.save("ch01.sgemm", {"tflops": ...}, notebook="chapters/01_cp_async.ipynb")
        writes only in the record run (JUDGE_RECORD=1, `python -m judge.record.hopper_run`);
        anywhere else it is a no-op, so a learner's own GPU cannot overwrite the course's figures.
    record.load("ch01.sgemm") -> the section, or None
    record.stale() -> what a figure was measured with and changed since (a CPU test fails on any)
    record.regrade() -> what graded a figure and changed since (a warning naming the sections)
    python -m judge  -> prints what is here, the whole record, and both kinds of change

A source's hash: the file's bytes; for a notebook, its cells' sources only (outputs do not count).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from judge import config
from judge.record import reading
from judge.record.reading import (  # noqa: F401 - re-exported
    _provenance, _rel, device_line, figures, kind_of, load, read, regrade, regrade_note, source_hash, stale)


#: the judge modules a figure is measured with, when the process that saves it imported them
MEASURED_WITH = {"judge.gpu.timing": "judge/gpu/timing.py", "judge.gpu.launch": "judge/gpu/launch.py"}


def _graded_by_imported() -> set[Path]:
    """The modules of the CPU model and the grading wing this process imported (what graded its figures)."""
    out = set()
    for name, m in list(sys.modules.items()):
        f = getattr(m, "__file__", None)
        if f and name.startswith(("judge.model", "judge.grading")) and config.ROOT in Path(f).resolve().parents:
            out.add(Path(f).resolve())
    return out

_mark: set[Path] = set()          # sources already attributed to an earlier section of this process


def _sources_since_last_save() -> set[Path]:
    """Kernels and headers built since the previous save, and every module of the course imported
    from chapters/ or exercises/ (a chapter's run.py, an exercise's check.py)."""
    from judge.gpu import build
    new = {p for p in build.SOURCES_READ if config.ROOT in p.parents} - _mark
    mods = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and (config.CHAPTERS_DIR in Path(f).resolve().parents or config.EXERCISES_DIR in Path(f).resolve().parents):
            mods.add(Path(f).resolve())
    return new | mods


def save(section: str, figures: dict, *, sources: list | None = None,  # noqa: F811 - figures: what to save
         notebook: str | None = None, compile_only: str | None = None) -> bool:
    """Record figures measured here. Only in the record run (JUDGE_RECORD=1).

    The section lists exactly what it ran, in two kinds (judge.record): what the figures were measured
    with (the sources given, the kernels and headers built since the previous save in this process, the
    course modules imported from chapters/ and exercises/, the notebook, and MEASURED_WITH when imported)
    and what graded them (the judge.model and judge.grading modules imported, and any given source that
    kind_of() calls graded). It stores the NVRTC version that compiled them.
    compile_only="sm_100a": figures that need no GPU of that target (compile results, SASS features),
    recorded under that target rather than the GPU of this machine.
    """
    if not config.recording():
        return False
    from judge.gpu import build
    from judge import gpu
    i = gpu.info()
    if i is None and compile_only is None:
        raise RuntimeError("record.save needs a GPU: figures are only recorded where they were measured")
    paths = set(Path(p).resolve() for p in (sources or []))
    paths |= _sources_since_last_save()
    paths |= {(config.ROOT / f).resolve() for m, f in MEASURED_WITH.items() if m in sys.modules}
    paths |= _graded_by_imported()
    if notebook:
        paths.add((config.ROOT / notebook).resolve())
    _mark.update(p for p in build.SOURCES_READ)
    if compile_only:
        where = {"device": f"compile-only ({compile_only})", "cc": compile_only, "sms": 0,
                 "driver": i.driver if i else "none"}
    else:
        where = {"device": i.name, "cc": i.sm, "sms": i.sms, "driver": i.driver}
    data = read()
    data.setdefault("sections", {})[section] = {
        **where, "nvrtc": build.nvrtc_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sources": {_rel(p): source_hash(p) for p in sorted(paths) if kind_of(_rel(p)) == "measured"},
        "graded_by": {_rel(p): source_hash(p) for p in sorted(paths) if kind_of(_rel(p)) == "graded"},
        "figures": figures,
    }
    path = reading.RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=float)
    os.replace(tmp, path)
    return True


def unrecorded(paths) -> list[str]:
    """Which of these sources no recorded section ran."""
    seen = set()
    for sec in read().get("sections", {}).values():
        seen |= {rel for rel, _ in _provenance(sec)}
    return [_rel(p) for p in paths if _rel(p) not in seen]


def main() -> int:
    """python -m judge: what the H200 measured, section by section, and whether it is current."""
    data = read().get("sections", {})
    if not data:
        print("Nothing recorded yet: run python -m judge.record.hopper_run on an H100/H200.")
        return 0
    print(f"Recorded on {device_line()}\n")
    for name in sorted(data):
        figs = data[name]["figures"]
        flat = {k: v for k, v in figs.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(flat.items())[:6])
        print(f"  {name:<34} {data[name]['date']}  {shown}")
    st = stale()
    print("\nWhat the figures were measured with is current." if not st else
          "\nMeasured with, changed since recorded (CI fails until re-recorded):\n  " + "\n  ".join(st))
    note = regrade_note()
    print(f"\nWarning: {note}" if note else "What graded them is current.")
    return 0



def figures_table() -> str:
    """The README's table of headline figures, made from the record (python -m judge --readme writes it)."""
    f = {name: s["figures"] for name, s in read()["sections"].items()}
    ce = f["device.ceilings"]
    base = {(r["kernel"], r["n"]): r for r in f["ch01.baselines"]["rows"]}
    speed = {r["copy"]: r for r in f["ch02.speed"]["rows"]}
    fast = [r for r in f["ch02.copy_fast"]["rows"] if not r["copy"].startswith("device-to-device")]
    best_fast = max(fast, key=lambda r: r["GB/s"])
    lat = {r["target"]: r for r in f["ch03.dsmem"]["latency"]}
    hist = [r for r in f["ch03.histogram"]["rows"] if r["bins"] == 65536 and r["input"] == "uniform"]
    ladder = {(r["rung"], r["n"]): r for r in f["ch04.ladder"]["rows"]}
    fp8 = f["ch05.fp8"]["sizes"]
    hang = f["ch02.hang"]
    fits = f["ch03.occupancy"]["layout"]["fits_one_per_sm"]

    def pair(kernel):
        a, b = base[(kernel, 4096)], base[(kernel, 8192)]
        return (f"{a['TFLOPS']:.1f} / {b['TFLOPS']:.1f} TFLOPS "
                f"({a['of cuBLAS']:.2f} / {b['of cuBLAS']:.2f} of cuBLAS)")

    def rung(name):
        a, b = ladder[(name, 4096)], ladder[(name, 8192)]
        return f"{a['TFLOPS']:.0f} / {b['TFLOPS']:.0f} TFLOPS ({a['of cuBLAS']:.3f} / {b['of cuBLAS']:.3f} of cuBLAS)"

    def kernel_named(prefix):
        return next(k for k, _ in base if k.startswith(prefix))

    rungs = [r["rung"] for r in f["ch04.ladder"]["rows"] if r["n"] == 4096 and r.get("variant") is False]
    ex = {e: s["verdicts"]["solution"] for e, s in
          ((n.split(".", 1)[1], v) for n, v in f.items() if n.startswith("exercise."))}
    fixtures = {e: (sum(1 for k, v in s["verdicts"].items() if k != "solution"),
                    all(v["verdict"] == v.get("expected", "PASS") for v in s["verdicts"].values()))
                for e, s in ((n.split(".", 1)[1], v) for n, v in f.items() if n.startswith("exercise."))}
    copies = [speed[k] for k in ("TMA (pipelined, 1 thread issues)", "cp.async (16 B per thread)",
                                 "plain 16-byte loads")]
    dsmem = lat["peer's shared memory (DSMEM)"]["ns/load"]
    own, l2 = lat["own shared memory"]["ns/load"], lat["L2 (ld.global.cg)"]["ns/load"]
    lines = [
        "| what | figure |", "| --- | --- |",
        f"| device-to-device copy, 2 GiB, read + write | {ce['copy_gbps']:.0f} GB/s |",
        f"| cuBLAS FP32 / bf16 / FP8 GEMM, 4096³ | {ce['sgemm4096_tflops']:.1f} / {ce['bf164096_tflops']:.0f} / "
        f"{ce['fp84096_tflops']:.0f} TFLOPS |",
        f"| cuBLAS FP32 / bf16 / FP8 GEMM, 8192³ | {ce['sgemm8192_tflops']:.1f} / {ce['bf168192_tflops']:.0f} / "
        f"{ce['fp88192_tflops']:.0f} TFLOPS |",
        f"| SGEMM, synchronous loads, 4096³ / 8192³ | {pair('synchronous loads (single buffer)')} |",
        f"| SGEMM, register double-buffering | {pair('register double-buffering')} |",
        f"| SGEMM, 3-stage cp.async | {pair('cp.async, 3 stages (chapter)')} |",
        f"| SGEMM, tuned cp.async (128×256 tiles, 8×16 per thread) | {pair(kernel_named('tuned2'))} |",
        "| 1 GiB copy: TMA pipelined / cp.async / plain 16-byte loads | "
        + " / ".join(f"{r['GB/s']:.0f}" for r in copies) + " GB/s ("
        + " / ".join(f"{r['x device copy (2 GiB)']:.2f}" for r in copies) + " of the device copy) |",
        f"| fastest TMA copy shape ({best_fast['copy']}) | {best_fast['GB/s']:.0f} GB/s, "
        f"{best_fast['x same-size device copy']:.3f} of a device copy of the same size |",
        f"| a kernel spinning on an mbarrier (wrong `expect_tx`) | {hang['verdict']}, killed {hang['seconds']} s "
        f"after launch; the next launch: {hang['next_launch']['message']} |",
        f"| clusters that fit at one block per SM, sizes 2 / 4 / 8 / 16 | {fits['2']} / {fits['4']} / {fits['8']} / "
        f"{fits['16']} |",
        f"| latency of a dependent load: own shared memory / a peer's (DSMEM) / L2 | {own:.0f} / {dsmem:.0f} / "
        f"{l2:.0f} ns |",
        "| histogram, 2²⁶ elements into 65,536 bins, speed-up over global atomics | "
        + ", ".join(f"{r['variant']} {r['speed-up vs global']:.2f}×" for r in hist if r["variant"] != "global atomics")
        + " |",
        f"| bf16 GEMM ladder, first rung ({rungs[0]}), 4096³ / 8192³ | {rung(rungs[0])} |",
        f"| bf16 GEMM ladder, best rung ({rungs[-1]}) | {rung(rungs[-1])} |",
        f"| FP8 E4M3 against bf16 through cuBLAS, 4096³ / 8192³ | {fp8['4096']['speedup']:.2f}× / "
        f"{fp8['8192']['speedup']:.2f}× (relative error {fp8['4096']['fp8_rel_err']:.3f} against "
        f"{fp8['4096']['bf16_rel_err']:.4f}) |",
    ]
    own = {(r["n"], r["kernel"].startswith("gemm_fp8.cu (")): r for r in f["ch05.wgmma_fp8"]["rows"]
           if r["kernel"].startswith("gemm_fp8.cu (")}
    a, b = own[(4096, True)], own[(8192, True)]
    lines.append(f"| the course's FP8 wgmma kernel (block scales in the epilogue), 4096³ / 8192³ | {a['TFLOPS']:.0f} / "
                 f"{b['TFLOPS']:.0f} TFLOPS ({a['of _scaled_mm']:.2f} / {b['of _scaled_mm']:.2f} of `torch._scaled_mm` "
                 f"with row/column scales; relative error {a['rel_err']:.1e} / {b['rel_err']:.1e}) |")
    for e in sorted(ex):
        v, (n, ok) = ex[e], fixtures[e]
        m = v.get("measurements") or {}
        fig = f", {m['fraction']:.2f} of {m['ceiling']}" if m.get("fraction") else ""
        lines.append(f"| exercise {e}: reference / {n} fixtures | {v['verdict']}"
                     + (f" ({v['tier']})" if v.get("tier") else "") + fig
                     + f" / {'every verdict as declared' if ok else 'NOT as declared'} |")
    return "\n".join(lines)


README_BEGIN, README_END = "<!-- figures: begin (python -m judge --readme) -->", "<!-- figures: end -->"


def update_readme() -> bool:
    """Rewrite the README's figures table from the record. Returns True if it changed."""
    path = config.ROOT / "README.md"
    text = path.read_text()
    a, b = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    new = text[:a] + "\n" + figures_table() + "\n" + text[b:]
    path.write_text(new)
    return new != text
