"""Grader of multicast_plan: python practice/judge.py check multicast_plan

cta_mask is compared with the reference. Then, for 2-D clusters from 1x2 to 4x4 and a 1x16 one,
the learner's gemm_plan and expect_tx are SIMULATED, not compared: every load delivers its rows
to every block in its mask; each block must end with exactly the tiles it needs, every row once
(else WRONG), and each block's barrier must expect exactly the bytes it receives. A barrier that
expects more never completes: HANG, naming the block. One that expects less completes while
data lands, and the surplus counts against its next phase, which never completes: HANG too.
"""
from __future__ import annotations

from collections import Counter

from judge.grading.grade import Result, Verdict, learner_error

SHAPES = [(1, 2, 64, 64, 128), (2, 1, 64, 128, 128), (2, 2, 128, 64, 128), (4, 1, 64, 256, 64),
          (2, 4, 128, 128, 128), (4, 4, 64, 64, 256), (1, 16, 128, 32, 128)]


# Plans that are not symmetric: one block loads for others (e.g. a producer block).
UNEVEN = [
    (2, [{"issuer": 0, "tile": "T", "row": 0, "rows": 64, "bytes": 8192, "mask": 0b11}]),
    (4, [{"issuer": 0, "tile": "T", "row": 0, "rows": 64, "bytes": 16384, "mask": 0b1110},
         {"issuer": 3, "tile": "U", "row": 0, "rows": 32, "bytes": 4096, "mask": 0b1001}]),
]


def simulate_tx(loads, announced, size):
    """(verdict, message) for the barriers alone; (None, '') if every one completes on time."""
    received = [0] * size
    for ld in loads:
        for r in range(size):
            if int(ld["mask"]) >> r & 1:
                received[r] += int(ld["bytes"])
    if len(announced) != size:
        return Verdict.WRONG, f"expect_tx returned {len(announced)} values for a cluster of {size}"
    for r in range(size):
        if announced[r] > received[r]:
            return Verdict.HANG, (f"block rank {r}'s barrier expects {announced[r]} bytes but receives "
                                  f"{received[r]}: its phase never completes")
    for r in range(size):
        if announced[r] < received[r]:
            return Verdict.HANG, (f"block rank {r}'s barrier expects {announced[r]} bytes but receives "
                                  f"{received[r]}: the phase can complete while its data is still landing, "
                                  f"and the {received[r] - announced[r]} surplus bytes count against the next "
                                  f"phase, which then never completes")
    return None, ""


def simulate(loads, announced, cx, cy, a_rows, b_rows, row_bytes):
    """(verdict, message) of one k-step of this plan; (None, '') if it works."""
    size = cx * cy
    got = [Counter() for _ in range(size)]
    for ld in loads:
        mask = int(ld["mask"])
        if mask >> size:
            return Verdict.WRONG, f"load {ld} has mask bits above rank {size - 1}: no such block in a cluster of {size}"
        for r in range(size):
            if mask >> r & 1:
                for row in range(int(ld["row"]), int(ld["row"]) + int(ld["rows"])):
                    got[r][(ld["tile"], row)] += 1
    for r in range(size):
        x, y = r % cx, r // cx
        need = Counter({(f"A{y}", i): 1 for i in range(a_rows)}) + Counter({(f"B{x}", i): 1 for i in range(b_rows)})
        if got[r] != need:
            missing = sorted(set(need) - set(got[r]))[:3]
            extra = sorted(k for k in got[r] if got[r][k] != need.get(k, 0))[:3]
            return Verdict.WRONG, (f"block rank {r} (x={x}, y={y}) needs A{y} and B{x} once each; "
                                   f"missing rows {missing}" if missing else
                                   f"block rank {r} (x={x}, y={y}) receives {extra} the wrong number of times")
    return simulate_tx(loads, announced, size)


def check(sub) -> Result:
    sub.progress("importing plan.py")
    mod = sub.learner_module()
    ref = sub.exercise.reference()
    checked = []
    for ranks in ([0], [1], [0, 1], [0, 2], [1, 3], [0, 1, 2, 3], list(range(8)), list(range(16)), [15]):
        try:
            got = mod.cta_mask(list(ranks))
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"cta_mask({ranks})"))
        if got != ref.cta_mask(ranks):
            return Result(Verdict.WRONG, f"cta_mask({ranks}) = {got!r}, expected {ref.cta_mask(ranks):#06x}",
                          details=["bit r of the mask is cluster rank r"])
    checked.append("cta_mask on 9 rank sets")
    for size, loads in UNEVEN:
        try:
            announced = list(mod.expect_tx([dict(ld) for ld in loads], size))
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"expect_tx({loads}, {size})"), checked=checked)
        verdict, msg = simulate_tx(loads, announced, size)
        if verdict is not None:
            return Result(verdict, f"cluster of {size}, loads {loads}: {msg}", checked=checked,
                          details=["simulated: every load delivered to every block in its mask"])
    checked.append(f"expect_tx simulated on {len(UNEVEN)} uneven plans (one block loading for others)")
    for cx, cy, a_rows, b_rows, rb in SHAPES:
        sub.progress(f"simulating a {cx}x{cy} cluster")
        try:
            loads = mod.gemm_plan(cx, cy, a_rows, b_rows, rb)
            announced = list(mod.expect_tx(loads, cx * cy))
            ref_tx = list(mod.expect_tx(ref.gemm_plan(cx, cy, a_rows, b_rows, rb), cx * cy))
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"gemm_plan / expect_tx for a {cx}x{cy} cluster"),
                          checked=checked)
        verdict, msg = simulate(loads, announced, cx, cy, a_rows, b_rows, rb)
        if verdict is None and ref_tx != ref.expect_tx(ref.gemm_plan(cx, cy, a_rows, b_rows, rb), cx * cy):
            verdict, msg = Verdict.WRONG, "expect_tx disagrees with the reference on the reference plan"
        if verdict is not None:
            return Result(verdict, f"{cx}x{cy} cluster, A {a_rows} rows, B {b_rows} rows of {rb} B: {msg}",
                          checked=checked, details=["simulated: every load delivered to every block in its mask"])
    checked.append(f"plans simulated on {len(SHAPES)} cluster shapes")
    return Result(Verdict.PASS, "every block gets its tiles once and every barrier completes", checked=checked)
