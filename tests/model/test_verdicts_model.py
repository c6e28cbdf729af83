"""The CPU model is a machine no kernel can tell from an H200, and orders memory as the PTX ISA does.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_verdicts_model.py -q -p no:cacheprovider

Each test runs a small kernel written for it through judge.model.run and checks it against values
computed here (special registers from the launch shape; tf32 rounding from exact integer arithmetic on
the bits), with fresh random inputs and outputs poisoned first.
"""
from __future__ import annotations

import numpy as np
import pytest

from judge import model
from judge.gpu import build

SREGS = r'''
extern "C" __global__ void __cluster_dims__(2, 1, 1) sregs(unsigned* out) {
  unsigned v[8];
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v[0]));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(v[1]));
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(v[2]));
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(v[3]));
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(v[4]));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(v[5]));
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(v[6]));
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v[7]));
  if (threadIdx.x == 0)
    for (int i = 0; i < 8; ++i) out[blockIdx.x * 8 + i] = v[i];
}
'''


def _poisoned(n, dtype=np.uint32):
    a = np.empty(n, dtype)
    a.view(np.uint8)[:] = 0xA5
    return a


def test_special_registers_read_as_on_an_h200_over_the_real_grid():
    b = build.compile(SREGS, target="sm_90a", name="sregs.cu")
    grid = 2 * int(np.random.default_rng().integers(3, 90))          # a real grid, clusters of 2
    out = _poisoned(grid * 8)
    rep = model.run(b, "sregs", grid=(grid,), block=(64,), args=(out,))
    v = out.reshape(grid, 8)
    assert (v[:, 0] == 132).all(), "%nsmid of an H200"
    assert (v[:, 1] < 132).all() and len(set(v[:, 1].tolist())) == min(grid, 132), "%smid: a distinct SM per block"
    assert (v[:, 2] == grid).all()
    assert (v[:, 3] == np.arange(grid) // 2).all()
    assert (v[:, 4] == grid // 2).all()
    assert (v[:, 5] == np.arange(grid) % 2).all()
    assert (v[:, 6] == 2).all()
    assert (v[:, 7] == np.arange(grid)).all()
    assert rep.blocks_total == grid and len(rep.ctaids) == grid


def test_a_sampled_grid_runs_whole_clusters_and_says_which():
    b = build.compile(SREGS, target="sm_90a", name="sregs.cu")
    grid = 64
    out = _poisoned(grid * 8)
    rep = model.run(b, "sregs", grid=(grid,), block=(64,), args=(out,), max_blocks=8)
    ran = sorted(x for x, _, _ in rep.ctaids)
    assert len(ran) == 8 and rep.blocks_total == grid
    assert all(x % 2 == 0 and x + 1 in ran for x in ran[::2]), f"whole clusters: {ran}"
    v = out.reshape(grid, 8)
    assert (v[ran, 2] == grid).all() and (v[ran, 7] == ran).all(), "the sample sees the real grid"
    skipped = [x for x in range(grid) if x not in ran]
    assert (v[skipped] == 0xA5A5A5A5).all(), "blocks not run write nothing"


TF32 = r'''
extern "C" __global__ void tf32(const float* x, unsigned* rna, unsigned* rn, unsigned* rz, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned a, b, c;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(a) : "f"(x[i]));
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(b) : "f"(x[i]));
  asm("cvt.rz.tf32.f32 %0, %1;" : "=r"(c) : "f"(x[i]));
  rna[i] = a; rn[i] = b; rz[i] = c;
}
'''


def _tf32_exact(bits: np.ndarray, mode: str) -> np.ndarray:
    """tf32 rounding with Python integers, one value at a time (the reference)."""
    out = []
    for u in bits.tolist():
        s, mag = u & 0x80000000, u & 0x7FFFFFFF
        if mag > 0x7F800000:
            out.append(0x7FFFFFFF)
            continue
        if mag == 0x7F800000:
            out.append(u)
            continue
        q, r = divmod(mag, 1 << 13)
        if mode == "rna":
            q += r >= (1 << 12)
        elif mode == "rn":
            q += r > (1 << 12) or (r == (1 << 12) and q & 1)
        out.append(s | (q << 13))
    return np.array(out, np.uint32)


def test_cvt_tf32_rounds_as_the_ptx_isa_says():
    b = build.compile(TF32, target="sm_90a", name="tf32.cu")
    rng = np.random.default_rng()
    n = 509
    x = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, n).astype(np.float32)
    bits = x.view(np.uint32)
    # ties, both parities, and the edges
    bits[:6] = [0x3F801000, 0x3F803000, 0xBF801000, 0x7F7FF000, 0x7F800000, 0x7FC00001]
    outs = [_poisoned(n) for _ in range(3)]
    model.run(b, "tf32", grid=(-(-n // 128),), block=(128,), args=(x, *outs, np.int32(n)))
    for got, mode in zip(outs, ("rna", "rn", "rz")):
        want = _tf32_exact(bits, mode)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), f"{mode}: at {bad[:4]} got {got[bad[:4]]} want {want[bad[:4]]}"
    assert outs[0][0] == 0x3F802000 and outs[1][0] == 0x3F800000, "a tie: away from zero vs to even"


RELAXED = r'''
extern "C" __global__ void __cluster_dims__(2, 1, 1) handoff(unsigned* out, int relaxed) {
  __shared__ unsigned box;
  unsigned rank; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) box = 1000 + rank;
  if (relaxed) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  else asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(&box)), r, v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank ^ 1));
  if (threadIdx.x == 0) {
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(r) : "memory");
    out[blockIdx.x] = v;
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
'''


def test_a_relaxed_cluster_arrive_orders_nothing():
    b = build.compile(RELAXED, target="sm_90a", name="relaxed.cu")
    out = _poisoned(2)
    model.run(b, "handoff", grid=(2,), block=(32,), args=(out, np.int32(0)))
    assert out.tolist() == [1001, 1000]
    with pytest.raises(model.Violation) as e:
        model.run(b, "handoff", grid=(2,), block=(32,), args=(_poisoned(2), np.int32(1)))
    assert e.value.rule == "dsmem-unordered"


SETMAXNREG = r'''
extern "C" __global__ void __launch_bounds__(384, 1) regs(unsigned* out, int mode) {
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (mode == 1) { if (threadIdx.x < 32) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  } else {
    if (mode == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  }
  out[threadIdx.x] = threadIdx.x + 7;
}
'''


def test_setmaxnreg_is_warpgroup_aligned_and_draws_on_the_ctas_pool():
    b = build.compile(SETMAXNREG, target="sm_90a", name="regs.cu")
    regs = b.resources["regs"]["registers"]
    assert regs == 168, "ptxas gives 384 threads at one block per SM 65536 / 384 registers, rounded to 8"
    out = _poisoned(384)
    model.run(b, "regs", grid=(1,), block=(384,), args=(out, np.int32(0)))   # 40 + 2 x 232 = 3 x 168
    assert (out == np.arange(384) + 7).all()
    with pytest.raises(model.Hang) as e:                   # one warp of the warpgroup: hangs on an H200
        model.run(b, "regs", grid=(1,), block=(384,), args=(_poisoned(384), np.int32(1)))
    assert "warps 1, 2, 3" in str(e.value) and "setmaxnreg" in str(e.value)
    with pytest.raises(model.Hang) as e:                   # 40 + 2 x 240 > 3 x 168: the pool runs dry
        model.run(b, "regs", grid=(1,), block=(384,), args=(_poisoned(384), np.int32(2)))
    assert "for 9216 registers from the CTA's pool, which holds 7168" in str(e.value)   # 72 x 128 of 128 x 128 - 9216


ASSERT = r'''
extern "C" __global__ void checked(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { assert(x[i] >= 0); y[i] = 2 * x[i]; }
}
'''


def test_a_failed_device_assert_is_a_trap_quoting_the_condition():
    b = build.compile(ASSERT, target="sm_90a", name="checked.cu")
    rng = np.random.default_rng()
    x = rng.integers(0, 1000, 200).astype(np.int32)
    y = _poisoned(200, np.int32)
    model.run(b, "checked", grid=(2,), block=(128,), args=(x, y, np.int32(200)))
    assert (y == 2 * x).all()
    x[int(rng.integers(200))] = -5
    with pytest.raises(model.Violation) as e:
        model.run(b, "checked", grid=(2,), block=(128,), args=(x, _poisoned(200, np.int32), np.int32(200)))
    assert e.value.rule == "trap" and "x[i] >= 0" in str(e.value)


def test_dsmem_writes_into_a_peer_are_counted():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "exercises" / "dsmem_histogram"
    rng = np.random.default_rng()
    n, bins = int(rng.integers(1001, 2000)), int(rng.integers(500, 1500))
    x = rng.integers(0, bins, n).astype(np.int32)
    counts = {}
    for f in ("solution.cu", "fixtures/wrong_no_peer.cu"):
        b = build.compile(root / f, target="sm_90a")
        h = np.zeros(bins, np.uint32)
        rep = model.run(b, "cluster_histogram", grid=(8,), block=(256,), cluster=(2,),
                        args=(x, np.int32(n), np.int32(bins), h), shared_bytes=4 * (-(-bins // 2)))
        assert (h == np.bincount(x, minlength=bins)).all()
        counts[f] = rep.counts.get("dsmem.peer", 0)
    lo = -(-bins // 2)
    i = np.arange(n)                                        # which thread counts element i: int4 loop, then tail
    n4 = n // 4
    g = np.where(i < 4 * n4, i // 4, i - 4 * n4)            # global thread index (one pass: 2048 threads)
    own_rank = (g // 256) % 2
    peer = int(np.count_nonzero((x // lo) != own_rank))
    assert counts["solution.cu"] == peer
    assert counts["fixtures/wrong_no_peer.cu"] == 0
