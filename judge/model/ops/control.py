"""judge.model.ops.control - bra, exit/ret, trap, and the hints with no effect the model can see.

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks, scheduler
from judge.model.errors import Unsupported
from judge.model.ops.common import no_effect
from judge.model.registry import op


@op("bra")
def bra(m, ins):
    """bra to a label (the lanes in the mask jump; divergence is the scheduler's)."""
    if "idx" in ins.parts:
        raise Unsupported(ins.op)
    target = m.k.labels.get(ins.args[-1].name)
    if target is None:
        raise Unsupported(ins.text, "branch to an unknown label")

    def branch(ins, mask, full):
        m.pc[mask] = target
    return branch


@op("exit", "ret")
def exit(m, ins):
    """exit / ret from the kernel: the threads end; barriers stop waiting for them."""
    def leave(ins, mask, full):
        m.alive[mask] = False
        m.event("exit", threads=int(np.count_nonzero(mask)))
        scheduler.on_exit(m, mask, ins)
    return leave


@op("createpolicy")
def createpolicy(m, ins):
    """createpolicy: an opaque L2 cache policy (a hint, no effect on results)."""
    d = ins.args[0]

    def make_policy(ins, mask, full):            # an opaque L2 cache policy: only a hint, no effect on results
        m.wr(d, np.zeros(m.n, np.uint64), mask, full)
    return make_policy


@op("trap")
def trap(m, ins):
    """trap (a failed device-side assert): the kernel aborts."""
    def abort(ins, mask, full):
        t = int(np.nonzero(mask)[0][0])
        m.fail("trap", ins, f"{m.tdesc(t)} executed trap (an assertion failed or the kernel aborted)")
        raise checks.abort(m, "trap", ins, "trap")
    return abort



# hints and orderings with nothing the model can observe: membar orders memory the model already
# runs in order; the rest steer caches, scheduling or register allocation
op("membar", "nanosleep", "prefetch", "prefetchu", "griddepcontrol", "pmevent", "discard",
   "applypriority")(no_effect)
