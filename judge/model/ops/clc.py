"""judge.model.ops.clc - cluster launch control (sm_100): clusterlaunchcontrol.try_cancel and query_cancel,
and the .b128 registers their responses travel in (mov.b128).

Registered with judge.model.registry; tested by tests/model/test_model_clc.py. The model runs the clusters of
a launch one after another in its own order (judge.model.run keeps the ones not started in
m.launch_pending). A try_cancel succeeds while some cluster has not started: it takes one (drawn with the
run's seed) out of the launch - that cluster never runs - and answers with the ctaid of its first block;
otherwise it fails. The 16-byte response lands in shared memory like a TMA load: poison until the
mbarrier phase completes, and its complete-tx of 16 bytes reaches the mbarrier as late as allowed
(judge.model.completion.flush_clc_responses: when a thread waits on that mbarrier, or nothing else can
run). With .multicast::cluster::all every block of the cluster gets the response at the same offset,
on its own mbarrier at the same offset.

The response is the model's own encoding (the hardware's is opaque): word 0 says cancelled or not,
words 1-3 the first ctaid. query_cancel of bytes that are not a response is "clc-response"; a second
try_cancel in a block that saw one fail is "clc-after-failure" (PTX ISA: undefined behaviour).
"""
from __future__ import annotations

import numpy as np

from judge.model import checks, completion
from judge.model.checks import POISON32, TMA_PENDING
from judge.model.errors import Unsupported
from judge.model.registry import op

CANCELLED, FAILED = 0xC1C00001, 0xC1C00000     # word 0 of a response (the model's encoding)
UNDEFINED = 0xFFFFFFFF                          # the ctaid words of a failed response


def _response(m):
    """Cancel a cluster that has not started, if any: the 16 response bytes."""
    if not m.launch_pending:
        return np.array([FAILED, UNDEFINED, UNDEFINED, UNDEFINED], np.uint32).view(np.uint8)
    o = m.launch_pending.pop(int(m.rng.integers(len(m.launch_pending))))
    m.launch_cancelled.append(tuple(int(v) for v in o))
    m.counts["clc.cancelled"] += 1
    return np.array([CANCELLED, *o], np.uint32).view(np.uint8)


