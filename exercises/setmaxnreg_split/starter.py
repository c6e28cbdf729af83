"""regalloc.py - move registers between the warpgroups of a CTA with setmaxnreg, as the PTX ISA states it (chapter 4).

An SM has 65536 32-bit registers. A CTA launched with __launch_bounds__(THREADS, 1) starts with the
compiler's per-thread count for every thread, allocated per warp in units of 256 registers (8 per
thread). Those registers are the CTA's pool: setmaxnreg.dec gives a warpgroup's registers back to it,
setmaxnreg.inc takes them from it and waits until it holds enough.
Check it: python practice/judge.py check setmaxnreg_split   (README.md has the rules and examples)
"""

WARPGROUP = 128            # threads: setmaxnreg is executed by the 4 warps of a warpgroup together
UNIT = 8                   # registers per thread in one allocation unit (256 per warp)
MIN_COUNT, MAX_COUNT = 24, 256


def cta_pool(threads, regs_at_launch):
    """Every register a CTA of `threads` threads holds when launched at `regs_at_launch` registers per thread."""
    raise NotImplementedError("cta_pool: round the count up as the hardware allocates it, then count every thread")


def best_split(threads, regs_at_launch, producers=1, consumers=2, producer_regs=40):
    """(producer_regs, consumer_regs): `producers` warpgroups .dec to producer_regs; `consumers` warpgroups .inc
    to the largest count the pool then gives each of them (a multiple of 8, at most 256); any other warpgroup
    executes no setmaxnreg and keeps its launch count."""
    raise NotImplementedError("best_split: share out what the producers and the other warpgroups leave in the pool")


def outcome(threads, regs_at_launch, plan):
    """"ok", "hang" or "illegal": what the CTA does when its warps execute the plan.

    plan: one item per warpgroup, in order; each a list of its 4 warps' setmaxnreg: None (that warp executes
    none) or a tuple (action, count), action "dec" or "inc". README.md states the rules and their order.
    """
    raise NotImplementedError("outcome: the count rules first (illegal), then each warpgroup's warps, then the pool")
