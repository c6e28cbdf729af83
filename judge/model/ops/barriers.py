"""judge.model.ops.barriers - bar/barrier (block), bar.warp.sync, barrier.cluster, fence.

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py. A barrier joins
the vector clocks of the threads that arrive and hands the join to those that wait (PTX memory
model: what happened before the arrival happens before what follows the wait); the release itself
is the scheduler's (judge.model.scheduler.release_barrier).
"""
from __future__ import annotations

import numpy as np

from judge.model import scheduler
from judge.model.checks import FENCED, GENERIC
from judge.model.errors import Unsupported
from judge.model.ops.common import no_effect
from judge.model.registry import op


#: bar.red / barrier.red: the reduction over the predicates of every thread the barrier counted
_REDUCE = {"popc": lambda ps: np.uint32(np.count_nonzero(ps)), "and": lambda ps: bool(ps.all()),
           "or": lambda ps: bool(ps.any())}


def _reduction(ins):
    """(kind, destination, predicate) of bar.red.popc.u32 d, a{, b}, {!}c / bar.red.{and,or}.pred p, a{, b}, {!}c;
    None for the other barriers."""
    p = ins.parts
    if "red" not in p:
        return None
    kind = next((k for k in _REDUCE if k in p), None)
    if kind is None or "arrive" in p or len(ins.args) not in (3, 4):
        raise Unsupported(ins.op, "this form of barrier reduction")
    return kind, ins.args[0], ins.args[-1]


@op("bar", "barrier")
def block_barrier(m, ins):
    """bar.sync / bar / barrier.sync(.aligned) / bar.arrive / barrier.arrive: a block barrier with an id and an
    optional thread count. bar.red (what __syncthreads_count / _and / _or compile to) is a bar.sync that also
    reduces one predicate per thread: every waiter gets the popc, and or or of all the threads the barrier
    counted, once the last of them arrived (PTX ISA, bar.red)."""
    p = ins.parts
    red = _reduction(ins)
    arrive = "arrive" in p
    if not red and not arrive and "sync" not in p and not (p[0] == "bar" and len(p) == 1):
        raise Unsupported(ins.op)
    args = ins.args[1:-1] if red else ins.args
    id_op = args[0] if args else None
    cnt_op = args[1] if len(args) > 1 else None

    def barrier_sync(ins, mask, full):
        ids = np.broadcast_to(np.asarray(m.rd(id_op, "u32", ins)) if id_op else np.uint32(0), (m.n,))
        cnts = np.broadcast_to(np.asarray(m.rd(cnt_op, "u32", ins)), (m.n,)) if cnt_op else None
        lanes = np.nonzero(mask)[0]
        m.counts["bar.sync" if not arrive else "bar.arrive"] += len(lanes)
        keys = {}
        for t in lanes:
            keys.setdefault((int(m.cta[t]), int(ids[t])), []).append(t)
        for key, ts in keys.items():
            ts = np.array(ts)
            b = m.bars.get(key)
            if b is None:
                b = m.bars[key] = {"mask": np.zeros(m.n, bool), "waiters": np.zeros(m.n, bool),
                                   "expected": None, "pc": m.cur_pc}
            if cnts is not None:
                b["expected"] = int(cnts[ts[0]])
            if red:
                _arrive_reducing(m, b, ins, red, ts)
            elif b.get("reduce"):
                raise Unsupported(ins.op, "a plain bar.sync on a barrier that other threads reduce on (bar.red)")
            b["mask"][ts] = True
            m.VC[ts, ts] = m.gtime
            if not arrive:
                b["waiters"][ts] = True
                m.blocked[ts] = True
                for t in ts:
                    m.block_why[int(t)] = ("bar", key)
            scheduler.release_barrier(m, key, ins)
    return barrier_sync


