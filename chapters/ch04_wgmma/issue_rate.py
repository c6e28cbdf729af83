"""Can one warpgroup keep the tensor cores busy? Chapter 4's probe (wgmma_issue_rate.cu), run on an H200 and
on the CPU model, and what it says about rung 9 (ping-pong), whose consumers issue wgmma one at a time.

    from chapters.ch04_wgmma.issue_rate import measure, measure_fed, model_check, model_check_fed, claim_text, draw_fed
    rows = measure()                     # on an H100/H200: MACs per SM cycle for every CONFIGS build
    fed = measure_fed(plain=rows)        # the same with a TMA feed writing into shared memory alongside
    model_check(1, 128, 2, 1)            # anywhere: the probe on the CPU model, its sum against float64
    model_check_fed(1, 128, 2, 1)        # the fed probe on the CPU model
    claim_text(rows, counters, fed)      # the sentence the chapter prints, or None when figures contradict it
    draw_fed(fed)                        # MACs per cycle against the feed's bytes per cycle

Run by chapters/ch04_wgmma.ipynb (section 6b; record section "ch04.issue_rate") and
lab/explore_h200.py round3.
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


def build(warpgroups: int, n: int, chains: int, lag: int, patch: tuple[str, str] | None = None,
          feed_slots: int = 4):
    """Compile the probe for sm_90a (any machine); `patch` = (old, new) builds it with one mistake;
    feed_slots: issue_rate_fed's bulk copies in flight."""
    defines = {"BN": n, "CHAINS": chains, "WGS": warpgroups, "LAG": lag, "FEED_SLOTS": feed_slots}
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


FEED_CHUNK = 16384      # issue_rate_fed's bytes per bulk copy, as in the .cu
#: feeds of increasing depth (bulk copies in flight per SM): the curve of MACs per cycle against feed bytes
FEED_DEPTHS = (1, 2, 4, 8)
#: the configurations measured with a feeder: rung 9's consumer (one warpgroup, two m64n128k16 accumulators)
#: and rung 8's pair (two warpgroups, m64n256k16 each)
FED_CONFIGS = [(1, 128, 2, 1), (2, 256, 1, 1)]


