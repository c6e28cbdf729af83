"""The course's one timing protocol, and the two ceilings every figure is measured against.

Protocol of bench():
  1. Warm up: call the launch `warmup` times (module load, JIT, clocks ramping stay out).
  2. Each timed run: flush L2 by writing a buffer twice the L2 size, then time the launch
     alone between two CUDA events recorded on the current stream.
  3. Inputs rotate: run i uses input set i % len(inputs), so that no run finds its
     inputs already in cache from the one before.
  4. Repeat `reps` times; report the median, and the spread as the 10th-90th percentile.
Throughput (TFLOPS, GB/s) is computed from the median time and the work the caller
counts (flops, or bytes that must cross device memory: each input read once, each
output written once). Ceilings are measured in the same process by the same protocol:
  copy_ceiling()        device-to-device copy, counting bytes read + written
  sgemm_ceiling(n)      cuBLAS FP32 GEMM (through cupy.matmul; TF32 off)
  bf16_gemm_ceiling(n)  cuBLAS bf16 GEMM through torch (a @ b.T, fp32 accumulate, bf16 out)
  fp8_gemm_ceiling(n)   cuBLAS FP8 E4M3 GEMM through torch._scaled_mm (unit scales, bf16 out)
  ceiling(name, n)      one of the above by name (exercise.toml's [timing] ceiling)
All data is random normal: on this GPU a matrix product on zeros runs measurably faster.
"""
from __future__ import annotations

from dataclasses import dataclass, asdict
from functools import lru_cache

import numpy as np


@dataclass
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    flops: float = 0.0
    bytes: float = 0.0

    @property
    def tflops(self) -> float:
        return self.flops / (self.median_ms * 1e-3) / 1e12 if self.flops else float("nan")

    @property
    def gbps(self) -> float:
        return self.bytes / (self.median_ms * 1e-3) / 1e9 if self.bytes else float("nan")

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: below a few percent, two versions closer than that are noise."""
        return (self.p90_ms - self.p10_ms) / self.median_ms

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(tflops=self.tflops, gbps=self.gbps)
        return d

    def __str__(self):
        rate = f"{self.tflops:.1f} TFLOPS" if self.flops else f"{self.gbps:.0f} GB/s" if self.bytes else ""
        return f"{self.median_ms:.4f} ms (p10-p90 {self.p10_ms:.4f}-{self.p90_ms:.4f}, {self.runs} runs) {rate}"


_flush_buf = None


def flush_l2():
    """Evict L2 by writing a buffer twice its size (the next kernel then reads from HBM)."""
    global _flush_buf
    import cupy
    from judge import gpu
    if _flush_buf is None:
        _flush_buf = cupy.empty(max(2 * gpu.info().l2_bytes, 1 << 20), dtype=cupy.uint8)
    _flush_buf.fill(1)


def bench(launch, inputs=None, *, warmup: int = 3, reps: int = 30, flush: bool = True,
          flops: float = 0.0, bytes: float = 0.0) -> Timing:
    """Time `launch(*inputs[i % len(inputs)])` under the protocol above. See module docstring."""
    import cupy
    sets = list(inputs) if inputs else [()]
    for i in range(warmup):
        launch(*sets[i % len(sets)])
    cupy.cuda.get_current_stream().synchronize()
    starts = [cupy.cuda.Event() for _ in range(reps)]
    stops = [cupy.cuda.Event() for _ in range(reps)]
    for i in range(reps):
        if flush:
            flush_l2()
        starts[i].record()
        launch(*sets[i % len(sets)])
        stops[i].record()
    stops[-1].synchronize()
    ms = np.array([cupy.cuda.get_elapsed_time(a, b) for a, b in zip(starts, stops)])
    return Timing(float(np.median(ms)), float(np.percentile(ms, 10)), float(np.percentile(ms, 90)),
                  reps, flops, bytes)


@lru_cache(None)
def copy_ceiling(nbytes: int = 1 << 31) -> Timing:
    """Device-to-device copy of `nbytes` (default 2 GiB), counting bytes read + written."""
    import cupy
    src = [cupy.ones(nbytes // 4, dtype=cupy.float32) for _ in range(2)]
    dst = cupy.empty_like(src[0])
    return bench(lambda s: dst.__setitem__(Ellipsis, s), [(s,) for s in src], reps=20, bytes=2 * nbytes)


@lru_cache(None)
def sgemm_ceiling(n: int = 4096) -> Timing:
    """cuBLAS FP32 GEMM n x n x n on random data (TF32 off: CuPy uses it only if CUPY_TF32=1)."""
    import cupy
    rng = cupy.random.default_rng(1234)
    sets = [(rng.standard_normal((n, n), dtype=cupy.float32),
             rng.standard_normal((n, n), dtype=cupy.float32)) for _ in range(2)]
    out = cupy.empty((n, n), dtype=cupy.float32)
    return bench(lambda a, b: cupy.matmul(a, b, out=out), sets, reps=20, flops=2.0 * n ** 3)


def _torch_pair(n: int, seed: int):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [(torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16),
             torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)) for _ in range(2)]


@lru_cache(None)
def bf16_gemm_ceiling(n: int = 4096) -> Timing:
    """cuBLAS bf16 GEMM n x n x n through torch: C = A @ B^T (B stored N x K, "K-major"), bf16 out."""
    import torch
    sets = _torch_pair(n, 4321)
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    return bench(lambda a, b: torch.matmul(a, b.t(), out=out), sets, reps=20, flops=2.0 * n ** 3)


@lru_cache(None)
def fp8_gemm_ceiling(n: int = 4096) -> Timing:
    """cuBLAS FP8 (E4M3 x E4M3, fp32 accumulate, bf16 out) through torch._scaled_mm, unit scales."""
    import torch
    sets = [(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)) for a, b in _torch_pair(n, 8765)]
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return bench(lambda a, b: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                 sets, reps=20, flops=2.0 * n ** 3)


CEILINGS = {"copy": lambda n=None: copy_ceiling(), "sgemm_fp32": lambda n=4096: sgemm_ceiling(n),
            "bf16_gemm": lambda n=4096: bf16_gemm_ceiling(n), "fp8_gemm": lambda n=4096: fp8_gemm_ceiling(n)}


def ceiling(name: str, n: int | None = None) -> Timing:
    """A ceiling by name (copy, sgemm_fp32, bf16_gemm, fp8_gemm), measured once per process."""
    if name not in CEILINGS:
        raise KeyError(f"unknown ceiling {name!r}; known: {', '.join(CEILINGS)} (or 'baseline')")
    return CEILINGS[name](n) if n is not None else CEILINGS[name]()
