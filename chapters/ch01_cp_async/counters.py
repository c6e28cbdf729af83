"""chapters/ch01_cp_async/counters.py - what the record's counters pass profiles in chapter 1: every SGEMM of
the chapter's table (sgemm.BASELINES) at 4096^3, each in a child process under Nsight Compute. The pass
(judge/record/counters.py) reads this list and starts the children; figures.toml names this module.

    python -m chapters.ch01_cp_async.counters --list                  # the kernels, one JSON object a line
    python -m chapters.ch01_cp_async.counters --run ch01.sgemm_tuned  # one checked launch (ncu profiles it)
"""
from __future__ import annotations

import os
from pathlib import Path

from chapters.ch01_cp_async import sgemm
from judge.record.counters import chapter_main, say

HERE = Path(__file__).resolve().parent
N = 4096                          # every SGEMM is profiled at 4096^3


def kernels() -> list[dict]:
    """One row per SGEMM of the table: id, chapter, label, kernel (its name, for ncu's -k), size, sources."""
    return [{"id": f"ch01.{Path(f).stem}", "chapter": "ch01", "label": label, "kernel": sgemm.spec(f, defines).name,
             "file": f, "defines": defines, "n": N, "size": f"{N}^3",
             "sources": [str(HERE / f), str(HERE / "sgemm.py"), __file__]}
            for label, f, defines in sgemm.BASELINES]


def run(k: dict) -> None:
    """One launch of the kernel at n^3 on fresh random inputs, C poisoned, then rows 0..511 against float64."""
    import cupy
    from judge.grading import compare
    n = k["n"]
    seed = int.from_bytes(os.urandom(4), "little")
    launch = sgemm.Launcher(k["file"], k["defines"])
    A, B = sgemm.random_inputs(n, n, n, seed=seed)
    C = compare.poison(cupy.empty((n, n), dtype=cupy.float32))
    launch(A, B, C)                              # the launch ncu profiles
    cupy.cuda.get_current_stream().synchronize()
    ref = cupy.matmul(A[:512].astype(cupy.float64), B.astype(cupy.float64))
    r = compare.compare(C[:512], ref, case=f"{k['file']} {n}^3 seed {seed} rows 0..511", **sgemm.tolerances(n))
    say(r.ok, r.message or r.case)


if __name__ == "__main__":
    raise SystemExit(chapter_main(kernels, run))
