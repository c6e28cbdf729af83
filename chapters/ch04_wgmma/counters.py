"""chapters/ch04_wgmma/counters.py - what the record's counters pass profiles in chapter 4: every rung and
variant of the ladder (ladder.RUNGS, ladder.VARIANTS) at 4096^3, again at 8192^3 the ones whose claim rests on
that size (ladder.profiled_at), and cuBLAS's bf16 GEMM at both sizes beside them; each in a child process under
Nsight Compute. The pass (judge/record/counters.py) reads this list and starts the children; figures.toml names
this module.

    python -m chapters.ch04_wgmma.counters --list               # the kernels, one JSON object a line
    python -m chapters.ch04_wgmma.counters --run ch04.tma_ring  # one checked launch (ncu profiles it)
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from chapters.ch04_wgmma import ladder
from judge.record.counters import chapter_main, say

HERE = Path(__file__).resolve().parent
N = 4096                          # every GEMM is profiled at 4096^3; some again at 8192^3
#: ncu's kernel filter for cuBLAS's kernels: the library chooses their names (its name says its tile, stages and
#: cluster: cublas_kernels.py), so ncu takes the first launch whose name contains one of these; the child makes
#: no other GEMM before the profiled call
CUBLAS_KERNELS = "nvjet|xmma|cutlass|gemm"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _size(n: int) -> str:
    return f"{n}^3"


def kernels() -> list[dict]:
    """One row per kernel: id, chapter, label, kernel (its name, for ncu's -k), n, size, sources."""
    out = []
    at = [(r, N) for r in ladder.RUNGS + ladder.VARIANTS] + [(ladder.rung(x), 8192) for x in ladder.profiled_at(8192)]
    for r, n in at:
        out.append({"id": f"ch04.{_slug(r['name'])}" + ("" if n == N else f"_{n}"), "chapter": "ch04",
                    "label": r["name"], "kernel": r["kernel"], "variant": r not in ladder.RUNGS or n != N,
                    "n": n, "size": _size(n), "sources": [str(HERE / r["file"]), str(HERE / "ladder.py"), __file__]})
    for n in (N, 8192):
        out.append({"id": "ch04.cublas_bf16" + ("" if n == N else f"_{n}"), "chapter": "ch04", "label": "cuBLAS bf16",
                    "kernel": CUBLAS_KERNELS, "regex": True, "cublas": "bf16", "variant": True, "n": n,
                    "size": _size(n), "sources": [str(HERE / "ladder.py"), __file__]})
    return out


def run(k: dict) -> None:
    """One launch at n^3 on fresh random inputs (the output poisoned where the call takes one), then a
    512 x 512 sample of it against float64 computed after the launch (the profiled launch is the first GEMM)."""
    import torch
    from judge.grading import compare
    n = k["n"]
    seed = int.from_bytes(os.urandom(4), "little")
    a, b = ladder._inputs(n, n, n, seed)
    if k.get("cublas"):
        c = a @ b.T                              # the launch ncu profiles
        torch.cuda.synchronize()
        r = ladder.compare_output(c, a, b, case=f"cuBLAS bf16 {n}^3 seed {seed}")
        return say(r.ok, r.message or r.case)
    c = ladder._poisoned(n, n)
    launch = ladder.launcher(k["label"], n, n, n)
    launch(a, b, c)                              # the launch ncu profiles
    torch.cuda.synchronize()
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    rows = torch.randperm(n, device="cuda", generator=g)[:512].sort().values
    cols = torch.randperm(n, device="cuda", generator=g)[:512].sort().values
    ref, atol = ladder.reference(a, b, rows, cols)
    r = compare.compare(c[rows][:, cols].float().cpu().numpy(), ref.cpu().numpy(), rtol=ladder.RTOL,
                        atol=atol.cpu().numpy(), norm_tol=ladder.NORM_TOL,
                        case=f"{k['label']} {n}^3 seed {seed} (512 x 512 sample)")
    say(r.ok, r.message or r.case)


if __name__ == "__main__":
    raise SystemExit(chapter_main(kernels, run))
