"""An exercise's domain, and the one generator that draws the CPU model's cases from it.

    from judge.grading import domain, exercise
    ex = exercise.get("ws_gemm")
    cases = domain.draw(ex.domain, seed=7, max_blocks=ex.model.max_blocks)   # every class, seeded
    domain.uncovered(ex.domain, ex.cases.list)            # [] when the H200 cases cover every class too
    python -m judge.grading.mutate --cases ws_gemm [--seed S]   # the cases a check with that seed runs

exercise.toml [domain] states what the statement leaves free and what a correct kernel must handle:

    [domain]
    free = { M = {min = 128, max = 1024, step = 128}, N = 256, K = {min = 8, max = 512, step = 8} }
    derive = { tiles = "K // 8", blocks = "(M // 128) * (N // 128)" }   # names the classes speak of
    fixed = { ctas = "min(4, tiles)" }      # keys of the case computed from the drawn ones (optional)
    cost = "min(blocks, max_blocks) * tiles"   # what a model case costs, in the unit of max_cost
    max_cost = 400                           # no drawn case costs more
    order = "tiles"                          # the cases run by this, least first (default: by cost)
    classes = [
      { name = "a single k-tile", when = "tiles == 1", pin = { K = 8 } },
      { name = "every stage buffer used three times, tiles % 3 == 0", when = "tiles >= 9 and tiles % 3 == 0" },
      { name = "a sampled grid", when = "blocks > max_blocks", model = true },
    ]

`free` uses the families of [cases] (a number, a list, {min, max, step}); `pin` narrows them for one
class, so that a narrow class is drawn directly instead of hoped for. Expressions are Python over the
case's keys, the derived names, `max_blocks`, `cdiv(a, b)`, `min`, `max` and `abs`. A class with
`model = true` is the model's own (a sampled grid); every other class must also hold in one of
[cases] list, the H200's cases (a test checks it).

The draw: for the first class not yet covered, in the order written, TRIES candidates are drawn within
its `pin` and `free` (up to 20 times as many while none holds it; a test holds every class to 2 % of its
draws at least, so that a check never runs out); of those that hold it (and cost at most max_cost), the one that also holds the most
classes still open is kept, the cheapest among equals; until every class holds. The cases run cheapest
first (or by `order`), so that a kernel that bypasses the feature is told so before a long case runs. One
seed decides every case and every case's inputs (and the model's landing order and sample): the check
shows it, and JUDGE_MODEL_SEED=S replays the same cases and inputs.

`mapping` (the statement's rule of which block writes what) decides how a sampled grid is judged:
follow_sample below compares every element the blocks that ran wrote, wherever it lies, and with a
mapping also holds them to check.owned, naming the rule when they break it.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping

import numpy as np

#: the environment variable that replays a check's model cases (the seed its result shows)
SEED_VAR = "JUDGE_MODEL_SEED"

#: candidates drawn per class before the draw gives up on it (a class no case can hold is a domain error)
TRIES = 1500


class DomainError(ValueError):
    """exercise.toml [domain] names a class that no case within `free` (and `pin`) can hold."""


@functools.lru_cache(maxsize=None)
def _code(expr: str):
    return compile(expr, "<exercise.toml [domain]>", "eval")


def _eval(expr: str, env: dict):
    return eval(_code(expr), {"__builtins__": {}}, env)  # noqa: S307 - the course's own exercise.toml


def _cdiv(a, b):
    return -(-int(a) // int(b))


_NAMES = {"cdiv": _cdiv, "min": min, "max": max, "abs": abs, "ceil": math.ceil, "floor": math.floor}


def _get(d, key, default=None):
    return d.get(key, default) if isinstance(d, Mapping) else getattr(d, key, default)


def values(dom, case: dict, max_blocks: int = 0) -> dict:
    """The case's keys, its derived names and max_blocks: what `when`, `cost` and `fixed` see."""
    env = dict(_NAMES)
    env.update(case)
    env["max_blocks"] = int(max_blocks) if max_blocks else 1 << 30
    for name, expr in (_get(dom, "derive") or {}).items():
        env[name] = _eval(expr, env)
    return env


def holds(cls, env: dict) -> bool:
    return bool(_eval(_get(cls, "when"), env))


