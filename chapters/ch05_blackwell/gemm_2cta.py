"""gemm_2cta.py - build gemm_2cta.cu (a tcgen05 GEMM over CTA pairs, cta_group::2) for sm_100a, run it on the CPU
model, and compute and draw what a pair saves.

Any machine, no GPU (none is used, and no Blackwell GPU has run this kernel):

    from chapters.ch05_blackwell import gemm_2cta
    b = gemm_2cta.build_kernel()                       # NVRTC, sm_100a cubin + PTX
    gemm_2cta.key_counts(b)                            # SASS: UTCHMMA.2CTA, UTMALDG.2D.2CTA, UTCBAR.2CTA.MULTICAST, ...
    res = gemm_2cta.run_on_model(512, 256, 128)        # C against float64
    gemm_2cta.traffic_per_tile(256)                    # shared memory and L2 -> SM bytes: pair vs two single CTAs

run_on_model draws fresh random bf16 inputs, poisons C with NaN, runs the kernel's own PTX on judge.model
(clusters of 2: TMA with .cta_group::2 into each CTA, the pair's MMA reading both CTAs' shared memory,
multicast commits, each CTA's tensor memory read by its own epilogue) and compares C with the float64
product of the same bf16 values. Tests: tests/chapters/ch05_blackwell/test_gemm_2cta.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from judge import model
from judge.gpu import build
from judge.hw import sass, tma

from chapters.ch05_blackwell.gemm_ws import aligned, from_bf16_bits, to_bf16_bits, tolerance   # noqa: F401  (same chapter, same helpers)

SOURCE = Path(__file__).with_name("gemm_2cta.cu")
KERNEL = "gemm_2cta"
BM, BK, THREADS = 128, 64, 192          # as gemm_2cta.cu's #defines: BM rows per CTA, 2 * BM per pair
#: SASS features that tell the pair's kernel from gemm_ws
KEY_FEATURES = ("tcgen05", "tcgen05.2cta", "tcgen05.commit", "tma.load", "mbarrier.wait", "tmem.ld", "tmem.alloc",
                "cluster.barrier")


def build_kernel(bn: int = 256, stages: int = 4):
    """gemm_2cta.cu compiled for sm_100a with BN and STAGES."""
    return build.compile(SOURCE, target="sm_100a", defines={"BN": bn, "STAGES": stages})


def build_patched(old: str, new: str, *more: tuple[str, str], bn: int = 256, stages: int = 4):
    """gemm_2cta.cu with a piece of text replaced (a mistake: the kernel plus one patch; `more` further
    (old, new) pairs for a change that touches two places), for sm_100a. Each `old` must occur exactly
    once; keep the line count and the model's verdicts name gemm_2cta.cu's lines."""
    text = SOURCE.read_text()
    for o, n in ((old, new), *more):
        if text.count(o) != 1:
            raise ValueError(f"the patch must match gemm_2cta.cu exactly once; {o!r} matches {text.count(o)} times")
        text = text.replace(o, n)
    full = build.inline_headers(text, SOURCE)
    return build.compile(full, target="sm_100a", defines={"BN": bn, "STAGES": stages}, name="gemm_2cta.cu")


def smem_bytes(bn: int = 256, stages: int = 4) -> int:
    """Dynamic shared memory per CTA (SMEM_BYTES): the ring (A's 128 rows + half of B per slot), 1024 to
    align it, the barriers."""
    return stages * (BM + bn // 2) * BK * 2 + 1024 + 256


def key_counts(b, kernel: str = KERNEL) -> dict[str, int]:
    """How many SASS instructions of each key feature the kernel has (0 where absent)."""
    counts = sass.feature_counts(sass.kernel_section(b.sass, kernel))
    return {f: counts.get(f, 0) for f in KEY_FEATURES}


def pair_mnemonics(b, kernel: str = KERNEL) -> list[str]:
    """The distinct SASS mnemonics of the tensor-core, tensor-memory and TMA instructions (UTC*, UTMALDG*)."""
    import re
    return sorted(set(re.findall(r"\b(?:UTC\w+|UTMALDG)(?:\.\w+)*", sass.kernel_section(b.sass, kernel))))


def run_on_model(M: int = 256, N: int = 256, K: int = 256, *, pairs: int = 1, bn: int = 256, stages: int = 4,
                 seed=None, b=None) -> dict:
    """Run gemm_2cta on the CPU model with `pairs` clusters of 2 CTAs (persistent); C checked against float64.

    Returns {"c", "ref", "max_abs_err", "tol", "ok", "tiles", "report"}. Raises model.Violation / Hang /
    Unsupported as the model does."""
    if M % (2 * BM) or N % bn or K % BK:
        raise ValueError(f"M, N, K must be multiples of {2 * BM}, {bn}, {BK}: the kernel has no edge handling")
    rng = np.random.default_rng(seed)
    a = aligned(to_bf16_bits(rng.standard_normal((M, K), dtype=np.float32)))
    bm = aligned(to_bf16_bits(rng.standard_normal((N, K), dtype=np.float32)))
    c = np.full((M, N), np.nan, np.float32)                # poisoned: every element must be written
    map_a = tma.tensor_map_spec(a, box=(BK, BM), swizzle="128B")
    map_b = tma.tensor_map_spec(bm, box=(BK, bn // 2), swizzle="128B")   # each CTA loads half of B's rows
    b = b or build_kernel(bn, stages)
    rep = model.run(b, KERNEL, grid=(2 * pairs, 1, 1), block=(THREADS, 1, 1), cluster=(2, 1, 1),
                    args=(map_a, map_b, c, np.int32(M), np.int32(N), np.int32(K)),
                    shared_bytes=smem_bytes(bn, stages))
    ref = from_bf16_bits(a) @ from_bf16_bits(bm).T
    err = float(np.nanmax(np.abs(c - ref))) if not np.isnan(c).all() else float("nan")
    tol = tolerance(K)
    ok = bool(not np.isnan(c).any() and err <= tol)
    return {"c": c, "ref": ref, "max_abs_err": err, "tol": tol, "ok": ok,
            "tiles": (M // (2 * BM)) * (N // bn), "report": rep}


# ---------------------------------------------------------------------------------------------- what a pair saves
def traffic_per_tile(bn: int = 256, stages: int = 4) -> list[dict]:
    """The same 256 x bn outputs made two ways, per K slice of 64 (bf16):

    two single CTAs (gemm_ws with BN = bn, tiles of 128 x bn): each loads A's 128 rows and ALL bn rows of B,
    so B's slice crosses L2 -> SM twice: 2 (128 + bn) 64 x 2 bytes;
    one CTA pair (gemm_2cta): each CTA loads its 128 rows of A and HALF of B, and the pair's MMA reads both
    CTAs' shared memory: (256 + bn) 64 x 2 bytes. Shared memory per CTA per ring slot falls from (128 + bn) 128
    to (128 + bn / 2) 128 bytes, so the same ring depth needs less of the SM's shared memory (or the same
    shared memory holds more slots); MMA FLOPs per byte loaded rise accordingly."""
    flops = 2.0 * 256 * bn * BK
    rows = []
    for name, per_cta_rows, ctas in (("two CTAs, 128 x %d tiles each (gemm_ws)" % bn, BM + bn, 2),
                                     ("one CTA pair, a 256 x %d tile (gemm_2cta)" % bn, BM + bn // 2, 2)):
        slot = per_cta_rows * BK * 2
        rows.append({"way": name, "bytes L2 -> SM per K slice": ctas * slot, "shared bytes per CTA per slot": slot,
                     f"ring of {stages} per CTA (KiB)": stages * slot / 1024, "MMA FLOP per byte loaded": flops / (ctas * slot)})
    single, paired = rows
    paired["saved vs two CTAs"] = 1 - paired["bytes L2 -> SM per K slice"] / single["bytes L2 -> SM per K slice"]
    single["saved vs two CTAs"] = 0.0
    return rows


def traffic_gemm(M: int, N: int, K: int, bn: int = 256) -> dict:
    """L2 -> SM bytes of a whole GEMM with no reuse between tiles (every tile fetches its slices): one CTA per
    128 x bn tile against one pair per 256 x bn tile. C (fp32, written once) is the same for both and left out."""
    slices = K // BK
    one = (M // BM) * (N // bn) * slices * (BM + bn) * BK * 2
    two = (M // (2 * BM)) * (N // bn) * slices * (2 * BM + bn) * BK * 2
    return {"M x N x K": f"{M}x{N}x{K}", "BN": bn, "one CTA per tile (GB)": one / 1e9, "a pair per tile (GB)": two / 1e9,
            "saved": 1 - two / one}


def draw_layout(bn: int = 256):
    """Which CTA of the pair holds what: A's rows, B's rows (in shared memory) and D's rows (in tensor
    memory), for one 256 x bn tile. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    colors = {0: "#4C72B0", 1: "#DD8452"}
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1, 1, 1.6]})
    panels = [("A tile: 256 x 64 (K-major)", 256, 64, [(0, 128, 0), (128, 128, 1)], "rows of A"),
              (f"B tile: {bn} x 64 (K-major)", bn, 64, [(0, bn // 2, 0), (bn // 2, bn // 2, 1)], "rows of B"),
              (f"D = A B^T: 256 x {bn} (fp32)", 256, bn, [(0, 128, 0), (128, 128, 1)], "rows of D")]
    for ax, (title, h, w, parts, what) in zip(axes, panels):
        for y0, hh, r in parts:
            where = "shared memory" if "D" not in title else "tensor memory, lanes 0..127"
            ax.add_patch(Rectangle((0, h - y0 - hh), w, hh, facecolor=colors[r], edgecolor="black", alpha=0.8))
            ax.text(w / 2, h - y0 - hh / 2, f"rank {r} ({'leader' if r == 0 else 'peer'})\n{what} {y0}..{y0 + hh - 1}"
                    f"\nin its {where}", ha="center", va="center", fontsize=8, color="white")
        ax.set_xlim(0, w)
        ax.set_ylim(0, h)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("tcgen05.mma.cta_group::2, M = 256: one thread of the pair (here the leader's) issues it; it reads both CTAs' "
                 "shared memory and writes both tensor memories", fontsize=9)
    fig.tight_layout()
    return fig


def draw_savings(bns=(64, 128, 256), stages: int = 4):
    """Per 256 x BN outputs and K slice: L2 -> SM bytes and shared memory per CTA, two single CTAs vs a pair."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    x = np.arange(len(bns))
    rows = [traffic_per_tile(bn, stages) for bn in bns]
    for ax, key, unit, scale in ((axes[0], "bytes L2 -> SM per K slice", "KiB per K slice of 64", 1024),
                                 (axes[1], f"ring of {stages} per CTA (KiB)", f"KiB of shared memory per CTA ({stages} slots)", 1)):
        for i, label in enumerate(("two CTAs (gemm_ws)", "a CTA pair (gemm_2cta)")):
            vals = [r[i][key] / scale for r in rows]
            bars = ax.bar(x + (i - 0.5) * 0.38, vals, 0.38, label=label)
            ax.bar_label(bars, fmt="%.0f", fontsize=8)
        ax.set_xticks(x, [f"BN = {bn}" for bn in bns])
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
    axes[0].set_title("operand bytes for the same 256 x BN outputs", fontsize=9)
    axes[1].set_title("shared memory each CTA spends on its ring", fontsize=9)
    fig.tight_layout()
    return fig
