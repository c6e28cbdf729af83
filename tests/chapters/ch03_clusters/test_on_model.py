"""tests/chapters/ch03_clusters/test_on_model.py - the CPU model (judge.model) runs Chapter 3's cluster reduction, and catches its early exit.

Run: .venv/bin/python -m pytest tests/chapters/ch03_clusters/test_on_model.py -q      (no GPU)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge.gpu import build
from judge.grading import compare
from judge import model

SUM = Path(__file__).resolve().parents[3] / "chapters" / "ch03_clusters" / "cluster_sum.cu"


def run_sum(kernel, size, cluster, extra=()):
    clusters, per_block = 2, 300
    x = np.random.default_rng().standard_normal(clusters * size * per_block).astype(np.float32)
    out = compare.poison(np.empty(clusters, np.float32))
    model.run(build.compile(SUM), kernel, grid=(clusters * size,), block=(256,), cluster=(cluster, 1, 1),
              args=(x, out, np.int32(per_block)) + extra)
    return out, x.astype(np.float64).reshape(clusters, -1).sum(axis=1)


@pytest.mark.parametrize("size", [1, 2, 4])
def test_the_dsmem_reduction_of_a_cluster_is_correct(size):
    out, ref = run_sum("cluster_sum", size, size)
    assert compare.compare(out, ref, rtol=1e-5, atol=1e-2).ok


def test_the_compile_time_pair_takes_its_cluster_shape_from_the_ptx():
    out, ref = run_sum("cluster_sum_pair", 2, 1)          # launched without a cluster: __cluster_dims__ decides
    assert compare.compare(out, ref, rtol=1e-5, atol=1e-2).ok


def test_peers_that_exit_before_rank_0_read_them_are_caught():
    with pytest.raises(model.Violation) as e:
        run_sum("cluster_sum_early_exit", 2, 2, (np.uint32(20000),))
    assert e.value.rule == "dsmem-after-exit"
