"""judge.model.ops.warp - shfl.sync, vote, activemask, elect.sync: lanes of one warp exchanging values.

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py. The model assumes the
lanes named by the member mask are converged (their lockstep is not checked).
"""
from __future__ import annotations

import numpy as np

from judge.model.registry import op


@op("shfl")
def shfl(m, ins):
    """shfl.sync up/down/bfly/idx with the clamp and segment mask of operand c; writes the value and (with a predicate) whether the source lane was in range."""
    mode = next(x for x in ("up", "down", "bfly", "idx") if x in ins.parts)
    dst, a, b, c = ins.args[:4]

    def shuffle(ins, mask, full):
        lane = m.lt % 32
        x = np.broadcast_to(np.asarray(m.rd(a, "b32", ins)), (m.n,))
        bv = np.broadcast_to(np.asarray(m.rd(b, "u32", ins)).astype(np.int64), (m.n,)) & 0x1F
        cv = np.broadcast_to(np.asarray(m.rd(c, "u32", ins)).astype(np.int64), (m.n,))
        seg = (cv >> 8) & 0x1F
        cl = cv & 0x1F
        maxl = (lane & seg) | (cl & ~seg)
        minl = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= maxl
        elif mode == "down":
            j = lane + bv
            ok = j <= maxl
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= maxl
        else:
            j = minl | (bv & ~seg)
            ok = j <= maxl
        j = np.where(ok, j, lane)
        src = (np.arange(m.n) - lane) + j
        r = x[src]
        if dst.kind == "vec":
            m.wr(dst.items[0], r, mask, full)
            m.wr(dst.items[1], ok, mask, full)
        else:
            m.wr(dst, r, mask, full)
        m.counts["shfl"] += int(np.count_nonzero(mask))
    return shuffle


@op("vote")
def vote(m, ins):
    """vote.all / any / uni / ballot over the active lanes of each warp."""
    mode = next(x for x in ("all", "any", "uni", "ballot") if x in ins.parts)
    d, a = ins.args[:2]

    def vote_in_warp(ins, mask, full):
        v = np.broadcast_to(m.rd(a, "pred", ins), (m.n,)) & mask
        warp = np.arange(m.n) // 32
        out = np.zeros(m.n, np.uint32 if mode == "ballot" else bool)
        for w in np.unique(warp[mask]):
            sl = slice(32 * w, 32 * w + 32)
            act = mask[sl]
            vv = v[sl]
            if mode == "ballot":
                out[sl] = int(sum(1 << i for i in range(32) if vv[i]))
            elif mode == "all":
                out[sl] = bool(np.all(vv[act]))
            elif mode == "any":
                out[sl] = bool(np.any(vv[act]))
            else:
                out[sl] = bool(np.all(vv[act]) or not np.any(vv[act]))
        m.wr(d, out, mask, full)
    return vote_in_warp


@op("activemask")
def activemask(m, ins):
    """activemask: the bit mask of the warp's lanes executing it."""
    d = ins.args[0]

    def active_lanes(ins, mask, full):
        out = np.zeros(m.n, np.uint32)
        for w in np.unique(np.nonzero(mask)[0] // 32):
            sl = slice(32 * w, 32 * w + 32)
            out[sl] = int(sum(1 << i for i in range(32) if mask[sl][i]))
        m.wr(d, out, mask, full)
    return active_lanes


@op("elect")
def elect(m, ins):
    """elect.sync: the lowest active lane of each warp is the leader (and every lane learns its number)."""
    d = ins.args[0]

    def elect_one(ins, mask, full):
        lead = np.zeros(m.n, bool)
        leader_lane = np.zeros(m.n, np.uint32)
        for w in np.unique(np.nonzero(mask)[0] // 32):
            sl = np.arange(32 * w, 32 * w + 32)
            first = sl[mask[sl]][0]
            lead[first] = True
            leader_lane[sl] = first % 32
        if d.kind == "vec":
            m.wr(d.items[0], leader_lane, mask, full)
            m.wr(d.items[1], lead, mask, full)
        else:
            m.wr(d, lead, mask, full)
    return elect_one
