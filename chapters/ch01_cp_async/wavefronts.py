"""Shared-memory wavefronts: the course's model (judge.hw.tma.bank_conflicts) against ncu's counters.

    from chapters.ch01_cp_async import wavefronts
    wavefronts.PATTERNS                      # the access patterns the chapters and exercises use
    wavefronts.table()                       # model vs the counts recorded in wavefronts_h200.json
    wavefronts.kernel_note()                 # sgemm_tuned's counts against the model (markdown, chapter 1)

Recorded on an H200 on 2026-11-30 (ncu 2025.3.1, driver 580.159.04): wavefronts_h200.json beside
this file. judge.hw.tma.bank_conflicts reproduces all 22 probe counts; the course's previous rule
(previous_model below: 8- and 16-byte loads served 128 bytes at a time, broadcast only inside
those groups) missed 5 of them, among them sgemm_tuned's padded A read (it said 4, ncu counted 2).

On an H200 (the counters need ncu and a GPU; run from the repository root):

    PYTHONPATH=. python -m chapters.ch01_cp_async.wavefronts ncu OUT_DIR    # writes OUT_DIR/wavefronts_h200.json
    (with JUDGE_RECORD=1, in the record run, the counts are also saved as record section ch01.wavefronts)

`ncu` runs this file again with the argument `launch`, which launches wavefront_probe.cu once per
pattern (one warp, REPS loads of WIDTH bytes at the pattern's per-lane offsets) and sgemm_tuned.cu
at 512^3 with padded (A_PAD=4) and unpadded (A_PAD=0) A rows, and reads
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum (wavefronts of shared loads),
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum and smsp__inst_executed_op_shared_ld.sum
(shared-load instructions, per warp) for each. Wavefronts per request = wavefronts / instructions.
"""
from __future__ import annotations

import csv
import datetime
import io
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

from judge.hw import tma

RECORD = HERE / "wavefronts_h200.json"
METRICS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "smsp__inst_executed_op_shared_ld.sum")
LANES = range(32)


def _swz(offsets, mode):
    return [int(tma.swizzle_offset(o, mode)) for o in offsets]