def fed_shared_bytes(warpgroups: int, n: int, chains: int, feed_slots: int = 4) -> int:
    """issue_rate_fed: the operand tiles rounded up to 1 KiB, then the feeder's ring."""
    return -(-(warpgroups * chains * A_BYTES + n * 128) // 1024) * 1024 + feed_slots * FEED_CHUNK + 1024


def operand_bytes_per_mac(n: int, chains: int) -> float:
    """Bytes wgmma reads from shared memory per MAC: per k16 step, each chain's A tile (64 x 16 bf16) and the
    B tile (n x 16 bf16) once per chain (each wgmma reads its own operands)."""
    return chains * (64 * 16 * 2 + n * 16 * 2) / (chains * 64 * n * 16)


def measure_fed(iters: int = 2048, configs=FED_CONFIGS, depths=FEED_DEPTHS, feeds: int = 4096,
                plain: list[dict] | None = None) -> list[dict]:
    """On the GPU: the probe without a feed (issue_rate) and with feeds of each depth (issue_rate_fed), one block
    per SM, median over the blocks, then over three launches after a first. One row per configuration and
    depth (depth 0: no feed): MACs per cycle, the feed's bytes per cycle while the warpgroups ran, and the
    shared-memory bytes per cycle both made (wgmma's operand reads, from the MACs done, plus the feed)."""
    import cupy
    src = cupy.random.standard_normal(SRC_VECTORS * 8, dtype=cupy.float32)
    src = (src.view(cupy.uint32) >> 16).astype(cupy.uint16)
    rows = []
    for wgs, n, chains, lag in configs:
        m = macs(iters, wgs, n, chains)
        done = next((r for r in plain or () if (r["warpgroups"], r["wgmma"], r["chains"], r["wait_group"])
                     == (wgs, f"m64n{n}k16", chains, lag)), None)
        if done is not None:
            reads = done["MACs per cycle"] * operand_bytes_per_mac(n, chains)
            rows.append({**done, "feed depth": 0, "feed bytes per cycle": 0.0, "operand bytes per cycle": reads,
                         "shared bytes per cycle": reads, "feed outlasted the loop": True})
        for depth in ((*depths,) if done is not None else (0, *depths)):
            b = build(wgs, n, chains, lag, feed_slots=max(depth, 1))
            k = b.kernel("issue_rate_fed" if depth else "issue_rate")
            smem = fed_shared_bytes(wgs, n, chains, depth) if depth else shared_bytes(wgs, n, chains)
            k.max_dynamic_shared_size_bytes = smem
            cycles = cupy.zeros(SMS, dtype=cupy.int64)
            feed_cycles = cupy.zeros(SMS, dtype=cupy.int64)
            during = cupy.zeros(SMS, dtype=cupy.int32)
            sink = cupy.full(SMS * 128 * wgs, float("nan"), dtype=cupy.float32)
            per, rate, covered = [], [], True
            for _ in range(4):
                sink.fill(float("nan"))
                if depth:
                    k((SMS,), (128 * wgs + 32,), (src, np.int32(iters), cycles, sink, np.int32(feeds), feed_cycles,
                                                  during), shared_mem=smem)
                else:
                    k((SMS,), (128 * wgs,), (src, np.int32(iters), cycles, sink), shared_mem=smem)
                cupy.cuda.get_current_stream().synchronize()
                c = cycles.astype(cupy.float64)
                per.append(float(cupy.median(c)))
                if depth:
                    rate.append(float(cupy.median(during.astype(cupy.float64) * FEED_CHUNK / c)))
                    # the feed must outlast the loop on every SM, or part of the loop ran unfed
                    covered = covered and int(during.max()) < feeds - depth
            c = float(np.median(per[1:]))
            feed_bpc = float(np.median(rate[1:])) if depth else 0.0
            reads = m / c * operand_bytes_per_mac(n, chains)
            rows.append({"warpgroups": wgs, "wgmma": f"m64n{n}k16", "chains": chains, "wait_group": lag,
                         "feed depth": depth, "cycles": c, "MACs per cycle": m / c, "of peak": m / c / PEAK,
                         "feed bytes per cycle": feed_bpc, "operand bytes per cycle": reads,
                         "shared bytes per cycle": reads + feed_bpc, "feed outlasted the loop": covered,
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


def _random_src(seed: int, poison_past: int | None = None) -> np.ndarray:
    """The probe's source: random normal bf16 bits for the bytes one block copies (SRC_VECTORS 16-byte
    vectors in all); poison_past (a byte offset): NaN from there on, so a read past the tiles shows in the sum."""
    import ml_dtypes
    src = np.random.default_rng(seed).standard_normal(SRC_VECTORS * 8).astype(ml_dtypes.bfloat16).view(np.uint16)
    if poison_past is not None:
        src[poison_past // 2:] = 0x7FC0
    return src


def _sum_check(src: np.ndarray, sink: np.ndarray, warpgroups: int, n: int, chains: int, iters: int) -> dict:
    """The sum of every thread's accumulators (sink) against iters x sum over m, n, k of A[m, k] B[n, k] per
    warpgroup and chain (that chain's A tile), in float64 from the bytes block 0 copied into shared memory."""
    smem_bytes = warpgroups * chains * A_BYTES + n * 128
    smem = src[:smem_bytes // 2].view(np.uint8)
    bt = _tile(smem, warpgroups * chains * A_BYTES, n)
    want = sum(iters * float((_tile(smem, t * A_BYTES, 64).sum(axis=0) * bt.sum(axis=0)).sum())
               for t in range(warpgroups * chains))
    got = float(sink.astype(np.float64).sum())
    scale = iters * float(np.abs(bt).sum()) * 64 * warpgroups * chains   # a bound on the terms' size
    return {"got": got, "want": want, "ok": bool(np.isfinite(sink).all()) and abs(got - want) <= 1e-5 * scale}


def model_check(warpgroups: int, n: int, chains: int, lag: int, iters: int = 2, seed: int | None = None,
                patch: tuple[str, str] | None = None) -> dict:
    """Run the probe (one block) on the CPU model; its sum against float64 (_sum_check), NaN past the tiles."""
    import os

    from judge.gpu import launch as _launch
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    src = _random_src(seed, poison_past=warpgroups * chains * A_BYTES + n * 128)
    cycles = np.zeros(1, np.int64)
    sink = np.full(128 * warpgroups, np.nan, np.float32)
    _launch.launch(build(warpgroups, n, chains, lag, patch), "issue_rate", grid=(1, 1, 1),
                   block=(128 * warpgroups, 1, 1), args=(src, np.int32(iters), cycles, sink),
                   shared_bytes=shared_bytes(warpgroups, n, chains))
    return {"seed": seed, **_sum_check(src, sink, warpgroups, n, chains, iters), "model cycles": int(cycles[0])}


def model_check_fed(warpgroups: int, n: int, chains: int, lag: int, iters: int = 2, feeds: int = 6,
                    seed: int | None = None, patch: tuple[str, str] | None = None) -> dict:
    """issue_rate_fed (one block) on the CPU model: the same sum as model_check while the feeder's bulk copies
    land, each slot reused only after its last copy landed (the model ends a reuse too early as a
    violation and a lost arrival as a HANG). The feed reads the whole source, so nothing in it is NaN."""
    import os

    from judge.gpu import launch as _launch
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    src = _random_src(seed)
    cycles, feed_cycles = np.zeros(1, np.int64), np.zeros(1, np.int64)
    during = np.full(1, -1, np.int32)
    sink = np.full(128 * warpgroups, np.nan, np.float32)
    _launch.launch(build(warpgroups, n, chains, lag, patch), "issue_rate_fed", grid=(1, 1, 1),
                   block=(128 * warpgroups + 32, 1, 1),
                   args=(src, np.int32(iters), cycles, sink, np.int32(feeds), feed_cycles, during),
                   shared_bytes=fed_shared_bytes(warpgroups, n, chains))
    r = _sum_check(src, sink, warpgroups, n, chains, iters)
    return {"seed": seed, **r, "during": int(during[0]), "feed cycles": int(feed_cycles[0]),
            "ok": r["ok"] and 0 <= during[0] <= feeds}


def tma_bytes_per_cycle(summary: dict, sms: int = SMS) -> float | None:
    """TMA load bytes per SM cycle per SM, from a kernel's counters summary (bytes / (duration x clock x SMs));
    None when a figure is missing."""
    b, ns, hz = (summary.get(k) for k in ("TMA load bytes", "duration ns (profiled, not a timing)",
                                           "SM clock Hz (while profiled)"))
    if not all(isinstance(x, (int, float)) and x > 0 for x in (b, ns, hz)):
        return None
    return b / (ns * 1e-9 * hz * sms)


def fed_row(fed: list[dict] | None) -> dict | None:
    """Rung 9's consumer (one warpgroup, two m64n128k16 chains) under the fullest feed measured."""
    cands = [r for r in fed or () if r["warpgroups"] == 1 and r["wgmma"] == "m64n128k16" and r["feed depth"] > 0
             and r.get("feed outlasted the loop", True)]
    return max(cands, key=lambda r: r["feed bytes per cycle"]) if cands else None


def claim_text(rows: list[dict] | None, counters_by_rung: dict | None, fed: list[dict] | None = None) -> str | None:
    """What the probe says about rung 9, or None when the figures do not support it. One warpgroup alone
    reaches the peak, so one-at-a-time issue is not rung 9's limit; with `fed` (measure_fed's rows), a TMA
    feed of at least the bytes per cycle rung 9's ring brought (ch04.counters) leaves it at the peak, so
    shared memory's bandwidth is not either; and what the counters still show different, rung 9 against
    rung 8: more TMA bytes per MAC and more L2 traffic while its tensor pipe is less busy."""
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
    text += ". So issuing from one warpgroup at a time is not what holds rung 9 back"
    by = counters_by_rung or {}
    pp, top = by.get("ping-pong"), by.get("TMA store + L2 order")
    if pp and top and "TMA load bytes" in pp and "TMA load bytes" in top:
        r = pp["TMA load bytes"] / top["TMA load bytes"]
        if not (r > 1.2 and pp["tensor pipe %"] < top["tensor pipe %"]):
            return None
        f, need = fed_row(fed), tma_bytes_per_cycle(pp)
        if fed is not None and f is not None and need is not None:
            if f["of peak"] < 0.97 or f["feed bytes per cycle"] < need:
                return None
            text += (f". Nor is shared memory's bandwidth: with TMA writing {f['feed bytes per cycle']:.0f} bytes "
                     f"per cycle into each SM's shared memory while it ran (rung 9's ring brought {need:.0f}, by its "
                     f"counters), the same warpgroup still ran at {f['of peak']:.1%}")
        text += (f". What the counters do show different, rung 9 against rung 8: its 128 x 128 tiles make TMA "
                 f"bring {r:.2f}x the bytes for the same MACs")
        if all(k in pp and k in top for k in ("L2 bytes", "L2 hit %", "DRAM bytes")):
            text += (f", L2 serves {pp['L2 bytes'] / top['L2 bytes']:.2f}x the bytes at a {pp['L2 hit %']:.0f} % "
                     f"hit rate (rung 8: {top['L2 hit %']:.0f} %) and DRAM {pp['DRAM bytes'] / top['DRAM bytes']:.2f}x")
        text += (f"; its tensor pipe is busy {pp['tensor pipe %']:.0f} % of the time against rung 8's "
                 f"{top['tensor pipe %']:.0f} %")
    return text[0].upper() + text[1:] + "."


def draw_fed(fed: list[dict]):
    """measure_fed's rows as a matplotlib Figure: per configuration, the share of the SM's peak against the bytes
    per cycle TMA wrote into shared memory alongside (0: no feed), with the operand reads on a second panel."""
    # a Figure outside pyplot: the notebook's display() shows it once (a pyplot figure is shown again
    # when the cell ends, which stored the same picture twice in chapter 4's outputs)
    from matplotlib.figure import Figure
    fig = Figure(figsize=(10, 3.4))
    ax, bx = fig.subplots(1, 2)
    for (wgs, n, chains), mark in zip(sorted({(r["warpgroups"], r["wgmma"], r["chains"]) for r in fed}), "os^v"):
        pts = sorted((r for r in fed if (r["warpgroups"], r["wgmma"], r["chains"]) == (wgs, n, chains)),
                     key=lambda r: r["feed bytes per cycle"])
        label = f"{wgs} warpgroup{'s' if wgs > 1 else ''}, {chains} x {n}"
        ax.plot([r["feed bytes per cycle"] for r in pts], [r["of peak"] for r in pts], marker=mark, label=label)
        bx.plot([r["feed bytes per cycle"] for r in pts], [r["shared bytes per cycle"] for r in pts], marker=mark,
                label=label)
    ax.set_ylim(0.8, 1.02)
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("TMA feed into shared memory, bytes per SM cycle")
    ax.set_ylabel("wgmma MACs per cycle, share of peak")
    ax.set_title("the tensor cores with TMA writing alongside", fontsize=10)
    bx.set_xlabel("TMA feed into shared memory, bytes per SM cycle")
    bx.set_ylabel("operand reads + feed, bytes per cycle")
    bx.set_title("shared-memory traffic the two made together", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