def _draw_free(spec: Mapping, rng) -> dict:
    out = {}
    for k, v in spec.items():
        if isinstance(v, (list, tuple)):
            v = v[int(rng.integers(len(v)))]
        elif isinstance(v, Mapping):
            lo, hi, step = int(v["min"]), int(v["max"]), int(v.get("step", 1))
            v = lo + step * int(rng.integers((hi - lo) // step + 1))
        out[k] = v
    return out


def _complete(dom, case: dict, max_blocks: int) -> dict:
    fixed = _get(dom, "fixed") or {}
    if fixed:
        env = values(dom, case, max_blocks)
        case = dict(case)
        for k, expr in fixed.items():
            case[k] = int(_eval(expr, env))
    return case


def cost(dom, case: dict, max_blocks: int = 0) -> float:
    expr = _get(dom, "cost") or "0"
    return float(_eval(expr, values(dom, case, max_blocks)))


def classes_of(dom, case: dict, max_blocks: int = 0) -> list[str]:
    """The names of the classes `case` holds."""
    env = values(dom, case, max_blocks)
    return [_get(c, "name") for c in _get(dom, "classes") or () if holds(c, env)]


def draw(dom, seed: int, max_blocks: int = 0) -> list[dict]:
    """Cases that together hold every class of the domain, drawn with `seed`, cheapest first; each
    carries `seed`, its inputs' own seed (derived from the one given, so that one seed replays all)."""
    rng = np.random.default_rng(seed)
    free = dict(_get(dom, "free") or {})
    most = float(_get(dom, "max_cost") or math.inf)
    classes = list(_get(dom, "classes") or ())
    open_ = list(range(len(classes)))
    chosen: list[tuple[float, dict]] = []
    while open_:
        target = classes[open_[0]]
        spec = dict(free)
        spec.update(dict(_get(target, "pin") or {}))
        best, best_key = None, None
        for i in range(TRIES * 20):
            if i >= TRIES and best is not None:      # a narrow class: more tries only until one holds
                break
            case = _complete(dom, _draw_free(spec, rng), max_blocks)
            env = values(dom, case, max_blocks)
            if not holds(target, env):
                continue
            c = cost(dom, case, max_blocks)
            if c > most:
                continue
            covers = sum(holds(classes[i], env) for i in open_)
            key = (-covers, c)
            if best_key is None or key < best_key:
                best, best_key = case, key
        if best is None:
            raise DomainError(f"no case within [domain] free/pin and max_cost {most:g} holds the class "
                              f"{_get(target, 'name')!r} ({_get(target, 'when')})")
        env = values(dom, best, max_blocks)
        open_ = [i for i in open_ if not holds(classes[i], env)]
        first = _get(dom, "order") or ""
        chosen.append((float(_eval(first, env)) if first else best_key[1], best))
    out = [case for _, case in sorted(chosen, key=lambda t: t[0])]
    for case in out:
        case["seed"] = int(rng.integers(1 << 31))
    return out


def seed_for_run() -> int:
    """JUDGE_MODEL_SEED when set (a replay), else a fresh seed."""
    given = os.environ.get(SEED_VAR, "").strip()
    if given:
        return int(given)
    return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF


def in_free(dom, case: dict) -> list[str]:
    """What of `case` lies outside `free` (the statement's domain): [] when all of it is inside."""
    out = []
    for k, v in (_get(dom, "free") or {}).items():
        if k not in case:
            continue
        x = case[k]
        if isinstance(v, (list, tuple)):
            if x not in v:
                out.append(f"{k}={x} not one of {list(v)}")
        elif isinstance(v, Mapping):
            lo, step = int(v["min"]), int(v.get("step", 1))
            if (x - lo) % step:
                out.append(f"{k}={x} not min {lo} plus a multiple of {step}")
            if x < lo:
                out.append(f"{k}={x} below {lo}")
        elif x != v:
            out.append(f"{k}={x}, fixed at {v}")
    return out


def uncovered(dom, cases, max_blocks: int = 0) -> list[str]:
    """The classes (not the model's own) that none of `cases` holds: [] when they cover the domain."""
    out = []
    for cls in _get(dom, "classes") or ():
        if _get(cls, "model", False):
            continue
        if not any(holds(cls, values(dom, dict(c), max_blocks)) for c in cases):
            out.append(_get(cls, "name"))
    return out


# ------------------------------------------------------------------ a sampled grid: followed, not assumed
def _unwritten(a: np.ndarray) -> np.ndarray:
    """Elements still holding the engine's poison (NaN for every float width, INT_POISON for integers)."""
    from judge.grading import compare
    if a.dtype.kind in "iu":
        return compare.is_poison(a)
    return np.isnan(np.asarray(a, dtype=np.float32) if a.dtype.kind != "f" else a)


def _blocks(ran, most: int = 4) -> str:
    shown = ", ".join(str(tuple(c)) for c in ran[:most])
    return shown + (f" and {len(ran) - most} more" if len(ran) > most else "")


def follow_sample(mod, ex, case: dict, ref: dict, outs: dict, ran) -> tuple[dict, list]:
    """The outputs of a sampled grid, to compare with `ref`: every element the blocks that ran wrote is
    compared, wherever it lies (a grouped raster or a persistent loop writes where it likes); elements
    nobody wrote are taken from `ref` (the blocks that were skipped may own them; the whole-grid cases
    judge them). Where the statement fixes which block writes what ([domain] mapping, check.owned),
    an owned element left unwritten, or one written outside what the blocks own, is a failure naming
    that rule. Returns (outputs to compare, failures as judge.grading.compare.Comparison)."""
    from judge.grading import compare
    rule = getattr(getattr(ex, "domain", None), "mapping", "") or ""
    out, failures = dict(outs), []
    for k in ref:
        got = np.array(compare.to_numpy(outs[k]), copy=True)
        written = ~_unwritten(got)
        if rule and hasattr(mod, "owned"):
            owned = np.asarray(mod.owned(case, k, ran), bool)
            missing, stray = owned & ~written, written & ~owned
            if missing.any() or stray.any():
                where = np.argwhere(missing if missing.any() else stray)[0].tolist()
                what = (f"{int(missing.sum())} element(s) of {k} that they own were never written (first at "
                        f"{where})" if missing.any() else
                        f"{int(stray.sum())} element(s) of {k} outside what they own were written (first at {where})")
                failures.append(compare.Comparison(
                    False, k, float("inf"), int(missing.sum() + stray.sum()), int(missing.sum()), got.size, [],
                    f"{k}, {' '.join(f'{a}={b}' for a, b in case.items())}: the model ran blocks {_blocks(ran)} of "
                    f"the grid: {what}. The statement fixes which block writes what: {rule}"))
        got[~written] = np.asarray(ref[k])[~written].astype(got.dtype)
        out[k] = got
    return out, failures
