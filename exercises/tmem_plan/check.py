"""Grader of tmem_plan: python practice/judge.py check tmem_plan

For each kernel (a list of accumulators) the learner's plan is checked three ways:
1. the allocation is the smallest power of two >= 32 that holds the buffers, or a ValueError is
   raised exactly when more than 512 columns are needed;
2. the buffers lie inside the allocation and do not overlap;
3. the plan is replayed through the tensor-memory simulator (judge/hw/tmem.py): warp 0 allocates,
   one MMA per buffer, commit, four warps wait and read their lane quarters, dealloc. The
   simulator names the rule a plan breaks (alloc.size, access.unallocated, ...).
Then ctas_per_sm for every allocation size.
"""
from judge.hw import tmem
from judge.grading.result import Result, Verdict
from judge.grading.submission import learner_error

KERNELS = [
    ("one 128 x 128 accumulator", [("acc", 128, 1)]),
    ("double-buffered 128 x 128", [("acc", 128, 2)]),
    ("double-buffered 128 x 256 (the whole SM)", [("acc", 256, 2)]),
    ("a narrow 128 x 16 tile", [("acc", 16, 1)]),
    ("N = 96", [("acc", 96, 1)]),
    ("N = 192, two buffers", [("acc", 192, 2)]),
    ("a main and an auxiliary accumulator", [("acc", 128, 2), ("aux", 64, 1)]),
    ("one 128 x 512", [("acc", 512, 1)]),
    ("three 200-column buffers (too many)", [("acc", 200, 3)]),
    ("544 columns (too many)", [("acc", 256, 2), ("aux", 32, 1)]),
]


def _need(acc):
    total = sum(n * b for _, n, b in acc)
    if total > 512:
        return None
    alloc = 32
    while alloc < total:
        alloc *= 2
    return alloc


def _steps(plan, acc):
    steps = [("alloc", 0, plan["alloc"]), ("relinquish", 0), ("sync",)]
    for name, n, _ in acc:
        for b, col in enumerate(plan["columns"][name]):
            bar = f"{name}[{b}]"
            steps += [("mma", 0, col, n), ("commit", 0, bar)]
            for w in range(4):
                steps.append(("wait", w, bar, 0))
                chunk = min(n, 32)
                steps += [("ld", w, 32 * w, col + c, chunk) for c in range(0, n, chunk)]
    return steps + [("sync",), ("dealloc", 0, 0, plan["alloc"]), ("exit",)]


def check(sub) -> Result:
    mod = sub.learner_module("plan", "ctas_per_sm")
    for what, acc in KERNELS:
        sub.progress(what)
        need = _need(acc)
        try:
            p = mod.plan([tuple(a) for a in acc])
        except ValueError as e:
            if need is None:
                continue
            return Result(Verdict.WRONG, f"{what}: plan({acc}) raised ValueError ({e}), but "
                                         f"{sum(n * b for _, n, b in acc)} columns fit in 512")
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"plan({acc})"))
        if need is None:
            return Result(Verdict.WRONG, f"{what}: plan({acc}) returned {p!r}; "
                                         f"{sum(n * b for _, n, b in acc)} columns do not fit in 512: raise ValueError")
        if not isinstance(p, dict) or "alloc" not in p or "columns" not in p:
            return Result(Verdict.WRONG, f"plan must return {{'alloc': ..., 'columns': {{...}}}}, got {p!r}")
        for name, n, b in acc:
            cols = p["columns"].get(name)
            if not isinstance(cols, (list, tuple)) or len(cols) != b:
                return Result(Verdict.WRONG, f"{what}: columns[{name!r}] must list {b} buffer start(s), got {cols!r}")
        try:
            tmem.replay(_steps(p, acc))
        except tmem.TmemError as e:
            return Result(Verdict.WRONG, f"{what}: your plan {p} breaks a tensor-memory rule in simulation: {e}")
        spans = sorted((c, c + n, f"{name}[{i}]") for name, n, _ in acc
                       for i, c in enumerate(p["columns"][name]))
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                return Result(Verdict.WRONG, f"{what}: buffers {an} (columns {a0}..{a1 - 1}) and {bn} "
                                             f"(columns {b0}..{b1 - 1}) overlap: one MMA would overwrite the other's "
                                             f"accumulator")
        if p["alloc"] != need:
            return Result(Verdict.WRONG, f"{what}: allocates {p['alloc']} columns where {need} suffice",
                          details=[f"an SM's 512 columns then hold {512 // p['alloc']} such CTA(s) instead of "
                                   f"{512 // need}: a CTA that cannot allocate waits"])
    for alloc in (32, 64, 128, 256, 512):
        try:
            got = mod.ctas_per_sm(alloc)
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"ctas_per_sm({alloc})"))
        if got != 512 // alloc:
            return Result(Verdict.WRONG, f"ctas_per_sm({alloc}) returned {got!r}, expected {512 // alloc}: "
                                         f"512 columns per SM shared by CTAs of {alloc} columns each")
    return Result(Verdict.PASS, f"{len(KERNELS)} kernels planned: minimal power-of-two allocations, no overlap, "
                                f"and every plan passed the tensor-memory simulator",
                  checked=[what for what, _ in KERNELS] + ["ctas_per_sm for 32..512 columns"])
