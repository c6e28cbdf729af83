"""Grader of wgmma_fragment: python practice/judge.py check wgmma_fragment

coord() and owner() against solution.py for N = 8, 64 (every thread and register, every element)
and N = 256 (every thread with 24 registers, 1536 elements, drawn from a fixed seed), then the
round trip owner(coord(t, i)) == (t, i). A failure names the call, what came back, what was
expected, and which part of the rule (warp rows, lane row, register band, column pair) it broke.
"""
import random

from judge.grading.grade import Result, Verdict, learner_error

SIZES = (8, 64, 256)


def _why(thread, reg, got, want) -> list[str]:
    warp, lane = divmod(thread, 32)
    out = [(f"thread {thread} is lane {lane} of warp {warp}: warp {warp} owns rows {16 * warp}..{16 * warp + 15}; "
           f"lane {lane} sits in row {lane // 4} of each 8-row band and holds columns "
           f"{2 * (lane % 4)} and {2 * (lane % 4) + 1} of each group of 8")]
    out.append(f"d[{reg}] is in column group {reg // 4} (columns {8 * (reg // 4)}..{8 * (reg // 4) + 7}), "
               f"{'lower' if (reg // 2) % 2 else 'upper'} band (+{8 * ((reg // 2) % 2)} rows), "
               f"{'second' if reg % 2 else 'first'} column of the pair")
    if isinstance(got, (tuple, list)) and len(got) == 2:
        if got[0] != want[0]:
            out.append(f"your row {got[0]} should be {want[0]}")
        if got[1] != want[1]:
            out.append(f"your column {got[1]} should be {want[1]}")
    return out


def check(sub) -> Result:
    sub.progress("importing fragment.py")
    mod = sub.learner_module("coord", "owner")
    ref = sub.exercise.reference()
    rng = random.Random(64)
    checked = []
    for n in SIZES:
        regs = range(n // 2) if n <= 64 else sorted(rng.sample(range(n // 2), 24))
        sub.progress(f"coord, N = {n}")
        for t in range(128):
            for i in regs:
                call = f"coord(thread={t}, reg={i}, n={n})"
                try:
                    got = mod.coord(t, i, n)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, call))
                want = ref.coord(t, i, n)
                if not isinstance(got, (tuple, list)) or tuple(got) != want:
                    return Result(Verdict.WRONG, f"{call}: got {got!r}, expected {want}",
                                  details=_why(t, i, got, want))
        cells = ([(r, c) for r in range(64) for c in range(n)] if n <= 64
                 else [(rng.randrange(64), rng.randrange(n)) for _ in range(1536)])
        sub.progress(f"owner, N = {n}")
        for r, c in cells:
            call = f"owner(row={r}, col={c}, n={n})"
            try:
                got = mod.owner(r, c, n)
            except Exception as e:  # noqa: BLE001
                return Result(Verdict.WRONG, learner_error(e, call))
            want = ref.owner(r, c, n)
            if not isinstance(got, (tuple, list)) or tuple(got) != want:
                details = [(f"C[{r}][{c}] is held by thread {want[0]} (warp {want[0] // 32}, lane {want[0] % 32}) "
                           f"in d[{want[1]}]")]
                if isinstance(got, (tuple, list)) and len(got) == 2:
                    try:
                        back = ref.coord(int(got[0]), int(got[1]), n)
                        details.append(f"thread {got[0]}'s d[{got[1]}] holds C[{back[0]}][{back[1]}]")
                    except (ValueError, TypeError, IndexError):
                        pass
                return Result(Verdict.WRONG, f"{call}: got {got!r}, expected {want}", details=details)
        checked.append(f"N = {n}: {128 * len(regs)} registers, {len(cells)} elements")
    return Result(Verdict.PASS, "coord and owner right for N = 8, 64 and 256", checked=checked)
