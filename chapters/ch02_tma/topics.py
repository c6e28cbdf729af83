"""Host side of chapter 2's shorter topics: 1-D bulk copies, zero-fill with cp.async on an mbarrier,
waiting (try_wait / test_wait), late expect_tx, tensor maps changed on the device, descriptor
prefetch, L2 promotion, and what the driver says about a swizzled map's global alignment.

    from chapters.ch02_tma import topics
    topics.build("bulk_add_one").sass            # any machine
    topics.bulk_add_one()                        # an H200: correctness + GB/s per variant
    PYTHONPATH=. python -m chapters.ch02_tma.topics OUT_DIR   # everything, on an H200; OUT_DIR/topics_h200.json

Every GPU function draws fresh random inputs, poisons its outputs, synchronizes after each launch
and compares with an exact reference (these kernels move or add one to data: exact in float32).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

from judge.gpu import build as _build
from judge.grading import compare as _cmp
from judge import gpu
from judge.gpu import timing
from judge.hw import tma

KERNELS = ["bulk_add_one", "zfill_tile", "wait_kinds", "tx_late", "tensormap_replace", "prefetch_map",
           "swizzle_shifted", "store_negative"]


EXPLORED = HERE / "topics_h200.json"     # this module's run on the H200 (python -m chapters.ch02_tma.topics), 2026-11-30


def figures(section: str, key):
    """(figures, where they come from) for a notebook cell without a GPU: the record run's section if
    there is one, else the exploratory run kept in topics_h200.json under `key` (a tuple of keys: a
    dict of them), else (None, why)."""
    from judge import record
    figs = record.figures(section)
    if figs is not None:
        return figs, "recorded on the H200 by the record run"
    if EXPLORED.exists():
        saved = json.loads(EXPLORED.read_text())
        got = {k: saved.get(k) for k in key} if isinstance(key, tuple) else saved.get(key)
        if got is not None and not (isinstance(key, tuple) and None in got.values()):
            return got, "measured on an H200 on 2026-11-30 by python -m chapters.ch02_tma.topics (topics_h200.json)"
    return None, "(not recorded yet on an H200)"


def build(name: str, **defines):
    return _build.compile(HERE / f"{name}.cu", defines=defines or None)


def _cp():
    import cupy
    return cupy


def _sync():
    _cp().cuda.get_current_stream().synchronize()


def _gen():
    cp = _cp()
    return cp.random.default_rng(int(np.random.default_rng().integers(1 << 31)))


def bulk_add_one(n: int = 1 << 28, reps: int = 20) -> list[dict]:
    """y = x + 1 with 1-D bulk copies: each variant checked exactly, then timed (GB/s: read + write)."""
    cp = _cp()
    chunk = 16384
    n -= n % (chunk // 4)
    xs = [_gen().random(n, dtype=cp.float32) for _ in range(2)]
    y = cp.empty(n, dtype=cp.float32)
    grid = 8 * gpu.info().sms
    rows = []
    for d in ({"PREFETCH": 0}, {"PREFETCH": 1}, {"PREFETCH": 0, "EVICT_FIRST": 1}, {"PREFETCH": 1, "EVICT_FIRST": 1}):
        k = build("bulk_add_one", **d).kernel("bulk_add_one")
        chunks = np.int32(n // (chunk // 4))

        def launch(x, k=k, chunks=chunks):
            k((grid,), (256,), (x, y, chunks))
        _cmp.poison(y)
        launch(xs[1])
        _sync()
        bad = int(cp.count_nonzero(y != xs[1] + 1))
        t = timing.bench(launch, [(x,) for x in xs], reps=reps, bytes=2 * 4 * n)
        rows.append({"defines": d, "wrong": bad, "ms": t.median_ms, "GB/s": t.gbps, "spread": t.spread})
    return rows


def zfill_tile(rows: int = 37, cols: int = 70, ld: int = 72) -> dict:
    """A rows x cols matrix (rows of ld floats) copied tile by tile with cp.async zero-fill: inside
    the matrix every element must equal the input, outside every element must be exactly 0."""
    cp = _cp()
    x = _gen().random((rows, ld), dtype=cp.float32) + 1.0          # never 0 inside
    gx, gy = -(-cols // 32), -(-rows // 32)
    tiles = _cmp.poison(cp.empty((gy * 32, gx * 32), dtype=cp.float32))
    build("zfill_tile").kernel("zfill_tile")((gx, gy), (256,), (x, np.int32(rows), np.int32(cols), np.int32(ld), tiles))
    _sync()
    t = cp.asnumpy(tiles)
    inside = t[:rows, :cols] == cp.asnumpy(x[:, :cols])
    outside = np.ones_like(t, dtype=bool)
    outside[:rows, :cols] = False
    return {"rows": rows, "cols": cols, "inside_wrong": int((~inside).sum()),
            "outside_not_zero": int((t[outside] != 0).sum()), "outside_elements": int(outside.sum())}


def wait_kinds(work: int = 20000, hint_ns: int = 1000000) -> list[dict]:
    """Per way of waiting: medians over one block per SM of the worker's cycles, the waiter's polls
    and its wake-up delay after the arrival."""
    cp = _cp()
    sms = gpu.info().sms
    out = []
    for how, name in ((0, "test_wait loop"), (1, "try_wait loop"), (2, f"try_wait, hint {hint_ns} ns")):
        k = build("wait_kinds", HOW=how, WORK=work, HINT_NS=hint_ns).kernel("wait_kinds")
        res = cp.zeros(3 * sms, dtype=cp.int64)
        sink = cp.empty(sms, dtype=cp.float32)
        k((sms,), (160,), (np.float32(np.random.default_rng().random()), res, sink))
        _sync()
        r = cp.asnumpy(res).reshape(sms, 3)
        out.append({"wait": name, "worker cycles": float(np.median(r[:, 0])), "polls": float(np.median(r[:, 1])),
                    "wake-up cycles": float(np.median(r[:, 2])), "wake-up cycles (max)": float(r[:, 2].max())})
    return out


def tx_late(rows: int = 1024, cols: int = 2048) -> dict:
    """The load issued before its expect_tx: out must be a + 1 everywhere."""
    cp = _cp()
    host = np.random.default_rng().integers(-2 ** 30, 2 ** 30, size=(rows, cols), dtype=np.int32)
    a = cp.asarray(host)
    out = _cmp.poison(cp.empty_like(a))
    m = tma.tensor_map(a, box=(32, 16))
    build("tx_late").kernel("tx_late")((cols // 32, rows // 16), (128,), (m.as_kernel_arg(), out))
    _sync()
    return {"wrong": int((cp.asnumpy(out) != host + 1).sum()), "elements": rows * cols}


def tensormap_replace(batch: int = 8) -> dict:
    """Each block re-points a template map at its own tensor on the device and loads it."""
    cp = _cp()
    arrs = [_gen().random((32, 32), dtype=cp.float32) for _ in range(batch)]   # separate allocations
    tmpl = tma.tensor_map(arrs[0], box=(32, 32))
    maps = cp.zeros(batch * 16, dtype=cp.uint64)                 # 128 bytes each, 256-byte aligned start
    bases = cp.asarray(np.array([a.data.ptr for a in arrs], dtype=np.uint64))
    out = _cmp.poison(cp.empty((batch, 32, 32), dtype=cp.float32))
    build("tensormap_replace").kernel("tensormap_replace")((batch,), (64,), (tmpl.as_kernel_arg(), maps, bases, out))
    _sync()
    wrong = [int(cp.count_nonzero(out[b] != arrs[b])) for b in range(batch)]
    return {"batch": batch, "wrong_per_tensor": wrong, "ok": not any(wrong)}


def prefetch_map(blocks: int = 4 * 132, launches: int = 5) -> list[dict]:
    """First-load latency (cycles, clock64) per block, with and without prefetch.tensormap."""
    cp = _cp()
    a = _gen().random((16 * blocks, 32), dtype=cp.float32)
    out = []
    for pf in (0, 1):
        k = build("prefetch_map", PREFETCH=pf).kernel("prefetch_map")
        lat = []
        for _ in range(launches):
            m = tma.tensor_map(a, box=(32, 16))
            cyc = cp.zeros(blocks, dtype=cp.int64)
            sink = cp.empty(blocks, dtype=cp.float32)
            k((blocks,), (32,), (m.as_kernel_arg(), cyc, sink))
            _sync()
            lat.append(cp.asnumpy(cyc))
        lat = np.concatenate(lat)
        out.append({"prefetch.tensormap": bool(pf), "median cycles": float(np.median(lat)),
                    "p10": float(np.percentile(lat, 10)), "p90": float(np.percentile(lat, 90))})
    return out


def l2_promotion(nbytes: int = 1 << 30, reps: int = 20) -> list[dict]:
    """The pipelined TMA copy of section 6 with the tensor maps' L2 promotion none / 128B / 256B."""
    cp = _cp()
    cols = 8192
    rows = nbytes // 4 // cols
    srcs = [_gen().random((rows, cols), dtype=cp.float32) for _ in range(2)]
    dst = cp.empty((rows, cols), dtype=cp.float32)
    k = _build.compile(HERE / "tma_copy_pipelined.cu").kernel("tma_copy_pipelined")
    tiles_x, tiles = cols // 64, (cols // 64) * (rows // 32)
    grid = min(tiles, 4 * gpu.info().sms)
    out = []
    for promo in ("none", "128B", "256B"):
        dmap = tma.tensor_map(dst, box=(64, 32), l2_promotion=promo).as_kernel_arg()
        smaps = {s.data.ptr: tma.tensor_map(s, box=(64, 32), l2_promotion=promo).as_kernel_arg() for s in srcs}

        def launch(s, smaps=smaps, dmap=dmap):
            k((grid,), (64,), (smaps[s.data.ptr], dmap, np.int32(tiles_x), np.int32(tiles)))
        _cmp.poison(dst)
        launch(srcs[1])
        _sync()
        bad = int(cp.count_nonzero(dst.view(cp.uint32) != srcs[1].view(cp.uint32)))
        t = timing.bench(launch, [(s,) for s in srcs], reps=reps, bytes=2 * rows * cols * 4)
        out.append({"l2_promotion": promo, "wrong": bad, "GB/s": t.gbps, "spread": t.spread})
    return out


