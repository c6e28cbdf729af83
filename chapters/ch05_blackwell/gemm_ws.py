"""gemm_ws.py - build gemm_ws.cu (the warp-specialized tcgen05 GEMM) for sm_100a and run it on the CPU model.

Any machine, no GPU (none is used, and no Blackwell GPU has run this kernel):

    from chapters.ch05_blackwell import gemm_ws
    b = gemm_ws.build_kernel()                       # NVRTC, sm_100a cubin + PTX
    gemm_ws.key_counts(b)                            # SASS: UTCHMMA, UTMALDG, UTCBAR, LDTM, ...
    res = gemm_ws.run_on_model(256, 256, 256, ctas=2)
    res["max_abs_err"], res["report"].counts["tcgen05.mma"]

run_on_model draws fresh random bf16 inputs, poisons C with NaN, runs the kernel's own PTX on judge.model
(TMA from tensor maps made by judge.hw.tma.tensor_map_spec, mbarriers, tensor memory, tcgen05) and
compares C with the float64 product of the same bf16 values. Tests: tests/chapters/ch05_blackwell/test_gemm_ws.py.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from judge import model
from judge.gpu import build
from judge.hw import sass, tma
from judge.hw.formats import from_bf16_bits, to_bf16_bits
from judge.hw.tma import aligned

SOURCE = Path(__file__).with_name("gemm_ws.cu")
KERNEL = "gemm_ws"
BM, BK, THREADS = 128, 64, 192          # as gemm_ws.cu's #defines
#: the SASS mnemonics of the features compared with the Hopper ladder's top rung
KEY_FEATURES = ("tcgen05", "wgmma", "tcgen05.commit", "tma.load", "tma.store", "mbarrier.wait", "tmem.ld",
                "tmem.alloc", "setmaxnreg")


def build_kernel(bn: int = 128, stages: int = 4):
    """gemm_ws.cu compiled for sm_100a with BN and STAGES."""
    return build.compile(SOURCE, target="sm_100a", defines={"BN": bn, "STAGES": stages})


def build_patched(old: str, new: str, bn: int = 128, stages: int = 4):
    """gemm_ws.cu with one piece of text replaced (a mistake: the kernel plus one patch), for sm_100a.
    `old` must occur exactly once. Line numbers in the model's verdicts stay those of gemm_ws.cu where
    the patch keeps the line count."""
    text = SOURCE.read_text()
    if text.count(old) != 1:
        raise ValueError(f"the patch must match gemm_ws.cu exactly once; {old!r} matches {text.count(old)} times")
    full = build.inline_headers(text.replace(old, new), SOURCE)
    return build.compile(full, target="sm_100a", defines={"BN": bn, "STAGES": stages}, name="gemm_ws.cu")


def smem_bytes(bn: int = 128, stages: int = 4) -> int:
    """Dynamic shared memory the kernel needs (its SMEM_BYTES): the ring, 1024 to align it, the barriers."""
    return stages * (BM + bn) * BK * 2 + 1024 + 256


def key_counts(b, kernel: str = KERNEL) -> dict[str, int]:
    """How many SASS instructions of each key feature the kernel has (0 where absent)."""
    counts = sass.feature_counts(sass.kernel_section(b.sass, kernel))
    return {f: counts.get(f, 0) for f in KEY_FEATURES}


def tolerance(K: int) -> float:
    """Products of bf16 are exact in fp32; K fp32 additions err by about sqrt(K) 2^-24 |a||b| with
    |a| ~ |b| ~ sqrt(K) for unit normal data: we allow 32 times that (as exercises/tcgen05_gemm)."""
    return 32 * math.sqrt(K) * 2.0 ** -24 * K


def run_on_model(M: int = 256, N: int = 256, K: int = 256, *, ctas: int = 2, bn: int = 128, stages: int = 4,
                 seed=None, b=None) -> dict:
    """Run gemm_ws on the CPU model with `ctas` persistent CTAs; C checked against float64.

    Returns {"c", "ref", "max_abs_err", "tol", "ok", "tiles", "report"} (report: judge.model's run report,
    with its instruction counts and model seconds). Raises model.Violation / Hang / Unsupported as the
    model does."""
    if M % BM or N % bn or K % BK:
        raise ValueError(f"M, N, K must be multiples of {BM}, {bn}, {BK}: the kernel has no edge handling")
    rng = np.random.default_rng(seed)
    a = aligned(to_bf16_bits(rng.standard_normal((M, K), dtype=np.float32)))
    bm = aligned(to_bf16_bits(rng.standard_normal((N, K), dtype=np.float32)))
    c = np.full((M, N), np.nan, np.float32)                # poisoned: every element must be written
    map_a = tma.tensor_map_spec(a, box=(BK, BM), swizzle="128B")
    map_b = tma.tensor_map_spec(bm, box=(BK, bn), swizzle="128B")
    b = b or build_kernel(bn, stages)
    rep = model.run(b, KERNEL, grid=(ctas, 1, 1), block=(THREADS, 1, 1),
                    args=(map_a, map_b, c, np.int32(M), np.int32(N), np.int32(K)),
                    shared_bytes=smem_bytes(bn, stages))
    ref = from_bf16_bits(a) @ from_bf16_bits(bm).T
    err = float(np.nanmax(np.abs(c - ref))) if not np.isnan(c).all() else float("nan")
    tol = tolerance(K)
    ok = bool(not np.isnan(c).any() and err <= tol)
    return {"c": c, "ref": ref, "max_abs_err": err, "tol": tol, "ok": ok,
            "tiles": (M // BM) * (N // bn), "report": rep}


def issue_order(report, bn: int = 128) -> dict[str, list[tuple[int, int]]]:
    """A one-CTA model run's timeline as rows of (model step, tile) for drawing: the TMA loads (tile -1: not
    told apart), the MMAs into each accumulator buffer and the tcgen05.ld from each. Model steps give the
    ORDER in which the model ran things (lowest PC first), not hardware time."""
    rows = {"TMA loads": [], "MMA -> acc 0": [], "MMA -> acc 1": [], "tcgen05.ld <- acc 0": [],
            "tcgen05.ld <- acc 1": []}
    ev = report.timeline
    base = min(e["col"] for e in ev if e["kind"] == "tcgen05.mma")
    tile_of_buf = {0: -2, 1: -1}                       # buffer b holds tiles b, b + 2, ...
    for e in ev:
        if e["kind"] == "tcgen05.mma":
            buf = (e["col"] - base) // bn
            if not e["accumulate"]:                    # a tile's first MMA overwrites D
                tile_of_buf[buf] += 2
            rows[f"MMA -> acc {buf}"].append((e["t"], tile_of_buf[buf]))
        elif e["kind"] == "tcgen05.ld":
            buf = (e["col"] - base) // bn
            rows[f"tcgen05.ld <- acc {buf}"].append((e["t"], tile_of_buf[buf]))
        elif e["kind"] == "tma.load":
            rows["TMA loads"].append((e["t"], -1))
    return rows


# Published figures for the roofline ESTIMATE (no B200 was measured): NVIDIA's HGX B200 specifications, per GPU
# at 1000 W, as summarized at https://glennklockwood.com/garden/processors/B200 : dense BF16 tensor-core math
# 2250 TFLOPS (4500 with 2:4 sparsity, which a GEMM does not use), HBM3e 8 TB/s.
B200_BF16_DENSE_TFLOPS = 2250.0
B200_HBM_TBPS = 8.0


def roofline_estimate(M: int, N: int, K: int, bn: int = 128) -> dict:
    """Time bounds of C (fp32) = A (bf16) B^T (bf16) on a B200 from the published peaks: an ESTIMATE.

    compute bound: 2MNK / peak. Memory, two cases: every byte once (A, B read, C written: the best L2 reuse
    can do) and every tile's slices fetched from HBM anew (no L2 reuse at all: (M/128)(N/bn)(K/64) slots of
    (128 + bn) x 64 bf16, plus C)."""
    flops = 2.0 * M * N * K
    once = 2.0 * (M * K + N * K) + 4.0 * M * N
    no_reuse = (M // BM) * (N // bn) * (K // BK) * (BM + bn) * BK * 2.0 + 4.0 * M * N
    t_math = flops / (B200_BF16_DENSE_TFLOPS * 1e12)
    t_once, t_none = once / (B200_HBM_TBPS * 1e12), no_reuse / (B200_HBM_TBPS * 1e12)
    ridge = B200_BF16_DENSE_TFLOPS / B200_HBM_TBPS
    return {"M=N=K": M if M == N == K else f"{M}x{N}x{K}", "FLOP/byte (once)": flops / once,
            "FLOP/byte (no L2 reuse)": flops / no_reuse, "ridge FLOP/byte": ridge,
            "math ms": 1e3 * t_math, "HBM ms (once)": 1e3 * t_once, "HBM ms (no L2 reuse)": 1e3 * t_none,
            "bound TFLOPS (once)": flops / max(t_math, t_once) / 1e12,
            "bound TFLOPS (no L2 reuse)": flops / max(t_math, t_none) / 1e12}