def _arrive_reducing(m, b, ins, red, ts):
    """Threads ts arrive at barrier b with bar.red: keep each one's predicate, and have the release (the
    scheduler runs b["on_release"] when the last thread arrived) write the reduction into their destination."""
    kind, dst, pred = red
    if b.get("reduce", kind) != kind or (b["mask"].any() and "reduce" not in b):
        raise Unsupported(ins.op, "threads meeting at one barrier with different reductions (or bar.sync)")
    b["reduce"] = kind
    preds = b.setdefault("preds", np.zeros(m.n, bool))
    preds[ts] = np.broadcast_to(np.asarray(m.rd(pred, "pred", ins)), (m.n,))[ts]
    lanes = np.zeros(m.n, bool)
    lanes[ts] = True

    def write_result(b):
        v = _REDUCE[kind](b["preds"][b["mask"]])
        m.wr(dst, np.full(m.n, v, np.bool_ if kind != "popc" else np.uint32), lanes, False, internal=True)
    b.setdefault("on_release", []).append(write_result)


@op("bar.warp", "barrier.warp")
def warp_barrier(m, ins):
    """bar.warp.sync membermask: the warp's lanes in the mask meet."""
    mop = ins.args[0]

    def warp_sync(ins, mask, full):
        mm = np.broadcast_to(np.asarray(m.rd(mop, "b32", ins)).astype(np.uint64), (m.n,))
        lanes = np.nonzero(mask)[0]
        for t in lanes:
            key = ("warp", int(m.cta[t]), int(m.lt[t]) // 32)
            b = m.bars.get(key)
            if b is None:
                b = m.bars[key] = {"mask": np.zeros(m.n, bool), "waiters": np.zeros(m.n, bool),
                                   "expected": bin(int(mm[t]) & 0xFFFFFFFF).count("1"), "pc": m.cur_pc}
            b["mask"][t] = True
            b["waiters"][t] = True
            m.blocked[t] = True
            m.block_why[int(t)] = ("bar", key)
            m.VC[t, t] = m.gtime
        for key in {("warp", int(m.cta[t]), int(m.lt[t]) // 32) for t in lanes}:
            scheduler.release_barrier(m, key, ins)
    return warp_sync


@op("barrier.cluster")
def cluster_barrier(m, ins):
    """barrier.cluster.arrive / wait: every thread of the cluster arrives before any wait returns.

    PTX ISA, barrier.cluster: the default arrive has .release semantics and the default wait .acquire;
    arrive.relaxed counts towards the barrier but orders no memory access of the arriving thread, so a
    waiter learns nothing of what it did."""
    arrive = "arrive" in ins.parts
    relaxed = "relaxed" in ins.parts

    def cluster_arrive_or_wait(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        if arrive:
            ks = m.cl_count[lanes]
            for k in np.unique(ks):                     # the lanes arriving for phase k, together
                sel = lanes[ks == k]
                acc = m.cl_acc.setdefault(int(k), np.zeros(m.VC.shape[1], np.int64))
                if not relaxed:
                    rows = m.VC[sel]                    # a copy: each lane's clock, its own entry = now
                    rows[np.arange(len(sel)), sel] = m.gtime
                    np.maximum(acc, rows.max(axis=0), out=acc)
            m.cl_count[lanes] += 1
            m.counts["barrier.cluster.arrive" + (".relaxed" if relaxed else "")] += len(lanes)
        else:
            m.blocked[lanes] = True
            for t in lanes:
                m.block_why[int(t)] = ("cluster", int(m.cl_count[t]) - 1)
            m.counts["barrier.cluster.wait"] += len(lanes)
        scheduler.release_cluster_barrier(m, ins)
    return cluster_arrive_or_wait


@op("fence")
def fence(m, ins):
    """fence.proxy.async marks the thread's generic shared writes as fenced for the async proxy; other fences have no effect the model needs."""
    if "proxy" in ins.parts and "async" in ins.parts:
        def proxy_fence(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            sel_thr = np.zeros(m.n + 1, bool)
            sel_thr[lanes] = True
            wt = m.w_thread
            hit = (m.w_state == GENERIC) & sel_thr[np.where(wt < 0, m.n, np.minimum(wt, m.n))]
            m.w_state[hit] = FENCED
            m.w_time[hit] = m.gtime
            m.counts["fence.proxy.async"] += len(lanes)
        return proxy_fence
    return no_effect(m, ins)
