"""Compare a kernel's output with a float64 (or exact) reference, and poison outputs first.

    out = cupy.empty(n, dtype=cupy.float32); poison(out)   # NaN: an unwritten element cannot pass
    ...launch...
    c = compare(out, ref64, rtol=1e-4, atol=1e-5, case="4096x4096 seed 7")
    assert c.ok, c.message

The verdict needs both: the relative error norm ||got - ref|| / ||ref|| under `norm_tol`,
and every element within atol + rtol * |ref|. A failure names the case, counts the unwritten
elements (still poisoned) and the wrong ones (written, outside their elementwise limit) apart,
and gives the first of each: coordinates, the value got and the value expected.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: what integer outputs are filled with before a run (an unlikely value, not zero)
INT_POISON = -0x5A5A5A5B


def _is_low_float(dtype) -> bool:
    """bfloat16, float8_*, float6_*, float4_* (ml-dtypes): numpy sees them as kind 'V' (or 'f')."""
    return type(dtype).__module__.startswith("ml_dtypes") or getattr(dtype, "name", "").startswith(
        ("bfloat16", "float8", "float6", "float4"))


def to_numpy(a) -> np.ndarray:
    """A host numpy array from numpy, CuPy or torch. Low-precision floats (torch bf16/fp8, ml-dtypes)
    become float32, exactly (every bf16/fp8/fp6/fp4 value is a float32 value), NaN kept."""
    if hasattr(a, "detach"):       # torch
        t = a.detach().cpu()
        if t.dtype.is_floating_point and t.element_size() < 4 and str(t.dtype) != "torch.float16":
            t = t.float()
        return t.numpy()
    if hasattr(a, "get"):          # cupy
        a = a.get()
    a = np.asarray(a)
    if _is_low_float(a.dtype):
        return a.astype(np.float32)
    return a


def _has_nan(dtype) -> bool:
    try:
        return bool(np.isnan(np.array(np.nan, np.float32).astype(dtype).astype(np.float32)))
    except (TypeError, ValueError):
        return False


def poison(a):
    """Fill an output with NaN (floats) or INT_POISON (integers), in place: numpy, CuPy or torch, any
    float width (float64 down to bf16 and FP8 E4M3/E5M2). A format with no NaN (FP4 E2M1, FP6) cannot
    hold a poison value that a real result could not also be: keep such outputs as packed bytes
    (uint8) and poison those."""
    if hasattr(a, "fill_"):                                    # torch
        if a.dtype.is_floating_point:
            a.fill_(float("nan"))
        else:
            a.fill_(int(np.array(INT_POISON).astype(str(a.dtype).removeprefix("torch.")))
                    if a.dtype.itemsize >= 4 else -91)
        return a
    kind = a.dtype.kind
    if kind == "f" or (_is_low_float(a.dtype) and _has_nan(a.dtype)):
        a.fill(np.array(np.nan, np.float32).astype(a.dtype) if kind != "f" else np.nan)
    elif kind in "iu":
        a.fill(np.array(INT_POISON).astype(a.dtype))
    else:
        raise TypeError(f"cannot poison dtype {a.dtype}: it has no NaN; keep the output as packed uint8 bytes")
    return a


def is_poison(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.isnan(a)
    return a == np.array(INT_POISON).astype(a.dtype)


@dataclass
class Comparison:
    ok: bool
    case: str
    rel_err: float                    # ||got - ref|| / ||ref||
    n_bad: int                        # written elements outside their elementwise tolerance
    n_unwritten: int                  # elements still holding the poison
    size: int
    first: list = field(default_factory=list)   # [(coords, got, expected)]: unwritten first, then wrong
    message: str = ""
    first_wrong: list = field(default_factory=list)       # the first wrong written elements
    first_unwritten: list = field(default_factory=list)   # the first poisoned elements

    def __bool__(self):
        return self.ok


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return "NaN" if np.isnan(v) else f"{v:.6g}"
    return str(v)


def _points(mask_or_idx, g, r, show):
    idx = np.argwhere(mask_or_idx) if mask_or_idx.dtype == bool else mask_or_idx
    out = []
    for c in idx[:show]:
        c = tuple(int(x) for x in c)
        out.append((c, g[c].item(), r[c].item()))
    return out


def elementwise_limit(r64: np.ndarray, rtol: float, atol: float, norm_tol: float | None,
                      norm_failed: bool = True) -> np.ndarray:
    """Each element's own limit on |got - ref|: atol + rtol * |ref|, the case's tolerance.

    A norm-only comparison (rtol = atol = inf) has no elementwise limit of its own; once its norm has
    failed, the limit there is derived from norm_tol: norm_tol * rms(ref), the largest error every
    element could have at once with the relative error norm still within norm_tol (n elements each off
    by norm_tol * ||ref|| / sqrt(n) make an error norm of exactly norm_tol * ||ref||). So a failed norm
    names at least one element, and an element counts as wrong only when it alone is beyond its share.
    While the norm holds, such a comparison has no elementwise limit (inf)."""
    # rtol * |ref| where ref != 0: rtol = inf must not make inf * 0 = NaN of an exact zero
    lim = atol + np.multiply(rtol, np.abs(r64), where=r64 != 0, out=np.zeros_like(r64))
    if norm_tol is not None and norm_failed:
        share = norm_tol * float(np.sqrt(np.mean(np.square(r64)))) if r64.size else 0.0
        lim = np.where(np.isinf(lim), share, lim)
    return lim


def compare(got, ref, *, rtol: float = 1e-5, atol: float = 1e-6, norm_tol: float | None = None,
            case: str = "", show: int = 4) -> Comparison:
    """Element-wise and norm-wise comparison of got against a float64 (or exact integer) ref.

    Passing needs every element within its limit (`elementwise_limit`) and, with norm_tol, the relative
    error norm within norm_tol. Elements still holding the poison are unwritten, counted apart from the
    wrong ones: an element counts as wrong only when it was written and lies outside its elementwise
    limit (a failed norm never makes a correctly rounded element wrong). The message names the first
    unwritten and the first wrong elements, each with the value got and the value expected."""
    g = to_numpy(got)
    r = to_numpy(ref)
    if g.shape != r.shape:
        return Comparison(False, case, float("inf"), g.size, 0, g.size, [],
                          f"{case}: shape {g.shape} but expected {r.shape}")
    unwritten = is_poison(g) if g.dtype.kind in "fiu" else np.zeros(g.shape, bool)
    largest = None
    if r.dtype.kind in "iub":        # exact comparison
        bad = (g != r) & ~unwritten
        rel = float(np.count_nonzero((g != r))) / max(1, g.size)
        norm_ok = True
    else:
        g64 = g.astype(np.float64)
        r64 = r.astype(np.float64)
        diff = np.abs(g64 - r64)
        denom = float(np.linalg.norm(r64.ravel()))
        num = float(np.linalg.norm(np.nan_to_num(g64 - r64, nan=np.inf).ravel()))
        rel = num / denom if denom > 0 else num
        norm_ok = norm_tol is None or rel <= norm_tol
        lim = elementwise_limit(r64, rtol, atol, norm_tol, norm_failed=not norm_ok)
        bad = ~(diff <= lim) & ~unwritten                # NaN compares False, so NaN is bad
        if not norm_ok and not bad.any() and not unwritten.any():
            # every element within its own limit, the norm not: show where the error is largest
            flat = np.argsort(-np.nan_to_num(diff, nan=np.inf), axis=None, kind="stable")[:show]
            largest = np.stack(np.unravel_index(flat, diff.shape), axis=-1)
    n_bad = int(np.count_nonzero(bad))
    n_unw = int(np.count_nonzero(unwritten))
    ok = n_bad == 0 and n_unw == 0 and norm_ok
    first_unw = _points(unwritten, g, r, show) if n_unw else []
    first_bad = _points(bad, g, r, show) if n_bad else []
    msg = ""
    if not ok:
        parts = [f"{case}: " if case else ""]
        said = []
        if n_unw:
            said.append(f"{n_unw} of {g.size} elements were never written (still poisoned), first at "
                        + ", ".join(str(c) for c, _, _ in first_unw))
        if n_bad:
            said.append(f"{n_bad} of {g.size} written elements wrong (outside the tolerance), first: "
                        + "; ".join(f"at {c} got {_fmt(gv)} expected {_fmt(rv)}" for c, gv, rv in first_bad))
        elif 0 < n_unw < g.size:
            said.append("every written element is within the tolerance")
        if largest is not None:
            said.append("every element is within its own tolerance, but together they are not: largest "
                        "differences " + "; ".join(f"at {c} got {_fmt(gv)} expected {_fmt(rv)}"
                                                  for c, gv, rv in _points(largest, g, r, show)))
        parts.append("; ".join(said))
        if r.dtype.kind not in "iub" and not n_unw:
            parts.append(f"; relative error {rel:.3g}")
            if norm_tol is not None:
                parts.append(f" (limit {norm_tol:g})")
        msg = "".join(parts) + "."
    first = (first_unw + first_bad)[:show] if not ok else []
    return Comparison(ok, case, rel, n_bad, n_unw, int(g.size), first, msg, first_bad, first_unw)
