"""Grader of tma_tiles: python practice/judge.py check tma_tiles

The shared CUDA flow (judge.grading.cuda_flow) runs exercise.toml's cases and timing; this file holds what is
this exercise's own. The host side of the kernel is here: the two tensor maps come from
judge.hw.tma.tensor_map (innermost-first dims and box; it checks the hardware rules, then encodes) and
are passed by value to the kernel's `const __grid_constant__ TensorMap` parameters through
judge.gpu.launch. y = 2x + 1 is exact in float32 for these inputs' magnitudes up to one rounding, so the
limit is one float32 ulp of the result: rtol 2^-23.
"""
from __future__ import annotations

import numpy as np

from judge.gpu import launch as _launch
from judge.hw import tma

KERNEL = "tma_affine"
BOX_ROWS, BOX_COLS, THREADS = 32, 64, 128     # must match the #defines of tma_tiles.cu


def inputs(case, xp, rng):
    return {"x": rng.standard_normal((case["rows"], case["cols"]), dtype=xp.float32)}


def outputs(case, ins, xp):
    return {"y": xp.empty_like(ins["x"])}


def reference(case, ins):
    return {"y": 2.0 * ins["x"].astype(np.float64) + 1.0}


def tolerance(case):
    return {"rtol": 2.0 ** -23, "atol": 2.0 ** -24}


def _map(arr):
    """A tensor map over a 2-D row-major float32 array: box BOX_ROWS x BOX_COLS, no swizzle."""
    return tma.tensor_map(arr, box=(BOX_COLS, BOX_ROWS), l2_promotion="128B")


def launch(build, case, ins, outs):
    rows, cols = case["rows"], case["cols"]
    grid = ((cols + BOX_COLS - 1) // BOX_COLS, (rows + BOX_ROWS - 1) // BOX_ROWS, 1)
    return _launch.launch(build, KERNEL, grid=grid, block=(THREADS,), args=(_map(ins["x"]), _map(outs["y"])))


def owned(case, name, ctaids):
    """The elements of y that blocks `ctaids` write: block (bx, by) stores the box at rows 32 by, columns
    64 bx (cut at the edges). The CPU model runs a sample of a large grid; only these are compared."""
    keep = np.zeros((case["rows"], case["cols"]), bool)
    for bx, by, _ in ctaids:
        keep[by * BOX_ROWS:(by + 1) * BOX_ROWS, bx * BOX_COLS:(bx + 1) * BOX_COLS] = True
    return keep


def work(case):
    return {"bytes": 2.0 * 4 * case["rows"] * case["cols"]}     # each element read once, written once
