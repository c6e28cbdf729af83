"""sgemm.py - launch, check and time chapter 1's SGEMM kernels from Python (CuPy).

    from chapters.ch01_cp_async import sgemm
    C, A, B = sgemm.run("sgemm_cp_async.cu", 512, 256, 64, defines={"STAGES": 4}, seed=1)
    [c.ok for c in sgemm.check("sgemm_tuned.cu", [(256, 384, 528)], seeds=[0, 1])]
    print(sgemm.bench("sgemm_cp_async.cu", 4096))   # judge.gpu.timing.Timing, 2 n^3 flops
    blocks = sgemm.timeline(4096)                   # {"block 0": [(copy_start, copy_end, compute_start, compute_end), ...]}
    sgemm.occupancy("sgemm_cp_async.cu", {"STAGES": 6})   # blocks per SM, from ptxas and the H200's limits

    rows = sgemm.baselines_table((4096, 8192))      # GPU: sync, register double-buffering, cp.async,
    judge.show.table(rows)                          #   the handbook's design, tuned, tuned2, cuBLAS
    print(sgemm.explain(rows))                      # the steps of the table, in words, from those rows
    sgemm.tuned2_sweep(sgemm.TUNED2_CONFIGS)        # GPU: sgemm_tuned2.cu's knobs, against cuBLAS
    sgemm.check_epilogue()                          # GPU: the handbook kernel's alpha/beta semantics
    judge.show.table([sgemm.sass_mix(f) for f in ("sgemm_regbuf.cu", "sgemm_tuned2.cu")])   # anywhere

Every kernel computes C = A @ B for row-major float32 matrices (A: M x K, B: K x N) and writes C
without reading it. Shapes: M and N multiples of the block tile (128), K a multiple of the
kernel's BK (8, or 16 for sgemm_tuned.cu); run() refuses other shapes with a ValueError.
Launch geometry and shared memory come from the defaults in each .cu file's #ifndef block,
overridden by `defines`. run/check/bench/timeline need a GPU (judge.gpu.build.NoGPU otherwise);
spec() and occupancy() work anywhere.
Try it: python -m chapters.ch01_cp_async.sgemm [kernel.cu ...]   (checks each kernel on a GPU)
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from judge.gpu import build, timing  # noqa: E402
from judge.grading import compare

KERNEL_FILES = ("sgemm_sync.cu", "sgemm_cp_async.cu", "sgemm_cp_async_timed.cu", "sgemm_tuned.cu")

# The H200's per-SM limits (compute capability 9.0), used by occupancy().
H200 = dict(sms=132, regs_per_sm=65536, regs_per_smsp=16384, reg_alloc_unit=256, max_warps=64,
            max_blocks=32, smem_per_sm=228 * 1024, smem_per_block_optin=227 * 1024,
            smem_reserved_per_block=1024)
DEFAULT_SMEM_LIMIT = 48 * 1024    # dynamic shared memory a launch may use without opting in


# ----------------------------------------------------------------------------- the kernels
def _path(kernel_file) -> Path:
    p = Path(kernel_file)
    if not p.is_absolute() and not p.exists():
        p = HERE / p
    if not p.exists():
        raise FileNotFoundError(f"no kernel file {kernel_file!r} (chapter 1 has {', '.join(KERNEL_FILES)})")
    return p.resolve()


_DEFINE = re.compile(r"^#ifndef\s+(\w+)\s*\n#define\s+\1\s+(-?\d+)", re.M)


def defaults(kernel_file) -> dict[str, int]:
    """The compile-time parameters a kernel file sets in its #ifndef block."""
    return {k: int(v) for k, v in _DEFINE.findall(_path(kernel_file).read_text())}


