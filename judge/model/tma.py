"""judge.model.tma - mbarriers, TMA (cp.async.bulk.tensor), 1-D bulk copies and bulk async-groups.

Handlers used by judge.model.ops. The tensor map of a TMA instruction is the kernel parameter it
points at; judge.model.run receives the judge.hw.tma map objects (TensorMap or TensorMapSpec), so
the box geometry, out-of-bounds fill and swizzle come from judge/hw/tma.py's own model.
"""
from __future__ import annotations


import numpy as np

from judge.hw import tma as _tma
from judge.model import machine as M
from judge.model.machine import Unsupported


# ---------------------------------------------------------------------------- mbarriers
def _mbar_addr(m, ins, op, lanes):
    a = m.addr(op, ins)
    if not any(s.startswith("shared") for s in ins.parts):
        sp, a = m.resolve_generic(a, lanes, ins)
        if sp != "shared":
            raise Unsupported(ins.op, "an mbarrier outside shared memory")
    cta, off = m.smem_split(a, lanes, ins, cluster_ok=True)
    if (off % 8).any():
        m.fail("alignment", ins, f"an mbarrier at shared offset {int(off[0])}, not 8-byte aligned")
    return cta, off


def _get(m, ins, key, t):
    mb = m.mbars.get(key)
    if mb is None:
        m.fail("mbarrier-uninitialized", ins,
               f"{m.tdesc(t)} used an mbarrier at shared 0x{key[1]:x} (block rank {key[0]}) that no thread "
               f"initialized with mbarrier.init (or that was invalidated)")
        raise M.Violation("mbarrier-uninitialized", m.where(ins), "uninitialized mbarrier")
    return mb


def _arrive(m, mb, t, ins, count=1, snapshot=None, when=None):
    row = m.VC[t].copy() if snapshot is None else snapshot
    row[t] = m.gtime if when is None else when
    np.maximum(mb["acc"], row, out=mb["acc"])
    mb["pending"] -= count
    if mb["pending"] < 0:
        m.fail("mbarrier-arrivals", ins,
               f"{m.tdesc(t)} arrived on the mbarrier at shared 0x{mb['off']:x} in phase {mb['phase']} after "
               f"all {mb['count']} expected arrivals were already in, while its tx-count still waits for "
               f"{mb['tx']} bytes: more arrivals than mbarrier.init's count")
    _check_complete(m, mb, ins)


