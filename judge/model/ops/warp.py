"""judge.model.ops.warp - shfl.sync, vote, activemask, elect.sync, redux.sync, match.sync: lanes of one warp
exchanging values.

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py. The model assumes the
lanes named by the member mask are converged (their lockstep is not checked).
"""
from __future__ import annotations

import numpy as np

from judge.model.errors import Unsupported
from judge.model.ops.common import types
from judge.model.registry import op
from judge.model.state import DT


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


def _members(m, ins, op_, mask):
    """Per warp with active lanes: (the lane indices of the warp, the lanes of it both active and in membermask)."""
    mm = np.broadcast_to(np.asarray(m.rd(op_, "u32", ins)).astype(np.int64), (m.n,))
    for w in np.unique(np.nonzero(mask)[0] // 32):
        sl = np.arange(32 * w, 32 * w + 32)
        bits = int(mm[sl[mask[sl]][0]])
        yield sl, sl[mask[sl] & ((bits >> (sl % 32)) & 1).astype(bool)]


@op("redux")
def redux(m, ins):
    """redux.sync.{add, min, max}.{u32, s32} / .{and, or, xor}.b32 d, a, membermask: one value reduced over the
    member lanes, given to each of them (add wraps to 32 bits). The float forms (sm_100a) are refused."""
    ty = types(ins.parts)[-1] if types(ins.parts) else None
    opn = next((o for o in ("add", "min", "max", "and", "or", "xor") if o in ins.parts), None)
    if ty not in ("u32", "s32", "b32") or opn is None:
        raise Unsupported(ins.op)
    d, a, mm = ins.args[:3]
    fold = {"add": np.sum, "min": np.min, "max": np.max, "and": np.bitwise_and.reduce,
            "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}[opn]

    def reduce_in_warp(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)).astype(DT[ty]), (m.n,)).astype(np.int64)
        out = np.zeros(m.n, DT[ty])
        for _, lanes in _members(m, ins, mm, mask):
            if len(lanes):
                out[lanes] = np.array([int(fold(x[lanes])) & 0xFFFFFFFF], np.uint32).view(DT[ty])[0]
        m.wr(d, out, mask, full)
    return reduce_in_warp


@op("match")
def match(m, ins):
    """match.any.sync.{b32, b64} d, a, membermask: the mask of member lanes whose a equals this lane's;
    match.all.sync.{b32, b64} d{|p}, a, membermask: membermask if every member's a is equal (p true), else 0."""
    ty = types(ins.parts)[-1]
    mode = "any" if "any" in ins.parts else "all"
    d, a, mm = ins.args[:3]

    def match_in_warp(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)).astype(DT[ty]), (m.n,))
        out = np.zeros(m.n, np.uint32)
        same = np.zeros(m.n, bool)
        for sl, lanes in _members(m, ins, mm, mask):
            if mode == "any":
                for t in lanes:
                    out[t] = sum(1 << int(u % 32) for u in lanes if x[u] == x[t])
            else:
                eq = bool(len(lanes)) and bool((x[lanes] == x[lanes[0]]).all())
                bits = sum(1 << int(u % 32) for u in lanes)
                out[lanes] = bits if eq else 0
                same[lanes] = eq
        if d.kind == "vec":                    # d|p
            m.wr(d.items[0], out, mask, full)
            m.wr(d.items[1], same, mask, full)
        else:
            m.wr(d, out, mask, full)
    return match_in_warp