@dataclass(frozen=True)
class Spec:
    """How to launch one kernel file with given defines."""
    path: Path
    name: str                 # the extern "C" kernel, the file's stem
    params: dict              # defaults merged with the defines
    bm: int
    bn: int
    bk: int
    threads: int
    smem: int                 # dynamic shared memory bytes per block
    static_smem: int          # static shared memory the kernel declares (for occupancy)
    timed: bool = False

    def grid(self, M: int, N: int) -> tuple[int, int]:
        return (N // self.bn, M // self.bm)

    def refuse(self, M: int, N: int, K: int) -> None:
        bad = []
        if M <= 0 or M % self.bm:
            bad.append(f"M={M} is not a positive multiple of {self.bm}")
        if N <= 0 or N % self.bn:
            bad.append(f"N={N} is not a positive multiple of {self.bn}")
        if K <= 0 or K % self.bk:
            bad.append(f"K={K} is not a positive multiple of BK={self.bk}")
        if bad:
            raise ValueError(f"{self.name} handles only whole tiles (M, N multiples of {self.bm}x{self.bn}, "
                             f"K a multiple of {self.bk}); " + "; ".join(bad))


def spec(kernel_file, defines: dict | None = None) -> Spec:
    path = _path(kernel_file)
    p = defaults(path)
    p.update({k: int(v) for k, v in (defines or {}).items()})
    name = path.stem
    if name == "sgemm_tuned":
        bm, bn, bk = 64 * p["WARPS_M"], 32 * p["WARPS_N"], p["BK"]
        threads = 32 * p["WARPS_M"] * p["WARPS_N"]
        smem = p["STAGES"] * (bm * (bk + p["A_PAD"]) + bk * bn) * 4   # padded A rows, then B
        return Spec(path, name, p, bm, bn, bk, threads, smem, 0)
    bm, bn, bk = p["BM"], p["BN"], p["BK"]
    threads = (bm // p["TM"]) * (bn // p["TN"])
    if name == "sgemm_sync":
        return Spec(path, name, p, bm, bn, bk, threads, 0, (bm * bk + bk * bn) * 4)
    if name in ("sgemm_cp_async", "sgemm_cp_async_timed"):
        smem = p["STAGES"] * (bm * bk + bk * bn) * 4
        return Spec(path, name, p, bm, bn, bk, threads, smem, 0, timed=name.endswith("_timed"))
    raise ValueError(f"{path.name} is not one of chapter 1's SGEMM kernels ({', '.join(KERNEL_FILES)})")


def compiled(kernel_file, defines: dict | None = None) -> build.Build:
    return build.compile(_path(kernel_file), defines=defines)


def occupancy(kernel_file, defines: dict | None = None, limits: dict = H200) -> dict:
    """Resident blocks per SM from the ptxas report and the SM's limits (works without a GPU).

    Registers are allocated per warp in units of 256 (8 per thread), and each of the 4 SM
    sub-partitions holds 16384 of them; shared memory per SM is 228 KB, allocated in 128-byte
    units, and every resident block also takes 1 KB for the system. The smallest limit wins.
    """
    s = spec(kernel_file, defines)
    res = compiled(kernel_file, defines).resources[s.name]
    warps = s.threads // 32
    unit = limits["reg_alloc_unit"]
    warp_regs = max(unit, math.ceil(res["registers"] * 32 / unit) * unit)
    warps_by_regs = (limits["regs_per_smsp"] // warp_regs) * 4
    smem_block = math.ceil((s.smem + res["shared"]) / 128) * 128 + limits["smem_reserved_per_block"]
    by = {
        "registers": warps_by_regs // warps,
        "shared memory": limits["smem_per_sm"] // smem_block,
        "warps": limits["max_warps"] // warps,
        "blocks": limits["max_blocks"],
    }
    limiter = min(by, key=by.get)
    return {"blocks_per_sm": by[limiter], "limited_by": limiter, "by": by,
            "registers": res["registers"], "smem_per_block": s.smem + res["shared"],
            "fits": s.smem + res["shared"] <= limits["smem_per_block_optin"]}


# ----------------------------------------------------------------------------- launching
class Launcher:
    """A compiled kernel with its launch geometry: launcher(A, B, C) enqueues one launch."""

    def __init__(self, kernel_file, defines: dict | None = None):
        from judge import gpu
        self.spec = spec(kernel_file, defines)
        self.build = compiled(kernel_file, defines)
        self.kernel = self.build.kernel(self.spec.name)          # raises NoGPU without a GPU
        limit = gpu.info().smem_per_block_optin
        if self.spec.smem > limit:
            raise ValueError(f"{self.spec.name} with {self.spec.params} needs {self.spec.smem} bytes of "
                             f"shared memory per block; this GPU allows {limit}")
        if self.spec.smem > DEFAULT_SMEM_LIMIT:
            # Above 48 KB a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize), or the
            # launch fails with "too many resources requested".
            self.kernel.max_dynamic_shared_size_bytes = self.spec.smem
        self.stamps = None

    def __call__(self, A, B, C):
        import cupy
        M, K = A.shape
        K2, N = B.shape
        if K2 != K or C.shape != (M, N):
            raise ValueError(f"shapes do not chain: A {A.shape}, B {B.shape}, C {C.shape}")
        for name, x in (("A", A), ("B", B), ("C", C)):
            if x.dtype != cupy.float32 or not x.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous float32 CuPy array")
        self.spec.refuse(M, N, K)
        args = [np.int32(M), np.int32(N), np.int32(K), A, B, C]
        if self.spec.timed:
            n_words = self.spec.params["TIMED_BLOCKS"] * (1 + 3 * (K // self.spec.bk))
            if self.stamps is None or self.stamps.size != n_words:
                self.stamps = cupy.zeros(n_words, dtype=cupy.uint64)
            args.append(self.stamps)
        self.kernel(self.spec.grid(M, N), (self.spec.threads,), tuple(args), shared_mem=self.spec.smem)

    def occupancy_driver(self) -> int:
        """Blocks per SM as the driver computes it (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
        from cupy.cuda import driver
        return driver.occupancyMaxActiveBlocksPerMultiprocessor(self.kernel.kernel.ptr, self.spec.threads,
                                                                self.spec.smem)


def random_inputs(M: int, N: int, K: int, seed: int):
    """A (M x K) and B (K x N), uniform in [-1, 1), float32, from a seeded CuPy generator."""
    import cupy
    rng = cupy.random.default_rng(seed)
    A = (rng.random((M, K), dtype=cupy.float64) * 2 - 1).astype(cupy.float32)
    B = (rng.random((K, N), dtype=cupy.float64) * 2 - 1).astype(cupy.float32)
    return A, B


def run(kernel_file, M: int, N: int, K: int, *, defines: dict | None = None, seed: int = 0):
    """One launch on fresh random inputs, C poisoned with NaN first. Returns (C, A, B) on the GPU."""
    import cupy
    spec(kernel_file, defines).refuse(M, N, K)              # a clear error before anything is allocated
    launch = Launcher(kernel_file, defines)
    A, B = random_inputs(M, N, K, seed)
    C = compare.poison(cupy.empty((M, N), dtype=cupy.float32))
    launch(A, B, C)
    cupy.cuda.get_current_stream().synchronize()           # a fault surfaces here, not later
    return C, A, B


def tolerances(K: int) -> dict:
    """fp32 sums of K products of numbers in [-1, 1): rounding grows like sqrt(K)."""
    return dict(rtol=1e-4, atol=1e-4 * math.sqrt(K), norm_tol=2e-6 * math.sqrt(K))


def check(kernel_file, shapes=((256, 384, 64), (512, 256, 1040)), seeds=(0, 1),
          defines: dict | None = None) -> list[compare.Comparison]:
    """Each (M, N, K) in shapes for each seed: fresh inputs, NaN-poisoned C, float64 reference."""
    import cupy
    out = []
    name = _path(kernel_file).stem
    for (M, N, K) in shapes:
        for seed in seeds:
            C, A, B = run(kernel_file, M, N, K, defines=defines, seed=seed)
            ref = cupy.matmul(A.astype(cupy.float64), B.astype(cupy.float64))
            case = f"{name}{_fmt_defines(defines)} {M}x{N}x{K} seed {seed}"
            out.append(compare.compare(C, ref, case=case, **tolerances(K)))
    return out


def _fmt_defines(defines) -> str:
    return " [" + ", ".join(f"{k}={v}" for k, v in defines.items()) + "]" if defines else ""


def bench(kernel_file, n: int, *, defines: dict | None = None, reps: int | None = None,
          warmup: int = 3) -> timing.Timing:
    """n x n x n under judge.gpu.timing.bench: two rotating input sets, L2 flushed, 2 n^3 flops.

    Check the kernel first (check()); bench() only times. Default reps: 20 up to 4096, 5 above.
    """
    import cupy
    launch = Launcher(kernel_file, defines)
    sets = [random_inputs(n, n, n, seed=1000 + i) for i in range(2)]
    C = cupy.empty((n, n), dtype=cupy.float32)
    if reps is None:
        reps = 20 if n <= 4096 else 5
    t = timing.bench(lambda A, B: launch(A, B, C), sets, warmup=warmup, reps=reps, flops=2.0 * n ** 3)
    if bool(cupy.isnan(C).any()):
        raise RuntimeError(f"{launch.spec.name}: NaN in the output after timing at n={n}")
    return t


# ----------------------------------------------------------------------------- the timeline
def stamps(n: int = 4096, *, defines: dict | None = None, seed: int = 0,
           kernel_file="sgemm_cp_async_timed.cu") -> np.ndarray:
    """Launch the timed kernel once (after a warm-up launch) on an n^3 problem, check its C, and
    return the raw stamps, shape (TIMED_BLOCKS, 1 + 3 * n/BK), in globaltimer nanoseconds."""
    import cupy
    launch = Launcher(kernel_file, defines)
    if not launch.spec.timed:
        raise ValueError(f"{launch.spec.name} records no timeline; use sgemm_cp_async_timed.cu")
    launch.spec.refuse(n, n, n)
    A, B = random_inputs(n, n, n, seed)
    C = compare.poison(cupy.empty((n, n), dtype=cupy.float32))
    launch(A, B, C)                                          # warm-up: module load, clocks
    compare.poison(C)
    launch.stamps.fill(0)
    launch(A, B, C)
    cupy.cuda.get_current_stream().synchronize()
    ref = cupy.matmul(A.astype(cupy.float64), B.astype(cupy.float64))
    c = compare.compare(C, ref, case=f"{launch.spec.name} {n}^3 seed {seed}", **tolerances(n))
    if not c.ok:
        raise AssertionError(c.message)
    blocks = min(launch.spec.params["TIMED_BLOCKS"], (n // launch.spec.bm) * (n // launch.spec.bn))
    raw = launch.stamps.get().reshape(launch.spec.params["TIMED_BLOCKS"], -1)[:blocks]
    if (raw == 0).any():
        raise AssertionError("some stamps were never written: the timed blocks did not all record")
    return raw


def schedules_from_stamps(raw) -> dict[str, list[tuple]]:
    """Raw stamps -> {"block b": [(copy_start, copy_end, compute_start, compute_end), ...]} in ns
    from the block's start. copy_end is when the wait for the tile returned (the copy landed no
    later), which is also when its compute starts."""
    raw = np.asarray(raw, dtype=np.int64)
    out = {}
    for b, row in enumerate(raw):
        t0 = row[0]
        tiles = (row[1:] - t0).reshape(-1, 3)
        out[f"block {b}"] = [(int(i), int(r), int(r), int(d)) for i, r, d in tiles]
    return out


def timeline(n: int = 4096, *, defines: dict | None = None, seed: int = 0) -> dict[str, list[tuple]]:
    """Per-block schedules measured by sgemm_cp_async_timed.cu, ready for judge.draw.timeline.draw
    (unit="ns"): {"block 0": [(copy_start, copy_end, compute_start, compute_end), ...], ...}."""
    return schedules_from_stamps(stamps(n, defines=defines, seed=seed))


def model_schedule(K: int, L: float, C: float, S: int) -> list[tuple]:
    """The pipeline_timeline exercise's model: the rule of judge.hw.pipesim.timeline (no solution file is read,
    so a learners' release, which holds none, draws it too)."""
    from judge.hw import pipesim
    return pipesim.timeline(K, L, C, S)


if __name__ == "__main__":
    from judge import gpu
    files = sys.argv[1:] or KERNEL_FILES
    for f in files:
        occ = occupancy(f)
        print(f"{f}: {occ['registers']} registers, {occ['smem_per_block']} B shared, "
              f"{occ['blocks_per_sm']} block(s)/SM on an H200 (limited by {occ['limited_by']})")
    if gpu.require("sm_90", "the correctness check", checked="compiled for sm_90a"):
        for f in files:
            for c in check(f):
                print(("ok   " if c.ok else "FAIL ") + (c.message or f"{c.case}: rel err {c.rel_err:.2e}"))


# ============================================================================= baselines and the tuned kernel
# Three more kernel files, same host protocol:
#   sgemm_regbuf.cu            register double-buffering: the honest synchronous baseline
#   handbook_gemm_cp_async.cu  the handbook's design (alpha/beta epilogue), for the comparison table
#   sgemm_tuned2.cu            A K-major in shared memory, 4x4 quadrants, double-buffered fragments
# spec() and Launcher are extended below for these names; the original kernels behave as before.
MORE_KERNEL_FILES = ("sgemm_regbuf.cu", "handbook_gemm_cp_async.cu", "sgemm_tuned2.cu")

_spec_chapter = spec


def spec(kernel_file, defines: dict | None = None) -> Spec:   # noqa: F811 - extends the one above
    """How to launch one kernel file with given defines (every chapter-1 SGEMM file)."""
    path = _path(kernel_file)
    name = path.stem
    if name not in ("sgemm_regbuf", "handbook_gemm_cp_async", "sgemm_tuned2"):
        return _spec_chapter(kernel_file, defines)
    p = defaults(path)
    p.update({k: int(v) for k, v in (defines or {}).items()})
    if name == "sgemm_regbuf":
        bm, bn, bk = p["BM"], p["BN"], p["BK"]
        return Spec(path, name, p, bm, bn, bk, (bm // p["TM"]) * (bn // p["TN"]), 0, 2 * (bm * bk + bk * bn) * 4)
    if name == "handbook_gemm_cp_async":
        return Spec(path, name, p, 128, 128, 8, 256, 0, p["STAGES"] * (128 * 8 + 8 * 128) * 4)
    bk, bn = p["BK"], 64 * p["NQ"]          # BN = 128 with 8x8 outputs per thread, 256 with 8x16
    return Spec(path, name, p, 128, bn, bk, 256, p["STAGES"] * bk * (128 + 4 + bn) * 4, 0)


_Launcher_chapter = Launcher


class Launcher(_Launcher_chapter):   # noqa: F811 - adds the alpha/beta signature of the handbook kernel
    """As above; handbook_gemm_cp_async.cu takes (M, N, K, alpha, A, B, beta, C):
    launcher(A, B, C, alpha=1.0, beta=0.0). With beta == 0 C is not read (BLAS semantics)."""

    def __call__(self, A, B, C, alpha: float = 1.0, beta: float = 0.0):
        if self.spec.name != "handbook_gemm_cp_async":
            return super().__call__(A, B, C)
        M, K = A.shape
        N = B.shape[1]
        if B.shape[0] != K or C.shape != (M, N):
            raise ValueError(f"shapes do not chain: A {A.shape}, B {B.shape}, C {C.shape}")
        for name, x in (("A", A), ("B", B), ("C", C)):
            if x.dtype != np.float32 or not x.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous float32 CuPy array")
        self.spec.refuse(M, N, K)
        self.kernel(self.spec.grid(M, N), (self.spec.threads,),
                    (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), A, B, np.float32(beta), C))


def check_epilogue(shapes=((256, 384, 64), (384, 128, 264)), seeds=(0, 1)) -> list[compare.Comparison]:
    """handbook_gemm_cp_async.cu's alpha/beta epilogue against float64, for each shape and seed:
    beta = 0 with C poisoned with NaN (C must not be read), and alpha = -1.5, beta = 0.75 with a
    random C (C is read once and scaled). Returns the Comparisons (check .ok)."""
    import cupy
    launch = Launcher("handbook_gemm_cp_async.cu")
    out = []
    for (M, N, K) in shapes:
        for seed in seeds:
            A, B = random_inputs(M, N, K, seed)
            AB = cupy.matmul(A.astype(cupy.float64), B.astype(cupy.float64))
            C = compare.poison(cupy.empty((M, N), dtype=cupy.float32))
            launch(A, B, C, 2.0, 0.0)
            cupy.cuda.get_current_stream().synchronize()
            out.append(compare.compare(C, 2.0 * AB, case=f"handbook {M}x{N}x{K} seed {seed}, alpha 2, beta 0, "
                                       f"C poisoned", **tolerances(K)))
            C0 = (cupy.random.default_rng(seed + 77).random((M, N), dtype=cupy.float64) * 2 - 1).astype(cupy.float32)
            C = C0.copy()
            launch(A, B, C, -1.5, 0.75)
            cupy.cuda.get_current_stream().synchronize()
            out.append(compare.compare(C, -1.5 * AB + 0.75 * C0.astype(cupy.float64),
                                       case=f"handbook {M}x{N}x{K} seed {seed}, alpha -1.5, beta 0.75",
                                       **tolerances(K)))
    return out


#: the kernels of the comparison table: (label, file, defines)
BASELINES = [
    ("synchronous loads (single buffer)", "sgemm_sync.cu", None),
    ("register double-buffering", "sgemm_regbuf.cu", None),
    ("cp.async, 3 stages (chapter)", "sgemm_cp_async.cu", {"STAGES": 3}),
    ("handbook's design: cp.async, 3 stages, alpha/beta", "handbook_gemm_cp_async.cu", None),
    ("tuned cp.async (BK 32, 3 stages)", "sgemm_tuned.cu", {"BK": 32, "STAGES": 3}),
    ("tuned2: 128x256 tiles, 8x16 per thread, A K-major (BK 16, 3 stages)", "sgemm_tuned2.cu", None),
]

#: tuned2_sweep() configurations worth comparing (the defaults of sgemm_tuned2.cu come first)
TUNED2_CONFIGS = [
    {},
    {"STAGES": 2},
    {"BK": 8},
    {"BK": 32, "STAGES": 2},
    {"WARPS_M": 4},
    {"NQ": 2, "MIN_BLOCKS": 2, "STAGES": 2},
    {"NQ": 2, "MIN_BLOCKS": 2},
    {"NQ": 2, "MIN_BLOCKS": 1},
]


#: shapes every kernel above handles (M, N multiples of 128 and 256, K of 8, 16 and 32), short K included
CHECK_SHAPES = ((256, 512, 96), (384, 768, 1056))


def baselines_table(sizes=(4096, 8192), kernels=None, reps: int | None = None) -> list[dict]:
    """Check, then time, each kernel of BASELINES (or `kernels`, same form) at each n in sizes,
    with cuBLAS FP32 (timing.sgemm_ceiling) measured in the same process. GPU only.

    Every kernel is first checked against float64 (check() on CHECK_SHAPES, two seeds, fresh
    random inputs, C poisoned with NaN) and a failure raises AssertionError before anything is timed.
    Returns rows for judge.show.table: {"kernel", "file", "n", "TFLOPS", "of cuBLAS", "ms",
    "spread", "registers"}, one per kernel and size, then the cuBLAS row of each size.
    """
    kernels = BASELINES if kernels is None else kernels
    for label, f, d in kernels:
        bad = [c.message for c in check(f, CHECK_SHAPES, defines=d) if not c.ok]
        if bad:
            raise AssertionError(f"{label} ({f}) is wrong: " + "; ".join(bad))
    rows = []
    for n in sizes:
        ceiling = timing.sgemm_ceiling(n)
        for label, f, d in kernels:
            t = bench(f, n, defines=d, reps=reps)
            rows.append({"kernel": label, "file": f, "n": n, "TFLOPS": t.tflops, "of cuBLAS": t.tflops / ceiling.tflops,
                         "ms": t.median_ms, "spread": t.spread,
                         "registers": compiled(f, d).resources[spec(f, d).name]["registers"]})
        rows.append({"kernel": "cuBLAS FP32", "file": "", "n": n, "TFLOPS": ceiling.tflops, "of cuBLAS": 1.0,
                     "ms": ceiling.median_ms, "spread": ceiling.spread, "registers": None})
    return rows


def tuned2_sweep(configs, n: int = 4096, reps: int | None = None) -> list[dict]:
    """sgemm_tuned2.cu under each dict of defines in `configs` (e.g. [{"BK": 16, "STAGES": 3},
    {"NQ": 4, "MIN_BLOCKS": 1}]): checked against float64 (CHECK_SHAPES), then timed at n^3 against
    cuBLAS from the same process. Rows: {"defines", "n", "TFLOPS", "of cuBLAS", "spread",
    "registers", "blocks/SM", "spilled bytes"} (blocks/SM from ptxas and the H200's limits, see
    occupancy())."""
    ceiling = timing.sgemm_ceiling(n)
    rows = []
    for d in configs:
        bad = [c.message for c in check("sgemm_tuned2.cu", CHECK_SHAPES, defines=d) if not c.ok]
        if bad:
            raise AssertionError(f"sgemm_tuned2 {d} is wrong: " + "; ".join(bad))
        t = bench("sgemm_tuned2.cu", n, defines=d, reps=reps)
        occ = occupancy("sgemm_tuned2.cu", d)
        rows.append({"defines": ", ".join(f"{k}={v}" for k, v in d.items()) or "defaults", "n": n,
                     "TFLOPS": t.tflops, "of cuBLAS": t.tflops / ceiling.tflops, "spread": t.spread,
                     "registers": occ["registers"], "blocks/SM": occ["blocks_per_sm"],
                     "spilled bytes": compiled("sgemm_tuned2.cu", d).resources["sgemm_tuned2"]["spill_stores"]})
    return rows


_BRA = re.compile(r"\bBRA\b.*?(\.L_x_\d+)")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_INSN = re.compile(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\S*)")


def _main_loop(sass_text: str) -> list[str]:
    """The SASS instructions of the loop with the most FFMA (a backward branch and its target)."""
    lines = sass_text.splitlines()
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := _LABEL.match(l))}
    best = []
    for i, l in enumerate(lines):
        m = _BRA.search(l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            body = [x for x in lines[labels[m.group(1)]:i + 1] if _INSN.search(x)]
            if sum(" FFMA " in x for x in body) > sum(" FFMA " in x for x in best):
                best = body
    return best


def sass_mix(kernel_file, defines: dict | None = None) -> dict:
    """What the compiler made of a kernel's main loop (works without a GPU): instruction counts
    in the loop with the most FFMA, the FFMA share of all its instructions (the ceiling on the
    fraction of issue slots doing math), LDS per FFMA and the bytes of shared memory read per FFMA.
    Returns {"kernel", "registers", "loop instructions", "FFMA", "LDS", "LDGSTS", "LDG", "STS",
    "BAR", "FFMA share", "LDS per FFMA", "shared bytes per FFMA"}."""
    s = spec(kernel_file, defines)
    b = compiled(kernel_file, defines)
    body = _main_loop(b.sass_of(s.name))
    ops = [m.group(1) + m.group(2) for x in body if (m := _INSN.search(x))]

    def count(prefix):
        return sum(1 for o in ops if o == prefix or o.startswith(prefix + "."))
    ffma, lds = count("FFMA"), count("LDS")
    lds_bytes = sum(16 if ".128" in o else 8 if ".64" in o else 4 for o in ops if o.split(".")[0] == "LDS")
    return {"kernel": f"{s.name}{_fmt_defines(defines)}", "registers": b.resources[s.name]["registers"],
            "loop instructions": len(ops), "FFMA": ffma, "LDS": lds, "LDGSTS": count("LDGSTS"),
            "LDG": count("LDG"), "STS": count("STS"), "BAR": count("BAR"),
            "FFMA share": ffma / len(ops) if ops else float("nan"),
            "LDS per FFMA": lds / ffma if ffma else float("nan"),
            "shared bytes per FFMA": lds_bytes / ffma if ffma else float("nan")}


def explain(rows: list[dict], n: int = 4096) -> str:
    """The steps of the comparison table, in words, from rows of baselines_table() (measured now or
    recorded): a Markdown paragraph for the notebook. Every figure in it is read from `rows` at size n;
    the causes of the steps are not stated here but from the H200's counters (notes.why_markdown)."""
    by = {r["file"]: r for r in rows if r["n"] == n}
    need = ("sgemm_sync.cu", "sgemm_regbuf.cu", "sgemm_cp_async.cu", "handbook_gemm_cp_async.cu", "sgemm_tuned2.cu")
    missing = [f for f in need if f not in by]
    cublas = [r for r in rows if r["n"] == n and r["kernel"] == "cuBLAS FP32"]
    if missing or not cublas:
        return f"(no measurement of {', '.join(missing) or 'cuBLAS'} at n = {n})"
    sync, reg, cpa, hb, t2 = (by[f] for f in need)
    return (
        f"At {n}^3 the single-buffered synchronous kernel reaches {sync['TFLOPS']:.1f} TFLOPS, the weak baseline. "
        f"Register double-buffering (same tiles; tile k+1 is loaded into registers while tile k is computed, one "
        f"barrier per tile) reaches {reg['TFLOPS']:.1f}. The 3-stage cp.async kernel reaches {cpa['TFLOPS']:.1f}: "
        f"{cpa['TFLOPS'] / reg['TFLOPS']:.2f}x the strong baseline (against {cpa['TFLOPS'] / sync['TFLOPS']:.2f}x "
        f"the weak one). The handbook's design (the same tiles and stages, an alpha/beta epilogue) reaches "
        f"{hb['TFLOPS']:.1f} TFLOPS ({hb['of cuBLAS']:.2f} of cuBLAS) under the course's protocol (random inputs, "
        f"L2 flushed). sgemm_tuned2 changes register-level work, not copies (8x16 outputs per thread, A stored "
        f"K-major for float4 fragment loads, fragments double-buffered): {t2['TFLOPS']:.1f} TFLOPS, "
        f"{t2['of cuBLAS']:.2f} of cuBLAS ({cublas[0]['TFLOPS']:.1f}). Why each step is what it is: the counters "
        f"below.")
