"""Host side of Chapter 4's GEMM ladder: build, launch, check and time every rung.

The notebook chapters/ch04_wgmma.ipynb and tests/chapters/ch04_wgmma/test_kernels.py call these functions:

    from chapters.ch04_wgmma import ladder
    [r["name"] for r in ladder.RUNGS]            # the ten rungs, in order
    ladder.build_rung("TMA store + L2 order").sass      # any machine: NVRTC -> sm_90a -> SASS
    ladder.check_rung("persistent", 1000, 1032, 520)    # an H200: a judge.grading.compare.Comparison
    ladder.model_check("TMA store + L2 order", 256, 256, 200)   # any machine: the CPU model of the GPU
    rows = ladder.measure_ladder()                # an H200: every rung and cuBLAS, one run
    tl = ladder.timeline()                        # an H200: %globaltimer per stage, and its cost
    tl9 = ladder.timeline(name="ping-pong")       # the same for rung 9; ladder.pingpong_spans(tl9) per tile
    rows = ladder.measure_shapes()                # an H200: rungs 8, 9, 10 and cuBLAS on ladder.SHAPES
    ladder.stream_k_plan(8192, 8192, 8192, 66)    # any machine: how rung 10 splits the last round
    python -m chapters.ch04_wgmma.ladder            # an H200: checks, table, timeline (the device script)

The problem. C = A @ B^T with A (M x K) and B (N x K) bfloat16, both row-major ("K-major": the
reduction dimension is contiguous in both; the course's choice, not a requirement for 16-bit types:
bf16/fp16 wgmma also reads MN-major tiles through the instruction's transpose bits (PTX ISA,
wgmma.mma_async, imm-trans-a/b; CUTLASS's Layout_MN_SW* atoms), while tf32, FP8 and int8 operands must
be K-major), fp32 accumulation in the tensor cores, C (M x N) bfloat16, row-major. cuBLAS does the same through torch: `a @ b.T` in bf16.

Sizes. Any M, N, K >= 1 with K and N multiples of 8: TMA requires every row of a tensor to
start on a 16-byte boundary (8 bf16), for A and B (K) and for C (N); other sizes are refused with
a ValueError saying so. Sizes that are not multiples of the tile are handled: TMA fills the parts
of a box past the matrix with zeros (they add nothing to the sums) and the epilogues skip (or the
TMA store clips) rows and columns past the edge.

The tolerance (check_rung), derived from the arithmetic:
  * the inputs are bf16, so they are exact in float64, and each product a*b (8-bit significands)
    is exact in fp32; the only errors are the fp32 accumulation and the final rounding to bf16;
  * accumulation: K additions in fp32 (unit roundoff u = 2^-24) err by about sqrt(K) * u *
    ||a_i|| * ||b_j|| (a random walk; ||a_i||, ||b_j|| the row of A and the row of B). The tensor
    cores add in groups and truncate, so we allow 16 times that: atol_ij = 16 sqrt(K) 2^-24
    ||a_i|| ||b_j||;
  * rounding C to bf16 (p = 8 significand bits, unit roundoff u = 2^-8) adds at most 2^-8 |c_ij|;
    rtol = 2^-8 covers exactly that, with no headroom: the headroom is in atol (16 times the
    accumulation estimate), which also absorbs the (1 + u) the rounding puts on the accumulation error;
  * and the relative error norm ||C - C64|| / ||C64|| must stay under 2^-8.
For random normal inputs at K = 4096 that is atol ~ 0.25 and rtol * |c| ~ 0.25 around |c| ~ 64,
while a missing k-slice, a swapped row or a stale tile errs by 8 to 64. The float64 reference is
computed on the GPU by torch; above 4096^3 a random sample of 512 rows x 512 columns is checked.

Timing: judge.gpu.timing.bench (L2 flushed before each run, two input sets alternating, median and
10-90 % spread), cuBLAS bf16 through torch measured in the same process by the same protocol.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

from judge.gpu import build as _build
from judge.grading import compare as _cmp
from judge.gpu import timing
from judge.hw import tma

NOTEBOOK = "chapters/ch04_wgmma.ipynb"
BK = 64                        # every rung loads 64 bf16 (128 bytes) of K per slice

#: The ladder, in order. Host-side shape of each rung: tile (BM, BN), threads per block, ring
#: stages, whether blocks are persistent, cluster size, the rows of B one TMA box brings, and
#: whether C leaves through a TMA store.
RUNGS: list[dict] = [
    {"name": "one warpgroup", "file": "gemm_01_one_warpgroup.cu", "kernel": "gemm_one_warpgroup",
     "what": "one warpgroup per 128x128 tile: TMA (128B swizzle) + wgmma m64n128k16, load then compute",
     "defines": {}, "tile": (128, 128), "threads": 128, "stages": 1, "persistent": False,
     "cluster": 1, "box_b": 128, "tma_store": False},
    {"name": "TMA ring", "file": "gemm_02_tma_ring.cu", "kernel": "gemm_tma_ring",
     "what": "a 4-stage ring of TMA slices with full barriers: loads run ahead of the math",
     "defines": {}, "tile": (128, 128), "threads": 128, "stages": 4, "persistent": False,
     "cluster": 1, "box_b": 128, "tma_store": False},
    {"name": "warp specialized", "file": "gemm_03_warp_specialized.cu", "kernel": "gemm_warp_specialized",
     "what": "a producer warpgroup and two consumers (full/empty barriers), setmaxnreg 40/232",
     "defines": {}, "tile": (128, 128), "threads": 384, "stages": 4, "persistent": False,
     "cluster": 1, "box_b": 128, "tma_store": False},
    {"name": "128x256 tile", "file": "gemm_03_warp_specialized.cu", "kernel": "gemm_warp_specialized",
     "what": "the same with a 128x256 tile: each consumer runs m64n256k16 on 128 accumulators",
     "defines": {"BN": 256, "BM": 128, "BK": 64, "STAGES": 4}, "tile": (128, 256), "threads": 384,
     "stages": 4, "persistent": False, "cluster": 1, "box_b": 256, "tma_store": False},
    {"name": "persistent", "file": "gemm_05_persistent.cu", "kernel": "gemm_persistent",
     "what": "one block per SM walks the tiles; the ring runs across tile boundaries",
     "defines": {}, "tile": (128, 256), "threads": 384, "stages": 4, "persistent": True,
     "cluster": 1, "box_b": 256, "tma_store": False},
    {"name": "mbarrier parity", "file": "gemm_06_mbarrier_parity.cu", "kernel": "gemm_mbarrier_parity",
     "what": "parity waits: 1 arrival per full phase, 1 per consumer warpgroup per empty phase",
     "defines": {}, "tile": (128, 256), "threads": 384, "stages": 4, "persistent": True,
     "cluster": 1, "box_b": 256, "tma_store": False},
    {"name": "cluster multicast", "file": "gemm_07_cluster_multicast.cu", "kernel": "gemm_cluster_multicast",
     "what": "2-block clusters on 256x256: each block loads half of B and multicasts it to both",
     "defines": {}, "tile": (128, 256), "threads": 384, "stages": 4, "persistent": True,
     "cluster": 2, "box_b": 128, "tma_store": False},
    {"name": "TMA store + L2 order", "file": "gemm_08_tma_store.cu", "kernel": "gemm_tma_store",
     "what": "swizzled smem + TMA store epilogue, grouped tile order, one wgmma group kept in flight",
     "defines": {}, "tile": (128, 256), "threads": 384, "stages": 4, "persistent": True,
     "cluster": 2, "box_b": 128, "tma_store": True},
    {"name": "ping-pong", "file": "gemm_09_pingpong.cu", "kernel": "gemm_pingpong",
     "what": "each consumer owns whole 128x128 tiles; ordered named barriers alternate the two consumers' "
             "mainloops and epilogues, so one's epilogue runs under the other's wgmma",
     "defines": {}, "tile": (128, 128), "threads": 384, "stages": 6, "persistent": True,
     "cluster": 2, "box_b": 64, "tma_store": True, "epilogue_buffers": 2},
    {"name": "stream-K tail", "file": "gemm_10_stream_k.cu", "kernel": "gemm_stream_k",
     "what": "rung 8 with the last, partial wave of tiles cut into K slices dealt out evenly to every "
             "cluster; a tile split between clusters is summed through an fp32 workspace and flags",
     "defines": {}, "tile": (128, 256), "threads": 384, "stages": 4, "persistent": True,
     "cluster": 2, "box_b": 128, "tma_store": True, "stream_k": True},
]
_TOP_DEFINES = {"BN": 256, "BM": 128, "BK": 64, "STAGES": 4, "GROUP_M": 8}   # gemm_08's #ifndef block
#: Measured beside the ladder, not rungs of it: the top rung with one thing taken away.
VARIANTS: list[dict] = [
    {**RUNGS[7], "name": "TMA store + L2 order, no cluster",
     "what": "the top rung with clusters of 1: plain TMA loads of the whole B slice, no multicast",
     "defines": {"CLUSTER": 1}, "cluster": 1, "box_b": 256},
    {**RUNGS[7], "name": "TMA store + L2 order, row-major order",
     "what": "the top rung with GROUP_M 1: tiles walked row by row, as on rungs 5 to 7",
     "defines": {**_TOP_DEFINES, "GROUP_M": 1, "RELEASE_LAG": 1}},
    {**RUNGS[7], "name": "TMA store + L2 order, BK 32 x 8 stages",
     "what": "the top rung with slices of 32 (64-byte rows, 64B swizzle) in 8 stages: the same bytes, "
             "freed in smaller steps, so more of the ring is loading at any time",
     "defines": {**_TOP_DEFINES, "BK": 32, "STAGES": 8, "RELEASE_LAG": 1}, "stages": 8, "bk": 32},
    {**RUNGS[7], "name": "TMA store + L2 order, release lag 0",
     "what": "the top rung with wgmma.wait_group 0 before each release (no group kept in flight)",
     "defines": {**_TOP_DEFINES, "RELEASE_LAG": 0}},
    {**RUNGS[8], "name": "ping-pong, 64x256 tiles",
     "what": "rung 9 with 64x256 tiles per consumer (one m64n256k16 per k-step) in a 4-stage ring",
     "defines": {"BN": 256, "BM": 64, "BK": 64, "STAGES": 4, "GROUP_M": 16, "RELEASE_LAG": 1},
     "tile": (64, 256), "stages": 4, "box_b": 128},
]
BEST = "TMA store + L2 order"
BEST_WITHOUT_CLUSTER = "TMA store + L2 order, no cluster"
TIMELINE_EVENTS = 1024         # TL_EVENTS in gemm_08_tma_store.cu
TIMELINE_ROLES = 5             # producer, consumer 1, consumer 2, epilogue 1, epilogue 2


def rung(name: str) -> dict:
    for r in RUNGS + VARIANTS:
        if r["name"] == name:
            return r
    raise KeyError(f"no rung {name!r}; the rungs are: " + ", ".join(repr(r["name"]) for r in RUNGS))


def build_rung(name: str, **extra_defines):
    """Compile one rung for sm_90a (any machine): a judge.gpu.build.Build."""
    r = rung(name)
    defines = dict(r["defines"])
    defines.update(extra_defines)
    return _build.compile(HERE / r["file"], defines=defines or None)


def shared_bytes(r: dict) -> int:
    """Dynamic shared memory of a rung: the ring, the epilogue buffers, 1 KiB to align to 1024."""
    bm, bn = r["tile"]
    ring = r["stages"] * (bm + bn) * r.get("bk", BK) * 2
    # one 64 x 128 bf16 staging buffer per consumer warpgroup
    epilogue = r.get("epilogue_buffers", bm // 64) * 64 * 128 * 2 if r["tma_store"] else 0
    return ring + epilogue + 1024


def check_size(M: int, N: int, K: int) -> None:
    """Refuse sizes the kernels cannot take, saying why."""
    if min(M, N, K) < 1:
        raise ValueError(f"M, N, K must be at least 1 (got {M}, {N}, {K})")
    if K % 8 or N % 8:
        raise ValueError(
            f"K = {K} and N = {N} must be multiples of 8: TMA needs every row of A, B (K bf16 each) "
            f"and C (N bf16) to start on a 16-byte boundary. Pad K or N to a multiple of 8 with zeros.")


# ----------------------------------------------------------------------------- GPU plumbing
def _torch():
    import torch
    return torch


def _sync():
    import cupy
    cupy.cuda.get_current_stream().synchronize()


def _inputs(M, N, K, seed):
    """Random normal bf16 A (M x K) and B (N x K) on the GPU (never zeros)."""
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(int(seed))
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, device="cuda", generator=g).to(torch.bfloat16)
    return a, b


def _poisoned(M, N):
    torch = _torch()
    return torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)


_CLUSTERS: dict = {}

#: A stream-K range shorter than this many slices of BK costs more in partial sums (a 128 KiB fp32
#: write by one cluster, a read by another) than the idle SMs it fills.
SK_MIN_SLICES = 8
#: What splitting costs, in tiles of one cluster's time: measured on the H200 (2026-12-01, round 4/5 of
#: explore_h200.py), rung 10 splitting everywhere was 2.8 % slower than rung 8 at 4096^3, where the last
#: round is 58 / 66 = 0.88 full (0.12 of a tile idle), and faster where 0.24 or more of a tile idled
#: (8192^3: 0.48; 8B MLP down: 0.24, +1.5 %). So rung 10 splits only when more than this share idles.
SK_COST_TILES = 0.2


def stream_k_plan(M: int, N: int, K: int, clusters: int, tile=(128, 256), cluster: int = 2,
                  min_slices: int = SK_MIN_SLICES, cost_tiles: float = SK_COST_TILES) -> dict:
    """How rung 10 splits M x N x K over `clusters` persistent clusters.

    The T cluster tiles (cluster * BM x BN) are walked whole while every cluster gets one; the
    T mod clusters left over (all T when T < clusters) are cut into their K slices, dealt out in
    equal contiguous ranges to sk_clusters clusters. No split when the tiles fill every round, or
    when the ranges would be no shorter than a tile (nothing to gain) or shorter than SK_MIN_SLICES, or
    when the last round leaves no more than SK_COST_TILES of a tile idle (the split would cost more).
    """
    bm, bn = tile
    tiles = -(-M // (bm * cluster)) * -(-N // bn)
    k_tiles = -(-K // BK)
    sk_tiles = tiles % clusters
    sk_clusters = min(clusters, sk_tiles * k_tiles // min_slices)
    idle = 1 - sk_tiles / clusters if tiles >= clusters else 0.0   # of the last round (whole tiles)
    if sk_tiles == 0 or sk_clusters <= sk_tiles or (tiles >= clusters and idle <= cost_tiles):
        sk_tiles = sk_clusters = 0
    rounds = tiles // clusters + (sk_tiles / sk_clusters if sk_clusters else (1 if tiles % clusters else 0))
    return {"tiles": tiles, "k_tiles": k_tiles, "sk_tiles": sk_tiles, "sk_clusters": sk_clusters,
            "rounds": rounds, "rounds_whole_tiles": -(-tiles // clusters), "idle_last_round": round(idle, 3)}


def stream_k_args(plan: dict | None, workspace, flags, epoch: int) -> tuple:
    """Rung 10's arguments after M, N, K: the split (none when plan is None), the fp32 workspace (one
    64 x BN partial per slot, stream_k_slots), the flags (one per slot) and the launch's epoch, which the
    flags are compared with (so neither is ever cleared). workspace and flags: a device pointer
    (np.uint64) on a GPU, NumPy arrays on the CPU model."""
    sk_tiles, sk_clusters = (plan["sk_tiles"], plan["sk_clusters"]) if plan else (0, 0)
    return np.int32(sk_tiles), np.int32(sk_clusters), workspace, flags, np.uint32(epoch)


def stream_k_slots(clusters: int, r: dict) -> int:
    """Workspace slots of rung 10: one 64 x BN fp32 partial per cluster, block and consumer warpgroup."""
    return clusters * r["cluster"] * (r["tile"][0] // 64)


def _grid(r: dict, build, M: int, N: int) -> tuple[tuple, str]:
    """Blocks to launch, and how the count was chosen."""
    from judge import gpu
    bm, bn = r["tile"]
    tiles_n = -(-N // bn)
    if not r["persistent"]:
        return (tiles_n, -(-M // bm), 1), "one block per tile"
    sms = gpu.info().sms
    cl = r["cluster"]
    tiles = -(-M // (bm * cl)) * tiles_n
    if cl == 1:
        return (min(sms, tiles), 1, 1), f"{sms} SMs"
    key = (r["name"], build.key)
    if key not in _CLUSTERS:
        try:
            from judge.gpu import launch
            _CLUSTERS[key] = (launch.max_active_clusters(build, r["kernel"], block=(r["threads"], 1, 1),
                                                         cluster=(cl, 1, 1), shared_bytes=shared_bytes(r)),
                              "max active clusters")
        except Exception as e:  # noqa: BLE001 - fall back on the SM count, and say so
            _CLUSTERS[key] = (sms // cl, f"{sms} SMs / {cl} ({type(e).__name__} asking the occupancy API)")
    n, how = _CLUSTERS[key]
    if not r.get("stream_k"):               # rung 10 deals slices of a few tiles out to every cluster
        n = max(1, min(n, tiles))
    return (cl * n, 1, 1), how


def launcher(name: str, M: int, N: int, K: int, *, build=None, timeline_buf=None):
    """A function launch(a, b, c) running the rung on bf16 torch tensors A (MxK), B (NxK), C (MxN).

    Tensor maps are built per input set (and cached by address), the grid per rung and size.
    """
    check_size(M, N, K)
    r = rung(name)
    b = build or build_rung(name)
    k = b.kernel(r["kernel"])
    smem = shared_bytes(r)
    k.max_dynamic_shared_size_bytes = smem
    bm, _ = r["tile"]
    grid, _how = _grid(r, b, M, N)
    block = (r["threads"], 1, 1)
    maps: dict = {}

    def get_maps(a, bb, c):
        key = (a.data_ptr(), bb.data_ptr(), c.data_ptr())
        if key not in maps:
            # A box: 64 bf16 (128 bytes, the 128B swizzle span) x BM rows; B box: 64 x box_b rows
            # (rungs with slices of 32: 64-byte rows and the 64B swizzle).
            bk = r.get("bk", BK)
            sw = {64: "128B", 32: "64B"}[bk]
            ma = tma.tensor_map(a, box=(bk, bm), swizzle=sw)
            mb = tma.tensor_map(bb, box=(bk, r["box_b"]), swizzle=sw)
            mc = tma.tensor_map(c, box=(64, 64), swizzle="128B") if r["tma_store"] else None
            maps[key] = (ma, mb, mc)
        return maps[key]

    plan = None
    if r.get("stream_k"):
        torch = _torch()
        clusters = grid[0] // r["cluster"]
        plan = stream_k_plan(M, N, K, clusters, r["tile"], r["cluster"],
                             min_slices=r.get("sk_min_slices", SK_MIN_SLICES))
        slots = stream_k_slots(clusters, r)
        # Flags hold the number of the launch that raised them (never cleared); the workspace needs no zeros.
        workspace = torch.empty(slots * 64 * r["tile"][1], dtype=torch.float32, device="cuda")
        flags = torch.zeros(slots, dtype=torch.int32, device="cuda")
        epoch = [0]

    def launch(a, bb, c):
        ma, mb, mc = get_maps(a, bb, c)
        if plan is not None:
            epoch[0] += 1
            args = (ma.as_kernel_arg(), mb.as_kernel_arg(), mc.as_kernel_arg(), np.int32(M), np.int32(N),
                    np.int32(K), *stream_k_args(plan, np.uint64(workspace.data_ptr()),
                                                np.uint64(flags.data_ptr()), epoch[0]))
        elif r["tma_store"]:
            tl = np.uint64(timeline_buf.data_ptr() if timeline_buf is not None else 0)
            args = (ma.as_kernel_arg(), mb.as_kernel_arg(), mc.as_kernel_arg(),
                    np.int32(M), np.int32(N), np.int32(K), tl)
        else:
            args = (ma.as_kernel_arg(), mb.as_kernel_arg(), np.uint64(c.data_ptr()),
                    np.int32(M), np.int32(N), np.int32(K))
        k(grid, block, args, shared_mem=smem)

    launch.grid = grid
    launch.grid_how = _how
    launch.plan = plan
    return launch


def reference(a, b, rows=None, cols=None):
    """float64 C = A B^T (all of it, or rows x cols of it), and the per-element atol of the docstring."""
    torch = _torch()
    a64 = a.double() if rows is None else a[rows].double()
    b64 = b.double() if cols is None else b[cols].double()
    K = a.shape[1]
    ref = a64 @ b64.T
    atol = 16 * math.sqrt(K) * 2.0 ** -24 * torch.outer(a64.norm(dim=1), b64.norm(dim=1))
    return ref, atol


RTOL = 2.0 ** -8
NORM_TOL = 2.0 ** -8
SAMPLE = 512                    # rows and columns checked above FULL_CHECK_FLOPS
FULL_CHECK_FLOPS = 4096 ** 3


def compare_output(c, a, b, case: str, seed: int = 0):
    """Compare the kernel's C with float64 (whole, or a random sample of rows x columns)."""
    torch = _torch()
    M, K = a.shape
    N = b.shape[0]
    if M * N * K <= FULL_CHECK_FLOPS:
        ref, atol = reference(a, b)
        got = c.float()
    else:
        g = torch.Generator(device="cuda").manual_seed(seed + 1)
        rows = torch.randperm(M, device="cuda", generator=g)[:SAMPLE].sort().values
        cols = torch.randperm(N, device="cuda", generator=g)[:SAMPLE].sort().values
        ref, atol = reference(a, b, rows, cols)
        got = c[rows][:, cols].float()
        case += f" (sample of {len(rows)} rows x {len(cols)} columns)"
    return _cmp.compare(got.cpu().numpy(), ref.cpu().numpy(), rtol=RTOL, atol=atol.cpu().numpy(),
                        norm_tol=NORM_TOL, case=case)


