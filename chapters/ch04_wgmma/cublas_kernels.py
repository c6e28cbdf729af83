"""What cuBLAS runs, beside the course's GEMMs: each cuBLAS kernel that the record's counters pass profiled
(judge.record.counters, CUBLAS_PROFILED: one call of torch's bf16 matmul or torch._scaled_mm under Nsight
Compute, checked against float64) with its name read into tile, K step, stages and cluster, and the same
counters as the course's kernels.

    from chapters.ch04_wgmma import cublas_kernels
    cublas_kernels.parse("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")    # any machine
    cublas_kernels.rows(record.figures("ch04.counters"), ["TMA store + L2 order", "ping-pong"], 4096)

Used by chapters/ch04_wgmma.ipynb and chapters/ch05_blackwell.ipynb; tested by tests/chapters/ch04_wgmma/test_cublas_kernels.py.
What a name says is cuBLAS's own naming, read as it reads (the tile field is printed as the library prints it,
without claiming which of its numbers is M); the launch (grid, block) and the counters are measured.
"""
from __future__ import annotations

import re

# nvjet_sm90_<types>_<tile a>x<tile b>_<k step>x<stages>_<cluster a>x<cluster b>_<the rest>
_NAME = re.compile(r"_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_(.+)$")


def parse(name: str) -> dict:
    """A cuBLAS kernel name -> {"tile", "k step", "stages", "cluster", "rest"}; the fields are None when the
    name does not have that shape (then only "rest", the whole name, is kept)."""
    m = _NAME.search(name or "")
    if not m:
        return {"tile": None, "k step": None, "stages": None, "cluster": None, "rest": name}
    a, b, k, s, ca, cb, rest = m.groups()
    return {"tile": f"{a}x{b}", "k step": int(k), "stages": int(s), "cluster": f"{ca}x{cb}", "rest": rest}


def _gb(v) -> float | None:
    return round(v / 1e9, 3) if isinstance(v, float) else None


def _row(r: dict) -> dict:
    s = r["summary"]
    name = (r.get("launch") or {}).get("Kernel Name", r["kernel"])
    p = parse(name) if ".cublas_" in r.get("id", "") else {}
    clock = s.get("SM clock Hz (while profiled)")
    return {"kernel": r["label"], "size": r["size"], "name": name if p else r["kernel"],
            "tile (name)": p.get("tile") or "", "stages (name)": p.get("stages") or "",
            "cluster (name)": p.get("cluster") or "", "block": (r.get("launch") or {}).get("Block Size", ""),
            "tensor pipe %": s.get("tensor pipe %"), "issue slots %": s.get("issue slots busy %"),
            "FMA pipe %": s.get("FMA pipe %"), "L2 GB": _gb(s.get("L2 bytes")),
            "TMA load GB": _gb(s.get("TMA load bytes")), "DRAM GB": _gb(s.get("DRAM bytes")),
            "SM GHz (profiled)": round(clock / 1e9, 2) if isinstance(clock, float) else None}


def cublas_rows(counters: dict | None) -> list[dict]:
    """The record's cuBLAS rows of a chapter's counters section (the ids judge.record.counters gives them)."""
    return [r for r in (counters or {}).get("rows", []) if ".cublas_" in r.get("id", "") and r.get("summary")]


def rows(counters: dict | None, labels=(), n: int = 4096) -> list[dict]:
    """Table rows at n^3: the course's kernels named in `labels` (their counters-pass labels), then cuBLAS's."""
    size = f"{n}^3"
    ours = [r for r in (counters or {}).get("rows", []) if r.get("label") in labels and r.get("size") == size
            and r.get("summary")]
    ours.sort(key=lambda r: list(labels).index(r["label"]))
    return [_row(r) for r in ours + [r for r in cublas_rows(counters) if r.get("size") == size]]


def tensor_gap(counters: dict | None, label: str, n: int, cublas_label: str) -> float | None:
    """Percentage points of tensor-pipe activity by which the course's `label` trails cuBLAS's `cublas_label`
    at n^3 (negative: ahead), or None when either was not profiled."""
    by = {(r["kernel"], r["size"]): r for r in rows(counters, (label,), n)}
    ours, theirs = by.get((label, f"{n}^3")), by.get((cublas_label, f"{n}^3"))
    if not ours or not theirs or None in (ours["tensor pipe %"], theirs["tensor pipe %"]):
        return None
    return theirs["tensor pipe %"] - ours["tensor pipe %"]
