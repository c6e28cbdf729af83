"""Grader of tma_tiles: python practice/judge.py check tma_tiles

judge.grade.cuda_flow: compile for sm_90a, SASS must show UTMALDG, UTMASTG and SYNCS (mbarrier);
on a Hopper GPU, then: 5 shapes whose sizes are not multiples of the 32x64 box (fresh random
inputs each run, seed printed; output poisoned with NaN; float64 reference), and the
bandwidth against a device-to-device copy measured in the same run.

The host side is here: the two tensor maps come from judge.tma.tensor_map (innermost-first dims and
box; it checks the hardware rules, then calls cuTensorMapEncodeTiled) and are passed by value, as
128-byte numpy structured scalars, to the kernel's `const __grid_constant__ TensorMap` parameters.
"""
import numpy as np

from judge import compare, grade, timing, tma

KERNEL = "tma_affine"
BOX_ROWS, BOX_COLS, THREADS = 32, 64, 128     # must match the #defines of tma_tiles.cu
# (rows, cols): cols is a multiple of 4 so that a row is a multiple of 16 bytes (the globalStrides rule);
# all but the seed's 1024x2048 have partial tiles at the right and/or bottom edge (box 32x64), and
# 7x4 is smaller than one box.
SHAPES = [(33, 68), (7, 4), (1000, 1500), (1024, 2048), (4097, 2052)]
BENCH_SHAPE = (8192, 8188)


def encode(arr):
    """A tensor map over a 2-D row-major float32 cupy array: box BOX_ROWS x BOX_COLS, no swizzle,
    checked against the hardware rules by judge.tma, passed by value (its 128 bytes)."""
    return tma.tensor_map(arr, box=(BOX_COLS, BOX_ROWS), l2_promotion="128B").as_kernel_arg()


def _launcher(b, x, y):
    """launch() runs y = 2x + 1 with one block per box; x and y must outlive the maps."""
    fn = b.kernel(KERNEL)
    rows, cols = x.shape
    grid = ((cols + BOX_COLS - 1) // BOX_COLS, (rows + BOX_ROWS - 1) // BOX_ROWS, 1)
    args = (encode(x), encode(y))
    return lambda: fn(grid, (THREADS, 1, 1), args)


def run_cases(b, sub):
    import cupy
    comps = []
    for k, (rows, cols) in enumerate(SHAPES):
        seed = int(np.random.SeedSequence().entropy % (1 << 31))
        case = f"{rows}x{cols} (seed {seed})"
        sub.progress(f"case {k + 1}/{len(SHAPES)}: {case}")
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal((rows, cols), dtype=cupy.float32)
        y = compare.poison(cupy.empty_like(x))
        _launcher(b, x, y)()
        cupy.cuda.get_current_stream().synchronize()     # a hang waits here; the watchdog ends it
        ref = 2.0 * x.get().astype(np.float64) + 1.0
        comps.append(compare.compare(y, ref, rtol=1e-6, atol=1e-7, case=case))
    return comps


def measure(b, sub):
    import cupy
    sub.progress("timing a device-to-device copy (the ceiling)")
    ceiling = timing.copy_ceiling()
    rows, cols = BENCH_SHAPE
    sub.progress(f"timing tma_affine on {rows}x{cols}")
    rng = cupy.random.default_rng()
    x = rng.standard_normal((rows, cols), dtype=cupy.float32)
    y = cupy.empty_like(x)
    t = timing.bench(_launcher(b, x, y), bytes=2 * x.nbytes)            # each element read once, written once
    return t.gbps / ceiling.gbps, {"gbps": t.gbps, "copy_gbps": ceiling.gbps, "median_ms": t.median_ms,
                                   "spread": t.spread, "shape": [rows, cols]}


def check(sub):
    return grade.cuda_flow(sub, kernel=KERNEL, features=["tma.load", "tma.store", "mbarrier"],
                           run_cases=run_cases, measure=measure, tiers=sub.exercise.tiers)
