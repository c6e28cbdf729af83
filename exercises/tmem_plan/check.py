"""Grader of tmem_plan: python practice/judge.py check tmem_plan

Both functions of the statement are called directly, through the Python flow (judge.grading.cpu_flow):
1. plan(accumulators) on the statement's kernels, kernels with uneven buffer counts, then kernels
   drawn per run (1-4 accumulators, N a multiple of 8, 1-4 buffers each). Each plan must be a dict
   whose allocation is the smallest power of two >= 32 that holds the buffers (any integer type),
   whose buffers lie inside it without overlap, and which replays cleanly through the tensor-memory
   simulator (judge/hw/tmem.py): warp 0 allocates, one MMA per buffer, commit, four warps wait and
   read their lane quarters, dealloc. The simulator names the rule a plan breaks (alloc.size, ...);
2. plan must raise ValueError (any message) for kernels of more than 512 columns: the statement's,
   and ones drawn from the run's seed;
3. ctas_per_sm for every allocation size.
"""
import random

import numpy as np
from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.grading.result import Result, Verdict
from judge.grading.submission import learner_error
from judge.hw import tmem

COLUMNS = tmem.COLUMNS

KERNELS = [
    ("one 128 x 128 accumulator", [("acc", 128, 1)]),
    ("double-buffered 128 x 128", [("acc", 128, 2)]),
    ("double-buffered 128 x 256 (the whole SM)", [("acc", 256, 2)]),
    ("a narrow 128 x 16 tile", [("acc", 16, 1)]),
    ("N = 96", [("acc", 96, 1)]),
    ("N = 192, two buffers", [("acc", 192, 2)]),
    ("a main and an auxiliary accumulator", [("acc", 128, 2), ("aux", 64, 1)]),
    ("one 128 x 512", [("acc", 512, 1)]),
    ("uneven buffer counts: 1 and 3", [("acc", 128, 1), ("aux", 32, 3)]),
    ("uneven buffer counts: 3, 1 and 2", [("a", 64, 3), ("b", 16, 1), ("c", 8, 2)]),
    ("uneven buffer counts: 4 and 1, 500 columns", [("acc", 100, 4), ("aux", 100, 1)]),
]
TOO_MANY = [
    ("three 200-column buffers (too many)", [("acc", 200, 3)]),
    ("544 columns (too many)", [("acc", 256, 2), ("aux", 32, 1)]),
    ("uneven counts, 520 columns (too many)", [("acc", 8, 1), ("aux", 128, 4)]),
]


def _total(acc):
    return sum(n * b for _, n, b in acc)


def need(accumulators):
    """The allocation the statement asks for: the smallest power of two >= 32 holding every buffer."""
    alloc = 32
    while alloc < _total(accumulators):
        alloc *= 2
    return alloc


def _steps(alloc, columns, acc):
    steps = [("alloc", 0, alloc), ("relinquish", 0), ("sync",)]
    for name, n, _ in acc:
        for b, col in enumerate(columns[name]):
            bar = f"{name}[{b}]"
            steps += [("mma", 0, col, n), ("commit", 0, bar)]
            for w in range(4):
                steps.append(("wait", w, bar, 0))
                chunk = min(n, 32)
                steps += [("ld", w, 32 * w, col + c, min(chunk, n - c)) for c in range(0, n, chunk)]
    return steps + [("sync",), ("dealloc", 0, 0, alloc), ("exit",)]


def validate_plan(call, p):
    """None when the plan's shape, placement and protocol are right (its size is compared after)."""
    acc = call.args[0]
    if not isinstance(p, dict) or "alloc" not in p or "columns" not in p or not isinstance(p["columns"], dict):
        return f"plan must return {{'alloc': ncols, 'columns': {{name: [first column, ...]}}}}, got {checks.show(p)}"
    alloc = checks.as_integer(p["alloc"])
    if alloc is None:
        return f"'alloc' is {checks.show(p['alloc'])}: a number of columns is an integer"
    columns = {}
    for name, n, b in acc:
        cols = p["columns"].get(name)
        cols = cols.tolist() if isinstance(cols, np.ndarray) and cols.ndim == 1 else cols
        if not isinstance(cols, (list, tuple)) or len(cols) != b or any(checks.as_integer(c) is None for c in cols):
            return (f"columns[{name!r}] must list the first column of each of its {b} buffer(s), "
                    f"got {checks.show(cols)}")
        columns[name] = [checks.as_integer(c) for c in cols]
    try:
        tmem.replay(_steps(alloc, columns, acc))
    except tmem.TmemError as e:
        return f"your plan (alloc {alloc}, columns {columns}) breaks a tensor-memory rule in simulation: {e}"
    spans = sorted((c, c + n, f"{name}[{i}]") for name, n, _ in acc for i, c in enumerate(columns[name]))
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            return (f"buffers {an} (columns {a0}..{a1 - 1}) and {bn} (columns {b0}..{b1 - 1}) overlap: one MMA "
                    f"would overwrite the other's accumulator")
    return None


