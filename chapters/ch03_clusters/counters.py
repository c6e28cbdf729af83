"""chapters/ch03_clusters/counters.py - what the record's counters pass profiles in chapter 3: the histograms
(global atomics, shared and sliced, clusters of 2 and 4 over DSMEM), the DSMEM bandwidth probe (local, peer, L2)
and multicast_reuse (plain TMA, multicast to 2 and 4), each at the chapter's own size in a child process under
Nsight Compute. The pass (judge/record/counters.py) reads this list and starts the children; figures.toml names
this module.

    python -m chapters.ch03_clusters.counters --list                     # the kernels, one JSON object a line
    python -m chapters.ch03_clusters.counters --run ch03.hist_cluster2   # one checked launch (ncu profiles it)
"""
from __future__ import annotations

from pathlib import Path

from chapters.ch03_clusters import run as ch03
from judge import config
from judge.record.counters import chapter_main, say

HERE = Path(__file__).resolve().parent
SIZE = "chapter's defaults"


def kernels() -> list[dict]:
    """One row per kernel: id, chapter, label, kernel (its name, for ncu's -k), size, sources."""
    run_py = [str(HERE / "run.py"), __file__]
    hist = [str(HERE / "histogram.cu"), str(config.EXERCISES_DIR / "dsmem_histogram" / "solution.cu")]
    out = []
    for kid, label, kern in (("hist_global", "histogram: global atomics", "hist_global"),
                             ("hist_sliced", "histogram: shared, sliced", "hist_sliced"),
                             ("hist_cluster2", "histogram: cluster of 2 (DSMEM)", "cluster_histogram"),
                             ("hist_cluster4", "histogram: cluster of 4 (DSMEM)", "cluster_histogram")):
        out.append({"id": f"ch03.{kid}", "chapter": "ch03", "label": label, "kernel": kern, "size": SIZE,
                    "sources": hist + run_py})
    for t in ("local", "peer", "l2"):
        out.append({"id": f"ch03.dsmem_bandwidth_{t}", "chapter": "ch03", "size": SIZE,
                    "label": f"DSMEM probe: 16-byte loads from {t}, every SM", "kernel": f"dsmem_bandwidth_{t}",
                    "sources": [str(HERE / "dsmem_probe.cu")] + run_py})
    for c in (1, 2, 4):
        out.append({"id": f"ch03.multicast_{c}", "chapter": "ch03", "size": SIZE,
                    "label": "multicast_reuse: plain TMA" if c == 1 else f"multicast_reuse: multicast to {c}",
                    "kernel": "multicast_reuse", "sources": [str(HERE / "multicast_reuse.cu")] + run_py})
    return out


def run(k: dict) -> None:
    """One launch of the kernel at the chapter's size (run.py's defaults), checked against numpy."""
    import cupy as cp
    import numpy as np
    from judge import gpu
    from judge.grading import compare
    kid = k["id"].split(".", 1)[1]
    rng = np.random.default_rng()
    sms = gpu.info().sms
    if kid.startswith("hist_"):
        n, bins = 1 << 26, 65536                 # histogram()'s size, uniform input
        host = rng.integers(0, bins, n, dtype=np.int32)
        ref = np.bincount(host, minlength=bins).astype(np.int64)
        x = cp.asarray(host)
        hist = cp.zeros(bins, dtype=cp.uint32)
        if kid == "hist_global":
            ch03.run_kernel("histogram", "hist_global", grid=sms * 8, block=256, args=(x, np.int32(n), hist))
        elif kid == "hist_sliced":
            slice_ = min(bins, 24576)
            ch03.run_kernel("histogram", "hist_sliced", grid=(2 * sms, -(-bins // slice_)), block=256,
                            args=(x, np.int32(n), np.int32(bins), np.int32(slice_), hist), shared_bytes=4 * slice_)
        else:
            c = int(kid[len("hist_cluster"):])
            per = 4 * (-(-bins // c))
            d = {"CLUSTER": c, "BLOCKS": c}
            fit = ch03.max_clusters(ch03.HISTOGRAM_SOLUTION, "cluster_histogram", block=256, cluster=c,
                                    shared_bytes=per, defines=d) or sms // c
            ch03.run_kernel(ch03.HISTOGRAM_SOLUTION, "cluster_histogram", grid=fit * c, block=256,
                            args=(x, np.int32(n), np.int32(bins), hist), shared_bytes=per, cluster=c, defines=d)
        ch03._sync()
        r = compare.compare(hist.astype(cp.int64), ref, case=f"{kid}, {bins} bins, uniform, n = {n}")
        return say(r.ok, r.message or r.case)
    if kid.startswith("dsmem_bandwidth_"):
        t = kid[len("dsmem_bandwidth_"):]
        n_vec, reps, threads = 4096, 64, 512     # dsmem_bandwidth()'s defaults
        words = rng.integers(0, 2 ** 32, 4 * n_vec, dtype=np.uint64).astype(np.uint32)
        want = int((int(words.astype(np.uint64).sum()) * reps) % 2 ** 32)
        sb = max(16 * n_vec, 120 << 10)
        full = ch03.max_clusters("dsmem_probe", "dsmem_bandwidth_local", block=threads, cluster=2,
                                 shared_bytes=sb) or sms // 2
        out = compare.poison(cp.empty(4 * full, dtype=cp.uint64))
        ch03.run_kernel("dsmem_probe", f"dsmem_bandwidth_{t}", grid=2 * full, block=threads,
                        args=(cp.asarray(words), np.int32(n_vec), np.int32(reps), out), shared_bytes=sb, cluster=2)
        ch03._sync()
        sums = out.get().reshape(full, 4)[:, 3]
        ok = bool((sums == want).all())
        return say(ok, f"{kid}: {full} clusters of 2, checksum " + ("as expected" if ok else
                                                                     f"{sums[0]} != {want}"))
    if kid.startswith("multicast_"):
        c = int(kid[len("multicast_"):])
        from judge.hw import tma
        K, m_tiles, n_tiles = 8192, 8, 16        # multicast()'s defaults
        M, N = m_tiles * 64, n_tiles * 64
        A_h = rng.standard_normal((M, K)).astype(np.float32)
        B_h = rng.standard_normal((N, K)).astype(np.float32)
        a3 = A_h.astype(np.float64).reshape(m_tiles, 64, K)
        b3 = B_h.astype(np.float64).reshape(n_tiles, 64, K)
        ref = sum(a3[:, i, :] @ b3[:, i, :].T for i in range(64))
        A, B = cp.asarray(ch03.tile_major(A_h)), cp.asarray(ch03.tile_major(B_h))
        out = compare.poison(cp.empty((m_tiles, n_tiles), dtype=cp.float32))
        ch03.run_kernel("multicast_reuse", "multicast_reuse", grid=(n_tiles, m_tiles), block=256,
                        args=(tma.tensor_map(A, box=(64, 64 // c)), tma.tensor_map(B, box=(64, 64)), np.int32(K),
                              np.int32(M), np.int32(N), out),
                        shared_bytes=ch03.multicast_smem(), cluster=c, defines={"MULTICAST": int(c > 1), "CLUSTER": c})
        ch03._sync()
        r = compare.compare(out, ref, rtol=1e-4, atol=0.05, case=f"multicast_reuse, cluster {c}")
        return say(r.ok, r.message or r.case)
    raise KeyError(kid)


if __name__ == "__main__":
    raise SystemExit(chapter_main(kernels, run))
