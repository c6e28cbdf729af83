"""Register reallocation between the warpgroups of a CTA (setmaxnreg, sm_90a), as the PTX ISA states it.

An SM has 65536 32-bit registers. A CTA starts with the compiler's per-thread count R for every thread,
allocated per warp in units of 256 registers, so R is rounded up to a multiple of 8 per thread (R8).
Those THREADS x R8 registers are the CTA's pool for its whole life: `setmaxnreg` moves them between the
CTA's warpgroups and never takes any from elsewhere on the SM. A kernel fixes R for setmaxnreg with
__launch_bounds__(THREADS, 1) (ptxas otherwise drops it: info C7508); 384 threads get at most
65536 / 384 = 170, allocated as 168.

    setmaxnreg.dec.sync.aligned.u32 N    the warp's count drops to N; what was above N goes to the pool
    setmaxnreg.inc.sync.aligned.u32 N    the warp's count rises to N, taken from the pool; it blocks
                                         until the pool holds enough

The rules (PTX ISA, setmaxnreg), each with the verdict outcome() gives a plan that breaks it:

    count.range       N is a multiple of 8 from 24 to 256, both included (ptxas refuses
                      to assemble any other: tests/hw/test_regalloc_ptxas.py)              "illegal"
    count.direction   a .dec names at most the warp's current count, an .inc at least it     "illegal"
    warpgroup.aligned all four warps of a warpgroup execute the same setmaxnreg (.aligned);
                      the ISA leaves anything else undefined; the course calls it a hang
                      (its CPU model holds the warps that arrived until the rest come)        "hang"
    pool.enough       the counts the warpgroups end with fit the pool: an .inc that no
                      .dec can feed blocks forever                                            "hang"

A plan that breaks a count rule is illegal as written, whatever else it does; otherwise a hang
anywhere makes it a hang. Order does not matter: an .inc that comes first waits for the .dec.

A plan is one item per warpgroup, in order; each item one entry per warp of that warpgroup (4): None
(that warp executes no setmaxnreg) or (action, N) with action "dec" or "inc". Warps with the same pair
execute the same instruction.

    from judge.grading import exercise
    regalloc = exercise.get("setmaxnreg_split").reference_module()
    regalloc.cta_pool(384, 168)                   # 64512 = 384 x 168
    regalloc.best_split(384, 168)                 # (40, 232): the ladder's regs_dec<40> / regs_inc<232>
    plan = regalloc.split_plan(384, 40, 232)      # warpgroup 0 .dec 40, warpgroups 1 and 2 .inc 232
    regalloc.outcome(384, 168, plan)              # "ok"
    print(regalloc.judge(384, 168, plan))         # the verdict in words, with the rule

Kernels are not judged here: the CPU model runs a kernel's own setmaxnreg (judge.model.ops.setmaxnreg).
This module states the rules on their own, for the exercise setmaxnreg_split's check and for chapter 4's tests;
it is the exercise's answer, so a learners' release leaves it out.
Try it: PYTHONPATH=$PWD python exercises/setmaxnreg_split/reference.py
"""
from __future__ import annotations

from dataclasses import dataclass

SM_REGISTERS = 65536        # 32-bit registers of one SM
WARP = 32
WARPS = 4                   # warps of a warpgroup
WARPGROUP = WARP * WARPS    # threads of a warpgroup
UNIT = 8                    # registers per thread in one allocation unit (256 per warp)
MIN_COUNT, MAX_COUNT = 24, 256
MAX_AT_LAUNCH = 255         # the most registers per thread a kernel launches with
MAX_THREADS = 1024
ACTIONS = ("dec", "inc")
VERDICTS = ("ok", "hang", "illegal")
SECTION = "PTX ISA, setmaxnreg"
RULES = {
    "count.range": "the count is a multiple of 8 from 24 to 256",
    "count.direction": ".dec names at most the warp's current count, .inc at least it",
    "warpgroup.aligned": ".sync.aligned: all warps of a warpgroup execute the same setmaxnreg",
    "pool.enough": ".inc blocks until the CTA's pool holds the registers it asks for",
}


