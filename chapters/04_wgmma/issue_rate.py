"""Can one warpgroup keep the tensor cores busy? Chapter 4's probe (wgmma_issue_rate.cu), run on an H200 and
on the CPU model, and what it says about rung 9 (ping-pong), whose consumers issue wgmma one at a time.

    from issue_rate import measure, model_check, claim_text
    rows = measure()                     # on an H100/H200: MACs per SM cycle for every CONFIGS build
    model_check(1, 128, 2, 1)            # anywhere: the probe on the CPU model, its sum against float64
    claim_text(rows, counters)           # the sentence the chapter prints, or None when figures contradict it

Run by chapters/04_wgmma.ipynb (section 6b; record section "ch04.issue_rate") and
chapters/04_wgmma/explore_h200.py round3.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from judge.gpu import build as _build
from judge.hw import wgmma as _wgmma

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "wgmma_issue_rate.cu"
PEAK = 2048            # dense bf16 MACs per SM cycle on Hopper: 4 tensor cores x 512
SMS = 132
#: (warpgroups issuing, wgmma N, independent accumulators per warpgroup, groups left in flight at each wait)
CONFIGS = [(1, 256, 1, 1), (1, 256, 1, 0), (1, 128, 2, 1), (1, 128, 1, 1), (1, 64, 4, 1),
           (2, 256, 1, 1), (2, 128, 2, 1)]
A_BYTES = 64 * 128     # one 64 x 64 bf16 A tile (128-byte rows), as in the .cu
SRC_VECTORS = 1 << 16  # the kernel reads src[(block * 977 + i) % 65536] as 16-byte vectors


def build(warpgroups: int, n: int, chains: int, lag: int, patch: tuple[str, str] | None = None):
    """Compile the probe for sm_90a (any machine); `patch` = (old, new) builds it with one mistake."""
    defines = {"BN": n, "CHAINS": chains, "WGS": warpgroups, "LAG": lag}
    if patch is None:
        return _build.compile(SOURCE, defines=defines)
    text = SOURCE.read_text()
    if text.count(patch[0]) != 1:
        raise ValueError(f"the patch must match {SOURCE.name} exactly once; {patch[0]!r} matches {text.count(patch[0])}")
    full = _build.inline_headers(text.replace(*patch), SOURCE)
    return _build.compile(full, target="sm_90a", defines=defines, name=SOURCE.name)


def shared_bytes(warpgroups: int, n: int, chains: int) -> int:
    return warpgroups * chains * A_BYTES + n * 128 + 1024


def macs(iters: int, warpgroups: int, n: int, chains: int) -> int:
    """Multiply-adds one block does: iters slices x 4 k16 steps x chains x warpgroups x 64 x n x 16."""
    return iters * 4 * chains * warpgroups * 64 * n * 16


def measure(iters: int = 2048, configs=CONFIGS) -> list[dict]:
    """On the GPU: one block per SM, thread 0's clock64 around the loop; median over the blocks, then over
    three launches after a first one. Random normal bf16 operands (never zeros)."""
    import cupy
    src = cupy.random.standard_normal(SRC_VECTORS * 8, dtype=cupy.float32)
    src = (src.view(cupy.uint32) >> 16).astype(cupy.uint16)        # bf16 bits of random normals
    rows = []
    for wgs, n, chains, lag in configs:
        k = build(wgs, n, chains, lag).kernel("issue_rate")
        smem = shared_bytes(wgs, n, chains)
        k.max_dynamic_shared_size_bytes = smem
        cycles = cupy.zeros(SMS, dtype=cupy.int64)
        sink = cupy.full(SMS * 128 * wgs, float("nan"), dtype=cupy.float32)
        per = []
        for _ in range(4):
            k((SMS,), (128 * wgs,), (src, np.int32(iters), cycles, sink), shared_mem=smem)
            cupy.cuda.get_current_stream().synchronize()
            per.append(float(cupy.median(cycles.astype(cupy.float64))))
        c = float(np.median(per[1:]))
        m = macs(iters, wgs, n, chains)
        rows.append({"warpgroups": wgs, "wgmma": f"m64n{n}k16", "chains": chains, "wait_group": lag,
                     "cycles": c, "MACs per cycle": m / c, "of peak": m / c / PEAK,
                     "sink finite": bool(cupy.isfinite(sink).all())})
    return rows


def _tile(smem: np.ndarray, start: int, rows: int) -> np.ndarray:
    """rows x 64 bf16 of a 128B-swizzled K-major tile at byte `start`, read where wgmma reads them."""
    import ml_dtypes
    out = np.empty((rows, 64), dtype=np.float64)
    for r in range(rows):
        for k in range(64):
            off = start + _wgmma.kmajor_offset(r, k, "128B", k_elems=64)
            out[r, k] = float(smem[off:off + 2].view(ml_dtypes.bfloat16)[0])
    return out


def model_check(warpgroups: int, n: int, chains: int, lag: int, iters: int = 2, seed: int | None = None,
                patch: tuple[str, str] | None = None) -> dict:
    """Run the probe (one block) on the CPU model; the sum of every thread's accumulators must be
    iters x sum over m, n, k of A[m, k] B[n, k] (per warpgroup and chain, with that chain's A tile),
    computed in float64 from the bytes the kernel copies into shared memory."""
    import os

    import ml_dtypes

    from judge.gpu import launch as _launch
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    smem_bytes = warpgroups * chains * A_BYTES + n * 128
    src = rng.standard_normal(smem_bytes // 2).astype(ml_dtypes.bfloat16).view(np.uint16)
    src = np.concatenate([src, np.zeros(SRC_VECTORS * 8 - src.size, np.uint16)])   # block 0 reads the front
    src[smem_bytes // 2:] = 0x7FC0                                                    # NaN: a read past it shows
    cycles = np.zeros(1, np.int64)
    sink = np.full(128 * warpgroups, np.nan, np.float32)
    b = build(warpgroups, n, chains, lag, patch)
    _launch.launch(b, "issue_rate", grid=(1, 1, 1), block=(128 * warpgroups, 1, 1),
                   args=(src, np.int32(iters), cycles, sink), shared_bytes=shared_bytes(warpgroups, n, chains))
    smem = src[:smem_bytes // 2].view(np.uint8)
    bt = _tile(smem, warpgroups * chains * A_BYTES, n)
    want = 0.0
    for t in range(warpgroups * chains):
        a = _tile(smem, t * A_BYTES, 64)
        want += iters * float((a.sum(axis=0) * bt.sum(axis=0)).sum())
    got = float(sink.astype(np.float64).sum())
    scale = iters * float(np.abs(bt).sum()) * 64 * warpgroups * chains   # a bound on the terms' size
    return {"seed": seed, "got": got, "want": want, "ok": bool(np.isfinite(sink).all()) and abs(got - want) <= 1e-5 * scale,
            "model cycles": int(cycles[0])}


def claim_text(rows: list[dict] | None, counters_by_rung: dict | None) -> str | None:
    """What the probe says about rung 9, or None when the figures do not support it: one warpgroup alone
    reaches the peak (so one-at-a-time issue is not rung 9's limit), and rung 9 loads more bytes by TMA
    per MAC than rung 8 while its tensor pipe is less busy (ch04.counters)."""
    if not rows:
        return None
    one = [r for r in rows if r["warpgroups"] == 1 and r["wait_group"] >= 1 and r["wgmma"] != "m64n64k16"]
    zero = [r for r in rows if r["warpgroups"] == 1 and r["wait_group"] == 0]
    if not one or min(r["of peak"] for r in one) < 0.95:
        return None
    text = (f"one warpgroup alone, its operands resident in shared memory, runs at "
            f"{min(r['of peak'] for r in one):.1%}-{max(r['of peak'] for r in one):.1%} of the SM's {PEAK} MACs per "
            f"cycle (m64n256k16, or two m64n128k16 accumulators as rung 9 issues them)")
    if zero:
        text += f"; waiting for every group before the next (wait_group 0) costs it: {zero[0]['of peak']:.1%}"
    by = counters_by_rung or {}
    pp, top = by.get("ping-pong"), by.get("TMA store + L2 order")
    if pp and top and "TMA load bytes" in pp and "TMA load bytes" in top:
        r = pp["TMA load bytes"] / top["TMA load bytes"]
        if not (r > 1.2 and pp["tensor pipe %"] < top["tensor pipe %"]):
            return None
        text += (f". So issuing from one warpgroup at a time is not what holds rung 9 back; feeding it is: its "
                 f"128 x 128 tiles make TMA write {r:.2f}x rung 8's bytes into shared memory for the same MACs, "
                 f"and its tensor pipe is busy {pp['tensor pipe %']:.0f} % of the time against rung 8's "
                 f"{top['tensor pipe %']:.0f} %")
    return text[0].upper() + text[1:] + "."
