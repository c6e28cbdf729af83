"""judge.model.ops.mbarrier - mbarrier.init, inval, arrive(.expect_tx), arrive_drop, expect_tx, complete_tx,
try_wait / test_wait (parity or state).

Registered with judge.model.registry; tested by tests/model/test_model_ops_async.py.

PTX (Parallel Synchronization and Communication Instructions: mbarrier): a phase completes when its
pending arrival count and its tx-count are both zero; then the parity flips and the counts reset.
The phase rules are judge.hw.mbarrier.Mbarrier's; what a completion does in the model (TMA bytes
land, sleepers wake, clocks are handed on) is judge.model.completion's. A failed try_wait/test_wait
sleeps the thread until the phase changes (test_wait is non-blocking on the hardware; a spin loop
around it behaves the same).
"""
from __future__ import annotations

import numpy as np

from judge.model import completion
from judge.model.errors import Unsupported
from judge.model.registry import op


@op("mbarrier.init")
def init(m, ins):
    """mbarrier.init [addr], count: a fresh barrier in phase 0 expecting `count` arrivals per phase."""
    aop, cop = ins.args[:2]

    def initialize(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        cnt = np.broadcast_to(np.asarray(m.rd(cop, "u32", ins)), (m.n,))
        for t, c, o in zip(lanes, cta, off):
            key = (int(c), int(o))
            live = m.mbars.get(key)
            if live is not None:
                # RULE (PTX ISA, mbarrier.init): initializing a location that holds a valid mbarrier object is
                # undefined; mbarrier.inval it first. Several threads running one init, or a loop that inits its
                # barriers again for every tile, re-initialize a barrier that may still be in use.
                who, pc = live.init_by
                m.fail("mbarrier-reinit", ins,
                       f"{m.tdesc(t)} initializes {m.mbar_name(int(o), live)}"
                       f"{' of block rank ' + str(int(c)) if m.ncta > 1 else ''}, which "
                       f"{'this same instruction' if pc == m.cur_pc and who != t else m.tdesc(who)} already "
                       f"initialized{' (at ' + m.where(m.k.code[pc]) + ')' if pc != m.cur_pc else ''} and is "
                       f"live (phase {live.phase}, {live.count - live.pending} of {live.count} arrivals in): let one "
                       f"thread initialize each mbarrier once, or mbarrier.inval it before initializing it again")
            if m.next_col >= m.VC.shape[1]:
                raise Unsupported(ins.op, "more than 64 mbarriers in one cluster")
            col = m.next_col
            m.next_col += 1
            mb = completion.ModelMbarrier(int(cnt[t]), cta=int(c), off=int(o), col=col, width=m.VC.shape[1])
            mb.init_by = (int(t), m.cur_pc)
            mb.init_ins = ins                 # the line that initialized it names it (Machine.mbar_name)
            m.mbars[key] = mb
            m.mbar_by_col[col] = mb
            m.event("mbarrier.init", mbarrier=f"0x{int(o):x}", count=int(cnt[t]))
        m.counts["mbarrier.init"] += len(lanes)
    return initialize


@op("mbarrier.inval")
def inval(m, ins):
    """mbarrier.inval [addr]: the object is gone; using it again needs a new mbarrier.init."""
    aop = ins.args[0]

    def invalidate(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        for c, o in zip(cta, off):
            m.mbars.pop((int(c), int(o)), None)
    return invalidate


@op("mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.expect_tx", "mbarrier.complete_tx")
def arrive(m, ins):
    """mbarrier.arrive[.expect_tx] / arrive_drop (state = the phase arrived in), expect_tx, complete_tx."""
    p = ins.parts
    kind = p[1]
    if "noComplete" in p:
        raise Unsupported(ins.op)
    expect = "expect_tx" in p
    if kind in ("expect_tx", "complete_tx"):
        aop, txop, dst, cop = ins.args[0], ins.args[1], None, None
    else:
        dst, aop = ins.args[0], ins.args[1]
        rest = ins.args[2:]
        txop = rest[0] if expect and rest else None
        cop = rest[1] if expect and len(rest) > 1 else (rest[0] if not expect and rest else None)

    def arrive_or_count_bytes(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        tx = np.broadcast_to(np.asarray(m.rd(txop, "u32", ins)), (m.n,)) if txop is not None else None
        cn = np.broadcast_to(np.asarray(m.rd(cop, "u32", ins)), (m.n,)) if cop is not None else None
        state = np.zeros(m.n, np.uint64)
        for t, c, o in zip(lanes, cta, off):
            mb = completion.mbarrier_at(m, ins, (int(c), int(o)), t)
            state[t] = mb.state()
            if kind == "complete_tx":
                if mb.complete_tx(int(tx[t])):
                    completion.phase_completed(m, mb, ins)
                continue
            if tx is not None and mb.expect_tx(int(tx[t])):
                completion.phase_completed(m, mb, ins)
            if kind == "expect_tx":
                continue
            if kind == "arrive_drop":
                mb.count -= 1            # one fewer expected arrival in this and every later phase
            completion.arrive(m, mb, t, ins, int(cn[t]) if cn is not None else 1)
        m.counts[f"mbarrier.{kind}{'.expect_tx' if expect and kind == 'arrive' else ''}"] += len(lanes)
        if dst is not None and dst.kind != "sink":
            m.wr(dst, state, mask, full)
    return arrive_or_count_bytes


@op("mbarrier.try_wait", "mbarrier.test_wait")
def wait(m, ins):
    """try_wait / test_wait with .parity p (has the phase of parity p completed?) or a state from arrive."""
    parity = "parity" in ins.parts
    dst, aop, sop = ins.args[:3]

    def wait_for_phase(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        s = np.broadcast_to(np.asarray(m.rd(sop, "u32" if parity else "b64", ins)).astype(np.int64), (m.n,))
        ok = np.zeros(m.n, bool)
        for t, c, o in zip(lanes, cta, off):
            key = (int(c), int(o))
            mb = completion.mbarrier_at(m, ins, key, t)

            def done():
                return mb.test_wait_parity(int(s[t])) if parity else mb.test_wait_state(int(s[t]))
            if not done():
                completion.flush_cp_async_arrivals(m, mb)
            if done():
                ok[t] = True
                m.VC[t] = np.maximum(m.VC[t], mb.done)
                m.last_mbar_wait[int(t)] = (mb, getattr(mb, "completed_by", None), ins)
                # the phase this wait saw complete (the latest of parity s, or the state's phase): every TMA
                # byte of it and of earlier phases has landed (exit-before-tma-load)
                seen = (mb.phase - 1 if (mb.phase - 1) % 2 == int(s[t]) % 2 else mb.phase - 2) if parity \
                    else int(s[t])
                mb.observed = max(getattr(mb, "observed", -1), seen)
            else:
                # the thread sleeps in the wait until the phase completes, then tries again
                m.pc[t] = m.cur_pc
                m.blocked[t] = True
                m.block_why[int(t)] = ("mbar", (key, int(s[t]) & 1 if parity else int(s[t])))
                mb.waiters.append(int(t))
        m.counts["mbarrier.wait"] += int(ok.sum())
        if ok.any():
            m.event("wait", what="mbarrier", threads=int(ok.sum()))
        if ok.any():
            m.wr(dst, ok, mask & ok, False)
    return wait_for_phase
