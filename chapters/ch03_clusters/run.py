"""Host side of chapter 3 (clusters, DSMEM, multicast): build, launch, check and time every kernel
of chapters/ch03_clusters/.

The notebook chapters/ch03_clusters.ipynb and tests/chapters/ch03_clusters/ call these functions:

    from chapters.ch03_clusters import run as ch03
    ch03.build("cluster_sum").sass            # any machine: NVRTC -> sm_90a cubin -> SASS
    ch03.where(4), ch03.mapa_probe(4)          # an H200: rank / cluster / SM of each block; what mapa returns
    ch03.gpc_layout()                         # which SMs share a GPC, read from %smid
    ch03.occupancy(), ch03.residency()        # max_active_clusters; how many clusters really ran at once
    ch03.predicted_clusters(gpcs, 4, 1)       # the same count from a GPC layout (any machine)
    ch03.cluster_sum(), ch03.early_exit()     # the DSMEM reduction, and the rule broken
    ch03.dsmem_latency(), ch03.dsmem_bandwidth()
    ch03.histogram(), ch03.multicast()        # multicast(flush=False): operands already in L2

Every GPU function draws fresh random inputs, poisons its outputs (judge.grading.compare.poison), checks
every launch by synchronizing and compares against a float64 (or exact integer) reference before
it reports a time. Launches go through judge.gpu.launch (cluster size chosen at launch, cuda.core);
if that path fails on this machine, the same kernel is rebuilt with -DCLUSTER_DIMS=n
(__cluster_dims__) and launched with a CuPy RawKernel, and LAUNCH_FAILURES says why.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

from judge.gpu import build as _build
from judge.grading import compare as _cmp
from judge import gpu
from judge.gpu import timing
from judge.hw import tma
from judge.gpu import launch as _launch

NOTEBOOK = "chapters/ch03_clusters.ipynb"
HISTOGRAM_SOLUTION = ROOT / "exercises" / "dsmem_histogram" / "solution.cu"
LAYOUT_FILE = ROOT / "exercises" / "cluster_geometry" / "h200_layout.json"
ONE_PER_SM = 200 << 10        # dynamic shared memory that leaves room for one block per SM
LAUNCH_FAILURES: list[str] = []  # what the cuda.core path said when it failed (then RawKernel ran)


def build(name: str, **defines):
    """Compile chapters/ch03_clusters/<name>.cu (or a path) for sm_90a (works on any machine)."""
    path = Path(name) if str(name).endswith(".cu") else HERE / f"{name}.cu"
    return _build.compile(path, defines=defines or None)


def excerpt(name: str, marker: str = "extern \"C\"") -> tuple[str, tuple[int, int]]:
    """(path, (first, last line)) of a kernel file from its first marker to the end, for show.source."""
    path = HERE / f"{name}.cu"
    lines = path.read_text().splitlines()
    first = next(i for i, l in enumerate(lines, start=1) if marker in l)
    return f"chapters/ch03_clusters/{name}.cu", (first, len(lines))


def _cp():
    import cupy
    return cupy


def _sync():
    _cp().cuda.get_current_stream().synchronize()   # raises here if the kernel faulted


def _rng(seed=None):
    return np.random.default_rng(seed)


def _dim3(v):
    t = (v,) if isinstance(v, int) else tuple(v)
    return t + (1,) * (3 - len(t))


def run_kernel(name, kernel: str, *, grid, block, args, shared_bytes: int = 0, cluster: int = 1,
               defines: dict | None = None) -> str:
    """Launch with a cluster of `cluster` blocks along x. Returns which path ran it."""
    defines = dict(defines or {})
    b = build(name, **defines)
    if not LAUNCH_FAILURES:
        try:
            _launch.launch(b, kernel, grid=_dim3(grid), block=_dim3(block), args=args,
                           shared_bytes=shared_bytes, cluster=(cluster, 1, 1))
            return "judge.gpu.launch"
        except _launch.LaunchError:
            raise
        except Exception as e:  # noqa: BLE001 - recorded and reported, then the fallback runs
            LAUNCH_FAILURES.append(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
    if cluster > _launch.PORTABLE_CLUSTER:
        raise RuntimeError(f"clusters of {cluster} need the non-portable attribute, which the RawKernel "
                           f"fallback cannot set; the cuda.core path failed: {LAUNCH_FAILURES[0][:300]}")
    fb = build(name, **defines, CLUSTER_DIMS=cluster)
    k = fb.kernel(kernel)
    if shared_bytes > _launch.DEFAULT_SMEM_LIMIT:
        k.max_dynamic_shared_size_bytes = int(shared_bytes)
    raw = [a.as_kernel_arg() if hasattr(a, "as_kernel_arg") else a for a in args]
    k(_dim3(grid), _dim3(block), tuple(raw), shared_mem=int(shared_bytes))
    return "RawKernel + __cluster_dims__"


def max_clusters(name, kernel: str, *, block, cluster: int, shared_bytes: int = 0, defines=None):
    """launch.max_active_clusters, or None (with the error in LAUNCH_FAILURES) if it failed."""
    b = build(name, **(defines or {}))
    try:
        return _launch.max_active_clusters(b, kernel, block=_dim3(block), cluster=(cluster, 1, 1),
                                           shared_bytes=shared_bytes)
    except Exception as e:  # noqa: BLE001
        LAUNCH_FAILURES.append(f"max_active_clusters: {type(e).__name__}: {e}")
        return None


# ------------------------------------------------------------------ section 1: who runs where
WHERE_FIELDS = ("block", "rank", "cluster", "clusters", "size", "sm", "t0", "t1")


def where(cluster: int, clusters: int | None = None, shared_bytes: int = 0, compile_time: bool = False,
          spin_ns: int = 0) -> list[dict]:
    """One row per block: index, cluster rank, cluster id, cluster count, cluster size, SM, and the
    %globaltimer interval (ns, low 32 bits) thread 0 spent spinning for spin_ns."""
    cp = _cp()
    n = (clusters or max(1, gpu.info().sms // cluster)) * cluster
    out = _cmp.poison(cp.empty(8 * n, dtype=cp.uint32))
    if compile_time:              # __cluster_dims__(4,1,1): a plain CuPy launch, size from the kernel
        k = build("cluster_where").kernel("cluster_where_dims4")
        k((n,), (128,), (out, np.uint32(spin_ns)))
    else:
        run_kernel("cluster_where", "cluster_where", grid=n, block=128, args=(out, np.uint32(spin_ns)),
                   shared_bytes=shared_bytes, cluster=cluster)
    _sync()
    raw = out.get().reshape(n, 8)
    if _cmp.is_poison(raw[:, :6]).any():
        raise AssertionError("some blocks never wrote their row: the launch did not run every block")
    return [dict(zip(WHERE_FIELDS, (int(v) for v in row))) for row in raw]


def co_resident(rows: list[dict]) -> int:
    """The largest number of clusters whose spin intervals overlap (timestamps mod 2^32 ns)."""
    base = min(r["t0"] for r in rows)
    span = {}
    for r in rows:
        a, b = (r["t0"] - base) % 2 ** 32, (r["t1"] - base) % 2 ** 32
        lo, hi = span.get(r["cluster"], (a, b))
        span[r["cluster"]] = (min(lo, a), max(hi, b))
    events = sorted([(a, 1) for a, _ in span.values()] + [(b, -1) for _, b in span.values()],
                    key=lambda e: (e[0], e[1]))
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def residency(sizes=(2, 4, 8, 16), shared_bytes: int = ONE_PER_SM, spin_ns: int = 200_000) -> list[dict]:
    """max_active_clusters next to what ran: launch 3x that many clusters, each spinning spin_ns,
    and count the most clusters that were running at one moment."""
    rows = []
    for c in sizes:
        n = max_clusters("cluster_where", "cluster_where", block=128, cluster=c, shared_bytes=shared_bytes)
        if not n:
            continue
        got = where(c, clusters=3 * n, shared_bytes=shared_bytes, spin_ns=spin_ns)
        rows.append({"cluster": c, "max_active_clusters": n, "seen at once": co_resident(got),
                     "SMs used": len({r["sm"] for r in got})})
    return rows


def mapa_probe(cluster: int = 4) -> list[dict]:
    """What mapa returns for each rank and a few offsets, next to the block's own shared address."""
    cp = _cp()
    out = _cmp.poison(cp.empty(cluster * 8, dtype=cp.uint32))
    run_kernel("cluster_where", "mapa_probe", grid=cluster, block=32, args=(out,), cluster=cluster)
    _sync()
    o = out.get().reshape(cluster, 4, 2)
    return [{"rank": r, "own address": int(o[r, i, 0]), "mapa": int(o[r, i, 1])}
            for r in range(cluster) for i in range(4)]


