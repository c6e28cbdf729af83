"""chapters/ch05_blackwell/counters.py - what the record's counters pass profiles in chapter 5: the course's FP8
GEMM (gemm_fp8.cu) plain, PROMOTE=1 and PROMOTE=2 at 4096^3 and 8192^3, PROMOTE=2 with its descriptors built
anew (DESC_STEP=0), and cuBLAS's FP8 GEMM (fast and default accumulation) beside them; each in a child process
under Nsight Compute. Three of them also get a per-instruction ledger ("ledger": ncu's SourceCounters, for the
chapter's "why" that names instructions: stepped descriptors). The pass (judge/record/counters.py) reads this
list and starts the children; figures.toml names this module.

    python -m chapters.ch05_blackwell.counters --list                    # the kernels, one JSON object a line
    python -m chapters.ch05_blackwell.counters --run ch05.fp8_promote2   # one checked launch (ncu profiles it)
"""
from __future__ import annotations

import os
from pathlib import Path

from chapters.ch04_wgmma.counters import CUBLAS_KERNELS
from chapters.ch05_blackwell import fp8
from judge.record.counters import chapter_main, say

HERE = Path(__file__).resolve().parent
KERNEL_FILE = HERE / "gemm_fp8.cu"
N = 4096
#: gemm_fp8.cu, by PROMOTE level, at these sizes
FP8_PROFILED = ((0, 4096), (1, 4096), (2, 4096), (0, 8192), (1, 8192), (2, 8192))
#: PROMOTE=2 built with DESC_STEP=0 (each k32 descriptor built anew from its address), for the ledger
FP8_ANEW = {"id": "ch05.fp8_promote2_anew", "label": "gemm_fp8.cu, descriptors built anew (PROMOTE=2, DESC_STEP=0)",
            "defines": {"PROMOTE": 2, "DESC_STEP": 0}}
#: the kernels that also get a per-instruction ledger
LEDGERED = ("ch05.fp8_promote2", "ch05.fp8_promote2_anew", "ch05.cublas_fp8_default")


def kernels() -> list[dict]:
    """One row per kernel: id, chapter, label, kernel (its name, for ncu's -k), n, size, sources, ledger."""
    srcs = [str(KERNEL_FILE), str(HERE / "fp8.py"), __file__]
    out = [{"id": f"ch05.fp8_promote{promote}" + ("" if n == N else f"_{n}"), "chapter": "ch05",
            "label": f"gemm_fp8.cu PROMOTE={promote}", "kernel": "gemm_fp8", "promote": promote, "n": n,
            "size": f"{n}^3", "sources": srcs} for promote, n in FP8_PROFILED]
    out.append({**FP8_ANEW, "chapter": "ch05", "kernel": "gemm_fp8", "promote": 2, "variant": True, "n": N,
                "size": f"{N}^3", "sources": srcs})
    for what, n in (("fp8 fast", 4096), ("fp8 fast", 8192), ("fp8 default", 4096), ("fp8 default", 8192)):
        out.append({"id": f"ch05.cublas_{what.replace(' ', '_')}" + ("" if n == N else f"_{n}"), "chapter": "ch05",
                    "label": "cuBLAS FP8, " + ("use_fast_accum=True" if what == "fp8 fast" else "default (promoting)"),
                    "kernel": CUBLAS_KERNELS, "regex": True, "cublas": what, "variant": True, "n": n,
                    "size": f"{n}^3", "sources": [str(HERE / "fp8.py"), __file__]})
    for k in out:
        k["ledger"] = k["id"] in LEDGERED
    return out


def run(k: dict) -> None:
    """One launch at n^3, checked as fp8.py checks it: gemm_fp8.cu through fp8.wgmma_fp8_check (fresh
    block-quantized inputs, C poisoned, against float64); cuBLAS's call (torch._scaled_mm with the FP8 block
    scales per row and column) against float64 computed after it (the profiled launch is the first GEMM)."""
    n = k["n"]
    if not k.get("cublas"):
        return fp8.wgmma_fp8_check(n, n, n, promote=k["promote"], defines=k.get("defines"), say=say)
    import torch
    from judge.grading import compare
    seed = int.from_bytes(os.urandom(4), "little")
    g = torch.Generator(device="cuda").manual_seed(seed)
    qa, sa = fp8.quantize_blocks(torch.randn(n, n, device="cuda", generator=g))
    qb, sb = fp8.quantize_blocks(torch.randn(n, n, device="cuda", generator=g))
    ra, rb = fp8.row_scales({"qa": qa, "qb": qb, "sa": sa, "sb": sb})
    c = compare.poison(torch.empty(n, n, device="cuda", dtype=torch.bfloat16))
    out = fp8._scaled_mm_paths(rowwise=True)[k["cublas"].split()[1]](qa, qb, c, sa, sb, ra, rb)   # the launch ncu profiles
    torch.cuda.synchronize()
    rel, bad = fp8._rel_err64(out, fp8.dequantize_blocks(qa, sa) @ fp8.dequantize_blocks(qb, sb).T)
    say(bad == 0 and rel < fp8.REL_TOL, f"cuBLAS {k['cublas']} {n}^3 seed {seed}: rel. error {rel:.2e}, {bad} not finite")


if __name__ == "__main__":
    raise SystemExit(chapter_main(kernels, run))