@op("clusterlaunchcontrol.try_cancel")
def try_cancel(m, ins):
    """clusterlaunchcontrol.try_cancel.async{.shared::cta}.mbarrier::complete_tx::bytes{.multicast::cluster::all}.b128 [addr], [mbar]."""
    p = ins.parts
    if "mbarrier::complete_tx::bytes" not in p:
        raise Unsupported(ins.op, "a try_cancel completion mechanism other than mbarrier::complete_tx::bytes")
    mcast = "multicast::cluster::all" in p
    dst, bar = ins.args[:2]

    def request(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        da, ba = m.addr(dst, ins), m.addr(bar, ins)
        if "shared::cta" not in p:
            _, da = m.resolve_generic(da, lanes, ins)
            _, ba = m.resolve_generic(ba, lanes, ins)
        for t in lanes:
            one = np.array([t])
            c, doff = m.smem_split(da, one, ins, cluster_ok=False)
            _, boff = m.smem_split(ba, one, ins, cluster_ok=False)
            c, doff, boff = int(c[0]), int(doff[0]), int(boff[0])
            if doff % 16:
                m.fail("alignment", ins, f"the try_cancel response at shared offset {doff} is not 16-byte aligned")
            if m.clc_failed_seen[c]:
                m.fail("clc-after-failure", ins, f"{m.tdesc(t)} asks for another cluster after its block "
                       f"saw a try_cancel fail: no cluster is left to cancel, and asking again is undefined. "
                       f"Leave the loop when query_cancel.is_canceled is false")
            data = _response(m)
            words = doff // 4 + np.arange(4)
            for r in (range(m.ncta) if mcast else [c]):
                mb = completion.mbarrier_at(m, ins, (r, boff), t)
                checks.check_overwrite(m, np.array([r]), words[None, :], one, ins, "try_cancel response")
                m.w_state[r, words] = TMA_PENDING
                m.w_thread[r, words] = mb.col
                m.w_pc[r, words] = m.cur_pc
                m.smw[r, words] = POISON32
                m.tma_loads.append({"mb": mb, "cta": r, "pos": doff + np.arange(16), "data": data.copy(),
                                    "words": words})
                m.clc_pending.append(mb)
            m.event("clc.try_cancel", thread=int(t), cancelled=bool(data.view(np.uint32)[0] == CANCELLED))
        m.counts["clc.try_cancel"] += len(lanes)
    return request


@op("mov.b128")
def mov_b128(m, ins):
    """mov.b128 r, {lo, hi} (two .b64 into a .b128 register) and mov.b128 {lo, hi}, r."""
    d, s = ins.args[:2]
    if d.kind == "reg" and s.kind == "vec" and len(s.items) == 2:
        def pack(ins, mask, full):
            v = m.regs128.setdefault(d.name, np.zeros((m.n, 2), np.uint64))
            for i, it in enumerate(s.items):
                v[mask, i] = np.broadcast_to(np.asarray(m.rd(it, "b64", ins)), (m.n,))[mask]
        return pack
    if d.kind == "vec" and len(d.items) == 2 and s.kind == "reg":
        def unpack(ins, mask, full):
            v = _reg128(m, s, ins)
            for i, it in enumerate(d.items):
                m.wr(it, v[:, i].copy(), mask, full)
        return unpack
    raise Unsupported(ins.op, "mov.b128 forms other than {b64, b64} <-> b128")


def _reg128(m, op, ins):
    v = m.regs128.get(op.name) if op.kind == "reg" else None
    if v is None:
        raise Unsupported(ins.text, f"a .b128 operand {op} the model did not see written (mov.b128)")
    return v


def _decode(m, ins, v, lanes):
    """(cancelled per lane, ctaid words (lanes, 3)) of responses held in .b128 values; not a response: a Violation."""
    w = np.ascontiguousarray(v[lanes]).view(np.uint32).reshape(len(lanes), 4)
    bad = (w[:, 0] != CANCELLED) & (w[:, 0] != FAILED)
    if bad.any():
        t = int(lanes[np.argmax(bad)])
        m.fail("clc-response", ins, f"{m.tdesc(t)} decodes 0x{int(w[np.argmax(bad), 0]):08x}... with query_cancel: "
               f"not a try_cancel response (read it after the try_cancel's mbarrier phase completed, all 16 "
               f"bytes of it)")
    return w[:, 0] == CANCELLED, w[:, 1:]


@op("clusterlaunchcontrol.query_cancel")
def query_cancel(m, ins):
    """query_cancel.is_canceled.pred.b128 p, r; .get_first_ctaid{::x,::y,::z}.b32.b128 d, r; .get_first_ctaid.v4.b32.b128 {x, y, z, _}, r."""
    p = ins.parts
    d, s = ins.args[:2]
    if "is_canceled" in p:
        def is_canceled(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            ok, _ = _decode(m, ins, _reg128(m, s, ins), lanes)
            val = np.zeros(m.n, bool)
            val[lanes] = ok
            m.clc_failed_seen[np.unique(m.cta[lanes[~ok]])] = True    # this block saw a request fail
            m.wr(d, val, mask, full)
        return is_canceled
    which = next((x for x in p if x.startswith("get_first_ctaid")), None)
    if which is None:
        raise Unsupported(ins.op)
    axes = {"get_first_ctaid::x": [0], "get_first_ctaid::y": [1], "get_first_ctaid::z": [2],
            "get_first_ctaid": [0, 1, 2]}[which]
    items = d.items if d.kind == "vec" else [d]

    def first_ctaid(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        _, ids = _decode(m, ins, _reg128(m, s, ins), lanes)
        for it, ax in zip(items, axes):
            val = np.zeros(m.n, np.uint32)
            val[lanes] = ids[:, ax]
            m.wr(it, val, mask, full)
    return first_ctaid