def check_where(rows: list[dict], cluster: int) -> list[str]:
    """What a launch with clusters of `cluster` along x must satisfy (empty list: all true)."""
    bad = []
    for r in rows:
        if r["size"] != cluster:
            bad.append(f"block {r['block']}: cluster size {r['size']}, launched with {cluster}")
        if r["rank"] != r["block"] % cluster or r["cluster"] != r["block"] // cluster:
            bad.append(f"block {r['block']}: rank {r['rank']} cluster {r['cluster']}")
    by = {}
    for r in rows:
        by.setdefault(r["cluster"], []).append(r)
    for c, rs in by.items():
        if sorted(x["rank"] for x in rs) != list(range(cluster)):
            bad.append(f"cluster {c}: ranks {sorted(x['rank'] for x in rs)}")
    return bad


def _components(n: int, groups) -> list[list[int]]:
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a
    for g in groups:
        g = list(g)
        for x in g[1:]:
            parent[find(x)] = find(g[0])
    comps = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(i)
    return sorted((sorted(c) for c in comps.values()), key=lambda c: (-len(c), c[0]))


def gpc_layout(sizes=(16, 8, 7, 6, 5, 4, 3, 2), repeats: int = 3) -> dict:
    """Which SMs share a GPC, read off the hardware: launch every cluster size with one block per
    SM and as many clusters as fit; the SMs of one cluster are in one GPC (the hardware's promise),
    so SMs linked through any cluster form one group. Returns the groups and how many clusters of
    each size fitted at one block per SM."""
    sms = gpu.info().sms
    groups, fits, errors = [], {}, []
    for c in sizes:
        n = max_clusters("cluster_where", "cluster_where", block=128, cluster=c, shared_bytes=ONE_PER_SM)
        fits[c] = n
        if not n:
            continue
        for _ in range(repeats):
            try:
                rows = where(c, clusters=n, shared_bytes=ONE_PER_SM)
            except Exception as e:  # noqa: BLE001 - a size the fallback cannot launch
                errors.append(f"cluster {c}: {type(e).__name__}: {str(e)[:200]}")
                break
            bad = check_where(rows, c)
            if bad:
                raise AssertionError(f"cluster {c}: {bad[:3]}")
            by = {}
            for r in rows:
                by.setdefault(r["cluster"], []).append(r["sm"])
            for sm_list in by.values():
                if len(set(sm_list)) != len(sm_list):
                    raise AssertionError(f"two blocks of one cluster on one SM at {ONE_PER_SM} B each: {sm_list}")
                groups.append(sm_list)
    comps = _components(sms, groups)
    return {"sms": sms, "gpcs": comps, "gpc_sizes": [len(c) for c in comps],
            "fits_one_per_sm": {str(k): v for k, v in fits.items()}, "errors": errors}