def _check_complete(m, mb, ins):
    if mb["pending"] != 0 or mb["tx"] != 0:
        return
    done_phase = mb["phase"]
    mb["phase"] += 1
    mb["pending"] = mb["count"]
    mb["tx_expected"] = mb["tx_done"] = 0
    acc = mb["acc"]
    acc[mb["col"]] = m.gtime
    np.maximum(mb["done"], acc, out=mb["done"])
    mb["acc"] = np.zeros_like(acc)
    # the TMA bytes of this phase land now, in a scrambled order
    loads = [ld for ld in m.tma_loads if ld["mb"] is mb]
    m.tma_loads = [ld for ld in m.tma_loads if ld["mb"] is not mb]
    for i in m.rng.permutation(len(loads)):
        ld = loads[i]
        order = m.rng.permutation(len(ld["pos"]) // 16) if len(ld["pos"]) % 16 == 0 else None
        if order is not None:
            pos = ld["pos"].reshape(-1, 16)[order].ravel()
            data = ld["data"].reshape(-1, 16)[order].ravel()
        else:
            pos, data = ld["pos"], ld["data"]
        m.sm[ld["cta"], pos] = data
        w = ld["words"]
        m.w_state[ld["cta"], w] = M.TMA_LANDED
        m.w_thread[ld["cta"], w] = mb["col"]
        m.w_time[ld["cta"], w] = m.gtime
        m.w_group[ld["cta"], w] = done_phase
    m.event("phase", mbarrier=f"0x{mb['off']:x}", block=mb["cta"], completed=done_phase, tma_loads=len(loads))
    for t in mb["waiters"]:
        m.blocked[t] = False
        m.block_why.pop(int(t), None)
    mb["waiters"] = []


def mbarrier_handler(m, ins):
    p = ins.parts
    kind = p[1]
    if kind == "init":
        aop, cop = ins.args[:2]

        def init(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            cta, off = _mbar_addr(m, ins, aop, lanes)
            cnt = np.broadcast_to(np.asarray(m.rd(cop, "u32", ins)), (m.n,))
            for t, c, o in zip(lanes, cta, off):
                key = (int(c), int(o))
                if m.next_col >= m.VC.shape[1]:
                    raise Unsupported(ins.op, "more than 64 mbarriers in one cluster")
                col = m.next_col
                m.next_col += 1
                mb = {"cta": int(c), "off": int(o), "count": int(cnt[t]), "pending": int(cnt[t]), "phase": 0,
                      "tx": 0, "tx_expected": 0, "tx_done": 0, "col": col, "waiters": [],
                      "acc": np.zeros(m.VC.shape[1], np.int64), "done": np.zeros(m.VC.shape[1], np.int64)}
                m.mbars[key] = mb
                m.mbar_by_col[col] = mb
                m.event("mbarrier.init", mbarrier=f"0x{int(o):x}", count=int(cnt[t]))
            m.counts["mbarrier.init"] += len(lanes)
        return init
    if kind == "inval":
        aop = ins.args[0]

        def inval(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            cta, off = _mbar_addr(m, ins, aop, lanes)
            for c, o in zip(cta, off):
                m.mbars.pop((int(c), int(o)), None)
        return inval
    if kind in ("arrive", "arrive_drop", "expect_tx", "complete_tx"):
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

        def arrive(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            cta, off = _mbar_addr(m, ins, aop, lanes)
            tx = np.broadcast_to(np.asarray(m.rd(txop, "u32", ins)), (m.n,)) if txop is not None else None
            cn = np.broadcast_to(np.asarray(m.rd(cop, "u32", ins)), (m.n,)) if cop is not None else None
            state = np.zeros(m.n, np.uint64)
            for t, c, o in zip(lanes, cta, off):
                mb = _get(m, ins, (int(c), int(o)), t)
                state[t] = mb["phase"]
                if tx is not None and kind != "complete_tx":
                    mb["tx"] += int(tx[t])
                    mb["tx_expected"] += int(tx[t])
                if kind == "complete_tx":
                    mb["tx"] -= int(tx[t])
                    mb["tx_done"] += int(tx[t])
                    _check_complete(m, mb, ins)
                    continue
                if kind == "expect_tx":
                    continue
                if kind == "arrive_drop":
                    mb["count"] -= 1
                _arrive(m, mb, t, ins, int(cn[t]) if cn is not None else 1)
            m.counts[f"mbarrier.{kind}{'.expect_tx' if expect and kind == 'arrive' else ''}"] += len(lanes)
            if dst is not None and dst.kind != "sink":
                m.wr(dst, state, mask, full)
        return arrive
    if kind in ("try_wait", "test_wait"):
        parity = "parity" in p
        dst, aop, sop = ins.args[:3]

        def wait(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            cta, off = _mbar_addr(m, ins, aop, lanes)
            s = np.broadcast_to(np.asarray(m.rd(sop, "u32" if parity else "b64", ins)).astype(np.int64), (m.n,))
            ok = np.zeros(m.n, bool)
            for t, c, o in zip(lanes, cta, off):
                key = (int(c), int(o))
                mb = _get(m, ins, key, t)

                def done():
                    return (mb["phase"] & 1) != (int(s[t]) & 1) if parity else mb["phase"] > int(s[t])
                if not done():
                    flush_cpa_arrivals(m, mb)
                if done():
                    ok[t] = True
                    m.VC[t] = np.maximum(m.VC[t], mb["done"])
                else:
                    # the thread sleeps in the wait until the phase completes, then tries again
                    m.pc[t] = m.cur_pc
                    m.blocked[t] = True
                    m.block_why[int(t)] = ("mbar", (key, int(s[t]) & 1 if parity else int(s[t])))
                    mb["waiters"].append(int(t))
            m.counts["mbarrier.wait"] += int(ok.sum())
            if ok.any():
                m.event("wait", what="mbarrier", threads=int(ok.sum()))
            if ok.any():
                m.wr(dst, ok, mask & ok, False)
        return wait
    raise Unsupported(ins.op)


# ---------------------------------------------------------------------------- cp.async -> mbarrier
def cpasync_mbar_arrive(m, ins):
    noinc = "noinc" in ins.parts
    aop = ins.args[0]

    def run(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        cta, off = _mbar_addr(m, ins, aop, lanes)
        for t, c, o in zip(lanes, cta, off):
            mb = _get(m, ins, (int(c), int(o)), t)
            if not noinc:
                mb["pending"] += 1
            row = m.VC[t].copy()
            m.cpa_arrivals.append({"thread": int(t), "mb": mb, "seq": int(m.cpa_seq[t]), "snap": row,
                                   "time": m.gtime})
        m.counts["cp.async.mbarrier.arrive"] += len(lanes)
    return run


def flush_cpa_arrivals(m, mb=None):
    """The latest legal moment: the copies behind a cp.async.mbarrier.arrive land only when someone
    needs the mbarrier's phase (or nothing else can run)."""
    from judge.model import tcgen05              # a tcgen05.commit's arrival comes as late, one at a time
    if tcgen05.flush_commits(m, mb):
        return True
    todo = [a for a in m.cpa_arrivals if mb is None or a["mb"] is mb]
    if not todo:
        return False
    m.cpa_arrivals = [a for a in m.cpa_arrivals if not (mb is None or a["mb"] is mb)]
    for a in todo:
        t = a["thread"]
        msk = np.zeros(m.n, bool)
        msk[t] = True
        upto = np.zeros(m.n, np.int64)
        upto[t] = a["seq"]
        save = m.gtime
        m.cpa_land(msk, None, m.k.code[m.cur_pc], upto_seq=upto)
        # landed data is visible to whoever acquires this arrival
        m.w_time[(m.w_state == M.CPA_LANDED) & (m.w_thread == t) & (m.w_time == save)] = a["time"]
        _arrive(m, a["mb"], t, m.k.code[m.cur_pc], 1, snapshot=a["snap"], when=a["time"])
    return True


# ---------------------------------------------------------------------------- TMA geometry
def _spec_at(m, ins, a, t):
    spec = m.tmaps.get(int(a[t]))
    if spec is None:
        raise Unsupported(ins.text, "the tensor map is not a kernel parameter given as a judge.hw.tma object "
                          "(pass judge.hw.tma.TensorMap / TensorMapSpec objects to judge.model.run)")
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


def _region(m, spec, ins):
    base = spec.address
    for b, size, u8 in m.regions:
        if b <= base < b + size:
            return b, size, u8
    raise Unsupported(ins.text, "the tensor map's address is not inside an array passed to the kernel "
                      "(build the map over one of the NumPy arguments)")


def _fill(spec):
    if spec.oob_fill == "nan":
        return np.full(1, np.nan, {2: np.float16, 4: np.float32, 8: np.float64}[spec.elem_bytes]).view(np.uint8)
    return np.zeros(spec.elem_bytes, np.uint8)


def _coords(m, ins, items, t):
    return [int(np.broadcast_to(np.asarray(m.rd(c, "s32", ins)), (m.n,))[t]) for c in items]


def _tma_load(m, ins):
    p = ins.parts
    if "im2col" in p or any(x.startswith("tile::") for x in p) or "im2col_no_offs" in p:
        raise Unsupported(ins.op, "TMA im2col / gather modes")
    mcast = "multicast::cluster" in p
    dst, src, bar = ins.args[:3]
    rest = ins.args[3:]
    mask_op = rest[0] if mcast and rest else None

    def run(ins, mask, full):
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
            addr, inb, pos, eb = box_geometry(spec, co, int(doff[0]))
            b, size, u8 = _region(m, spec, ins)
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
                raise M.Violation("shared-bounds", m.where(ins), "TMA box out of shared memory")
            words = np.unique(pos // 4)
            if mcast:
                cm = int(np.broadcast_to(np.asarray(m.rd(mask_op, "u16", ins)), (m.n,))[t])
                ranks = [r for r in range(m.ncta) if (cm >> r) & 1]
            else:
                ranks = [int(dcta[0])]
            for r in ranks:
                key = (r if mcast else int(bcta[0]), int(boff[0]))
                mb = _get(m, ins, key, t)
                m.check_overwrite(np.array([r]), words[None, :], one, ins, "TMA load")
                m.w_state[r, words] = M.TMA_PENDING
                m.w_thread[r, words] = mb["col"]
                m.w_pc[r, words] = m.cur_pc
                m.smw[r, words] = M.POISON32
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "data": data, "words": words})
                mb["tx"] -= nbytes
                mb["tx_done"] += nbytes
                m.counts["smem_fill.tma.bytes"] += nbytes
                m.event("tma.load", thread=int(t), coords=co, bytes=nbytes, block=r)
                _check_complete(m, mb, ins)
            m.counts["tma.load"] += 1
    return run


def _check_store_source(m, ins, t, cta, words, what):
    st = m.w_state[cta, words]
    bad = (st == M.CPA_PENDING) | (st == M.TMA_PENDING)
    if bad.any():
        w = int(words[np.argmax(bad)])
        m.fail("async-overwrite-race", ins, f"{m.tdesc(t)}'s {what} reads shared [0x{4 * w:x}] while an "
               f"asynchronous copy into it is still in flight")
    gen = st == M.GENERIC
    if gen.any():
        w = int(words[np.argmax(gen)])
        m.fail("proxy-fence", ins,
               f"{m.tdesc(t)}'s {what} at {m.where(ins)} reads shared [0x{4 * w:x}], which "
               f"{m.tdesc(m.w_thread[cta, w])} wrote with an ordinary store and has not fenced since: "
               f"generic-proxy writes are invisible to the async proxy (TMA) until the writing thread "
               f"executes fence.proxy.async.shared::cta and a barrier orders that fence before the store. "
               f"The store may read the old bytes")
        return
    for s, rule in ((M.FENCED, "proxy-fence-barrier"), (M.CPA_LANDED, "cp.async-visibility"),
                    (M.TMA_LANDED, "tma-visibility")):
        hit = st == s
        if not hit.any():
            continue
        wt = m.w_thread[cta, words[hit]]
        ok = m.know(np.full(len(wt), t), wt, m.w_time[cta, words[hit]])
        if not ok.all():
            w = int(words[hit][np.argmin(ok)])
            if s == M.FENCED:
                msg = (f"{m.tdesc(t)}'s {what} at {m.where(ins)} reads shared [0x{4 * w:x}], which "
                       f"{m.tdesc(m.w_thread[cta, w])} wrote and fenced, but no barrier orders that fence "
                       f"before the store: add __syncthreads() between the fences and the store")
            else:
                msg = (f"{m.tdesc(t)}'s {what} reads shared [0x{4 * w:x}] written asynchronously without "
                       f"having synchronized with its completion")
            m.fail(rule, ins, msg)


REDOPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


def _tma_store(m, ins, reduce=False):
    p = ins.parts
    if "im2col" in p:
        raise Unsupported(ins.op, "TMA im2col")
    redop = next((o for o in REDOPS if o in p), None) if reduce else None
    if reduce and redop is None:
        raise Unsupported(ins.op, "reduction operator")
    dstm, src = ins.args[:2]

    def run(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        ta = m.addr(dstm, ins)
        sa = m.addr(src, ins)
        for t in lanes:
            spec = _spec_at(m, ins, ta, t)
            co = _coords(m, ins, dstm.items, t)
            one = np.array([t])
            scta, soff = m.smem_split(sa, one, ins, cluster_ok=False)
            addr, inb, pos, eb = box_geometry(spec, co, int(soff[0]))
            words = np.unique(pos // 4)
            c = int(scta[0])
            _check_store_source(m, ins, t, c, words, "TMA store")
            m.bulk_reading[c, words] += 1
            m.bulk.append({"thread": int(t), "group": int(m.nbulk[t]), "cta": c, "words": words, "pos": pos,
                           "addr": addr, "inb": inb, "eb": eb, "spec": spec, "read": False, "done": False,
                           "pc": m.cur_pc, "kind": "tensor", "redop": redop})
            m.counts["tma.reduce" if redop else "tma.store"] += 1
            m.event("tma.store", thread=int(t), coords=co)
    return run


def bulk_complete(m, b, ins):
    """The store reads its shared bytes now (the latest legal point) and writes global memory."""
    if b["done"]:
        return
    c = b["cta"]
    data = m.sm[c, b["pos"]].reshape(-1, b["eb"])
    if b["kind"] == "tensor":
        spec = b["spec"]
        base, size, u8 = _region(m, spec, ins)
        off = b["addr"][b["inb"]] - base
        new = np.ascontiguousarray(data[b["inb"]])
        if b.get("redop"):                      # cp.reduce.async.bulk: combine with what is in memory
            import ml_dtypes
            dt = np.dtype(ml_dtypes.bfloat16) if spec.dtype == "bfloat16" else np.dtype(spec.dtype)
            old = np.ascontiguousarray(u8[off[:, None] + np.arange(b["eb"])]).view(dt)[:, 0]
            val = new.view(dt)[:, 0]
            op = b["redop"]
            if op == "add":
                res = (old.astype(np.float64) + val.astype(np.float64)).astype(dt) if dt.kind == "f" else old + val
            elif op in ("min", "max"):
                res = np.minimum(old, val) if op == "min" else np.maximum(old, val)
            elif op in ("and", "or", "xor"):
                res = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, val)
            elif op == "inc":
                res = np.where(old >= val, 0, old + 1).astype(dt)
            else:
                res = np.where((old == 0) | (old > val), val, old - 1).astype(dt)
            new = np.ascontiguousarray(res.astype(dt)).view(np.uint8).reshape(-1, b["eb"])
        u8[off[:, None] + np.arange(b["eb"])] = new
        m.counts["tma.store.bytes"] += int(b["inb"].sum()) * b["eb"]
    else:
        one = np.array([b["thread"]])
        a = np.zeros(m.n, np.uint64)
        a[b["thread"]] = np.uint64(b["gaddr"])
        m.gstore(a, data.reshape(1, -1), one, ins)
    m.bulk_reading[c, b["words"]] -= 1
    b["read"] = b["done"] = True
    m.bulk.remove(b)
    m.event("bulk.read", thread=b["thread"])


def _bulk_1d(m, ins):
    p = ins.parts
    to_global = p[3] == "global"
    if not to_global and not ("shared::cluster" in p and "global" in p):
        raise Unsupported(ins.op, "bulk copies shared::cta -> shared::cluster")
    dst, src, size_op = ins.args[:3]
    bar = ins.args[3] if len(ins.args) > 3 else None

    def run(ins, mask, full):
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
                _check_store_source(m, ins, t, c, words, "bulk store")
                m.bulk_reading[c, words] += 1
                m.bulk.append({"thread": int(t), "group": int(m.nbulk[t]), "cta": c, "words": words, "pos": pos,
                               "eb": n, "read": False, "done": False, "pc": m.cur_pc, "kind": "1d",
                               "gaddr": int(da[t])})
                m.counts["bulk.store"] += 1
            else:
                dcta, doff = m.smem_split(da, one, ins, cluster_ok=True)
                bcta, boff = m.smem_split(m.addr(bar, ins), one, ins, cluster_ok=True)
                data = m.gload(sa, n, one, ins)[0]
                pos = int(doff[0]) + np.arange(n)
                words = np.unique(pos // 4)
                r = int(dcta[0])
                mb = _get(m, ins, (int(bcta[0]), int(boff[0])), t)
                m.check_overwrite(np.array([r]), words[None, :], one, ins, "bulk load")
                m.w_state[r, words] = M.TMA_PENDING
                m.w_thread[r, words] = mb["col"]
                m.smw[r, words] = M.POISON32
                m.tma_loads.append({"mb": mb, "cta": r, "pos": pos, "data": data, "words": words})
                mb["tx"] -= n
                mb["tx_done"] += n
                m.counts["bulk.load"] += 1
                m.counts["smem_fill.tma.bytes"] += n
                _check_complete(m, mb, ins)
    return run


def bulk_handler(m, ins):
    p = ins.parts
    if "prefetch" in p:
        from judge.model.ops import _nop
        return _nop(m, ins)
    if "commit_group" in p:
        def commit(ins, mask, full):
            m.nbulk[mask] += 1
        return commit
    if "wait_group" in p:
        nop = ins.args[0]

        def wait(ins, mask, full):
            n = int(m.rd(nop, "u32", ins))
            for b in list(m.bulk):
                t = b["thread"]
                if mask[t] and b["group"] < m.nbulk[t] - n:
                    bulk_complete(m, b, ins)
            m.counts["cp.async.bulk.wait_group"] += int(np.count_nonzero(mask))
        return wait
    if "tensor" in p:
        if "global" in p and p.index("global") == 5:
            return _tma_store(m, ins)
        return _tma_load(m, ins)
    return _bulk_1d(m, ins)