def swizzle_alignment() -> list[dict]:
    """Does the driver encode a 128B-swizzled map whose global address is 16, 64 or 128 bytes past
    a 1024-byte boundary? (The driver's answer; nothing is launched.)"""
    cp = _cp()
    from cuda.bindings import driver as drv
    base = cp.empty(1 << 20, dtype=cp.uint8)
    out = []
    for swz in ("none", "128B"):
        for off in (0, 16, 64, 128):
            addr = base.data.ptr + off
            err, _ = drv.cuTensorMapEncodeTiled(
                drv.CUtensorMapDataType(tma.DTYPES["float32"][0]), drv.cuuint32_t(2), addr,
                [drv.cuuint64_t(64), drv.cuuint64_t(64)], [drv.cuuint64_t(256)],
                [drv.cuuint32_t(32), drv.cuuint32_t(8)], [drv.cuuint32_t(1), drv.cuuint32_t(1)],
                drv.CUtensorMapInterleave(0), drv.CUtensorMapSwizzle(tma.SWIZZLES[swz]),
                drv.CUtensorMapL2promotion(0), drv.CUtensorMapFloatOOBfill(0))
            out.append({"swizzle": swz, "address offset": off, "driver": err.name})
    return out


def swizzle_shifted(offset: int = 128) -> dict:
    """An iota box (8 rows x 32 floats, 128B swizzle) loaded `offset` bytes past a 1024-byte boundary:
    the word each element landed in, against the model applied to the buffer's own offset bits."""
    cp = _cp()
    src = cp.arange(8 * 32, dtype=cp.int32).reshape(8, 32)
    m = tma.tensor_map(src, box=(32, 8), swizzle="128B")
    out = _cmp.poison(cp.empty(256, dtype=cp.int32))
    build("swizzle_shifted", OFFSET=offset).kernel("swizzle_shifted")((1,), (128,), (m.as_kernel_arg(), out))
    _sync()
    placed = [int(v) for v in out.get()]
    shifted = [-1] * 256
    aligned = [-1] * 256
    for g in range(256):
        shifted[(tma.swizzle_offset(offset + 4 * g, "128B") - offset) // 4] = g
        aligned[tma.swizzle_offset(4 * g, "128B") // 4] = g
    return {"offset": offset, "matches_shifted_model": placed == shifted, "matches_aligned_model": placed == aligned,
            "row0_chunks": [placed[4 * c] // 4 for c in range(8)]}


def _store_negative_child(x0: int, y0: int) -> dict:
    cp = _cp()
    parent = _cmp.poison(cp.empty((48, 64), dtype=cp.float32))
    view = parent[8:40, 16:48]                      # the tensor: 32 x 32, rows of 256 bytes
    view[...] = -1.0
    m = tma.tensor_map(view, box=(32, 16))
    build("store_negative").kernel("store_negative")((1,), (128,), (m.as_kernel_arg(), np.int32(x0), np.int32(y0)))
    _sync()
    p = cp.asnumpy(parent)
    t = p[8:40, 16:48]
    box = np.full((32, 32), False)
    box[max(y0, 0):max(y0 + 16, 0), max(x0, 0):max(x0 + 32, 0)] = True   # the in-tensor part of the box
    expect = np.array([[1000 + (r - y0) * 32 + (c - x0) for c in range(32)] for r in range(32)], dtype=np.float32)
    guard = np.ones_like(p, dtype=bool)
    guard[8:40, 16:48] = False
    return {"x0": x0, "y0": y0, "inside_box_written_right": int((t[box] == expect[box]).sum()),
            "inside_box": int(box.sum()), "tensor_outside_box_changed": int((t[~box] != -1.0).sum()),
            "guard_written": int((~np.isnan(p[guard])).sum())}


def store_negative(x0: int = -16, y0: int = -4, timeout: float = 60) -> dict:
    """The negative-coordinate store, in a child process (a fault there cannot hurt this process)."""
    import subprocess
    r = subprocess.run([sys.executable, "-m", __spec__.name, "store_negative", str(x0), str(y0)], capture_output=True,
                       text=True, timeout=timeout, check=False, cwd=ROOT)
    if r.returncode:
        return {"x0": x0, "y0": y0, "returncode": r.returncode, "error": r.stderr.strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure_all(out_dir=None) -> dict:
    res = {}
    for name, f in (("bulk_add_one", bulk_add_one), ("zfill_tile_70", lambda: zfill_tile(cols=70)),
                    ("zfill_tile_68", lambda: zfill_tile(cols=68)), ("wait_kinds", wait_kinds),
                    ("tx_late", tx_late), ("tensormap_replace", tensormap_replace),
                    ("prefetch_map", prefetch_map), ("l2_promotion", l2_promotion),
                    ("swizzle_shifted_128", lambda: swizzle_shifted(128)),
                    ("swizzle_shifted_512", lambda: swizzle_shifted(512)),
                    ("store_negative", store_negative), ("store_positive_edge", lambda: store_negative(16, 24)),
                    ("swizzle_alignment", swizzle_alignment)):
        try:
            res[name] = f()
        except Exception as e:  # noqa: BLE001 - one failing topic must not hide the others' figures
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        print(name, json.dumps(res[name], default=str), flush=True)
    if out_dir:
        Path(out_dir, "topics_h200.json").write_text(json.dumps(res, indent=1, default=str))
    return res


if __name__ == "__main__":
    if sys.argv[1:2] == ["store_negative"]:
        print(json.dumps(_store_negative_child(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        measure_all(sys.argv[1] if len(sys.argv) > 1 else None)
