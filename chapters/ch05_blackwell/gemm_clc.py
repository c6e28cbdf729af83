"""gemm_clc.py - build gemm_clc.cu (persistent tiles by cluster launch control) for sm_100a and run it on the CPU model.

Any machine, no GPU (none is used, and no Blackwell GPU has run this kernel):

    from chapters.ch05_blackwell import gemm_clc
    b = gemm_clc.build_kernel()                      # NVRTC, sm_100a cubin + PTX
    gemm_clc.try_cancel_sass(b)                      # the SASS lines of try_cancel (UGETNEXTWORKID)
    res = gemm_clc.run_on_model(64, 48, 40)
    res["max_abs_err"], res["blocks_run"], res["cancelled"]

run_on_model draws fresh random fp32 inputs, poisons C with NaN, runs the kernel's own PTX on judge.model
(which runs the grid's blocks one after another in its own order: a try_cancel takes a block that has not
started out of the launch) and compares C with the float64 product. It also reads back how often each
tile was computed: exactly once each, whoever computed it. Tests: tests/chapters/ch05_blackwell/test_gemm_clc.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from judge import model
from judge.grading import compare
from judge.gpu import build
from judge.hw import sass

SOURCE = Path(__file__).with_name("gemm_clc.cu")
KERNEL = "gemm_clc"
TILE = 16                                   # as gemm_clc.cu's #define


def build_kernel(source=None, tile: int = TILE):
    """gemm_clc.cu (or CUDA text of a variant) compiled for sm_100a with TILE."""
    if source is not None:
        source = build.inline_headers(source, SOURCE)
    return build.compile(source if source is not None else SOURCE, target="sm_100a", defines={"TILE": tile},
                         name="gemm_clc.cu")


def try_cancel_sass(b, limit: int = 4) -> list[str]:
    """The SASS lines that prove the kernel asks for work by cancelling blocks (UGETNEXTWORKID)."""
    return sass.lines_with(sass.kernel_section(b.sass, KERNEL), "clc.try_cancel", limit)


def run_on_model(M: int, N: int, K: int, *, b=None, seed=None, tile: int = TILE) -> dict:
    """C = A B on the CPU model: the error against float64, and who computed which tile."""
    b = b if b is not None else build_kernel(tile=tile)
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C = compare.poison(np.empty((M, N), np.float32))
    gx, gy = -(-N // tile), -(-M // tile)
    done = np.zeros(gx * gy, np.int32)
    rep = model.run(b, KERNEL, grid=(gx, gy, 1), block=(tile * tile, 1, 1),
                    args=(np.int32(M), np.int32(N), np.int32(K), A, B, C, done), seed=seed)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    return {"A": A, "B": B, "C": C, "reference": ref, "max_abs_err": float(np.nanmax(np.abs(C - ref))) if not np.isnan(C).any()
            else float("nan"), "tiles_done": done.reshape(gy, gx), "blocks_run": len(rep.ctaids),
            "blocks_total": rep.blocks_total, "cancelled": rep.cancelled, "report": rep}