def predicted_clusters(gpc_sizes, cluster: int, blocks_per_sm: int) -> int:
    """Clusters that fit at once if every GPC holds whole clusters only, and a GPC with fewer SMs than
    the cluster has blocks holds none (even with several blocks per SM): the rule that matched every
    max_active_clusters the H200 reported (sum over GPCs of n >= size SMs of floor(n * blocks / size))."""
    return sum((n * blocks_per_sm) // cluster for n in gpc_sizes if n >= cluster)


# ------------------------------------------------------------------ section 2: occupancy
def occupancy(sizes=(1, 2, 4, 8, 16), smem_kib=(1, 64, 100, 200), gpc_sizes=None) -> list[dict]:
    """For each cluster size and dynamic shared memory per block (256 threads): clusters that fit,
    blocks resident, block slots left idle, and the count predicted from the GPC layout."""
    sms = gpu.info().sms
    rows = []
    for kib in smem_kib:
        sb = kib << 10
        bps = _launch.max_active_blocks_per_sm(build("cluster_where"), "cluster_where", block=(256, 1, 1),
                                               shared_bytes=sb)
        for c in sizes:
            n = max_clusters("cluster_where", "cluster_where", block=256, cluster=c, shared_bytes=sb)
            row = {"smem KiB": kib, "cluster": c, "blocks/SM": bps, "clusters": n}
            if n is not None:
                row["blocks resident"] = n * c
                row["idle slots"] = sms * bps - n * c
                row["idle SMs"] = round((sms * bps - n * c) / bps, 1)
            if gpc_sizes:
                row["predicted"] = predicted_clusters(gpc_sizes, c, bps)
            rows.append(row)
    return rows


# ------------------------------------------------------------------ section 3: cluster_sum
def cluster_sum(sizes=(1, 2, 4, 8), clusters: int = 64, per_block: int = 10000, seed=None) -> list[dict]:
    """The DSMEM reduction for each cluster size, and the compile-time pair, against float64."""
    cp = _cp()
    rows = []
    for c in list(sizes) + ["pair"]:
        size = 2 if c == "pair" else c
        host = _rng(seed).standard_normal(clusters * size * per_block).astype(np.float32)
        x = cp.asarray(host)
        out = _cmp.poison(cp.empty(clusters, dtype=cp.float32))
        if c == "pair":
            build("cluster_sum").kernel("cluster_sum_pair")((clusters * 2,), (256,), (x, out, np.int32(per_block)))
            path = "RawKernel, __cluster_dims__(2,1,1)"
        else:
            path = run_kernel("cluster_sum", "cluster_sum", grid=clusters * size, block=256,
                              args=(x, out, np.int32(per_block)), cluster=size)
        _sync()
        ref = host.astype(np.float64).reshape(clusters, size * per_block).sum(axis=1)
        # float32 partial sums of ~N(0,1): the error grows like sqrt(terms) * eps * magnitude
        r = _cmp.compare(out, ref, rtol=1e-5, atol=1e-2,
                         case=f"cluster_sum, clusters of {size}")
        rows.append({"cluster": str(c), "ok": bool(r.ok), "rel err": r.rel_err, "path": path,
                     "message": r.message})
    return rows


def _early_exit_child(delay_ns: int = 20000, sizes=(2, 4), clusters: int = 132, per_block: int = 4096):
    """Child process: the kernel whose peers exit before rank 0 reads them."""
    cp = _cp()
    report = {}
    for size in sizes:
        host = _rng().standard_normal(clusters * size * per_block).astype(np.float32)
        x = cp.asarray(host)
        out = _cmp.poison(cp.empty(clusters, dtype=cp.float32))
        print(f"@@progress clusters of {size}", flush=True)
        run_kernel("cluster_sum", "cluster_sum_early_exit", grid=clusters * size, block=256,
                   args=(x, out, np.int32(per_block), np.uint32(delay_ns)), cluster=size)
        _sync()
        ref = host.astype(np.float64).reshape(clusters, size * per_block).sum(axis=1)
        got = out.get().astype(np.float64)
        wrong = ~np.isclose(got, ref, rtol=1e-4, atol=0.05)
        report[str(size)] = {"clusters": clusters, "wrong": int(wrong.sum()),
                             "examples": [[float(got[i]), float(ref[i])] for i in np.flatnonzero(wrong)[:3]]}
    return report


def early_exit(delay_ns: int = 20000, timeout: float = 20.0) -> dict:
    """Run cluster_sum_early_exit in the judge's child process: what did the hardware do?"""
    from judge.grading import check_process as isolate
    t0 = time.monotonic()
    r = isolate.run_function(__file__, "_early_exit_child", timeout=timeout, delay_ns=delay_ns)
    return {"verdict": r.verdict.value, "seconds": round(time.monotonic() - t0, 1),
            "message": r.message[:600], "value": (r.measurements or {}).get("value")}


# ------------------------------------------------------------------ section 4: DSMEM in numbers
TARGETS = ("local", "peer", "l2")
TARGET_NAMES = {"local": "own shared memory", "peer": "peer's shared memory (DSMEM)", "l2": "L2 (ld.global.cg)"}


def _cycle(n: int, rng) -> np.ndarray:
    """A random permutation that is one single cycle (Sattolo): the chase visits every entry."""
    p = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = rng.integers(0, i)
        p[i], p[j] = p[j], p[i]
    return p.astype(np.uint32)


def dsmem_latency(n: int = 4096, steps: int = 20000, seed=None) -> list[dict]:
    """ns and cycles per dependent load, same chase (a random cycle through n words) on each target."""
    cp = _cp()
    perm = _cycle(n, _rng(seed))
    idx = 0
    for _ in range(n + steps):
        idx = int(perm[idx])
    rows = []
    for t in TARGETS:
        out = _cmp.poison(cp.empty(4, dtype=cp.uint64))
        run_kernel("dsmem_probe", f"dsmem_latency_{t}", grid=2, block=128,
                   args=(cp.asarray(perm), np.int32(n), np.int32(steps), out), shared_bytes=4 * n, cluster=2)
        _sync()
        cyc, ns, last, st = (int(v) for v in out.get())
        if last != idx or st != steps:
            raise AssertionError(f"{t}: the chase ended at {last}, the host's walk at {idx}")
        rows.append({"target": TARGET_NAMES[t], "ns/load": ns / steps, "cycles/load": cyc / steps,
                     "clock GHz": cyc / ns})
    return rows


def dsmem_bandwidth(n_vec: int = 4096, reps: int = 64, threads: int = 512, seed=None) -> list[dict]:
    """Bytes per ns that rank 0 of a 2-block cluster reads from each target with 16-byte loads:
    one cluster alone, and every SM's worth of clusters at once (one block per SM)."""
    cp = _cp()
    words = _rng(seed).integers(0, 2 ** 32, 4 * n_vec, dtype=np.uint64).astype(np.uint32)
    want = int((int(words.astype(np.uint64).sum()) * reps) % 2 ** 32)
    src = cp.asarray(words)
    sb = max(16 * n_vec, 120 << 10)           # one block per SM, so one reader per SM
    full = max_clusters("dsmem_probe", "dsmem_bandwidth_local", block=threads, cluster=2, shared_bytes=sb) \
        or gpu.info().sms // 2
    rows = []
    for t in TARGETS:
        for clusters in (1, full):
            out = _cmp.poison(cp.empty(4 * clusters, dtype=cp.uint64))
            run_kernel("dsmem_probe", f"dsmem_bandwidth_{t}", grid=2 * clusters, block=threads,
                       args=(src, np.int32(n_vec), np.int32(reps), out), shared_bytes=sb, cluster=2)
            _sync()
            o = out.get().reshape(clusters, 4)
            if (o[:, 3] != want).any():
                raise AssertionError(f"{t}: checksum {o[0, 3]} != {want}: the loads did not read the table")
            per_sm = o[:, 2] / o[:, 1]            # bytes per ns = GB/s, each reading block
            rows.append({"target": TARGET_NAMES[t], "threads": threads, "readers": clusters,
                         "GB/s per SM (median)": float(np.median(per_sm)),
                         "GB/s all readers": float(o[:, 2].sum() / o[:, 1].max()),
                         "B/cycle per SM": float(np.median(o[:, 2] / o[:, 0]))})
    return rows


# ------------------------------------------------------------------ section 5: histogram
def _hist_input(n, bins, dist, rng):
    if dist == "uniform":
        return rng.integers(0, bins, n, dtype=np.int32)
    # "skewed": normal around the middle, sd bins/64: most counts land in a few hundred bins
    v = np.rint(rng.normal(bins / 2, bins / 64, n))
    return np.clip(v, 0, bins - 1).astype(np.int32)


def histogram(n: int = 1 << 26, bins_list=(65536, 262144), dists=("uniform", "skewed"),
              clusters=(2, 4, 8), seed=None, reps: int = 20) -> list[dict]:
    """Global atomics, per-block sliced shared histograms, and the cluster (DSMEM) histogram of
    exercises/dsmem_histogram/solution.cu, checked exactly against numpy.bincount, then timed
    (the memset that zeroes hist included in every variant)."""
    cp = _cp()
    sms = gpu.info().sms
    rng = _rng(seed)
    out_rows = []
    for bins in bins_list:
        for dist in dists:
            host = _hist_input(n, bins, dist, rng)
            ref = np.bincount(host, minlength=bins).astype(np.int64)
            x = cp.asarray(host)
            hist = cp.empty(bins, dtype=cp.uint32)
            variants = {}

            def glob():
                hist.fill(0)
                run_kernel("histogram", "hist_global", grid=sms * 8, block=256, args=(x, np.int32(n), hist))
            variants["global atomics"] = glob
            slice_ = min(bins, 24576)                 # 96 KiB: two blocks per SM
            nsl = -(-bins // slice_)

            def sliced():
                hist.fill(0)
                run_kernel("histogram", "hist_sliced", grid=(2 * sms, nsl), block=256,
                           args=(x, np.int32(n), np.int32(bins), np.int32(slice_), hist),
                           shared_bytes=4 * slice_)
            variants[f"shared, {nsl} slice(s)"] = sliced
            for c in clusters:
                per = 4 * (-(-bins // c))
                if per > gpu.info().smem_per_block_optin:
                    continue
                fit = max_clusters(HISTOGRAM_SOLUTION, "cluster_histogram", block=256, cluster=c,
                                   shared_bytes=per, defines={"CLUSTER": c, "BLOCKS": c}) or (sms // c)

                def clus(c=c, per=per, fit=fit):
                    hist.fill(0)
                    run_kernel(HISTOGRAM_SOLUTION, "cluster_histogram", grid=fit * c, block=256,
                               args=(x, np.int32(n), np.int32(bins), hist), shared_bytes=per, cluster=c,
                               defines={"CLUSTER": c, "BLOCKS": c})
                variants[f"cluster of {c} (DSMEM)"] = clus
            base_ms = None
            for name, fn in variants.items():
                _cmp.poison(hist)
                fn()
                _sync()
                r = _cmp.compare(hist.astype(cp.int64), ref, case=f"{name}, {bins} bins, {dist}")
                if not r.ok:
                    raise AssertionError(r.message)
                t = timing.bench(fn, reps=reps, bytes=4 * n)
                r2 = _cmp.compare(hist.astype(cp.int64), ref, case=f"{name} after timing")
                if not r2.ok:
                    raise AssertionError(r2.message)
                base_ms = base_ms or t.median_ms
                out_rows.append({"bins": bins, "input": dist, "variant": name, "ms": t.median_ms,
                                 "spread": t.spread, "G elements/s": n / t.median_ms / 1e6,
                                 "speed-up vs global": base_ms / t.median_ms})
    return out_rows


# ------------------------------------------------------------------ section 6: multicast
STAGES = 4


def multicast_smem() -> int:
    return STAGES * 2 * 64 * 64 * 4 + 1024 + 64     # tiles + alignment slack + barriers


def tile_major(a: np.ndarray) -> np.ndarray:
    """(R, K) row-major -> (K/64 * R, 64): the 64-column slab k of all R rows, slab after slab, so
    that every 64 x 64 tile is 16 KiB of consecutive memory (rows of slab k start at row k * R)."""
    r, k = a.shape
    return np.ascontiguousarray(a.reshape(r, k // 64, 64).transpose(1, 0, 2).reshape(k // 64 * r, 64))


def multicast(K: int = 8192, m_tiles: int = 8, n_tiles: int = 16, clusters=(2, 4), seed=None,
              reps: int = 20, flush: bool = True) -> list[dict]:
    """The reuse pattern with plain TMA loads and with multicast to clusters of 2 and 4 blocks:
    checked against float64, timed, with the bytes each variant asks L2 to deliver to SMs.
    flush=True starts every timed run with L2 flushed (first touches from HBM); False times the
    operands already in L2 (48 MiB at the default size, under the H200's 60 MiB)."""
    cp = _cp()
    rng = _rng(seed)
    M, N = m_tiles * 64, n_tiles * 64
    A_h = rng.standard_normal((M, K)).astype(np.float32)
    B_h = rng.standard_normal((N, K)).astype(np.float32)
    a3 = A_h.astype(np.float64).reshape(m_tiles, 64, K)
    b3 = B_h.astype(np.float64).reshape(n_tiles, 64, K)
    ref = sum(a3[:, i, :] @ b3[:, i, :].T for i in range(64))          # (m_tiles, n_tiles)
    A, B = cp.asarray(tile_major(A_h)), cp.asarray(tile_major(B_h))
    out = cp.empty((m_tiles, n_tiles), dtype=cp.float32)
    mapB = tma.tensor_map(B, box=(64, 64))
    rows, base = [], None
    tile = 64 * 64 * 4
    blocks = m_tiles * n_tiles
    for c in (1,) + tuple(clusters):
        mc = c > 1
        mapA = tma.tensor_map(A, box=(64, 64 // c))
        defines = {"MULTICAST": int(mc), "CLUSTER": c}

        def go(mapA=mapA, c=c, defines=defines):
            run_kernel("multicast_reuse", "multicast_reuse", grid=(n_tiles, m_tiles), block=256,
                       args=(mapA, mapB, np.int32(K), np.int32(M), np.int32(N), out),
                       shared_bytes=multicast_smem(), cluster=c, defines=defines)
        _cmp.poison(out)
        go()
        _sync()
        r = _cmp.compare(out, ref, rtol=1e-4, atol=0.05, case=f"multicast_reuse, cluster {c}")
        if not r.ok:
            raise AssertionError(r.message)
        l2_bytes = blocks * (K // 64) * (tile + tile / c)                  # B own + A shared c ways
        t = timing.bench(go, reps=reps, bytes=l2_bytes, flush=flush)
        _cmp.poison(out)
        go()
        _sync()
        if not _cmp.compare(out, ref, rtol=1e-4, atol=0.05).ok:
            raise AssertionError("wrong after timing")
        base = base or t.median_ms
        rows.append({"variant": "plain TMA" if not mc else f"multicast to {c} blocks",
                     "L2 flushed": flush, "ms": t.median_ms, "spread": t.spread, "L2->SM MB": l2_bytes / 1e6,
                     "L2->SM GB/s": l2_bytes / t.median_ms / 1e6, "speed-up": base / t.median_ms})
    return rows