def check_rung(name: str, M: int, N: int, K: int, seed=None):
    """Run one rung once on fresh random inputs, C poisoned with NaN, against float64."""
    check_size(M, N, K)
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    a, b = _inputs(M, N, K, seed)
    c = _poisoned(M, N)
    launch = launcher(name, M, N, K)
    launch(a, b, c)
    _sync()
    return compare_output(c, a, b, f"{name}: M={M} N={N} K={K} seed={seed}", seed)


def model_check(name: str, M: int, N: int, K: int, seed=None, clusters: int = 2, build=None):
    """Run one rung on the CPU model of the machine (judge.model, no GPU needed), against float64.

    The model runs the kernel's own PTX with the asynchronous rules enforced as late as they allow
    (a TMA box lands when its phase completes, a stage released too early is poisoned, a TMA store
    without the proxy fence is a violation), so a protocol error fails here even when a GPU would
    usually give the right numbers. Small sizes only (seconds per 256 x 256 x 256).
    Persistent rungs run on `clusters` clusters (blocks when unclustered); rung 10 splits its tail as
    it would on that many (stream_k_plan), and the model runs the clusters one after another, in
    order, so an owner finds its lower-ranked partners' partial sums already written.
    """
    import ml_dtypes

    from judge.gpu import launch as _launch
    check_size(M, N, K)
    r = rung(name)
    b = build or build_rung(name)              # build: the rung's file with a change (tests of its mistakes)
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    bf16 = ml_dtypes.bfloat16
    a = tma.empty_aligned((M, K), bf16)
    a[...] = rng.standard_normal((M, K)).astype(bf16)
    bb = tma.empty_aligned((N, K), bf16)
    bb[...] = rng.standard_normal((N, K)).astype(bf16)
    c = tma.empty_aligned((M, N), bf16)
    c[...] = np.nan
    bk = r.get("bk", BK)
    sw = {64: "128B", 32: "64B"}[bk]
    bm, bn = r["tile"]
    maps = [tma.tensor_map(a, box=(bk, bm), swizzle=sw), tma.tensor_map(bb, box=(bk, r["box_b"]), swizzle=sw)]
    cl = r["cluster"]
    plan = None
    if r.get("stream_k"):
        plan = stream_k_plan(M, N, K, clusters, r["tile"], cl, min_slices=1, cost_tiles=0)   # small: split anyway
        slots = stream_k_slots(clusters, r)
        args = (*maps, tma.tensor_map(c, box=(64, 64), swizzle="128B"), np.int32(M), np.int32(N), np.int32(K),
                *stream_k_args(plan, np.full(slots * 64 * bn, np.nan, np.float32), np.zeros(slots, np.uint32), 1))
    elif r["tma_store"]:
        args = (*maps, tma.tensor_map(c, box=(64, 64), swizzle="128B"), np.int32(M), np.int32(N), np.int32(K),
                np.uint64(0))
    else:
        args = (*maps, c.view(np.uint16), np.int32(M), np.int32(N), np.int32(K))   # the same bytes
    if plan is not None:
        grid = (cl * clusters, 1, 1)                                   # every cluster: some hold stream-K ranges
    elif r["persistent"]:
        grid = (cl * min(clusters, -(-M // (bm * cl)) * -(-N // bn)), 1, 1)   # the clusters share the tiles
    else:
        grid = (-(-N // bn), -(-M // bm), 1)
    _launch.launch(b, r["kernel"], grid=grid, block=(r["threads"], 1, 1), args=args,
                   shared_bytes=shared_bytes(r), cluster=(cl, 1, 1) if cl > 1 else None)
    a64, b64 = a.astype(np.float64), bb.astype(np.float64)
    ref = a64 @ b64.T
    atol = 16 * math.sqrt(K) * 2.0 ** -24 * np.outer(np.linalg.norm(a64, axis=1), np.linalg.norm(b64, axis=1))
    return _cmp.compare(c.astype(np.float32), ref, rtol=RTOL, atol=atol, norm_tol=NORM_TOL,
                        case=f"{name} on the CPU model: M={M} N={N} K={K} seed={seed}"
                        + (f" ({plan['sk_tiles']} tiles over {plan['sk_clusters']} stream-K ranges of {clusters} clusters)"
                           if plan else ""))


def cublas_launcher():
    torch = _torch()

    def launch(a, b, c):
        torch.matmul(a, b.T, out=c)
    return launch


def measure_ladder(sizes=(4096, 8192), rungs=None, reps: int = 20) -> list[dict]:
    """Every rung (and the VARIANTS) and cuBLAS bf16 (torch) at n^3 for each n, in this one process.

    Rows: {rung, n, TFLOPS, "of cuBLAS", ms, spread, ok, variant}; the first row of each size is
    cuBLAS; rows of VARIANTS have variant True.
    Each rung's output after its timed runs is compared with float64 (ok, rel_err).
    """
    torch = _torch()
    names = [r["name"] for r in RUNGS + VARIANTS] if rungs is None else list(rungs)
    rows = []
    for n in sizes:
        seeds = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
        sets = [_inputs(n, n, n, s) for s in seeds]
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * n ** 3
        cub = timing.bench(cublas_launcher(), [(a, b, c) for a, b in sets], flops=flops, reps=reps)
        ref_cmp = compare_output(c, *sets[(reps - 1) % 2], case=f"cuBLAS n={n}")
        rows.append({"rung": "cuBLAS bf16 (torch)", "n": n, "TFLOPS": cub.tflops, "of cuBLAS": 1.0,
                     "ms": cub.median_ms, "spread": cub.spread, "ok": bool(ref_cmp.ok),
                     "rel_err": ref_cmp.rel_err})
        for name in names:
            launch = launcher(name, n, n, n)
            c.fill_(float("nan"))
            t = timing.bench(launch, [(a, b, c) for a, b in sets], flops=flops, reps=reps)
            _sync()
            # the last timed run used set (reps - 1) % 2
            last = sets[(reps - 1) % 2]
            cmp = compare_output(c, *last, case=f"{name} n={n} (after timing)", seed=seeds[0])
            rows.append({"rung": name, "n": n, "TFLOPS": t.tflops, "of cuBLAS": t.tflops / cub.tflops,
                         "ms": t.median_ms, "spread": t.spread, "ok": bool(cmp.ok),
                         "rel_err": cmp.rel_err, "variant": name not in [x["name"] for x in RUNGS],
                         "grid": launch.grid[0] * launch.grid[1],
                         "grid_how": launch.grid_how})
        del sets, c
        torch.cuda.empty_cache()
    return rows


#: Transformer projections (M = tokens; N x K the weight of a layer): what the ladder meets outside
#: cubes. Llama-3-8B (hidden 4096, 8 KV heads of 128, MLP 14336) and Llama-3-70B (hidden 8192, MLP 28672);
#: "N several times K" (an up projection) and "K several times N" (a down projection); last, split-K's shape
#: (16 cluster tiles for 66 clusters), where only a split of K can use the machine.
SHAPES: list[dict] = [
    {"layer": "8B QKV projection", "M": 16384, "N": 6144, "K": 4096},
    {"layer": "8B MLP up (gate or up)", "M": 8192, "N": 14336, "K": 4096},
    {"layer": "8B MLP down", "M": 8192, "N": 4096, "K": 14336},
    {"layer": "70B MLP up (gate and up fused)", "M": 4096, "N": 57344, "K": 8192},
    {"layer": "70B MLP down", "M": 16384, "N": 8192, "K": 28672},
    {"layer": "few tiles, long K (split-K's shape)", "M": 1024, "N": 1024, "K": 16384},
]


def wave_fill(tiles: int, sms: int = 132) -> dict:
    """Wave quantization of `tiles` equal tiles over `sms` SMs, one tile per SM at a time:
    `last wave fill`, the share of the SMs the last wave keeps busy ((tiles mod sms) / sms, 1 when it
    divides), and `wave efficiency`, the share of the run's SM time that holds a tile (waves / ceil(waves):
    1 - efficiency of the machine idles while the last wave runs, spread over the whole run)."""
    waves = tiles / sms
    last = tiles % sms or sms
    return {"last wave fill": round(last / sms, 3), "wave efficiency": round(waves / math.ceil(waves), 3)}


def shape_facts(r: dict, M: int, N: int, K: int, sms: int = 132) -> dict:
    """What a rung's tiling makes of a shape: tiles, waves over the SMs (wave_fill), slices per tile."""
    bm, bn = r["tile"]
    tiles = -(-M // bm) * -(-N // bn)
    waves = tiles / sms                           # one tile per SM at a time (clusters: the pair together)
    return {"tiles": tiles, "waves": round(waves, 2), **wave_fill(tiles, sms),
            "k slices": -(-K // r.get("bk", BK))}


def measure_shapes(shapes=None, rungs=(BEST, "ping-pong", "stream-K tail"), reps: int = 10) -> list[dict]:
    """Each rung and cuBLAS bf16 on each transformer shape, in this one process, interleaved.

    Per shape: fresh random inputs (two sets), then two rounds in opposite order (cuBLAS, rungs...,
    rungs reversed, cuBLAS), each judge.gpu.timing.bench; a kernel's figure is the mean of its two
    medians, so drift in clocks or heat during the shape counts against every kernel alike. Each
    kernel's C after its timed runs is compared with float64 on a random sample of rows x columns.
    Rows: {layer, M, N, K, rung, TFLOPS, "of cuBLAS", ms, spread, ok, rel_err, tiles, waves, ...}.
    """
    torch = _torch()
    rows = []
    for sh in shapes or SHAPES:
        M, N, K = sh["M"], sh["N"], sh["K"]
        seeds = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
        sets = []
        for s in seeds:
            g = torch.Generator(device="cuda").manual_seed(s)
            sets.append((torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16),
                         torch.randn(N, K, device="cuda", generator=g).to(torch.bfloat16)))
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * M * N * K
        names = ["cuBLAS bf16 (torch)"] + list(rungs)
        launches = {"cuBLAS bf16 (torch)": cublas_launcher()}
        launches.update({n: launcher(n, M, N, K) for n in rungs})
        ms = {n: [] for n in names}
        spread = {n: [] for n in names}
        checks = {}
        for order in (names, names[::-1]):
            for n in order:
                c.fill_(float("nan"))
                t = timing.bench(launches[n], [(a, b, c) for a, b in sets], flops=flops, reps=reps)
                _sync()
                ms[n].append(t.median_ms)
                spread[n].append(t.spread)
                if n not in checks:
                    checks[n] = compare_output(c, *sets[(reps - 1) % 2], case=f"{n} {M}x{N}x{K} (after timing)",
                                               seed=seeds[0])
        base = float(np.mean(ms["cuBLAS bf16 (torch)"]))
        for n in names:
            m = float(np.mean(ms[n]))
            row = {**sh, "rung": n, "TFLOPS": flops / m / 1e9, "of cuBLAS": base / m, "ms": m,
                   "spread": float(max(spread[n])), "ok": bool(checks[n].ok), "rel_err": checks[n].rel_err}
            if n != "cuBLAS bf16 (torch)":
                row.update(shape_facts(rung(n), M, N, K))
                row["grid"] = launches[n].grid[0]
                if launches[n].plan:
                    row["stream-K tiles"] = launches[n].plan["sk_tiles"]
            rows.append(row)
        del sets, c
        torch.cuda.empty_cache()
    return rows


def shapes_table(rows) -> str:
    out = [f"{'layer':32s} {'M':>6s} {'N':>6s} {'K':>6s} {'kernel':22s} {'TFLOPS':>7s} {'of cuBLAS':>9s} "
           f"{'waves':>6s} {'ok':>3s}"]
    for r in rows:
        out.append(f"{r['layer']:32s} {r['M']:6d} {r['N']:6d} {r['K']:6d} {r['rung'][:22]:22s} {r['TFLOPS']:7.1f} "
                   f"{r['of cuBLAS']:9.3f} {r.get('waves', ''):>6} {'yes' if r['ok'] else 'NO':>3s}")
    return "\n".join(out)


def timeline(n: int = 4096, reps: int = 20, name: str = BEST) -> dict:
    """%globaltimer per stage of block 0 of a rung built with -DTIMELINE (the best rung unless named:
    gemm_08 and gemm_09 record one), and the cost.

    Returns times in ns from the first mark: producer [(wait_start, issued)] per k-slice,
    consumers [[(wait_start, data_ready, released)] per k-slice] for each consumer, epilogues
    [[(start, stores_issued)] per tile] for each consumer, the median times of the plain and the
    instrumented build under judge.gpu.timing.bench, and cost = instrumented / plain - 1.
    """
    torch = _torch()
    seeds = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
    sets = [_inputs(n, n, n, s) for s in seeds]
    c = _poisoned(n, n)
    buf = torch.zeros(TIMELINE_ROLES * TIMELINE_EVENTS * 4, device="cuda", dtype=torch.int64)
    plain = launcher(name, n, n, n)
    timed = launcher(name, n, n, n, build=build_rung(name, TIMELINE=None), timeline_buf=buf)
    flops = 2.0 * n ** 3
    # alternate the two builds so that clocks and heat treat them alike
    t_plain, t_timed = [], []
    for _ in range(2):
        t_plain.append(timing.bench(plain, [(a, b, c) for a, b in sets], flops=flops, reps=reps).median_ms)
        t_timed.append(timing.bench(timed, [(a, b, c) for a, b in sets], flops=flops, reps=reps).median_ms)
    buf.zero_()
    c.fill_(float("nan"))
    timed(*sets[0], c)
    _sync()
    cmp = compare_output(c, *sets[0], case=f"timeline build n={n}")
    raw = buf.cpu().numpy().view(np.uint64).reshape(TIMELINE_ROLES, TIMELINE_EVENTS, 4).astype(np.int64)
    t0 = raw[raw > 0].min()

    def rel(role, cols):
        ev = raw[role].copy()
        if role in (1, 2):   # a consumer marks its wait start only on a tile's first slice; later
            for i in range(1, len(ev)):       # slices start waiting when the previous one released
                if ev[i, 1] > 0 and ev[i, 0] == 0:
                    ev[i, 0] = ev[i - 1, 2]
        keep = ev[:, 1] > 0
        return [tuple(int(x - t0) for x in e[:cols]) for e in ev[keep]]

    ms_plain, ms_timed = float(np.median(t_plain)), float(np.median(t_timed))
    return {"n": n, "rung": name, "producer": rel(0, 2), "consumers": [rel(1, 3), rel(2, 3)],
            "epilogues": [rel(3, 2), rel(4, 2)], "ms_plain": ms_plain, "ms_timed": ms_timed,
            "cost": ms_timed / ms_plain - 1.0, "ok": bool(cmp.ok), "check": cmp.message or "ok"}


# ----------------------------------------------------------------------------- why each rung moved
# Every "why" the chapter prints is generated here from two record sections measured on the H200:
# ch04.ladder (times, chapters/ch04_wgmma.ipynb) and ch04.counters (Nsight Compute, a separate
# profiling pass at 4096^3, one launch per kernel: counters, not times). A claim is a sentence
# template plus a predicate over the counters of the rung and of the rung before; a claim whose
# predicate the record contradicts is never printed (why_rows says so instead), and
# tests/chapters/test_claims.py runs every predicate against the record.
#
#   counters_by_rung(c)        {rung name: the summary row of ch04.counters}
#   step_verdicts(ladder)      [(rung, n, ratio to the rung before, "faster"/"slower"/"level")]
#   why_rows(ladder, c)        one row per rung: its step at each size and its counter-backed why
#   why_markdown(ladder, c)    the same as a markdown list (the notebook displays it)
#   closing_markdown(ladder, c) the closing note: per rung, its step and its counters, as a table
#   draw_counters(c)           tensor-pipe utilisation and the stall breakdown per rung (a Figure)
#   draw_measured_timeline(..) the %globaltimer timeline, axis from the first slice drawn, boxes
#                              labelled with the slice numbers they show

MARGIN = 0.03          # a step within 3 % of the rung before is "level": run-to-run spread is ~1-2 %


#: Rungs whose claim rests on counters at another size than 4096^3 (rung 10 splits nothing at 4096^3).
COUNTERS_AT = {"stream-K tail": 8192}
#: Rungs whose step is measured against another rung than the one before it.
STEP_FROM = {"stream-K tail": "TMA store + L2 order"}


def profiled_at(n: int) -> list[tuple[str, str]]:
    """(rung, the rung its claim compares it with) of the claims resting on counters at n^3 (COUNTERS_AT):
    what judge.record.counters profiles at that size besides every rung and variant at 4096^3."""
    names = [(name, before) for name, before, _, _ in CLAIMS if COUNTERS_AT.get(name) == n]
    return list(dict.fromkeys(x for pair in names for x in pair if x))


def counters_by_rung(counters: dict | None, n: int = 4096) -> dict:
    """{label: summary} of the rows profiled at n^3 in record.figures("ch04.counters") (labels are the
    rung and variant names)."""
    if not counters:
        return {}
    return {r["label"]: {**r["summary"], "shared bytes per block":
                         r["metrics"].get("launch__shared_mem_per_block_dynamic", {}).get("value"),
                         "blocks per SM (registers limit)":
                         r["metrics"].get("launch__occupancy_limit_registers", {}).get("value"),
                         "blocks per SM (shared-memory limit)":
                         r["metrics"].get("launch__occupancy_limit_shared_mem", {}).get("value")}
            for r in counters["rows"] if r.get("size", "4096^3") in (f"{n}^3", "chapter's defaults")}


def _stall(s: dict, reason: str) -> float:
    """Warps stalled on `reason` per issued instruction (0 when it is not among the top stalls)."""
    return next((t["warps per issue"] for t in s["top stalls"] if t["reason"] == reason), 0.0)


def _ratio(cur: dict, prev: dict, key: str) -> float:
    return cur[key] / prev[key]


def verdict(ratio: float, margin: float = MARGIN) -> str:
    return "faster" if ratio > 1 + margin else "slower" if ratio < 1 - margin else "level"


def step_verdicts(ladder_figs: dict | None, names=None) -> list[tuple]:
    """(rung, n, TFLOPS ratio to the rung before, verdict) for every rung after the first, every size."""
    if not ladder_figs:
        return []
    names = names or [r["name"] for r in RUNGS]
    out = []
    for n in sorted({r["n"] for r in ladder_figs["rows"]}):
        by = {r["rung"]: r for r in ladder_figs["rows"] if r["n"] == n}
        for a, b in zip(names, names[1:]):
            a = STEP_FROM.get(b, a)
            if a in by and b in by:
                x = by[b]["TFLOPS"] / by[a]["TFLOPS"]
                out.append((b, n, x, verdict(x)))
    return out


def _mb(x):
    return f"{x / 1e6:.0f} MB"


def _kib(x):
    return f"{x / 1024:.0f} KiB"


def _top(s):
    t = s["top stalls"][0]
    return f"{t['reason']} ({100 * t['share']:.0f} % of stalls)"


#: (rung, the rung it is compared with or None, claim template, predicate). Templates are formatted
#: with c (this rung's counters), p (the compared rung's) and r (ratios c/p of the byte counters);
#: a predicate returns True when the counters support the claim.
CLAIMS: list[tuple] = [
    ("one warpgroup", None,
     "{c[registers per thread]:.0f} registers per thread and {kib_c} of shared memory per block allow "
     "{c[blocks per SM (theoretical)]:.0f} blocks per SM (limit from registers "
     "{c[blocks per SM (registers limit)]:.0f}, from shared memory {c[blocks per SM (shared-memory limit)]:.0f}): "
     "while one block waits for its load, another's wgmma run, so the tensor pipe is busy "
     "{c[tensor pipe %]:.0f} % of the time even though each block loads, then computes; top stall {top_c}",
     lambda c, p: c["blocks per SM (theoretical)"] >= 2 and c["tensor pipe %"] > 30),
    ("TMA ring", "one warpgroup",
     "its 4-slot ring needs {kib_c} of shared memory per block: {c[blocks per SM (theoretical)]:.0f} block per SM "
     "(limited by {c[occupancy limited by]}) instead of {p[blocks per SM (theoretical)]:.0f}. The ring overlaps a "
     "block's own loads, but three blocks already overlapped each other's: tensor pipe {p[tensor pipe %]:.0f} % -> "
     "{c[tensor pipe %]:.0f} %, and barrier waits became the top stall ({top_c})",
     lambda c, p: (c["blocks per SM (theoretical)"] < p["blocks per SM (theoretical)"]
                   and c["occupancy limited by"] == "shared_mem" and c["tensor pipe %"] < p["tensor pipe %"])),
    ("warp specialized", "TMA ring",
     "a producer warpgroup issues the loads and two consumer warpgroups the wgmma: still 1 block per SM "
     "(384 threads x {c[registers per thread]:.0f} registers, limited by {c[occupancy limited by]}), but 8 warps "
     "computing instead of 4: tensor pipe {p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %, issue slots busy "
     "{p[issue slots busy %]:.0f} % -> {c[issue slots busy %]:.0f} %",
     lambda c, p: c["tensor pipe %"] > p["tensor pipe %"] and c["blocks per SM (theoretical)"] == 1),
    ("128x256 tile", "warp specialized",
     "m64n256k16 does twice the work of m64n128k16 per instruction (gmma instructions {r_gmma:.2f}x); only A's "
     "share of the bytes per flop halves, so traffic falls by less than half: TMA bytes {r_tma:.2f}x, L2 bytes "
     "{mb_p} -> {mb_c} ({r_l2:.2f}x), shared-memory wavefronts {p[smem wavefronts]:.3g} -> "
     "{c[smem wavefronts]:.3g} ({r_wf:.2f}x); tensor pipe {p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %",
     lambda c, p: (0.6 < _ratio(c, p, "L2 bytes") < 0.95 and 0.6 < _ratio(c, p, "smem wavefronts") < 0.95
                   and c["tensor pipe %"] > p["tensor pipe %"])),
    ("persistent", "128x256 tile",
     "one block per SM walks the tiles, but nothing the counters measure improved: L2 bytes {r_l2:.2f}x, wavefronts "
     "{r_wf:.2f}x, tensor pipe {p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %, barrier stalls "
     "{bar_p:.1f} -> {bar_c:.1f} warps per issue: the drain and refill this rung removes did not show as a cost",
     lambda c, p: (abs(_ratio(c, p, "L2 bytes") - 1) < 0.05 and abs(_ratio(c, p, "smem wavefronts") - 1) < 0.05
                   and c["tensor pipe %"] <= p["tensor pipe %"] + 2)),
    ("mbarrier parity", "persistent",
     "one arrival per warpgroup instead of one per thread on every phase, waited by parity: long-scoreboard "
     "stalls {ls_p:.2f} -> {ls_c:.2f} warps per issue, tensor pipe {p[tensor pipe %]:.0f} % -> "
     "{c[tensor pipe %]:.0f} %, with the same bytes (L2 {r_l2:.2f}x)",
     lambda c, p: (_stall(c, "long_scoreboard") < _stall(p, "long_scoreboard")
                   and c["tensor pipe %"] > p["tensor pipe %"] and abs(_ratio(c, p, "L2 bytes") - 1) < 0.05)),
    ("cluster multicast", "mbarrier parity",
     "each block of a pair loads half of B and multicasts it: L2 bytes {mb_p} -> {mb_c} ({r_l2:.2f}x), but "
     "the tensor pipe stays at {c[tensor pipe %]:.0f} % (was {p[tensor pipe %]:.0f} %): L2 traffic was not "
     "what held the rung before back at 4096³",
     lambda c, p: _ratio(c, p, "L2 bytes") < 0.9 and abs(c["tensor pipe %"] - p["tensor pipe %"]) < 3),
    ("TMA store + L2 order", "cluster multicast",
     "C leaves through TMA stores and tiles are visited in groups: DRAM bytes {r_dram:.2f}x, L2 bytes "
     "{r_l2:.2f}x, tensor pipe {p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %; the epilogue's "
     "shared-memory stores now show as {c[smem bank conflicts]:.3g} bank conflicts and an mio_throttle stall",
     lambda c, p: (c["tensor pipe %"] > p["tensor pipe %"] + 3 and _ratio(c, p, "DRAM bytes") < 1
                   and _stall(c, "mio_throttle") > 0)),
    ("ping-pong", "TMA store + L2 order",
     "each consumer owns a 128x128 tile (all one warpgroup's 232 registers hold) instead of sharing a 128x256 "
     "one, so each loaded byte feeds less math: TMA load bytes {r_tma:.2f}x, L2 bytes {mb_p} -> {mb_c} "
     "({r_l2:.2f}x); the epilogues run under the other consumer's wgmma, yet the tensor pipe is busy "
     "{c[tensor pipe %]:.0f} % of the time (was {p[tensor pipe %]:.0f} %), top stall {top_c}",
     lambda c, p: _ratio(c, p, "TMA load bytes") > 1.2 and c["tensor pipe %"] < p["tensor pipe %"]),
    ("stream-K tail", "TMA store + L2 order",
     "at 8192³ rung 8 walks 1024 cluster tiles on 66 clusters, so its last round holds 34 and half the SMs "
     "have left: the average SM is busy {p[SMs busy % of elapsed]:.1f} % of the kernel's elapsed cycles. Rung 10 "
     "deals those 34 tiles out as K slices to every cluster: SMs busy {c[SMs busy % of elapsed]:.1f} %, the "
     "tensor pipe busy {p[tensor pipe % of elapsed]:.1f} % -> {c[tensor pipe % of elapsed]:.1f} % of elapsed "
     "cycles, for L2 bytes {r_l2:.3f}x (the partial sums written and read back)",
     lambda c, p: (c["SMs busy % of elapsed"] > p["SMs busy % of elapsed"] + 1
                   and c["tensor pipe % of elapsed"] > p["tensor pipe % of elapsed"])),
    # the variants: the top rung with one thing taken away, compared with the top rung
    ("TMA store + L2 order, no cluster", "TMA store + L2 order",
     "without multicast, L2 bytes {mb_p} -> {mb_c} ({r_l2:.2f}x) and DRAM bytes {r_dram:.2f}x; tensor pipe "
     "{p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %",
     lambda c, p: _ratio(c, p, "L2 bytes") > 1.2),
    ("TMA store + L2 order, row-major order", "TMA store + L2 order",
     "tiles walked row by row: DRAM bytes {mb_p} -> {mb_c} ({r_dram:.2f}x), the grouped order keeps shared "
     "slices in L2",
     lambda c, p: _ratio(c, p, "DRAM bytes") > 1.05),
    ("TMA store + L2 order, release lag 0", "TMA store + L2 order",
     "waiting for every wgmma group before releasing its slot: barrier stalls {bar_p:.1f} -> {bar_c:.1f} warps "
     "per issue ({top_c})",
     lambda c, p: _stall(c, "barrier") > _stall(p, "barrier")),
    ("ping-pong, 64x256 tiles", "ping-pong",
     "64x256 tiles bring 2 (1/64 + 1/256) = 0.039 bytes of operand per MAC instead of 2 (2/128) = 0.031: "
     "TMA load bytes {r_tma:.2f}x "
     "of the 128x128 tiles', tensor pipe {p[tensor pipe %]:.0f} % -> {c[tensor pipe %]:.0f} %",
     lambda c, p: _ratio(c, p, "TMA load bytes") > 1.1 and c["tensor pipe %"] < p["tensor pipe %"]),
]


def claim_holds(rung: str, counters: dict | None) -> bool | None:
    """Whether the record's counters support rung's claim (None: not measured)."""
    for name, before, _, pred in CLAIMS:
        if name == rung:
            by = _claim_counters(name, counters)
            if name not in by or (before and before not in by):
                return None
            return bool(pred(by[name], by[before] if before else None))
    raise KeyError(rung)


def _claim_counters(rung: str, counters: dict | None) -> dict:
    """counters_by_rung at the size the rung's claim rests on (COUNTERS_AT; 4096^3 for the others)."""
    return counters_by_rung(counters, COUNTERS_AT.get(rung, 4096))


def claim_text(rung: str, counters: dict | None) -> str | None:
    """The claim for `rung`, formatted from the counters, or None when they contradict it."""
    name, before, template, pred = next(x for x in CLAIMS if x[0] == rung)
    by = _claim_counters(name, counters)
    if name not in by or (before and before not in by):
        return None
    c, p = by[name], by[before] if before else None
    if not pred(c, p):
        return None
    f = {"c": c, "p": p, "kib_c": _kib(c["shared bytes per block"]), "top_c": _top(c)}
    if p:
        f.update(kib_p=_kib(p["shared bytes per block"]), mb_c=_mb(c["L2 bytes"]), mb_p=_mb(p["L2 bytes"]),
                 r_l2=_ratio(c, p, "L2 bytes"), r_wf=_ratio(c, p, "smem wavefronts"),
                 r_dram=_ratio(c, p, "DRAM bytes"), r_tma=_ratio(c, p, "TMA load bytes"),
                 r_gmma=_ratio(c, p, "gmma instructions"),
                 bar_c=_stall(c, "barrier"), bar_p=_stall(p, "barrier"),
                 ls_c=_stall(c, "long_scoreboard"), ls_p=_stall(p, "long_scoreboard"))
        if "DRAM bytes" in c and rung.endswith("row-major order"):
            f.update(mb_c=_mb(c["DRAM bytes"]), mb_p=_mb(p["DRAM bytes"]))
    text = template.format(**f).replace("shared_mem", "shared memory")
    return text[0].upper() + text[1:]


def why_rows(ladder_figs: dict | None, counters: dict | None) -> list[dict]:
    """Per rung and variant: its step at each recorded size (computed) and its why (from the counters)."""
    out = []
    steps = {(k, n): (x, v) for k, n, x, v in step_verdicts(ladder_figs)}
    top = {r["n"]: r for r in (ladder_figs or {}).get("rows", []) if r["rung"] == BEST}
    for name, before, _, _ in CLAIMS:
        sizes = sorted({r["n"] for r in (ladder_figs or {}).get("rows", [])})
        if name in [r["name"] for r in RUNGS]:
            step = [f"{steps[(name, n)][0]:.2f}x at {n}³ ({steps[(name, n)][1]})" for n in sizes if (name, n) in steps]
        else:
            by = {(r["rung"], r["n"]): r for r in ladder_figs["rows"]} if ladder_figs else {}
            step = [f"{by[(name, n)]['TFLOPS'] / top[n]['TFLOPS']:.2f}x the top rung at {n}³"
                    for n in sizes if (name, n) in by and n in top]
        text = claim_text(name, counters)
        out.append({"rung": name, "step": "; ".join(step) or ("the first rung" if before is None else "not recorded"),
                    "why (Nsight Compute, 4096³)": text if text is not None else
                    ("(counters not recorded)" if claim_holds(name, counters) is None
                     else "(the counters do not support the stated cause: see the figure)")})
    return out


def why_markdown(ladder_figs: dict | None, counters: dict | None) -> str:
    """why_rows as a markdown list: what the notebook shows as the explanation of the ladder."""
    if not ladder_figs:
        return "*(the ladder is not recorded yet on an H200)*"
    lines = []
    for i, r in enumerate(why_rows(ladder_figs, counters)):
        head = f"{i + 1}. **{r['rung']}**" if r["rung"] in [x["name"] for x in RUNGS] else f"- variant **{r['rung']}**"
        lines.append(f"{head} — {r['step']}. {r['why (Nsight Compute, 4096³)']}.")
    return "\n".join(lines)


def closing_markdown(ladder_figs: dict | None, counters: dict | None) -> str:
    """The chapter's closing note: per rung, its step and the counters that explain it, and where the
    ladder ends against cuBLAS, all from the record (a markdown table and one sentence)."""
    if not ladder_figs:
        return "*(the ladder is not recorded yet on an H200)*"
    by = counters_by_rung(counters)
    rows = ladder_figs["rows"]
    sizes = sorted({r["n"] for r in rows})
    steps = {(k, n): x for k, n, x, _ in step_verdicts(ladder_figs)}
    head = (["rung"] + [f"TFLOPS {n}³ (step)" for n in sizes]
            + ["tensor pipe %", "blocks / SM (limit)", "top stall", "L2 MB", "smem wavefronts (M)"])
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in RUNGS:
        cells = [r["name"]]
        for n in sizes:
            x = next((y for y in rows if y["rung"] == r["name"] and y["n"] == n), None)
            cells.append("-" if x is None else f"{x['TFLOPS']:.0f}"
                         + (f" ({steps[(r['name'], n)]:.2f}x)" if (r["name"], n) in steps else ""))
        c = by.get(r["name"])
        cells += (["-"] * 5 if c is None else
                  [f"{c['tensor pipe %']:.0f}", f"{c['blocks per SM (theoretical)']:.0f} "
                   f"({c['occupancy limited by'].replace('shared_mem', 'shared memory')})",
                   c["top stalls"][0]["reason"], f"{c['L2 bytes'] / 1e6:.0f}", f"{c['smem wavefronts'] / 1e6:.1f}"])
        out.append("| " + " | ".join(cells) + " |")
    end = []
    for n in sizes:
        top = next((y for y in rows if y["rung"] == RUNGS[-1]["name"] and y["n"] == n), None)
        if top:
            where = ("above it" if top["of cuBLAS"] > 1 + MARGIN else "level with it, within 3 %"
                     if top["of cuBLAS"] >= 1 - MARGIN else "below it")
            end.append(f"{top['of cuBLAS']:.2f} of cuBLAS at {n}³ ({where})")
    slower = [f"{k} at {n}³ ({x:.2f}x)" for k, n, x, v in step_verdicts(ladder_figs) if v == "slower"]
    text = "\n".join(out) + "\n\nThe ladder ends at " + "; ".join(end) + "."
    if slower:
        text += " Rungs slower than the rung before: " + ", ".join(slower) + " (their causes above)."
    return text


def draw_counters(counters: dict | None, names=None):
    """Per rung: tensor-pipe utilisation (left) and the top warp stalls, warps per issued instruction
    (right), from ch04.counters. Returns a matplotlib Figure (None when nothing is recorded)."""
    from matplotlib.figure import Figure
    by = counters_by_rung(counters)
    names = [n for n in (names or [r["name"] for r in RUNGS + VARIANTS]) if n in by]
    if not names:
        return None
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    y = np.arange(len(names))[::-1]
    ax1.barh(y, [by[k]["tensor pipe %"] for k in names], color="#4c72b0")
    for yy, k in zip(y, names):
        ax1.text(by[k]["tensor pipe %"] + 1, yy, f"{by[k]['tensor pipe %']:.0f} %  ({by[k]['blocks per SM (theoretical)']:.0f} "
                 f"block/SM, {by[k]['occupancy limited by'].replace('shared_mem', 'shared memory')})", va="center", fontsize=7)
    ax1.set_yticks(y, names, fontsize=8)
    ax1.set_xlim(0, 135)
    ax1.set_xlabel("tensor pipe busy, % of peak (sm__pipe_tensor_cycles_active)")
    reasons = list(dict.fromkeys(t["reason"] for k in names for t in by[k]["top stalls"]))
    left = np.zeros(len(names))
    for i, reason in enumerate(reasons):
        w = np.array([_stall(by[k], reason) for k in names])
        ax2.barh(y, w, left=left, color=f"C{i}", label=reason)
        left += w
    ax2.set_yticks(y, [""] * len(names))
    ax2.set_xlabel("warps stalled per issued instruction (top 4 reasons per kernel)")
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle("Nsight Compute on the H200, 4096³, one profiled launch per kernel (counters, not times)", fontsize=10)
    return fig


def pingpong_spans(tl: dict) -> dict:
    """From a ping-pong timeline (timeline(name="ping-pong")): per consumer, [(tile, mainloop start, mainloop
    end, epilogue start, epilogue end)] in µs, a mainloop from its first slice's data to its last release
    (the timeline's times are ns from block 0's first mark)."""
    out = {}
    for c, (cons, epi) in enumerate(zip(tl["consumers"], tl["epilogues"])):
        spans = []
        per = len(cons) // max(1, len(epi))            # slices per tile (every tile has the same K)
        for q, e in enumerate(epi):
            sl = cons[q * per:(q + 1) * per]
            if not sl or e[0] == 0:
                continue
            # the block's tile number: consumer c computes tiles c, c + 2, ...
            spans.append((2 * q + c, sl[0][1] / 1e3, sl[-1][2] / 1e3, e[0] / 1e3, e[1] / 1e3))
        out[f"consumer {c}"] = spans
    return out


def pingpong_overlap(spans: dict) -> list[dict]:
    """Per consumer: the share of its epilogue time during which the other consumer was in a mainloop
    (1.0: every epilogue ran entirely under the other's wgmma), and the median epilogue and mainloop in µs."""
    out = []
    names = list(spans)
    for who in names:
        other = [s for k in names if k != who for s in spans[k]]
        epi = [(e0, e1) for _, _, _, e0, e1 in spans[who]]
        covered = sum(max(0.0, min(e1, m1) - max(e0, m0)) for e0, e1 in epi for _, m0, m1, _, _ in other)
        total = sum(e1 - e0 for e0, e1 in epi)
        out.append({"consumer": who, "tiles": len(epi), "epilogue µs (median)":
                    float(np.median([e1 - e0 for e0, e1 in epi])) if epi else float("nan"),
                    "mainloop µs (median)": float(np.median([m1 - m0 for _, m0, m1, _, _ in spans[who]]))
                    if epi else float("nan"),
                    "epilogue under the other's mainloop": covered / total if total else float("nan")})
    return out


def draw_pingpong(rec: dict, tiles: int = 6):
    """Mainloops and epilogues of both consumers of block 0 on one time axis, from a record holding
    "spans" (pingpong_spans) and "n": a matplotlib Figure."""
    from matplotlib.figure import Figure
    spans = rec["spans"]
    fig = Figure(figsize=(12, 2.4), layout="constrained")
    ax = fig.subplots()
    t0 = min(s[1] for v in spans.values() for s in v[:tiles]) if any(spans.values()) else 0.0
    for y, (who, v) in enumerate(spans.items()):
        for q, m0, m1, e0, e1 in v[:tiles]:
            ax.barh(y, m1 - m0, left=m0 - t0, color="#4c72b0", edgecolor="white")
            ax.barh(y, e1 - e0, left=e0 - t0, color="#dd8452", edgecolor="white")
            ax.text((m0 + m1) / 2 - t0, y, f"tile {q}", ha="center", va="center", color="white", fontsize=7)
    ax.set_yticks(range(len(spans)), list(spans))
    ax.set_xlabel("µs (blue: mainloop, first slice's data to last release; orange: epilogue)")
    ax.set_title(f"ping-pong, block 0, n = {rec['n']}: the consumers take turns", fontsize=10)
    return fig


def draw_measured_timeline(schedules: dict, first: int, S: int | None, title: str):
    """timeline.draw of measured (issue, data, data, release) tuples in µs, with time counted from the
    first slice drawn (so the axis starts where the data does) and each box labelled with its slice
    number (first, first + 1, ...) rather than its position in the window."""
    from judge.draw import timeline as _tl
    t0 = min(t for s in schedules.values() for tile in s for t in tile)
    shifted = {k: [tuple(t - t0 for t in tile) for tile in s] for k, s in schedules.items()}
    fig = _tl.draw(shifted, S=S, unit=f"µs after slice {first}'s load was issued", title=title)
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_text().isdigit():
                t.set_text(str(int(t.get_text()) + first))
    return fig


# ----------------------------------------------------------------------------- device script
CHECK_SHAPES = [(128, 128, 64), (256, 512, 1024), (1000, 1032, 520), (136, 264, 8), (4096, 4096, 4096)]


def table(rows) -> str:
    out = [f"{'rung':36s} {'n':>5s} {'TFLOPS':>8s} {'of cuBLAS':>9s} {'ms':>8s} {'spread':>7s} ok"]
    for r in rows:
        out.append(f"{r['rung']:36s} {r['n']:5d} {r['TFLOPS']:8.1f} {r['of cuBLAS']:9.3f} "
                   f"{r['ms']:8.4f} {r['spread']:7.3f} {'yes' if r['ok'] else 'NO'}")
    return "\n".join(out)


def main(argv=None) -> int:
    """On an H200: check every rung against float64 on CHECK_SHAPES, time the ladder, the timeline."""
    import json
    import subprocess
    import time
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "check":           # child: one rung on every shape
        name = argv[1]
        for M, N, K in CHECK_SHAPES:
            t = time.time()
            c = check_rung(name, M, N, K)
            print(f"  {name:24s} {M:5d}x{N:5d}x{K:5d} {'ok' if c.ok else 'WRONG'} rel {c.rel_err:.2e} "
                  f"({time.time() - t:.1f}s){'' if c.ok else ' ' + c.message}", flush=True)
        return 0
    out = Path(os.environ.get("OUT", "."))
    results = {}
    for r in RUNGS + VARIANTS:                # each rung in a child: a hang cannot stop the rest
        try:
            p = subprocess.run([sys.executable, "-m", __spec__.name, "check", r["name"]], check=False, capture_output=True,
                               text=True, timeout=90, start_new_session=True, cwd=ROOT)
            print(p.stdout.rstrip() or p.stderr[-2000:], flush=True)
            results[r["name"]] = "ok" if p.returncode == 0 and "WRONG" not in p.stdout else "FAILED"
        except subprocess.TimeoutExpired as e:
            print(f"  {r['name']}: HANG (90 s)", (e.stdout or b"")[-500:], flush=True)
            results[r["name"]] = "HANG"
    good = [r["name"] for r in RUNGS + VARIANTS if results[r["name"]] == "ok"]
    rows = measure_ladder(rungs=good)
    (out / "ch04_ladder.json").write_text(json.dumps({"checks": results, "rows": rows}, indent=1))
    tl = None
    if BEST in good:
        tl = timeline()
        (out / "ch04_timeline.json").write_text(json.dumps(tl))
    print(table(rows))
    if tl:
        print(f"timeline: {len(tl['producer'])} producer events, cost {100 * tl['cost']:.2f} % "
              f"({tl['ms_plain']:.4f} -> {tl['ms_timed']:.4f} ms), check {tl['check']}")
    print("checks:", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
