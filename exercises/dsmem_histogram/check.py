"""Grader of dsmem_histogram: python practice/judge.py check dsmem_histogram

The engine (judge.grading.cuda_flow.grade) compiles histogram.cu for sm_90a, checks that the SASS shows the
cluster barrier (UCGABAR_ARV / UCGABAR_WAIT), runs the model cases (drawn per run: n with and without a tail
n % 4) on the CPU model of the machine (judge.model), then on an H200 every case with fresh random inputs
against numpy.bincount, exactly, and times the kernel against global atomics
(chapters/ch03_clusters/histogram.cu, hist_global) measured in the same run. The model also counts the adds
that reach a peer block's shared memory through .shared::cluster (exercise.toml [uses]): a histogram that
never touches a peer is MISSING FEATURE, whatever its SASS shows.

The launch: hist is zeroed (the poison the engine wrote is overwritten here, for every variant
alike: a histogram adds), then grid (BLOCKS,1,1), 256 threads, clusters of (CLUSTER,1,1) and
4 * ceil(bins / CLUSTER) bytes of dynamic shared memory. CLUSTER and BLOCKS are read from the
learner's file. The CPU model runs the same launch, the whole grid of BLOCKS blocks, with %nsmid and
the cluster registers as on an H200: a kernel cannot tell it from the GPU by its grid.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from judge.gpu import build as _build
from judge.gpu import launch as _launch

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "cluster_histogram"
THREADS = 256


def plan(build) -> tuple[int, int]:
    """(CLUSTER, BLOCKS) as the learner's file defines them."""
    found = {}
    for name in ("CLUSTER", "BLOCKS"):
        m = re.search(rf"^\s*#\s*define\s+{name}\s+(\d+)", build.source, re.MULTILINE)
        if not m:
            raise _launch.LaunchError(f"histogram.cu must #define {name} (CLUSTER: blocks per cluster, "
                                      f"BLOCKS: the grid in blocks); the grader launches with them")
        found[name] = int(m.group(1))
    return found["CLUSTER"], found["BLOCKS"]


def inputs(case, xp, rng):
    return {"x": rng.integers(0, case["bins"], case["n"], dtype=np.int32).astype(xp.int32)}


def outputs(case, ins, xp):
    return {"hist": xp.empty(case["bins"], dtype=xp.uint32)}


def reference(case, ins):
    return {"hist": np.bincount(np.asarray(ins["x"]), minlength=case["bins"]).astype(np.int64)}


def launch(build, case, ins, outs):
    cluster, blocks = plan(build)
    hist = outs["hist"]
    hist[...] = 0
    return _launch.launch(build, KERNEL, grid=(blocks, 1, 1), block=(THREADS, 1, 1),
                          args=(ins["x"], np.int32(case["n"]), np.int32(case["bins"]), hist),
                          shared_bytes=4 * (-(-case["bins"] // cluster)), cluster=(cluster, 1, 1))


def work(case):
    return {"bytes": 4 * case["n"]}


def baseline(case, ins, outs):
    """One global atomicAdd per element, the same zeroing: the kernel to beat."""
    from judge import gpu
    b = _build.compile(ROOT / "chapters" / "ch03_clusters" / "histogram.cu")
    hist = outs["hist"]
    hist[...] = 0
    _launch.launch(b, "hist_global", grid=(8 * gpu.info().sms, 1, 1), block=(THREADS, 1, 1),
                   args=(ins["x"], np.int32(case["n"]), hist))


def check(sub):
    from judge.grading import cuda_flow
    return cuda_flow.grade(sub, __import__(__name__))
