"""judge.model.ops.st_async - st.async and red.async: a register's value stored into (or reduced into) the
shared memory of a block of the cluster, its bytes counted on that block's mbarrier.

Registered with judge.model.registry (the longest prefix wins, so st.async and red.async come here, not to
judge.model.ops.memory's st and red); tested by tests/model/test_model_ops_async.py and test_model_rules.py.

    st.async{.weak}{.shared::cluster}.mbarrier::complete_tx::bytes{.v2, .v4}.{b32, b64, u32, u64, s32, s64, f32, f64}
        [a], b, [mbar]
    red.async.relaxed.cluster{.shared::cluster}.mbarrier::complete_tx::bytes.op.type [a], b, [mbar]
        op.type: inc.u32, dec.u32, min/max.u32/.s32, and/or/xor.b32, add.u32/.s32/.u64

RULE (PTX ISA, st.async / red.async): the write is asynchronous. Its bytes perform a complete-tx of their
size on the mbarrier at mbar, and another thread may read them only after it observed the phase that
complete-tx belongs to (try_wait on that mbarrier). The model lands them as late as that allows: at the
phase's completion, like a TMA load's. Before then the words read as poison and the read is the violation
tma-read-before-complete. a and mbar must lie in the shared memory of the same block (rule
async-store-mbarrier). Reductions into the same word commute, so two red.async into one word in flight
together are legal; a plain or st.async store into a word with either in flight is a race.
The global forms (st.async.release.global, red.async ... .global, sm_100) are refused as Unsupported.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks, completion
from judge.model.checks import POISON32, TMA_PENDING
from judge.model.errors import Unsupported
from judge.model.ops.common import rmw, types, vector_count
from judge.model.registry import op
from judge.model.state import DT

_RED_OPS = ("add", "min", "max", "and", "or", "xor", "inc", "dec")


def _reduce(opn: str, ty: str, cur, x):
    """cur (op) x for one element of PTX type ty, as red.async computes it, wrapped to the type's width."""
    bits = 8 * np.dtype(DT[ty]).itemsize
    r = int(rmw(opn, int(cur), int(x)))
    return np.array([r & ((1 << bits) - 1)], np.uint64).astype(DT[ty.replace("s", "u").replace("b", "u")])


def _landing_reduction(m, cta: int, off: int, ty: str, opn: str, x):
    """What lands at the phase's completion: the reduction of the word's value then with x."""
    w = np.dtype(DT[ty]).itemsize

    def land():
        cur = m.sm[cta, off:off + w].copy().view(DT[ty])[0]
        m.sm[cta, off:off + w] = _reduce(opn, ty, cur, x).view(np.uint8)
    return land


@op("st.async", "red.async")
def store_async(m, ins):
    """st.async / red.async into shared::cluster, completing tx bytes on the destination block's mbarrier."""
    p = ins.parts
    is_red = p[0] == "red"
    if "global" in p or "mbarrier::complete_tx::bytes" not in p:
        raise Unsupported(ins.op, "the global forms of st.async / red.async (sm_100)")
    ty = types(p)[-1]
    vn = vector_count(p)
    opn = next((o for o in _RED_OPS if o in p), None) if is_red else None
    if is_red and (opn is None or vn > 1):
        raise Unsupported(ins.op)
    esz = np.dtype(DT[ty]).itemsize
    w = esz * vn
    dst, val, bar = ins.args[:3]
    what = "red.async" if is_red else "st.async"

    def issue(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        da, ba = m.addr(dst, ins), m.addr(bar, ins)
        vals = [np.broadcast_to(np.asarray(m.rd(it, ty, ins)).astype(DT[ty]), (m.n,))
                for it in (val.items if val.kind == "vec" else [val])]
        for t in lanes:
            one = np.array([t])
            dcta, doff = m.smem_split(da, one, ins, cluster_ok=True)
            bcta, boff = m.smem_split(ba, one, ins, cluster_ok=True, data=False)
            checks.check_smem_range(m, doff, w, one, ins)
            r = int(dcta[0])
            checks.check_same_block(m, ins, t, r, int(bcta[0]), what)
            mb = completion.mbarrier_at(m, ins, (r, int(boff[0])), t)
            off = int(doff[0])
            words = m.words_of(doff, w)[0]
            pos = off + np.arange(w)
            if is_red:
                # in flight with another reduction is legal (they commute); with anything else it races
                reducing = (m.w_state[r, words] == TMA_PENDING) & m.w_atomic[r, words]
                if not reducing.all():
                    checks.check_overwrite(m, np.array([r]), words[~reducing][None, :], one, ins, what)
                m.w_atomic[r, words] = True
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "words": words,
                                    "land": _landing_reduction(m, r, off, ty, opn, vals[0][t])})
            else:
                checks.check_overwrite(m, np.array([r]), words[None, :], one, ins, what)
                m.w_atomic[r, words] = False
                m.smw[r, words] = POISON32
                data = np.stack([v[t] for v in vals]).astype(DT[ty]).view(np.uint8)
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "data": data, "words": words})
            m.w_state[r, words] = TMA_PENDING
            m.w_thread[r, words] = mb.col
            m.counts[what] += 1
            m.counts[f"smem_fill.{what}.bytes"] += w
            if mb.complete_tx(w):              # its complete-tx on the destination block's mbarrier
                completion.phase_completed(m, mb, ins)
    return issue