def compare_plan(p, want):
    alloc = checks.as_integer(p["alloc"])
    return None if alloc == want else f"allocates {alloc} columns where {want} suffice"


def explain_plan(call, got, want):
    acc = call.args[0]
    out = [f"the buffers take {' + '.join(f'{b} x {n}' for _, n, b in acc)} = {_total(acc)} columns: the smallest "
           f"power of two >= 32 that holds them is {want}"]
    alloc = checks.as_integer(got.get("alloc")) if isinstance(got, dict) else None
    if alloc and alloc > want:
        out.append(f"an SM's 512 columns then hold {COLUMNS // alloc} such CTA(s) instead of {COLUMNS // want}: "
                   f"a CTA that cannot allocate waits in tcgen05.alloc")
    if len({b for _, _, b in acc}) > 1:
        out.append("the accumulators have different buffer counts: each takes N x its own count")
    return out


@st.composite
def _kernels(draw, fitting=True):
    k = draw(st.integers(1, 4))
    acc = [(f"acc{i}", 8 * draw(st.integers(1, 64)), draw(st.integers(1, 4))) for i in range(k)]
    if fitting:
        while _total(acc) > COLUMNS:          # shrink the widest buffer until the kernel fits
            i = max(range(len(acc)), key=lambda j: acc[j][1] * acc[j][2])
            name, n, b = acc[i]
            acc[i] = (name, max(8, n // 2), b) if n > 8 else (name, n, max(1, b - 1))
    return (acc,)


PLAN = flow.Function("plan", reference=need, args=_kernels(), validate=validate_plan, compare=compare_plan,
                     explain=explain_plan, edges=[flow.Edge((acc,), what) for what, acc in KERNELS])
CTAS = flow.Function("ctas_per_sm", reference=lambda alloc: COLUMNS // alloc,
                     explain=lambda call, got, want: f"512 columns per SM shared by CTAs of {call.args[0]} columns each",
                     edges=[flow.Edge((a,), "every allocation size") for a in (32, 64, 128, 256, 512)])


def _too_many(seed):
    """The statement's kernels that do not fit, and ten drawn from the run's seed."""
    rng = random.Random(seed)
    out = list(TOO_MANY)
    while len(out) < len(TOO_MANY) + 10:
        acc = [(f"acc{i}", 8 * rng.randint(1, 64), rng.randint(1, 4)) for i in range(rng.randint(1, 4))]
        if _total(acc) > COLUMNS:
            out.append((f"{_total(acc)} columns (drawn with seed {seed})", acc))
    return out


def check(sub):
    mod = sub.learner_module("plan", "ctas_per_sm")
    seed = flow.seed_for_run()
    for what, acc in _too_many(seed):
        sub.progress(f"plan: {what}")
        try:
            p = mod.plan([tuple(a) for a in acc])
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - the learner's error, reported with its line
            return Result(Verdict.WRONG, learner_error(e, f"plan({acc})"), details=[f"{what}: expected ValueError"])
        return Result(Verdict.WRONG, f"plan({acc}) returned {checks.show(p)}; {_total(acc)} columns do not fit in "
                                     f"tensor memory's {COLUMNS}: raise ValueError",
                      details=[what, f"seed {seed}: {flow.SEED_ENV}={seed} python practice/judge.py check tmem_plan "
                                     f"replays these inputs"])
    return flow.run(sub, [PLAN, CTAS], seed=seed,
                    checked=[what for what, _ in KERNELS + TOO_MANY]
                    + ["kernels of 1-4 accumulators with 1-4 buffers each, drawn per run",
                       "ctas_per_sm for 32..512 columns"])