# (name, bytes per lane, byte offset of each lane, where the course uses it)
PATTERNS = [
    ("4 B, consecutive words", 4, [4 * l for l in LANES], "the baseline"),
    ("4 B, one word for all lanes", 4, [256] * 32, "broadcast"),
    ("4 B, stride 2 words", 4, [8 * l for l in LANES], "2-way"),
    ("4 B, column of 128-byte rows", 4, [128 * l for l in LANES], "ch02 section 3, unswizzled"),
    ("4 B, column of 128-byte rows, 128B swizzle", 4, _swz([128 * l for l in LANES], "128B"), "ch02 section 3"),
    ("4 B, column of 64-byte rows, 64B swizzle", 4, _swz([64 * l for l in LANES], "64B"), "ch02 section 3"),
    ("4 B, column of 32-byte rows, 32B swizzle", 4, _swz([32 * l for l in LANES], "32B"), "ch02 section 3"),
    ("4 B, column of 132-byte rows (padded)", 4, [132 * l for l in LANES], "padding"),
    ("8 B, consecutive", 8, [8 * l for l in LANES], "the baseline"),
    ("8 B, one address for all lanes", 8, [256] * 32, "broadcast"),
    ("8 B, stride 16 bytes", 8, [16 * l for l in LANES], "2-way"),
    ("16 B, consecutive", 16, [16 * l for l in LANES], "the baseline"),
    ("16 B, one address for all lanes", 16, [256] * 32, "broadcast"),
    ("16 B, lane % 8 (quarters read the same 128 bytes)", 16, [16 * (l % 8) for l in LANES], "broadcast across quarters"),
    ("16 B, lane // 2 (pairs share an address)", 16, [16 * (l // 2) for l in LANES], "broadcast within quarters"),
    ("16 B, lane // 8 (one address per quarter)", 16, [16 * (l // 8) for l in LANES], "broadcast within quarters"),
    ("16 B, sgemm_tuned A, rows padded to 80 B", 16, [80 * (l // 4) for l in LANES], "ch01 section 6"),
    ("16 B, sgemm_tuned A, rows of 64 B (unpadded)", 16, [64 * (l // 4) for l in LANES], "ch01 section 6"),
    ("16 B, sgemm_tuned B, lane % 4", 16, [16 * (l % 4) for l in LANES], "ch01 section 6"),
    ("16 B, stride 32 bytes", 16, [32 * l for l in LANES], "2-way"),
    ("16 B, column of 128-byte rows", 16, [128 * l for l in LANES], "ch02 section 3, unswizzled"),
    ("16 B, column of 128-byte rows, 128B swizzle", 16, _swz([128 * l for l in LANES], "128B"), "ch02 section 3"),
]
SGEMM_CASES = [("sgemm_tuned, A_PAD=4 (80-byte A rows), all shared loads", {"A_PAD": 4}),
               ("sgemm_tuned, A_PAD=0 (64-byte A rows), all shared loads", {"A_PAD": 0})]
SGEMM_N = 512


def model(width: int, offsets) -> int:
    return tma.bank_conflicts(offsets, width)


def previous_model(width: int, offsets) -> int:
    """The rule the course used before the counters were read: 128 bytes per wavefront, so 8-byte
    loads in two groups of 16 lanes and 16-byte loads in four of 8, each group costing the most
    distinct words in one bank. Kept to show what the measurement changed."""
    group = 128 // width
    total = 0
    for g in range(0, 32, group):
        banks: dict[int, set] = {}
        for a in offsets[g:g + group]:
            for k in range(width // 4):
                word = int(a) // 4 + k
                banks.setdefault(word % 32, set()).add(word)
        if banks:
            total += max(len(s) for s in banks.values())
    return total


# ------------------------------------------------------------------ GPU: the launches ncu profiles
def launch_all(reps: int = 64) -> list[str]:
    """Launch every probe once, then the two sgemm_tuned variants once; returns the labels in order."""
    import cupy
    import numpy as np
    from chapters.ch01_cp_async import sgemm

    from judge.gpu import build
    labels = []
    out = cupy.empty(32, dtype=cupy.float32)
    for name, width, offs, _ in PATTERNS:
        b = build.compile(HERE / "wavefront_probe.cu", defines={"WIDTH": width, "REPS": reps})
        o = cupy.asarray(np.array(offs, dtype=np.uint32))
        b.kernel("wavefront_probe")((1,), (32,), (o, out))
        cupy.cuda.get_current_stream().synchronize()
        labels.append(name)
    n = SGEMM_N
    for name, d in SGEMM_CASES:
        A, B = sgemm.random_inputs(n, n, n, 0)
        C = cupy.empty((n, n), dtype=cupy.float32)
        sgemm.Launcher("sgemm_tuned.cu", d)(A, B, C)
        cupy.cuda.get_current_stream().synchronize()
        labels.append(name)
    return labels


def _ncu_rows(text: str) -> dict[int, dict]:
    start = text.find('"ID"')
    rows: dict[int, dict] = {}
    for r in csv.DictReader(io.StringIO(text[start:])):
        try:
            i = int(r["ID"])
        except (KeyError, ValueError):
            continue
        rows.setdefault(i, {"kernel": r.get("Kernel Name", "")})[r["Metric Name"]] = \
            float(r["Metric Value"].replace(",", "") or "nan")
    return rows


def run_ncu(out_dir: str) -> dict:
    """Profile launch_all() under ncu and write out_dir/wavefronts_h200.json (H200 only)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "ncu_wavefronts.csv"
    labels_file = out / "wavefront_labels.json"
    ver = subprocess.run(["ncu", "--version"], check=False, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    cmd = ["ncu", "--csv", "--print-units", "base", "--clock-control", "none", "--metrics", ",".join(METRICS),
           "--kernel-name", "regex:^(wavefront_probe|sgemm_tuned)$", "--log-file", str(log),
           sys.executable, "-m", __spec__.name, "launch", str(labels_file)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, cwd=ROOT)
    if res.returncode:
        raise RuntimeError(f"ncu failed ({res.returncode}): {res.stderr[-2000:]}{res.stdout[-2000:]}")
    rows = _ncu_rows(log.read_text())
    labels = json.loads(labels_file.read_text())
    ids = sorted(rows)
    if len(ids) != len(labels):
        raise RuntimeError(f"ncu profiled {len(ids)} kernels for {len(labels)} launches")
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    counts = {}
    for i, label in zip(ids, labels):
        r = rows[i]
        wf, conf, inst = (r.get(m) for m in METRICS)
        counts[label] = {"wavefronts": wf, "bank_conflicts": conf, "instructions": inst,
                         "wavefronts_per_request": wf / inst if inst else None}
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], check=False,
                            capture_output=True, text=True).stdout.strip()
    rec = {"device": props["name"].decode(), "driver": driver, "date": datetime.date.today().isoformat(), "ncu": ver,
           "command": " ".join(cmd[:9]) + " ...", "metrics": list(METRICS), "counts": counts}
    (out / RECORD.name).write_text(json.dumps(rec, indent=1))
    from judge import record          # in the record run (JUDGE_RECORD=1) the counts join the Hopper record too
    record.save("ch01.wavefronts", rec, sources=[HERE / "wavefront_probe.cu", HERE / "sgemm_tuned.cu", Path(__file__)])
    return rec


# ------------------------------------------------------------------ model vs counter
def recorded() -> dict | None:
    return json.loads(RECORD.read_text()) if RECORD.exists() else None


def table(rec: dict | None = None) -> list[dict]:
    """One row per pattern: the model's wavefronts and ncu's (None until recorded)."""
    rec = rec if rec is not None else recorded()
    counts = (rec or {}).get("counts", {})
    rows = []
    for name, width, offs, where in PATTERNS:
        got = counts.get(name, {}).get("wavefronts_per_request")
        rows.append({"pattern": name, "where": where, "previous model": previous_model(width, offs),
                     "model": model(width, offs), "ncu (H200)": None if got is None else round(got, 2)})
    for name, _ in SGEMM_CASES:
        got = counts.get(name, {}).get("wavefronts_per_request")
        rows.append({"pattern": name, "where": "ch01 section 6", "previous model": None, "model": None,
                     "ncu (H200)": None if got is None else round(got, 2)})
    return rows


def kernel_note(rec: dict | None = None) -> str:
    """Chapter 1 section 6: sgemm_tuned's measured wavefronts per shared load against what the model predicts
    from its two read patterns (half of its LDS.128 read A, half read B), as markdown, from the recorded counts."""
    rows = {r["pattern"]: r for r in table(rec)}
    a_pad = rows["16 B, sgemm_tuned A, rows padded to 80 B"]["model"]
    a_un = rows["16 B, sgemm_tuned A, rows of 64 B (unpadded)"]["model"]
    b = rows["16 B, sgemm_tuned B, lane % 4"]["model"]
    m_pad, m_un = (rows[name]["ncu (H200)"] for name, _ in SGEMM_CASES)
    if m_pad is None or m_un is None:
        return "*(sgemm_tuned's wavefronts are not recorded yet on an H200)*"
    p_pad, p_un = (a_pad + b) / 2, (a_un + b) / 2
    effect = ("is what the model says" if abs((p_un - p_pad) - (m_un - m_pad)) < 0.1
              else "differs from what the model says")
    return (f"The last two rows are the whole kernel. Every shared load it executes is an `LDS.128`, half of them "
            f"A reads ({a_pad} wavefronts padded, {a_un} not) and half B reads (`lane % 4` within each half-warp: "
            f"{b} either way), so the model predicts {p_pad:.1f} and {p_un:.1f} per load. ncu counted {m_pad:.2f} and "
            f"{m_un:.2f}: the padding's effect ({p_un - p_pad:+.1f} predicted, {m_un - m_pad:+.2f} measured) {effect}; "
            f"the level is {p_pad - m_pad:.2f} to {p_un - m_un:.2f} lower than the prediction, and no counter recorded "
            f"here explains why. The probes above are the evidence for the rule; the kernel is where it is applied.")


if __name__ == "__main__":
    if sys.argv[1:2] == ["launch"]:
        names = launch_all()
        Path(sys.argv[2]).write_text(json.dumps(names))
    elif sys.argv[1:2] == ["ncu"]:
        rec = run_ncu(sys.argv[2])
        for name, c in rec["counts"].items():
            print(f"{c['wavefronts_per_request']!s:>6}  {name}")
    else:
        for r in table():
            print(r)
