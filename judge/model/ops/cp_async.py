"""judge.model.ops.cp_async - cp.async (Ampere-style copies), commit_group, wait_group/wait_all, mbarrier.arrive.

Registered with judge.model.registry; tested by tests/model/test_model_ops_async.py.

PTX (Data Movement and Conversion Instructions: cp.async, cp.async.commit_group,
cp.async.wait_group / wait_all, cp.async.mbarrier.arrive): the writes of a cp.async are performed
asynchronously and become visible to the executing thread only through cp.async.wait_group /
wait_all, or an mbarrier through cp.async.mbarrier.arrive; groups complete in commit order per
thread. MODEL: a group's bytes land at the last legal moment, when a wait of the issuing thread
covers it (judge.model.completion.land_cp_async); until then they are poison.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks, completion
from judge.model.checks import CPA_PENDING, POISON32
from judge.model.errors import Unsupported
from judge.model.registry import op


@op("cp.async.commit_group")
def commit_group(m, ins):
    """cp.async.commit_group: the thread's copies issued since the last commit form its next group."""
    def commit(ins, mask, full):
        m.ncommit[mask] += 1
        m.counts["cp.async.commit_group"] += int(np.count_nonzero(mask))
        m.event("commit", threads=int(np.count_nonzero(mask)))
    return commit


@op("cp.async.wait_group", "cp.async.wait_all")
def wait_group(m, ins):
    """cp.async.wait_group N: all but the N most recent groups of the thread have landed (wait_all: all,
    the pending copies committed first)."""
    p = ins.parts
    nop = ins.args[0] if ins.args else None
    allw = "wait_all" in p

    def wait(ins, mask, full):
        if allw:
            m.ncommit[mask] += 1
            n = 0
        else:
            n = int(m.rd(nop, "u32", ins))
        limit = m.ncommit - n
        m.last_wait_n[mask] = n
        m.cover[mask] = limit[mask] - 1
        m.event("wait", what="cp.async.wait_group", n=n, threads=int(np.count_nonzero(mask)))
        completion.land_cp_async(m, mask, limit, ins)
        m.counts["cp.async.wait_group"] += int(np.count_nonzero(mask))
    return wait


@op("cp.async.mbarrier.arrive")
def mbarrier_arrive(m, ins):
    """cp.async.mbarrier.arrive(.noinc): an arrive-on the mbarrier once all the thread's prior cp.async
    complete (without .noinc the pending count is raised by one first). MODEL: as late as possible,
    when a thread waits on that mbarrier (judge.model.completion.flush_cp_async_arrivals)."""
    noinc = "noinc" in ins.parts
    aop = ins.args[0]

    def arrive_when_copies_land(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        for t, c, o in zip(lanes, cta, off):
            mb = completion.mbarrier_at(m, ins, (int(c), int(o)), t)
            if not noinc:
                mb.add_pending(1)
            row = m.VC[t].copy()
            m.cpa_arrivals.append({"thread": int(t), "mb": mb, "seq": int(m.cpa_seq[t]), "snap": row,
                                   "time": m.gtime})
        m.counts["cp.async.mbarrier.arrive"] += len(lanes)
    return arrive_when_copies_land


@op("cp.async")
def cp_async(m, ins):
    """cp.async.ca/.cg.shared.global [dst], [src], 4|8|16 (, src-size | ignore-src predicate): the copy."""
    p = ins.parts
    if "ca" not in p and "cg" not in p:
        raise Unsupported(ins.op)
    if "ca" not in p and "cg" not in p:
        raise Unsupported(ins.op)
    dst, src, size_op = ins.args[:3]
    extra = ins.args[3] if len(ins.args) > 3 else None
    size = int(size_op.value)
    if size not in (4, 8, 16):
        raise Unsupported(ins.op, f"cp-size {size}")

    def copy(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        d = m.addr(dst, ins)
        s = m.addr(src, ins)
        if extra is not None and extra.kind in ("reg", "imm") and not (extra.kind == "reg" and m.is_pred(extra.name)):
            ssz = np.broadcast_to(np.asarray(m.rd(extra, "u32", ins)).astype(np.int64), (m.n,))[lanes]
        elif extra is not None and extra.kind == "reg":
            ign = np.broadcast_to(m.rd(extra, "pred", ins), (m.n,))[lanes]
            ssz = np.where(ign, 0, size)
        else:
            ssz = np.full(len(lanes), size)
        cta, off = m.smem_split(d, lanes, ins, cluster_ok=False)
        checks.check_smem_range(m, off, size, lanes, ins)
        if (off % size).any():
            m.fail("alignment", ins, f"a {size}-byte cp.async into shared offset {int(off[np.argmax(off % size != 0)])}, "
                   f"not {size}-byte aligned")
        data = np.zeros((len(lanes), size), np.uint8)
        for v in np.unique(ssz):
            if v <= 0:
                continue
            sel = np.nonzero(ssz == v)[0]
            data[sel, :min(v, size)] = m.gload(s, int(min(v, size)), lanes[sel], ins)
        words = m.words_of(off, size)
        checks.check_overwrite(m, cta, words, lanes, ins, "cp.async")
        C = cta[:, None]
        m.w_state[C, words] = CPA_PENDING
        m.w_thread[C, words] = lanes[:, None]
        m.w_group[C, words] = m.ncommit[lanes][:, None]
        m.w_pc[C, words] = m.cur_pc
        m.smw[C, words] = POISON32
        m.cpa.append({"lanes": lanes, "cta": cta, "off": off, "words": words, "data": data,
                      "group": m.ncommit[lanes].copy(), "seq": m.cpa_seq[lanes].copy()})
        m.cpa_seq[lanes] += 1
        m.counts["cp.async"] += len(lanes)
        m.counts["smem_fill.cp.async.bytes"] += int(ssz.clip(0, size).sum()) + 0 * len(lanes)
        m.event("cp.async", threads=len(lanes), bytes=size)
    return copy