def launch_count(regs_at_launch) -> int:
    """Registers per thread a warp holds at launch: the compiler's count rounded up to a multiple of 8."""
    r = int(regs_at_launch)
    if not 1 <= r <= MAX_AT_LAUNCH:
        raise ValueError(f"a kernel launches with 1 to {MAX_AT_LAUNCH} registers per thread, not {r}")
    return -(-r // UNIT) * UNIT


def warpgroups(threads) -> int:
    """The CTA's warpgroups; threads must be whole warpgroups, at most 1024."""
    t = int(threads)
    if t < WARPGROUP or t > MAX_THREADS or t % WARPGROUP:
        raise ValueError(f"threads is a multiple of {WARPGROUP} (whole warpgroups) up to {MAX_THREADS}, not {t}")
    return t // WARPGROUP


def cta_pool(threads, regs_at_launch) -> int:
    """Every register the CTA holds: threads x the launch count rounded up to 8. ValueError when it cannot launch."""
    pool = WARPGROUP * warpgroups(threads) * launch_count(regs_at_launch)
    if pool > SM_REGISTERS:
        raise ValueError(f"{threads} threads x {launch_count(regs_at_launch)} registers = {pool}: more than the "
                         f"SM's {SM_REGISTERS}, the CTA cannot launch")
    return pool


def legal_count(n) -> bool:
    """count.range: a multiple of 8 from 24 to 256."""
    return MIN_COUNT <= n <= MAX_COUNT and n % UNIT == 0


def best_split(threads, regs_at_launch, producers=1, consumers=2, producer_regs=40) -> tuple[int, int]:
    """(producer_regs, consumer_regs): `producers` warpgroups .dec to producer_regs, `consumers` warpgroups
    .inc to the largest count the pool then gives each of them (a multiple of 8, at most 256); any other
    warpgroup executes no setmaxnreg and keeps its launch count."""
    wgs, r8, pool = warpgroups(threads), launch_count(regs_at_launch), cta_pool(threads, regs_at_launch)
    if producers < 1 or consumers < 1 or producers + consumers > wgs:
        raise ValueError(f"{producers} producer and {consumers} consumer warpgroups in a CTA of {wgs}")
    if not legal_count(producer_regs) or producer_regs > r8:
        raise ValueError(f"producer_regs {producer_regs}: a .dec from {r8} names a legal count of at most {r8}")
    others = wgs - producers - consumers
    left = pool - WARPGROUP * (producers * producer_regs + others * r8)
    return int(producer_regs), min(MAX_COUNT, left // (WARPGROUP * consumers) // UNIT * UNIT)


def split_plan(threads, producer_regs, consumer_regs, producers=1, consumers=None) -> list[list]:
    """The plan of a warp-specialized kernel: the first `producers` warpgroups .dec to producer_regs, the next
    `consumers` (default: all the others) .inc to consumer_regs, any left execute no setmaxnreg."""
    wgs = warpgroups(threads)
    consumers = wgs - producers if consumers is None else consumers
    dec, inc = [("dec", producer_regs)] * WARPS, [("inc", consumer_regs)] * WARPS
    return [list(dec if g < producers else inc if g < producers + consumers else [None] * WARPS)
            for g in range(wgs)]


@dataclass(frozen=True)
class Outcome:
    """What a plan does: verdict ("ok", "hang" or "illegal"), the rule it breaks (a RULES key, or None) and why."""
    verdict: str
    rule: str | None
    why: str

    def __str__(self):
        return f"{self.verdict}: {self.why}"


def _warps(ws: list[int]) -> str:
    if len(ws) == 1:
        return f"warp {ws[0]}"
    if ws == list(range(ws[0], ws[-1] + 1)):
        return f"warps {ws[0]}-{ws[-1]}"
    return "warps " + ", ".join(map(str, ws))


def _ins(ins) -> str:
    return "no setmaxnreg" if ins is None else f"setmaxnreg.{ins[0]} {ins[1]}"


def read_plan(threads, plan) -> list[list]:
    """The plan as lists of None or (action, int count); ValueError naming what is malformed."""
    wgs = warpgroups(threads)
    if not isinstance(plan, (list, tuple)) or len(plan) != wgs:
        raise ValueError(f"a plan of {threads} threads has {wgs} items, one per warpgroup")
    out = []
    for g, warps in enumerate(plan):
        if not isinstance(warps, (list, tuple)) or len(warps) != WARPS:
            raise ValueError(f"warpgroup {g} of the plan must list its {WARPS} warps")
        row = []
        for w, ins in enumerate(warps):
            if ins is not None and (not isinstance(ins, (list, tuple)) or len(ins) != 2 or ins[0] not in ACTIONS
                                    or int(ins[1]) != ins[1]):
                raise ValueError(f"warpgroup {g}, warp {w}: None or (\"dec\" | \"inc\", count), not {ins!r}")
            row.append(None if ins is None else (str(ins[0]), int(ins[1])))
        out.append(row)
    return out


def describe(threads, plan) -> str:
    """The plan in words: 'warpgroup 0: warps 0-3 setmaxnreg.dec 40; warpgroup 1: ...'."""
    parts = []
    for g, warps in enumerate(read_plan(threads, plan)):
        groups: dict = {}
        for w, ins in enumerate(warps):
            groups.setdefault(ins, []).append(w)
        parts.append(f"warpgroup {g}: " + ", ".join(f"{_warps(ws)} {_ins(i)}" for i, ws in groups.items()))
    return "; ".join(parts)


def judge(threads, regs_at_launch, plan) -> Outcome:
    """What the plan does on a CTA of `threads` launched at `regs_at_launch` registers per thread (rules above)."""
    r8, pool = launch_count(regs_at_launch), cta_pool(threads, regs_at_launch)
    plan = read_plan(threads, plan)
    at = f"{regs_at_launch} registers" + (f" (allocated as {r8})" if r8 != regs_at_launch else "")
    for g, warps in enumerate(plan):
        for w, ins in enumerate(warps):
            if ins is None:
                continue
            action, n = ins
            if not legal_count(n):
                return Outcome("illegal", "count.range",
                               f"warpgroup {g}, warp {w} executes {_ins(ins)}: the count must be a multiple of 8 from "
                               f"{MIN_COUNT} to {MAX_COUNT} ({SECTION}: {RULES['count.range']})")
            if (action == "dec" and n > r8) or (action == "inc" and n < r8):
                way = "raise" if action == "dec" else "lower"
                return Outcome("illegal", "count.direction",
                               f"warpgroup {g}, warp {w} executes {_ins(ins)} holding {r8} per thread (launched at "
                               f"{at}): a .{action} cannot {way} the count; the PTX ISA leaves it undefined "
                               f"({SECTION}: {RULES['count.direction']})")
    for g, warps in enumerate(plan):
        kinds = {ins for ins in warps if ins is not None}
        if not kinds or (len(kinds) == 1 and None not in warps):
            continue
        groups: dict = {}
        for w, ins in enumerate(warps):
            groups.setdefault(ins, []).append(w)
        said = "; ".join(f"{_warps(ws)} {'execute' if len(ws) > 1 else 'executes'} {_ins(i)}"
                         for i, ws in groups.items())
        return Outcome("hang", "warpgroup.aligned",
                       f"warpgroup {g}: {said}. Each warp waits at its setmaxnreg for the rest of its warpgroup to "
                       f"execute the same one, which never happens: the PTX ISA leaves it undefined, and the course "
                       f"judges it a hang ({SECTION}: {RULES['warpgroup.aligned']})")
    final = [warps[0][1] if warps[0] is not None else r8 for warps in plan]
    need = WARPGROUP * sum(final)
    freed = sum(WARPGROUP * (r8 - f) for f in final if f < r8)
    asked = sum(WARPGROUP * (f - r8) for f in final if f > r8)
    sums = " + ".join(f"128 x {f}" for f in final)
    if need > pool:
        return Outcome("hang", "pool.enough",
                       f"the warpgroups' .inc ask the pool for {asked} registers and their .dec return {freed}: they "
                       f"would end with {sums} = {need} registers, and the CTA holds {threads} x {r8} = {pool}. An "
                       f".inc blocks until the pool has enough, so one waits forever ({SECTION}: "
                       f"{RULES['pool.enough']})")
    return Outcome("ok", None, f"every warpgroup's warps execute the same legal setmaxnreg and the counts fit the "
                               f"pool: {sums} = {need} <= {threads} x {r8} = {pool}")


def outcome(threads, regs_at_launch, plan) -> str:
    """"ok", "hang" or "illegal" (judge(...).verdict)."""
    return judge(threads, regs_at_launch, plan).verdict


if __name__ == "__main__":
    print("384 threads at 168: pool", cta_pool(384, 168), "split", best_split(384, 168))
    for plan in (split_plan(384, 40, 232), split_plan(384, 24, 240), split_plan(384, 48, 232),
                 [[("dec", 40)] * 3 + [None], [("inc", 232)] * 4, [("inc", 232)] * 4]):
        print(describe(384, plan), "->", judge(384, 168, plan))
