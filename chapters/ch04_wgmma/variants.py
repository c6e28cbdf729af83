"""Chapter 4's operand variants: an N-major B, A from registers, split-K with a TMA reduce-add.

Three kernels beside the ladder (ladder.py), each a 128 x 128 tile, a producer warpgroup and two
consumer warpgroups over a 4-slot ring of 64-wide K slices, parity waits:

    gemm_mn_major.cu  C (bf16) = A B, B stored K x N row-major (N-major): imm-trans-b and the MN-major
                      descriptor (LBO and SBO swap roles) read it as it lies
    gemm_rs.cu        C (bf16) = diag(scale) A B^T: A read from shared memory into wgmma's register
                      fragment, scaled per row in registers, fed to the register form of wgmma
    gemm_splitk.cu    C (fp32) += A B^T over gridDim.z ranges of K, each added into C by
                      cp.reduce.async.bulk.tensor .add; C zeroed by the host first

Use (the notebook chapters/ch04_wgmma.ipynb and tests/chapters/ch04_wgmma/test_variants.py call these):

    from chapters.ch04_wgmma import variants
    variants.build("rs").sass                          # any machine: NVRTC -> sm_90a -> SASS
    variants.model_check("splitk", 256, 256, 320, splits=3)   # any machine: the CPU model vs float64
    rows = variants.measure()                          # an H200: each kernel and cuBLAS, one run (< 60 s)

Inputs are random normal bf16 (scales uniform in [0.5, 2)), fresh for every check. Outputs are
poisoned with NaN before the launch, except split-K's C, which the kernel adds into and the host
must zero: there a tile nobody added stays 0 and differs from float64 as much as a NaN would.

Tolerance, as ladder.py derives it: the inputs are bf16, each product exact in fp32; K fp32
additions err about sqrt(K) 2^-24 ||a_i|| ||b_j||, allowed 16 times over (atol per element); a bf16
C adds its rounding, rtol = 2^-8, and the relative error norm stays under 2^-8. Split-K's C is fp32:
rtol 2^-20 and norm max(2^-16, K 2^-28): its partial sums are rounded to fp32 once each and added in
fp32 (a few more roundings of size 2^-24, inside atol), but the tensor core's own fp32 accumulation
loses more than round-to-nearest would, and its relative error norm grows with the length of the chain:
on the H200 about K 2^-30 (measured: 4.4e-6 at one K range of 4096, 1.86e-5 at one K range of 16384,
9.1e-6 and 4.4e-6 with 16384 split in 2 and 4), so 2^-28 per step of K keeps a margin of 4 while a C
rounded to bf16 anywhere (2^-9) still fails. The register form's reference scales A exactly as the
kernel does: the fp32 product of a bf16 and an fp32 scale, rounded once to bf16 (round to nearest even).

Timing: judge.gpu.timing.bench (L2 flushed before each run, two input sets alternating, median and
10-90 % spread); cuBLAS through torch on the same layouts, the same inputs, in the same run. Every
timed output is checked against float64 (a sample of 512 rows x 512 columns). Each kernel is first
launched once inside a try: a failure becomes a row with its message, and the others still run.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

from judge.gpu import build as _build
from judge.gpu import launch as _launch
from judge.gpu import timing
from judge.grading import compare as _cmp
from judge.hw import tma

NOTEBOOK = "chapters/ch04_wgmma.ipynb"
SECTION = "ch04.variants"
BM, BN, BK, STAGES, THREADS = 128, 128, 64, 4, 384       # the three files' #ifndef blocks

KERNELS: dict[str, dict] = {
    "mn_major": {"file": "gemm_mn_major.cu", "kernel": "gemm_mn_major",
                 "what": "C = A B with B stored K x N (N-major): imm-trans-b, MN-major 128B descriptor"},
    "rs": {"file": "gemm_rs.cu", "kernel": "gemm_rs",
           "what": "C = diag(s) A B^T with A scaled in registers and fed to wgmma's register form"},
    "splitk": {"file": "gemm_splitk.cu", "kernel": "gemm_splitk",
               "what": "C (fp32) += A B^T over K ranges, each block adding its tile by TMA reduce-add"},
}

RTOL_BF16 = NORM_BF16 = 2.0 ** -8
RTOL_F32, NORM_F32 = 2.0 ** -20, 2.0 ** -16
SAMPLE = 512


def build(name: str, **defines):
    """Compile one variant for sm_90a (any machine): a judge.gpu.build.Build."""
    return _build.compile(HERE / KERNELS[name]["file"], defines=defines or None)


def build_patched(name: str, old: str, new: str, **defines):
    """The variant's file with one piece of text replaced (a mistake: the kernel plus one change),
    compiled under the file's own name so the model's verdicts point into it. `old` occurs exactly once."""
    path = HERE / KERNELS[name]["file"]
    text = path.read_text()
    if text.count(old) != 1:
        raise ValueError(f"the patch must match {path.name} exactly once; {old!r} matches {text.count(old)} times")
    full = _build.inline_headers(text.replace(old, new), path)
    return _build.compile(full, target="sm_90a", defines=defines or None, name=path.name)


def shared_bytes(name: str) -> int:
    """Dynamic shared memory: the ring, split-K's two 64 x 128 fp32 tiles, 1 KiB to align to 1024."""
    ring = STAGES * (BM + BN) * BK * 2
    return ring + (2 * 64 * BN * 4 if name == "splitk" else 0) + 1024


