"""Integer atomic adds on the CPU model: every lane at once gives what one lane at a time in lane order gives.

Run: PYTHONPATH=$PWD python -m pytest tests/model/test_model_atomic_adds.py -q

judge.model.ops.memory runs atom/red.add on integers in shared, cluster-shared and global memory for
all lanes of an instruction together (VECTOR_ADDS); the reference is the lane-by-lane loop it replaced.
A kernel whose lanes collide on few addresses returns every old value and the final counts; both
paths, with the same seed, must agree bit for bit, and the counts must be the histogram.
"""
from __future__ import annotations

import numpy as np
import pytest

from judge import model
from judge.gpu import build
from judge.model.ops import memory

ADDS = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(2, 1, 1) adds(const int* x, unsigned* olds, unsigned* hist,
                                                          unsigned long long* wide, int n) {
  __shared__ unsigned counts[8];
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x < 8) counts[threadIdx.x] = 0;
  cluster.sync();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const int b = x[i];
    unsigned* where = cluster.map_shared_rank(&counts[b % 8], (b / 8) % 2);
    olds[i] = atomicAdd(where, 1u + (b & 1));            // a peer's or its own shared memory, old value back
    atomicAdd(&hist[b], 1u);                             // global
    atomicAdd(&wide[b % 3], (unsigned long long)b << 33); // 64-bit global, wrapping
  }
  cluster.sync();
  if (threadIdx.x < 8) atomicAdd(&hist[16 + 8 * (blockIdx.x % 2) + threadIdx.x], counts[threadIdx.x]);
}
'''


def _run(b, x, seed):
    n = len(x)
    olds = np.zeros(n, np.uint32)
    hist = np.zeros(32, np.uint32)
    wide = np.zeros(3, np.uint64)
    model.run(b, "adds", grid=(4,), block=(64,), args=(x, olds, hist, wide, np.int32(n)), seed=seed)
    return olds, hist, wide


@pytest.fixture(scope="module")
def kernel():
    return build.compile(ADDS, target="sm_90a", name="adds.cu")


def test_all_lanes_at_once_equal_lane_by_lane(kernel, monkeypatch):
    rng = np.random.default_rng()
    x = rng.integers(0, 16, 250).astype(np.int32)
    seed = int(rng.integers(1 << 31))
    fast = _run(kernel, x, seed)
    monkeypatch.setattr(memory, "VECTOR_ADDS", False)
    slow = _run(kernel, x, seed)
    for a, b in zip(fast, slow):
        assert np.array_equal(a, b)
    hist = fast[1]
    assert np.array_equal(hist[:16], np.bincount(x, minlength=16))
    wide = np.zeros(3, np.uint64)
    for v in x:
        wide[v % 3] += np.uint64(int(v) << 33)
    assert np.array_equal(fast[2], wide)
