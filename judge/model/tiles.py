"""judge.model.tiles - run one of the course's GEMM tile kernels on the CPU model and check its C.

    from judge.model import tiles
    rep = tiles.run_tile(build, "tcgen05_tile", K=128)    # random bf16 inputs, C against float64
    judge.hw.tmem.protocol_from_run(rep)                    # what the model saw it do, as tmem steps

Try it: python -m pytest tests/hw/test_tmem.py -q
"""
from __future__ import annotations

from judge.model import run


def run_tile(build, kernel: str, *, M: int = 128, N: int = 128, K: int = 64, seed: int = 0,
             threads: int = 128):
    """Run a GEMM tile kernel `kernel(A, B, C, M, N, K)` (A, B bf16 bits, row-major, C float32) of
    `build` on the CPU model (judge.model, tensor memory and tcgen05 in judge.model.ops.tcgen05), with
    random normal inputs, and check C against float64. Returns the model's Report; raises
    judge.model.Violation / Hang for a broken rule, AssertionError when C is wrong. One CTA per
    128 x 128 tile, grid (N / 128, M / 128)."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def bf16(x):
        u = x.astype(np.float32).view(np.uint32)
        return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    a, b = bf16(rng.standard_normal((M, K))), bf16(rng.standard_normal((N, K)))
    c = np.full((M, N), np.nan, np.float32)
    rep = run(build, kernel, grid=(N // 128, M // 128, 1), block=(threads, 1, 1),
                    args=(a, b, c, np.int32(M), np.int32(N), np.int32(K)))
    f64 = (lambda x: (x.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64))
    ref = f64(a) @ f64(b).T
    err = float(np.max(np.abs(c - ref))) if not np.isnan(c).any() else float("nan")
    if not err <= 32 * np.sqrt(K) * 2.0 ** -24 * K:
        raise AssertionError(f"{kernel}: C differs from the float64 product by {err} on the CPU model")
    return rep
