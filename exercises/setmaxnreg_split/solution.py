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
    # BEGIN SOLUTION
    #> raise NotImplementedError("cta_pool: round the count up as the hardware allocates it, then count every thread")
    return threads * ((regs_at_launch + UNIT - 1) // UNIT * UNIT)
    # END SOLUTION


def best_split(threads, regs_at_launch, producers=1, consumers=2, producer_regs=40):
    """(producer_regs, consumer_regs): `producers` warpgroups .dec to producer_regs; `consumers` warpgroups .inc
    to the largest count the pool then gives each of them (a multiple of 8, at most 256); any other warpgroup
    executes no setmaxnreg and keeps its launch count."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("best_split: share out what the producers and the other warpgroups leave in the pool")
    held = (regs_at_launch + UNIT - 1) // UNIT * UNIT
    others = threads // WARPGROUP - producers - consumers
    left = cta_pool(threads, regs_at_launch) - WARPGROUP * (producers * producer_regs + others * held)
    per_thread = left // (WARPGROUP * consumers)
    return producer_regs, min(MAX_COUNT, per_thread // UNIT * UNIT)
    # END SOLUTION


def outcome(threads, regs_at_launch, plan):
    """"ok", "hang" or "illegal": what the CTA does when its warps execute the plan.

    plan: one item per warpgroup, in order; each a list of its 4 warps' setmaxnreg: None (that warp executes
    none) or a tuple (action, count), action "dec" or "inc". README.md states the rules and their order.
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("outcome: the count rules first (illegal), then each warpgroup's warps, then the pool")
    held = (regs_at_launch + UNIT - 1) // UNIT * UNIT
    for warps in plan:
        for ins in warps:
            if ins is None:
                continue
            action, count = ins
            if count % UNIT or not MIN_COUNT <= count <= MAX_COUNT:
                return "illegal"
            if (action == "dec" and count > held) or (action == "inc" and count < held):
                return "illegal"
    final = []
    for warps in plan:
        if all(ins is None for ins in warps):
            final.append(held)                     # no setmaxnreg: the warpgroup keeps its registers
        elif any(ins != warps[0] for ins in warps):
            return "hang"                          # a warp skips it or executes another: the rest wait for it
        else:
            final.append(warps[0][1])
    if WARPGROUP * sum(final) > cta_pool(threads, regs_at_launch):
        return "hang"                              # an .inc waits for registers no .dec will return
    return "ok"
    # END SOLUTION
