"""sgemm.py - launch, check and time chapter 1's SGEMM kernels from Python (CuPy).

    import sgemm                                    # chapters/01_cp_async on sys.path
    C, A, B = sgemm.run("sgemm_cp_async.cu", 512, 256, 64, defines={"STAGES": 4}, seed=1)
    [c.ok for c in sgemm.check("sgemm_tuned.cu", [(256, 384, 528)], seeds=[0, 1])]
    print(sgemm.bench("sgemm_cp_async.cu", 4096))   # judge.timing.Timing, 2 n^3 flops
    blocks = sgemm.timeline(4096)                   # {"block 0": [(copy_start, copy_end, compute_start, compute_end), ...]}
    sgemm.occupancy("sgemm_cp_async.cu", {"STAGES": 6})   # blocks per SM, from ptxas and the H200's limits

Every kernel computes C = A @ B for row-major float32 matrices (A: M x K, B: K x N) and writes C
without reading it. Shapes: M and N multiples of the block tile (128), K a multiple of the
kernel's BK (8, or 16 for sgemm_tuned.cu); run() refuses other shapes with a ValueError.
Launch geometry and shared memory come from the defaults in each .cu file's #ifndef block,
overridden by `defines`. run/check/bench/timeline need a GPU (judge.build.NoGPU otherwise);
spec() and occupancy() work anywhere.
Try it: python chapters/01_cp_async/sgemm.py [kernel.cu ...]   (checks each kernel on a GPU)
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE.parent.parent) not in sys.path:          # the course root, for `import judge`
    sys.path.insert(0, str(HERE.parent.parent))

from judge import build, compare, timing  # noqa: E402

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
    """n x n x n under judge.timing.bench: two rotating input sets, L2 flushed, 2 n^3 flops.

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
    """Per-block schedules measured by sgemm_cp_async_timed.cu, ready for judge.timeline.draw
    (unit="ns"): {"block 0": [(copy_start, copy_end, compute_start, compute_end), ...], ...}."""
    return schedules_from_stamps(stamps(n, defines=defines, seed=seed))


def model_schedule(K: int, L: float, C: float, S: int) -> list[tuple]:
    """The pipeline_timeline exercise's model (its solution's schedule(K, L, C, S))."""
    import importlib.util
    path = HERE.parent.parent / "exercises" / "pipeline_timeline" / "solution.py"
    mod_spec = importlib.util.spec_from_file_location("pipeline_timeline_solution", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.schedule(K, L, C, S)


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