def check_size(name: str, M: int, N: int, K: int) -> None:
    """Refuse sizes a kernel cannot take, saying why (TMA: every row starts on a 16-byte boundary)."""
    if min(M, N, K) < 1:
        raise ValueError(f"M, N, K must be at least 1 (got {M}, {N}, {K})")
    if K % 8 or N % 8:
        raise ValueError(f"K = {K} and N = {N} must be multiples of 8: TMA needs every row of A and B "
                         f"and of C to start on a 16-byte boundary")


def grid(name: str, M: int, N: int, splits: int = 1) -> tuple:
    """One block per 128 x 128 tile (and per K range for split-K)."""
    return (-(-N // BN), -(-M // BM), splits if name == "splitk" else 1)


# ----------------------------------------------------------------------------- inputs and references
def host_inputs(name: str, M: int, N: int, K: int, rng) -> dict:
    """Fresh random NumPy inputs (never zeros) and the output as the launch must find it."""
    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    a = tma.empty_aligned((M, K), bf16)
    a[...] = rng.standard_normal((M, K)).astype(bf16)
    b = tma.empty_aligned((K, N) if name == "mn_major" else (N, K), bf16)
    b[...] = rng.standard_normal(b.shape).astype(bf16)
    ins = {"a": a, "b": b}
    if name == "rs":
        ins["scale"] = rng.uniform(0.5, 2.0, M).astype(np.float32)
    if name == "splitk":
        ins["c"] = tma.empty_aligned((M, N), np.float32)
        ins["c"][...] = 0.0                     # the sum starts from zero: the host's job
    else:
        ins["c"] = tma.empty_aligned((M, N), bf16)
        ins["c"][...] = np.nan                  # poisoned: an element nobody wrote stays NaN
    return ins


def scaled_a(a32, scale32):
    """A as gemm_rs feeds it to wgmma: the fp32 product a * s rounded once to bf16, as float64."""
    import ml_dtypes
    return (np.asarray(a32, np.float32) * np.asarray(scale32, np.float32)[:, None]).astype(
        ml_dtypes.bfloat16).astype(np.float64)


def expected(name: str, a64, b64, scale=None):
    """float64 C and its per-element atol from float64 rows of A and (for mn_major: columns of) B.
    a64: rows x K; b64: K x cols for mn_major, cols x K otherwise."""
    if name == "rs":
        a64 = scaled_a(a64, scale)
    bt = b64 if name == "mn_major" else b64.T                  # K x cols
    K = a64.shape[1]
    ref = a64 @ bt
    atol = 16 * math.sqrt(K) * 2.0 ** -24 * np.outer(np.linalg.norm(a64, axis=1), np.linalg.norm(bt, axis=0))
    return ref, atol


def tolerances(fp32_out: bool, K: int = 0) -> tuple[float, float]:
    """(rtol, norm_tol) for an fp32 C (split-K) or a bf16 C (the rest, and every cuBLAS call here).
    K: the length of the product (an fp32 C's norm tolerance grows with it; see the module docstring)."""
    return (RTOL_F32, max(NORM_F32, K * 2.0 ** -28)) if fp32_out else (RTOL_BF16, NORM_BF16)


def maps_and_args(name: str, ins: dict, M: int, N: int, K: int, b_span: int = 128) -> tuple:
    """Kernel arguments over NumPy arrays (the CPU model) or torch tensors (a GPU): the same maps.
    A box: 64 bf16 (128 bytes) x 128 rows, 128B swizzle. B: the same over N x K, or, N-major, a box of
    b_span / 2 columns x 64 k-rows of the K x N matrix with the b_span-byte swizzle (gemm_mn_major's B_SPAN). C of split-K: a box of 128 fp32 x 64
    rows, no swizzle (the reduction's source is a plain row-major tile)."""
    a, b, c = ins["a"], ins["b"], ins["c"]
    ma = tma.tensor_map(a, box=(BK, BM), swizzle="128B")
    if name == "mn_major":
        mb = tma.tensor_map(b, box=(b_span // 2, BK), swizzle=f"{b_span}B")
    else:
        mb = tma.tensor_map(b, box=(BK, BN), swizzle="128B")
    dims = (np.int32(M), np.int32(N), np.int32(K))
    cptr = c.view(np.uint16) if isinstance(c, np.ndarray) and name != "splitk" else c
    if name == "splitk":
        return (ma, mb, tma.tensor_map(c, box=(BN, 64)), *dims)
    if name == "rs":
        return (ma, mb, ins["scale"], cptr, *dims)
    return (ma, mb, cptr, *dims)


def model_check(name: str, M: int, N: int, K: int, *, splits: int = 1, seed=None, kbuild=None, b_span: int = 128):
    """Run one variant on the CPU model of the machine (judge.model, no GPU) against float64.

    kbuild: a Build to run instead of the file as it is (a variant with one mistake, in the tests);
    b_span: the B_SPAN that build was compiled with (gemm_mn_major: 128 or 64 bytes of N per box of B).
    Small sizes only (seconds per 256 x 256 x 256)."""
    check_size(name, M, N, K)
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    ins = host_inputs(name, M, N, K, rng)
    kb = kbuild or build(name)
    _launch.launch(kb, KERNELS[name]["kernel"], grid=grid(name, M, N, splits), block=(THREADS, 1, 1),
                   args=maps_and_args(name, ins, M, N, K, b_span), shared_bytes=shared_bytes(name))
    ref, atol = expected(name, ins["a"].astype(np.float64), ins["b"].astype(np.float64), ins.get("scale"))
    rtol, norm = tolerances(name == "splitk", K)
    return _cmp.compare(ins["c"].astype(np.float32), ref, rtol=rtol, atol=atol, norm_tol=norm,
                        case=f"{name} on the CPU model: M={M} N={N} K={K}" + (f" splits={splits}" if name == "splitk" else "")
                        + f" seed={seed}")


# ----------------------------------------------------------------------------- the H200
#: (M, N, K) and, for split-K, the splits tried at each shape. 1024 x 1024 x 16384 has 64 tiles for
#: 132 SMs: one block per tile leaves half the GPU idle; 4096^3 has 1024 tiles, about 7.8 waves.
SHAPES = {
    "mn_major": [(4096, 4096, 4096), (8192, 8192, 8192)],
    "rs": [(4096, 4096, 4096), (8192, 8192, 8192)],
    "splitk": [((1024, 1024, 16384), (1, 2, 4)), ((4096, 4096, 4096), (1, 2))],
}


def _torch():
    import torch
    return torch


def _device_inputs(name, M, N, K, seed):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(int(seed))
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(*((K, N) if name == "mn_major" else (N, K)), device="cuda", generator=g).to(torch.bfloat16)
    ins = {"a": a, "b": b}
    if name == "rs":
        ins["scale"] = torch.rand(M, device="cuda", generator=g) * 1.5 + 0.5
    dt = torch.float32 if name == "splitk" else torch.bfloat16
    ins["c"] = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    return ins


def check_device(name: str, ins: dict, c, case: str, seed: int):
    """Compare a GPU output with float64 on a random sample of rows x columns (all of them up to 512).
    name: the product c should hold: "mn_major" (A B), "rs" (diag(scale) A B^T), else A B^T."""
    torch = _torch()
    M, N = c.shape
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    rows = torch.randperm(M, device="cuda", generator=g)[:SAMPLE].sort().values
    cols = torch.randperm(N, device="cuda", generator=g)[:SAMPLE].sort().values
    a64 = ins["a"][rows].double().cpu().numpy()
    b = ins["b"]
    b64 = (b[:, cols] if name == "mn_major" else b[cols]).double().cpu().numpy()
    scale = ins["scale"][rows].cpu().numpy() if name == "rs" else None
    ref, atol = expected(name, a64, b64, scale)
    got = c[rows][:, cols].float().cpu().numpy()
    rtol, norm = tolerances(c.dtype == torch.float32, int(ins["a"].shape[1]))
    return _cmp.compare(got, ref, rtol=rtol, atol=atol, norm_tol=norm,
                        case=f"{case} (sample of {len(rows)} rows x {len(cols)} columns)")


def device_launcher(name: str, M: int, N: int, K: int, splits: int = 1, kb=None):
    """launch(ins) running the variant on torch tensors; split-K zeroes C first (inside the timed call).
    The kernel is called as a cupy.RawKernel with its arguments packed once per input set (as ladder.py
    does), so that the host's share of a launch stays small beside kernels of 0.1 ms."""
    kb = kb or build(name)
    k = kb.kernel(KERNELS[name]["kernel"])
    smem = shared_bytes(name)
    k.max_dynamic_shared_size_bytes = smem
    g = grid(name, M, N, splits)
    packed: dict = {}

    def pack(a):
        if hasattr(a, "as_kernel_arg"):
            return a.as_kernel_arg()
        if hasattr(a, "data_ptr"):
            return np.uint64(a.data_ptr())
        return a

    def launch(ins):
        key = tuple(t.data_ptr() for t in (ins["a"], ins["b"], ins["c"]))
        if key not in packed:
            packed[key] = tuple(pack(a) for a in maps_and_args(name, ins, M, N, K))
        if name == "splitk":
            ins["c"].zero_()
        k(g, (THREADS, 1, 1), packed[key], shared_mem=smem)
    launch.grid = g
    return launch


def cublas_launchers(name: str) -> dict:
    """cuBLAS through torch on the same layouts: {label: (launch(ins), the product it computes)}; the
    first is the one the kernel is compared with. Every one writes a bf16 C (split-K's kernel writes fp32)."""
    torch = _torch()
    out: dict = {}
    if name == "mn_major":
        out["cuBLAS a @ b (b K x N)"] = (lambda ins: torch.matmul(ins["a"], ins["b"], out=ins["cb"]), "mn_major")
    elif name == "rs":
        def scaled(ins):          # the same work: scale A (an elementwise kernel), then the GEMM
            torch.matmul((ins["a"] * ins["scale"][:, None]).to(torch.bfloat16), ins["b"].T, out=ins["cb"])
        out["cuBLAS scale + a @ b.T"] = (scaled, "rs")
        out["cuBLAS a @ b.T alone (no scale)"] = (lambda ins: torch.matmul(ins["a"], ins["b"].T, out=ins["cb"]), "plain")
    else:
        out["cuBLAS a @ b.T (bf16 C)"] = (lambda ins: torch.matmul(ins["a"], ins["b"].T, out=ins["cb"]), "plain")
    return out


def _clocks() -> str:
    """nvidia-smi's SM clock and active throttle reasons, or why they could not be read."""
    import subprocess
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks_throttle_reasons.active",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or r.stderr.strip()
    except Exception as e:  # noqa: BLE001 - a note beside the figures, never a reason to stop
        return f"({type(e).__name__}: {e})"


def measure(reps: int = 10, shapes: dict | None = None, rounds: int = 2) -> dict:
    """Every variant and cuBLAS on SHAPES, one run on one GPU: {"rows", "errors", "clocks"}.

    Per shape: each kernel is launched once on fresh inputs (C poisoned) and checked, inside a try (a
    failure is an entry of "errors" with its message, and the rest still run); then cuBLAS and every
    kernel that passed are timed in turn, `rounds` times over (so clocks and heat treat them alike),
    ms the median of the rounds' medians; every timed output is checked again after its timing.
    A row: {kernel, shape, splits, label, TFLOPS, "of cuBLAS", ms, spread, ok, rel_err, grid}; the
    first row of each (kernel, shape) is the cuBLAS call the kernel's "of cuBLAS" divides by."""
    torch = _torch()
    shapes = shapes or SHAPES
    rows, errors = [], []
    clocks = {"start": _clocks()}
    for name, plan in shapes.items():
        try:
            kb = build(name)
        except Exception as e:  # noqa: BLE001 - one failure is a recorded entry, not the end of the run
            errors.append({"kernel": name, "error": f"build: {type(e).__name__}: {e}"[:2000]})
            continue
        for entry in plan:
            (M, N, K), splits_list = (entry if name == "splitk" else (entry, (1,)))
            shape = f"{M}x{N}x{K}"
            try:
                seeds = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
                sets = [_device_inputs(name, M, N, K, s) for s in seeds]
            except Exception as e:  # noqa: BLE001
                errors.append({"kernel": name, "shape": shape, "error": f"inputs: {type(e).__name__}: {e}"[:2000]})
                continue
            flops = 2.0 * M * N * K
            # (label, launch, product checked, output key, splits, grid); every run writes an output of
            # its own, so the check after timing reads what that run wrote last
            runs = []
            for i, (label, (fn, product)) in enumerate(cublas_launchers(name).items()):
                for st in sets:
                    st[f"cb{i}"] = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                runs.append((label, lambda st, fn=fn, key=f"cb{i}": fn({**st, "cb": st[key]}), product,
                             f"cb{i}", None, None))
            for splits in splits_list:
                label = KERNELS[name]["file"] + (f", {splits} K ranges" if name == "splitk" else "")
                key = f"c{splits}"
                try:
                    for st in sets:
                        st[key] = torch.full_like(st["c"], float("nan"))
                    launch = device_launcher(name, M, N, K, splits, kb)
                    run = (lambda st, launch=launch, key=key: launch({**st, "c": st[key]}))
                    first = sets[0]
                    run(first)                           # once, checked, before any timing
                    torch.cuda.synchronize()
                    pre = check_device(name, first, first[key], f"{label} {shape} (first launch)", seeds[0])
                    if not pre.ok:
                        raise RuntimeError(pre.message)
                except Exception as e:  # noqa: BLE001 - recorded with its message; the next one runs
                    errors.append({"kernel": name, "shape": shape, "splits": splits,
                                   "error": f"{type(e).__name__}: {e}"[:2000]})
                    continue
                g = launch.grid
                runs.append((label, run, name, key, splits, g[0] * g[1] * g[2]))
            times: dict = {r[0]: [] for r in runs}
            for _ in range(rounds):
                for label, fn, product, out, splits, g in list(runs):
                    if label not in times:
                        continue
                    try:
                        times[label].append(timing.bench(fn, [(st,) for st in sets], flops=flops, reps=reps))
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001
                        errors.append({"kernel": name, "shape": shape, "splits": splits, "label": label,
                                       "error": f"timing: {type(e).__name__}: {e}"[:2000]})
                        del times[label]
            base = None
            for label, fn, product, out, splits, g in runs:
                if label not in times:
                    continue
                last = sets[(reps - 1) % 2]                  # the last timed launch used this set
                try:
                    cmp = check_device(product, last, last[out], f"{label} {shape} (after timing)", seeds[0])
                except Exception as e:  # noqa: BLE001
                    errors.append({"kernel": name, "shape": shape, "label": label,
                                   "error": f"check: {type(e).__name__}: {e}"[:2000]})
                    continue
                ts = times[label]
                ms = float(np.median([t.median_ms for t in ts]))
                tflops = flops / (ms * 1e-3) / 1e12
                if out.startswith("cb") and base is None:
                    base = tflops
                rows.append({"kernel": name, "shape": shape, "splits": splits, "label": label,
                             "TFLOPS": tflops, "of cuBLAS": tflops / base if base else None, "ms": ms,
                             "spread": max(t.spread for t in ts), "ok": bool(cmp.ok), "rel_err": cmp.rel_err,
                             "check": cmp.message or "ok", "grid": g})
            del sets
            torch.cuda.empty_cache()
    clocks["end"] = _clocks()
    return {"rows": rows, "errors": errors, "clocks": clocks, "reps": reps, "rounds": rounds}


if __name__ == "__main__":
    for n in KERNELS:
        print(model_check(n, 128, 128, 192, splits=2 if n == "splitk" else 1))
