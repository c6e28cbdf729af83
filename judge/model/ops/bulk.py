"""judge.model.ops.bulk - TMA (cp.async.bulk.tensor, cp.reduce.async.bulk.tensor), 1-D bulk copies (global to
shared memory, shared memory to global, and a block's shared memory into another block's of the cluster) and
bulk async-groups.

Registered with judge.model.registry; tested by tests/model/test_model_ops_async.py. The tensor map of a
TMA instruction is the kernel parameter it points at; judge.model.run receives the judge.hw.tma
map objects (TensorMap or TensorMapSpec), so the box geometry, out-of-bounds fill and swizzle come
from judge/hw/tma.py's own model. A load's bytes land when its mbarrier phase completes
(judge.model.completion.phase_completed); a store reads shared memory at its covering
cp.async.bulk.wait_group (judge.model.completion.bulk_complete).
"""
from __future__ import annotations

import numpy as np

from judge.hw import tma as _tma
from judge.model import checks, completion, tensormaps
from judge.model.checks import POISON32, TMA_PENDING
from judge.model.errors import Unsupported
from judge.model.ops.common import no_effect
from judge.model.registry import op


def _spec_at(m, ins, a, t):
    """The judge.hw.tma spec of the tensor map at address a[t]: a kernel parameter, or a map object in
    global memory (judge.model.tensormaps: its identity bytes, with the tensormap proxy's fences checked)."""
    spec, _ = tensormaps.at(m, ins, a[t], t)
    if spec.interleave != "none":
        raise Unsupported(ins.text, "interleaved tensor maps")
    return spec


def box_geometry(spec, coords, dst_off):
    """(global byte address per element, in-bounds mask, shared byte position per element byte
    in box order, bytes per element) for the box at coords (inner first) placed at dst_off."""
    r = spec.rank
    eb = spec.elem_bytes
    axes = []
    for i in range(r):
        n = -(-spec.box[i] // spec.elem_strides[i])
        axes.append(int(coords[i]) + np.arange(n, dtype=np.int64) * spec.elem_strides[i])
    grids = np.meshgrid(*reversed(axes), indexing="ij")        # outermost first -> C order = inner fastest
    idx = [g.ravel() for g in reversed(grids)]                   # inner first
    inb = np.ones(idx[0].shape, bool)
    addr = np.full(idx[0].shape, spec.address, np.int64)
    strides = (eb,) + tuple(spec.strides)
    for i in range(r):
        inb &= (idx[i] >= 0) & (idx[i] < spec.dims[i])
        addr += idx[i] * strides[i]
    nel = idx[0].size
    lin = dst_off + np.arange(nel * eb, dtype=np.int64)
    pos = _tma.swizzle_offset(lin, spec.swizzle) if spec.swizzle != "none" else lin
    return addr, inb, pos, eb


def _fill(spec):
    """The bytes of one out-of-bounds element (zero, or NaN with the NaN fill mode)."""
    if spec.oob_fill == "nan":
        return np.full(1, np.nan, {2: np.float16, 4: np.float32, 8: np.float64}[spec.elem_bytes]).view(np.uint8)
    return np.zeros(spec.elem_bytes, np.uint8)


def _coords(m, ins, items, t):
    """Thread t's tensor coordinates (inner first)."""
    return [int(np.broadcast_to(np.asarray(m.rd(c, "s32", ins)), (m.n,))[t]) for c in items]


def _tma_load(m, ins):
    """cp.async.bulk.tensor.Nd.shared::cluster.global (tile mode, optional .multicast::cluster): a box into shared memory, its bytes counted on an mbarrier."""
    p = ins.parts
    if "im2col" in p or any(x.startswith("tile::") for x in p) or "im2col_no_offs" in p:
        raise Unsupported(ins.op, "TMA im2col / gather modes")
    mcast = "multicast::cluster" in p
    pair = "cta_group::2" in p
    if pair and mcast:
        raise Unsupported(ins.op, ".multicast::cluster with .cta_group::2 (whose mbarrier each CTA's bytes "
                                  "signal is not modelled)")
    dst, src, bar = ins.args[:3]
    rest = ins.args[3:]
    mask_op = rest[0] if mcast and rest else None

    def load_box(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        ta = m.addr(src, ins)
        da = m.addr(dst, ins)
        ba = m.addr(bar, ins)
        for t in lanes:
            spec = _spec_at(m, ins, ta, t)
            co = _coords(m, ins, src.items, t)
            if len(co) != spec.rank:
                m.fail("tma-rank", ins, f"a {len(co)}-D TMA with a rank-{spec.rank} tensor map")
            one = np.array([t])
            dcta, doff = m.smem_split(da, one, ins, cluster_ok=True)
            bcta, boff = m.smem_split(ba, one, ins, cluster_ok=True)
            if doff[0] % 16:
                m.fail("alignment", ins, f"TMA destination at shared offset {int(doff[0])} is not 16-byte aligned")
            d0, b0 = int(dcta[0]), int(bcta[0])
            if not mcast and b0 != d0 and not (pair and b0 == d0 ^ 1):
                m.fail("tma-barrier-cta", ins,
                       f"{m.tdesc(t)}'s TMA load at {m.where(ins)} writes the shared memory of block rank {d0} "
                       f"but signals the mbarrier of block rank {b0}: "
                       + ("with .cta_group::2 the mbarrier is in the destination CTA or its peer (the rank that "
                          "differs in bit 0)" if pair else
                          "without .cta_group::2 the mbarrier is in the same CTA as the destination; to signal "
                          "the peer CTA's mbarrier (a CTA pair's leader), add .cta_group::2"))
            addr, inb, pos, eb = box_geometry(spec, co, int(doff[0]))
            b, size, u8 = completion.tensor_region(m, spec, ins)
            data = np.empty((addr.size, eb), np.uint8)
            data[:] = _fill(spec)
            off = addr[inb] - b
            if (off + eb > size).any():
                m.fail("global-bounds", ins, "the tensor map reaches past the end of its array")
            data[inb] = u8[off[:, None] + np.arange(eb)]
            data = data.ravel()
            nbytes = data.size
            if pos.max() + 1 > m.smem_size - 16:
                m.fail("shared-bounds", ins, f"a {nbytes}-byte TMA box at shared offset {int(doff[0])} runs past "
                       f"the block's shared memory")
                raise checks.abort(m, "shared-bounds", ins, "TMA box out of shared memory")
            words = checks.words_in(pos)
            if mcast:
                cm = int(np.broadcast_to(np.asarray(m.rd(mask_op, "u16", ins)), (m.n,))[t])
                ranks = [r for r in range(m.ncta) if (cm >> r) & 1]
            else:
                ranks = [int(dcta[0])]
            for r in ranks:
                key = (r if mcast else int(bcta[0]), int(boff[0]))
                mb = completion.mbarrier_at(m, ins, key, t)
                checks.check_overwrite(m, np.array([r]), words[None, :], one, ins, "TMA load")
                m.w_state[r, words] = TMA_PENDING
                m.w_thread[r, words] = mb.col
                m.w_pc[r, words] = m.cur_pc
                m.smw[r, words] = POISON32
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "data": data, "words": words})
                m.counts["smem_fill.tma.bytes"] += nbytes
                m.event("tma.load", thread=int(t), coords=co, bytes=nbytes, block=r)
                if mb.complete_tx(nbytes):           # the TMA's complete-tx on its mbarrier
                    completion.phase_completed(m, mb, ins)
            m.counts["tma.load"] += 1
    return load_box


REDOPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


def _tma_store(m, ins, reduce=False):
    """cp.async.bulk.tensor.Nd.global.shared::cta (and cp.reduce.async.bulk.tensor): a box of shared memory to global, read at the latest legal point."""
    p = ins.parts
    if "im2col" in p:
        raise Unsupported(ins.op, "TMA im2col")
    redop = next((o for o in REDOPS if o in p), None) if reduce else None
    if reduce and redop is None:
        raise Unsupported(ins.op, "reduction operator")
    dstm, src = ins.args[:2]

    def store_box(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        ta = m.addr(dstm, ins)
        sa = m.addr(src, ins)
        for t in lanes:
            spec = _spec_at(m, ins, ta, t)
            co = _coords(m, ins, dstm.items, t)
            one = np.array([t])
            scta, soff = m.smem_split(sa, one, ins, cluster_ok=False)
            addr, inb, pos, eb = box_geometry(spec, co, int(soff[0]))
            words = checks.words_in(pos)
            c = int(scta[0])
            checks.check_store_source(m, ins, t, c, words, "TMA store")
            m.bulk_reading[c, words] += 1
            m.bulk.append({"thread": int(t), "group": int(m.nbulk[t]), "cta": c, "words": words, "pos": pos,
                           "addr": addr, "inb": inb, "eb": eb, "spec": spec, "read": False, "done": False,
                           "pc": m.cur_pc, "kind": "tensor", "redop": redop})
            m.counts["tma.reduce" if redop else "tma.store"] += 1
            m.event("tma.store", thread=int(t), coords=co)
    return store_box


@op("cp.async.bulk")
def bulk_copy(m, ins):
    """cp.async.bulk (1-D): global -> shared::cluster or this block's shared::cta -> a cluster block's shared memory,
    counted on an mbarrier; or shared::cta -> global in a bulk async-group."""
    p = ins.parts
    to_global = p[3] == "global"
    peer = p[3:5] == ["shared::cluster", "shared::cta"]
    # PTX ISA 8.6 adds .shared::cta as a load's destination (what CCCL's cuda::memcpy_async with a cuda::barrier
    # emits under NVRTC 13): the executing block's own shared memory and mbarrier, never a peer's
    own = p[3:5] == ["shared::cta", "global"]
    if not (to_global or peer or own or p[3:5] == ["shared::cluster", "global"]):
        raise Unsupported(ins.op)
    dst, src, size_op = ins.args[:3]
    bar = ins.args[3] if len(ins.args) > 3 else None

    def copy_bytes(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        da, sa = m.addr(dst, ins), m.addr(src, ins)
        sz = np.broadcast_to(np.asarray(m.rd(size_op, "u32", ins)), (m.n,))
        for t in lanes:
            n = int(sz[t])
            one = np.array([t])
            if n % 16:
                m.fail("alignment", ins, f"cp.async.bulk size {n} is not a multiple of 16")
            if to_global:
                scta, soff = m.smem_split(sa, one, ins, cluster_ok=False)
                pos = int(soff[0]) + np.arange(n)
                words = np.unique(pos // 4)
                c = int(scta[0])
                checks.check_store_source(m, ins, t, c, words, "bulk store")
                m.bulk_reading[c, words] += 1
                m.bulk.append({"thread": int(t), "group": int(m.nbulk[t]), "cta": c, "words": words, "pos": pos,
                               "eb": n, "read": False, "done": False, "pc": m.cur_pc, "kind": "1d",
                               "gaddr": int(da[t])})
                m.counts["bulk.store"] += 1
            else:
                dcta, doff = m.smem_split(da, one, ins, cluster_ok=not own)
                bcta, boff = m.smem_split(m.addr(bar, ins), one, ins, cluster_ok=not own, data=False)
                r = int(dcta[0])
                after = None
                if peer:
                    # RULE (PTX ISA, cp.async.bulk .shared::cluster.shared::cta): this block's bytes into a block
                    # of the cluster, counted on that block's mbarrier, which must lie in the destination's block.
                    # The source is read by the async proxy (fence.proxy.async after generic writes) at some
                    # moment before the bytes land: it may not be overwritten until the phase completes.
                    checks.check_same_block(m, ins, t, r, int(bcta[0]), "bulk copy")
                    scta, soff = m.smem_split(sa, one, ins, cluster_ok=False)
                    c = int(scta[0])
                    spos = int(soff[0]) + np.arange(n)
                    swords = np.unique(spos // 4)
                    checks.check_store_source(m, ins, t, c, swords, "bulk copy to a peer block")
                    data = m.sm[c, spos].copy()
                    m.bulk_reading[c, swords] += 1

                    def after(c=c, swords=swords):
                        m.bulk_reading[c, swords] -= 1
                    m.counts["bulk.peer"] += 1
                else:
                    data = m.gload(sa, n, one, ins)[0]
                pos = int(doff[0]) + np.arange(n)
                words = np.unique(pos // 4)
                mb = completion.mbarrier_at(m, ins, (int(bcta[0]), int(boff[0])), t)
                checks.check_overwrite(m, np.array([r]), words[None, :], one, ins, "bulk load")
                m.w_state[r, words] = TMA_PENDING
                m.w_thread[r, words] = mb.col
                m.smw[r, words] = POISON32
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "data": data, "words": words,
                                    **({"after": after} if after else {})})
                m.counts["bulk.load"] += 1
                m.counts["smem_fill.tma.bytes"] += n
                if mb.complete_tx(n):           # the TMA's complete-tx on its mbarrier
                    completion.phase_completed(m, mb, ins)
    return copy_bytes




@op("cp.async.bulk.tensor")
def tensor_copy(m, ins):
    """cp.async.bulk.tensor: a store when global is its destination (the 6th part), else a load."""
    p = ins.parts
    if "global" in p and p.index("global") == 5:
        return _tma_store(m, ins)
    return _tma_load(m, ins)


@op("cp.reduce.async.bulk.tensor")
def tensor_reduce(m, ins):
    """cp.reduce.async.bulk.tensor: a TMA store that combines with global memory (add, min, max, ...)."""
    return _tma_store(m, ins, reduce=True)


@op("cp.async.bulk.commit_group")
def commit_group(m, ins):
    """cp.async.bulk.commit_group: the thread's bulk stores since the last commit form its next bulk group."""
    def commit(ins, mask, full):
        m.nbulk[mask] += 1
    return commit


@op("cp.async.bulk.wait_group")
def wait_group(m, ins):
    """cp.async.bulk.wait_group(.read) N: all but the N most recent bulk groups of the thread have read
    their shared memory (and written global memory: the model does both at once)."""
    nop = ins.args[0]

    def wait(ins, mask, full):
        n = int(m.rd(nop, "u32", ins))
        for b in list(m.bulk):
            t = b["thread"]
            if mask[t] and b["group"] < m.nbulk[t] - n:
                completion.bulk_complete(m, b, ins)
        m.counts["cp.async.bulk.wait_group"] += int(np.count_nonzero(mask))
    return wait


op("cp.async.bulk.prefetch")(no_effect)          # an L2 prefetch: no effect on results
