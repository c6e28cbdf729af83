"""The Hopper record: what ran on the H200, with the hashes of the sources it ran.

record/hopper.json holds, per section (a notebook's figures, an exercise's verdicts):
    {"device": ..., "driver": ..., "date": ..., "sources": {path: sha256}, "figures": {...}}

    record.save("ch01.sgemm", {"tflops": ...}, notebook="chapters/01_cp_async.ipynb")
        writes only in the record run (JUDGE_RECORD=1, `python -m judge.hopper_record`);
        anywhere else it is a no-op, so a learner's own GPU cannot overwrite the course's figures.
    record.load("ch01.sgemm") -> the section, or None
    record.stale() -> what changed since it was recorded (a CPU test fails on any)
    python -m judge  -> prints what is here and the whole record

A source's hash: the file's bytes; for a notebook, its cells' sources only (outputs do not count).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from . import config, recorded
from .recorded import _rel, device_line, figures, load, read, source_hash  # noqa: F401 - re-exported


#: the judge modules whose code decides a recorded figure, when the process that saves it imported them
MEASURING = {"judge.timing": "judge/timing.py", "judge.compare": "judge/compare.py",
             "judge.launch": "judge/launch.py", "judge.cuda_flow": "judge/cuda_flow.py"}

_mark: set[Path] = set()          # sources already attributed to an earlier section of this process


def _sources_since_last_save() -> set[Path]:
    """Kernels and headers built since the previous save, and every module of the course imported
    from chapters/ or exercises/ (a chapter's run.py, an exercise's check.py)."""
    import sys
    from . import build
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

    The section lists exactly the sources it ran: those given, the kernels built since the previous
    save in this process, the course modules imported from chapters/ and exercises/, the judge's
    measuring modules (MEASURING) this process imported, and the notebook. It stores the NVRTC version that compiled them.
    compile_only="sm_100a": figures that need no GPU of that target (compile results, SASS features),
    recorded under that target rather than the GPU of this machine.
    """
    if not config.recording():
        return False
    from . import build, gpu
    i = gpu.info()
    if i is None and compile_only is None:
        raise RuntimeError("record.save needs a GPU: figures are only recorded where they were measured")
    paths = set(Path(p).resolve() for p in (sources or []))
    paths |= _sources_since_last_save()
    import sys
    paths |= {(config.ROOT / f).resolve() for m, f in MEASURING.items() if m in sys.modules}
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
        "sources": {_rel(p): source_hash(p) for p in sorted(paths)},
        "figures": figures,
    }
    path = recorded.RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=float)
    os.replace(tmp, path)
    return True


def stale() -> list[str]:
    """Sources whose content differs from what was recorded (or that vanished)."""
    out = []
    for name, sec in read().get("sections", {}).items():
        for rel, h in sec.get("sources", {}).items():
            p = config.ROOT / rel
            if not p.exists():
                out.append(f"{name}: {rel} no longer exists")
            elif source_hash(p) != h:
                out.append(f"{name}: {rel} changed since it ran on {sec.get('device')} ({sec.get('date')})")
    return out


def unrecorded(paths) -> list[str]:
    """Which of these sources no recorded section ran."""
    seen = set()
    for sec in read().get("sections", {}).values():
        seen |= set(sec.get("sources", {}))
    return [_rel(p) for p in paths if _rel(p) not in seen]


def main() -> int:
    """python -m judge: what the H200 measured, section by section, and whether it is current."""
    data = read().get("sections", {})
    if not data:
        print("Nothing recorded yet: run python -m judge.hopper_record on an H100/H200.")
        return 0
    print(f"Recorded on {device_line()}\n")
    for name in sorted(data):
        figs = data[name]["figures"]
        flat = {k: v for k, v in figs.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(flat.items())[:6])
        print(f"  {name:<34} {data[name]['date']}  {shown}")
    st = stale()
    print("\nThe record is current." if not st else "\nChanged since recorded:\n  " + "\n  ".join(st))
    return 0



def figures_table() -> str:
    """The README's table of headline figures, made from the record (python -m judge --readme writes it)."""
    sec = read()["sections"]
    f = {name: s["figures"] for name, s in sec.items()}
    rows = {(r["kernel"], r["n"]): r for r in f["ch01.sgemm"]["rows"] + f["ch01.tuned"]["rows"]}
    speed = {r["copy"]: r for r in f["ch02.speed"]["rows"]}
    stages = f["ch01.stages"]["rows"]
    ce = f["device.ceilings"]
    hang = f["ch02.hang"]
    best = f["ch01.tuned"]["best"]

    def pair(kernel):
        a, b = rows[(kernel, 4096)], rows[(kernel, 8192)]
        return (f"{a['TFLOPS']:.1f} / {b['TFLOPS']:.1f} TFLOPS "
                f"({a['of cuBLAS']:.2f} / {b['of cuBLAS']:.2f} of cuBLAS)")

    deeper = [r["TFLOPS"] for r in stages if r["stages"] >= 3]
    copies = [speed[k] for k in ("TMA (pipelined, 1 thread issues)", "cp.async (16 B per thread)",
                                 "plain 16-byte loads")]
    ex = {e: f[f"exercise.{e}"]["verdicts"]["solution"] for e in ("cp_async_sgemm", "tma_tiles")}
    lines = [
        "| what | figure |", "| --- | --- |",
        f"| device-to-device copy, 2 GiB, read + write | {ce['copy_gbps']:.0f} GB/s |",
        f"| cuBLAS FP32 GEMM, 4096³ / 8192³ | {ce['sgemm4096_tflops']:.1f} / {ce['sgemm8192_tflops']:.1f} TFLOPS |",
        f"| SGEMM, synchronous loads, 4096³ / 8192³ | {pair('sync loads')} |",
        f"| SGEMM, 3-stage cp.async, 4096³ / 8192³ | {pair('cp.async, 3 stages')} |",
        f"| SGEMM, tuned cp.async ({', '.join(f'{k} {v}' for k, v in best.items())}), 4096³ / 8192³ "
        f"| {pair('sgemm_tuned')} |",
        f"| cp.async stage sweep, 4096³ | {stages[0]['TFLOPS']:.1f} TFLOPS at {stages[0]['stages']} stages, "
        f"{min(deeper):.1f}-{max(deeper):.1f} from 3 to {stages[-1]['stages']} |",
        f"| `%globaltimer` instrumentation of the 3-stage kernel | {f['ch01.timeline']['overhead'] * 100:+.1f} % |",
        "| 1 GiB copy: TMA pipelined / cp.async / plain 16-byte loads | "
        + " / ".join(f"{r['GB/s']:.0f}" for r in copies) + " GB/s ("
        + " / ".join(f"{r['x device copy (2 GiB)']:.2f}" for r in copies) + " of the device copy) |",
        f"| a kernel spinning on an mbarrier (wrong `expect_tx`) | {hang['verdict']}, killed {hang['seconds']} s "
        f"after launch; the next launch: {hang['next_launch']['message']} |",
        f"| exercise cp_async_sgemm, reference solution | {ex['cp_async_sgemm']['verdict']} "
        f"({ex['cp_async_sgemm']['tier']}), {ex['cp_async_sgemm']['measurements']['fraction']:.2f} of cuBLAS |",
        f"| exercise tma_tiles, reference solution | {ex['tma_tiles']['verdict']} ({ex['tma_tiles']['tier']}), "
        f"{ex['tma_tiles']['measurements']['fraction']:.2f} of the device copy |",
    ]
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
