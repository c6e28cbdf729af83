"""blockscaled.py - quantize to MXFP8 / NVFP4 with judge.hw.formats, run gemm_mxfp8.cu on the CPU model, check against float64.

Any machine, no GPU (none is used, and no Blackwell GPU has run this kernel):

    from chapters.ch05_blackwell import blockscaled
    res = blockscaled.run_on_model(M=128, N=128, K=256)              # MXFP8: E4M3, E8M0 per 32
    res["ok"], res["max_rel_err"], res["report"].counts["tcgen05.cp"]
    res = blockscaled.run_on_model(fmt="nvfp4", K=128)               # NVFP4: E2M1, UE4M3 per 16
    res = blockscaled.run_on_model(fmt="mxfp4", K=256)               # MXFP4: E2M1, E8M0 per 32 (kind::mxf4)
    blockscaled.tmem_layout(N=128)                                   # what sits where in tensor memory

run_on_model draws fresh random inputs, quantizes them (judge.hw.formats, the course's one decoder), lays the
codes and scales out as the kernel reads them, poisons C with NaN, runs the kernel's own PTX on judge.model
(tcgen05.cp of the scales, block-scaled tcgen05.mma, commit, tcgen05.ld) and compares C with the float64
product of the decoded values (codes x scales), within the error of fp32 accumulation.
Tests: tests/chapters/ch05_blackwell/test_blockscaled.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from judge import model
from judge.gpu import build
from judge.hw import formats

SOURCE = Path(__file__).with_name("gemm_mxfp8.cu")
KERNEL = "gemm_mxfp8"
BM, THREADS = 128, 128
#: per format: the define, K elements per scale word (one step), the block of one scale, bytes per row per step
FORMATS = {"mxfp8": {"defines": {}, "kw": 128, "block": 32, "row_bytes": 128},
           "mxfp4": {"defines": {"MXFP4": 1}, "kw": 128, "block": 32, "row_bytes": 64},
           "nvfp4": {"defines": {"NVFP4": 1}, "kw": 64, "block": 16, "row_bytes": 32}}


def build_kernel(fmt: str = "mxfp8", defines: dict | None = None):
    """gemm_mxfp8.cu compiled for sm_100a (fmt "mxfp8" or "nvfp4", plus any extra defines)."""
    return build.compile(SOURCE, target="sm_100a", defines={**FORMATS[fmt]["defines"], **(defines or {})})


def build_patched(old: str, new: str, fmt: str = "mxfp8", defines: dict | None = None):
    """gemm_mxfp8.cu with one piece of text replaced (the kernel plus one mistake). `old` must occur once."""
    text = SOURCE.read_text()
    if text.count(old) != 1:
        raise ValueError(f"the patch must match gemm_mxfp8.cu exactly once; {old!r} matches {text.count(old)} times")
    full = build.inline_headers(text.replace(old, new), SOURCE)
    return build.compile(full, target="sm_100a", defines={**FORMATS[fmt]["defines"], **(defines or {})},
                         name="gemm_mxfp8.cu")


def smem_bytes(fmt: str = "mxfp8") -> int:
    """Dynamic shared memory: A (128 rows) and B (up to 256 rows) of one step, 512 bytes of scale_A, 1024 of scale_B."""
    return (BM + 256) * FORMATS[fmt]["row_bytes"] + 512 + 1024


def quantize(x: np.ndarray, fmt: str = "mxfp8"):
    """x (rows, K) -> (codes as the kernel reads them (rows, K or K / 2 bytes), scale codes (rows, K / block),
    decoded values (float64, codes x block scales), the FP32 tensor scale (NVFP4; 1.0 for MXFP8))."""
    if fmt == "mxfp8":
        q = formats.mx_quantize(x, "e4m3", block=32)               # E8M0 scale per 32 (OCP floor rule)
        return q.codes, q.scales, q.dequantize(), 1.0
    if fmt == "mxfp4":
        q = formats.mx_quantize(x, "e2m1", block=32)               # E2M1, E8M0 scale per 32
        return formats.pack_fp4(q.codes), q.scales, q.dequantize(), 1.0
    n = formats.nvfp4_quantize(x)                                  # E2M1 codes, E4M3 scale per 16, FP32 tensor scale
    vals = formats.decode(n.codes, "e2m1").reshape(x.shape[0], -1, 16) * formats.decode(n.scales, "e4m3")[..., None]
    return formats.pack_fp4(n.codes), n.scales, vals.reshape(x.shape), float(n.tensor_scale)


def scale_image(scales: np.ndarray, groups: int) -> np.ndarray:
    """Scale codes (rows, steps * 4) -> the bytes tcgen05.cp.32x128b.warpx4 reads, per step and group of 128 rows:
    (steps, groups, 32, 4, 4) with [s, g, l, j, b] = scale b of step s of row 128 g + 32 j + l (zero past the rows)."""
    rows, nsc = scales.shape
    steps = nsc // 4
    pad = np.zeros((groups * 128, nsc), np.uint8)
    pad[:rows] = scales
    img = pad.reshape(groups, 4, 32, steps, 4)                     # [g, j, l, s, b]
    return np.ascontiguousarray(img.transpose(3, 0, 2, 1, 4))


def aligned(values: np.ndarray, align: int = 256) -> np.ndarray:
    """A copy of `values` whose first byte sits on an `align`-byte boundary (the kernel reads 16-byte vectors)."""
    raw = np.empty(values.nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def tolerance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Per element of C: products of the decoded values are exact in fp32's range; summing K of them in fp32
    errs by at most about K 2^-24 sum_k |a_k b_k| (we allow that bound itself, per element)."""
    K = A.shape[1]
    return K * 2.0 ** -24 * (np.abs(A) @ np.abs(B).T) + 1e-30


