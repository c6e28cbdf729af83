"""judge.model.ops.setmaxnreg - register reallocation between warpgroups, as the PTX ISA states it.

Registered with judge.model.registry for `setmaxnreg`; try it:
    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_verdicts_model.py -q -k setmaxnreg

PTX ISA, setmaxnreg (sm_90a): `setmaxnreg.{inc,dec}.sync.aligned.u32 n` changes the register count of
every thread of the executing WARPGROUP to n (24..256, a multiple of 8). It is .sync.aligned over the
warpgroup: all four warps execute the same setmaxnreg, and each waits until the others have. `.dec`
gives registers back to the CTA's pool; `.inc` takes them from it and blocks until the pool holds
enough. The pool starts with what the launch gave the CTA: the kernel's register count at entry times
its threads.

MODEL: a thread that executes setmaxnreg waits there until all 128 threads of its warpgroup have
executed the same instruction (an exited thread never does: the PTX ISA leaves such a kernel undefined,
and here it is a Hang that says so). Then `.dec` returns (old - n) x 128 registers to the pool at once; `.inc`
takes (n - old) x 128 when the pool has them, else the warpgroup waits for a `.dec` (a Hang if none
comes). The entry count comes from ptxas (Build.resources); without it the pool is not checked.
"""
from __future__ import annotations

import numpy as np

from judge.model.errors import Unsupported
from judge.model.registry import op

RULE = ("PTX ISA, setmaxnreg: .sync.aligned over the warpgroup, so all four warps of the warpgroup must "
        "execute the same setmaxnreg")


def _state(m):
    st = getattr(m, "_setmaxnreg", None)
    if st is None or st["n"] != m.n:
        regs0 = int(getattr(m, "entry_registers", 0) or 0)
        nwg = -(-m.nthr_cta // 128)
        st = m._setmaxnreg = {
            "n": m.n, "regs0": regs0,
            "pool": {c: 0 for c in range(m.ncta)},                 # free registers per CTA
            "count": {(c, w): regs0 for c in range(m.ncta) for w in range(nwg)},
            "arrived": {},                                         # (cta, wg, pc) -> bool mask
            "want": {},                                            # (cta, wg) -> (n, pc) waiting for the pool
        }
    return st


def describe_wait(m, key, who) -> str:
    """One line of a Hang's message for threads blocked at a setmaxnreg (machine._all_blocked)."""
    kind, rest = key[0], key[1:]
    st = _state(m)
    if kind == "align":
        c, w, pc = rest
        arrived = st["arrived"].get((c, w, pc), np.zeros(m.n, bool))
        rows = np.arange(c * m.nthr_cta + 128 * w, min(c * m.nthr_cta + 128 * (w + 1), (c + 1) * m.nthr_cta))
        missing = rows[~arrived[rows]]
        warps = sorted({int(t - c * m.nthr_cta) // 32 for t in missing})
        gone = [t for t in missing if not m.alive[t]]
        return (f"{len(who)} threads of warpgroup {w}{m.cta_suffix(c)} wait at this setmaxnreg "
                f"for warps {', '.join(map(str, warps))} of their warpgroup, which never execute it" + (" (they exited)" if len(gone) == len(missing) else "")
                + f": {RULE}; the PTX ISA leaves anything else undefined")
    c, w = rest
    n, pc = st["want"][(c, w)]
    need = (n - st["count"][(c, w)]) * 128
    return (f"{len(who)} threads of warpgroup {w}{m.cta_suffix(c)} wait at this setmaxnreg.inc for "
            f"{need} registers from the CTA's pool, which holds {st['pool'][c]}, and no setmaxnreg.dec that "
            f"could return them is left to run: the block started with {st['regs0']} x {m.nthr_cta} registers "
            f"(PTX ISA, setmaxnreg: .inc blocks until the pool has enough)")


def _grant(m, st, c, w) -> bool:
    n, pc = st["want"][(c, w)]
    need = (n - st["count"][(c, w)]) * 128
    if st["regs0"] and need > st["pool"][c]:
        return False
    st["pool"][c] -= max(need, 0)
    st["count"][(c, w)] = n
    del st["want"][(c, w)]
    m.release(m.wg_rows(c, w), ("setmaxnreg", ("pool", c, w)))
    return True


@op("setmaxnreg")
def setmaxnreg(m, ins):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 n: the warpgroup meets, then gives or takes registers."""
    p = ins.parts
    inc = "inc" in p
    if not ins.args or ins.args[0].kind != "imm":
        raise Unsupported(ins.op, "setmaxnreg takes an immediate register count")
    n = int(ins.args[0].value)

    def reallocate(ins, mask, full):
        st = _state(m)
        m.wait_descriptions["setmaxnreg"] = describe_wait
        pc = m.cur_pc
        lanes = np.nonzero(mask)[0]
        m.counts["setmaxnreg"] += len(lanes)
        for c, w in sorted({(int(m.cta[t]), int(m.lt[t]) // 128) for t in lanes}):
            key = (c, w, pc)
            arr = st["arrived"].setdefault(key, np.zeros(m.n, bool))
            rows = m.wg_rows(c, w)
            mine = lanes[(m.cta[lanes] == c) & (m.lt[lanes] // 128 == w)]
            arr[mine] = True
            if not arr[rows].all():
                m.wait_on(mine, ("setmaxnreg", ("align", c, w, pc)))
                continue
            del st["arrived"][key]
            m.release(rows, ("setmaxnreg", ("align", c, w, pc)))
            if inc:
                st["want"][(c, w)] = (n, pc)
                if not _grant(m, st, c, w):
                    m.wait_on(rows, ("setmaxnreg", ("pool", c, w)))
            else:
                st["pool"][c] += max(st["count"][(c, w)] - n, 0) * 128
                st["count"][(c, w)] = n
                for (c2, w2) in [k for k in st["want"] if k[0] == c]:
                    _grant(m, st, c2, w2)
    return reallocate