def run_on_model(M: int = 128, N: int = 128, K: int = 256, *, fmt: str = "mxfp8", seed=None, b=None,
                 a: np.ndarray | None = None, bt: np.ndarray | None = None) -> dict:
    """Quantize fresh random A (M x K) and B (N x K) (or the a / bt given), run gemm_mxfp8 on the CPU model
    and check C against the float64 product of the decoded operands.

    Returns {"c", "ref", "max_abs_err", "max_rel_err", "ok", "A_hat", "B_hat", "tensor_scale", "report"}.
    C is what the MMAs produce: for NVFP4 without the two FP32 tensor scales, which the host applies
    (c * tensor_scale). Raises model.Violation / Hang / Unsupported as the model does."""
    spec = FORMATS[fmt]
    if M % BM or N % 32 or not 32 <= N <= 256 or K % spec["kw"]:
        raise ValueError(f"M a multiple of {BM}, N a multiple of 32 in 32..256, K a multiple of {spec['kw']}")
    rng = np.random.default_rng(seed)
    if a is None:                                   # rows of different magnitudes: the scales matter
        a = rng.standard_normal((M, K)) * np.exp2(rng.integers(-6, 7, (M, 1)))
    if bt is None:
        bt = rng.standard_normal((N, K)) * np.exp2(rng.integers(-6, 7, (1, K)))
    ca, sa, A_hat, ta = quantize(a, fmt)
    cb, sb, B_hat, tb = quantize(bt, fmt)
    groups = (N + 127) // 128
    SFA = aligned(np.ascontiguousarray(scale_image(sa, M // BM).transpose(1, 0, 2, 3, 4)).reshape(-1))
    SFB = aligned(scale_image(sb, groups).reshape(-1))
    Ag, Bg = aligned(np.ascontiguousarray(ca)), aligned(np.ascontiguousarray(cb))
    c = np.full((M, N), np.nan, np.float32)            # poisoned: every element must be written
    b = b or build_kernel(fmt)
    rep = model.run(b, KERNEL, grid=(M // BM, 1, 1), block=(THREADS, 1, 1),
                    args=(Ag, Bg, SFA, SFB, c, np.int32(N), np.int32(K)), shared_bytes=smem_bytes(fmt))
    ref = A_hat @ B_hat.T                               # float64 of the decoded values
    tol = tolerance(A_hat, B_hat)
    err = np.abs(c.astype(np.float64) - ref)
    ok = bool(np.isfinite(c).all() and (err <= tol).all())
    scale = np.abs(ref).max() or 1.0
    return {"c": c, "ref": ref, "max_abs_err": float(np.nanmax(err)) if np.isfinite(c).any() else float("nan"),
            "max_rel_err": float(np.nanmax(err) / scale) if np.isfinite(c).any() else float("nan"),
            "ok": ok, "A_hat": A_hat, "B_hat": B_hat, "tensor_scale": ta * tb, "report": rep}


def tmem_layout(N: int = 128) -> dict[str, tuple[int, int]]:
    """The kernel's tensor-memory columns (first, count): D, scale_A, scale_B; and the allocation."""
    cols = 256 if N <= 128 else 512
    return {"D (fp32 accumulator)": (0, N), "scale_A (4 columns: rows 32j + l)": (N, 4),
            "scale_B (N / 32 columns)": (N + 4, max(1, N // 32)), "allocated": (0, cols)}


def draw_tmem_scales(N: int = 128):
    """A matplotlib figure of the kernel's tensor memory: D, scale_A and scale_B columns over the 128 lanes, each
    scale cell coloured by the row (of A) or column (of B) it serves, and one cell's four bytes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    lay = tmem_layout(N)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1.2]})
    lanes = np.arange(128)[:, None]
    (a0, na), (b0, nb) = lay["scale_A (4 columns: rows 32j + l)"], lay["scale_B (N / 32 columns)"]
    ax.add_patch(Rectangle((0, 0), 6, 128, color="0.85"))            # D, drawn narrow (the x axis is not to scale)
    ax.text(3, 64, f"D\n{N} fp32\ncolumns\n(row m of C\nin lane m)", ha="center", va="center", fontsize=9)
    ticks, labels, x = [], [], 7
    for first, n, cmap, name in ((a0, na, plt.cm.viridis, "scale_A"), (b0, nb, plt.cm.plasma, "scale_B")):
        rows = 32 * np.arange(n)[None, :] + lanes % 32              # the row (or column of B) a cell serves
        ax.imshow(rows, extent=(x, x + 1.5 * n, 128, 0), aspect="auto", cmap=cmap, vmin=0, vmax=32 * n,
                  interpolation="nearest")
        for j in range(n):
            for q in range(4):
                ax.text(x + 1.5 * j + 0.75, 32 * q + 16, f"{32 * j}+l", ha="center", va="center", fontsize=7,
                        color="w" if j < n / 2 else "k", rotation=90)
            ticks.append(x + 1.5 * j + 0.75)
            labels.append(str(first + j))
        ax.text(x + 0.75 * n, -3, name, ha="center", va="bottom", fontsize=9)
        x += 1.5 * n + 1
    ax.set_xticks([3] + ticks, [f"0..{N - 1}"] + labels, fontsize=8)
    for q in range(1, 4):
        ax.axhline(32 * q, color="k", lw=0.6, ls=":")
    ax.set_xlim(0, x)
    ax.set_ylim(128, 0)
    ax.set_xlabel("tensor-memory column (from the allocation's base; not to scale)")
    ax.set_ylabel("lane (l = lane % 32)")
    ax.set_title("cell (lane, column j of a scale block) holds the scales of row 32 j + l of A (column of B);\n"
                 "every 32-lane quarter holds the same copy (tcgen05.cp .32x128b.warpx4)", fontsize=9, pad=22)
    for b in range(4):
        bx.add_patch(Rectangle((b, 0), 1, 1, fill=True, color=plt.cm.Pastel1(b), ec="k"))
        bx.text(b + 0.5, 0.5, f"byte {b}", ha="center", va="center")
    bx.text(2, 1.35, "one 32-bit cell = 4 one-byte scales of one row", ha="center")
    bx.text(2, -0.35, "MXFP8: MMA j of a step reads byte j (scale factor ID j)\n"
                      "MXFP4: MMA j reads bytes 2j, 2j+1 (ID 2j)\nNVFP4: one MMA reads all four (ID 0)",
            ha="center", va="top", fontsize=9)
    bx.set_xlim(-0.2, 4.2)
    bx.set_ylim(-1.4, 1.7)
    bx.axis("off")
    fig.tight_layout()
    return fig
