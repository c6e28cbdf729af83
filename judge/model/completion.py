"""judge.model.completion - where asynchronous operations complete: cp.async groups land, mbarrier
phases complete (and land their TMA bytes), bulk/TMA stores read shared memory and write global.

    from judge.model import completion
    completion.land_cp_async(m, mask, limit, ins)     # copies of groups < limit land now
    mb = completion.mbarrier_at(m, ins, (cta, offset), t)
    completion.arrive(m, mb, t, ins)                  # may complete the phase and land its TMA bytes
    completion.bulk_complete(m, store, ins)           # the store reads shared memory now

Used by the instruction families (cp.async, mbarrier, TMA/bulk) and the scheduler, so that no family
has to import another. Each completion happens at the latest moment the PTX ISA allows, which is
what makes a missing wait visible on a CPU. The mbarrier phase rules themselves are
judge.hw.mbarrier.Mbarrier; ModelMbarrier adds where the barrier lives and the vector clocks its
arrivals carry (judge.model.checks).
"""
from __future__ import annotations

import numpy as np

from judge.hw.mbarrier import Mbarrier
from judge.model import checks
from judge.model.checks import CPA_LANDED, TMA_LANDED
from judge.model.errors import Unsupported


# ---------------------------------------------------------------------------- cp.async
def land_cp_async(m, mask, limit, ins, upto_seq=None):
    """Land the cp.async copies of threads in mask whose group < limit[thread] (or seq < upto_seq)."""
    keep = []
    for r in m.cpa:
        lanes = r["lanes"]
        if upto_seq is not None:
            sel = mask[lanes] & (r["seq"] < upto_seq[lanes])
        else:
            sel = mask[lanes] & (r["group"] < limit[lanes])
        if sel.any():
            cta, off, data, words = r["cta"][sel], r["off"][sel], r["data"][sel], r["words"][sel]
            m.sm[cta[:, None], off[:, None] + np.arange(data.shape[1])] = data
            C = cta[:, None]
            m.w_state[C, words] = CPA_LANDED
            m.w_thread[C, words] = lanes[sel][:, None]
            m.w_time[C, words] = m.gtime
            m.w_pc[C, words] = m.cur_pc
            m.event("land", what="cp.async", threads=int(sel.sum()))
        if (~sel).any():
            if sel.any():
                r = {k: (v[~sel] if isinstance(v, np.ndarray) else v) for k, v in r.items()}
            keep.append(r)
    m.cpa = keep


# ---------------------------------------------------------------------------- mbarriers
class ModelMbarrier(Mbarrier):
    """An mbarrier of the model: the PTX phase rules plus where it lives, who sleeps on it and the
    vector clocks of this phase's arrivals (acc) and of all completed phases (done)."""

    def __init__(self, count, *, cta, off, col, width):
        super().__init__(count)
        self.cta, self.off, self.col = cta, off, col       # col: its vector-clock column (its TMA bytes)
        self.waiters = []
        self.acc = np.zeros(width, np.int64)
        self.done = np.zeros(width, np.int64)


def mbarrier_address(m, ins, op, lanes):
    """(block, shared offset) per lane of an mbarrier operand (generic addresses are resolved)."""
    a = m.addr(op, ins)
    if not any(s.startswith("shared") for s in ins.parts):
        sp, a = m.resolve_generic(a, lanes, ins)
        if sp != "shared":
            raise Unsupported(ins.op, "an mbarrier outside shared memory")
    cta, off = m.smem_split(a, lanes, ins, cluster_ok=True)
    if (off % 8).any():
        m.fail("alignment", ins, f"an mbarrier at shared offset {int(off[0])}, not 8-byte aligned")
    return cta, off


def mbarrier_at(m, ins, key, t):
    """The initialized mbarrier at key = (block, offset), used by thread t (else rule mbarrier-uninitialized)."""
    mb = m.mbars.get(key)
    if mb is None:
        m.fail("mbarrier-uninitialized", ins,
               f"{m.tdesc(t)} used {m.mbar_name(key[1])} (block rank {key[0]}) as an mbarrier, but no thread "
               f"initialized it with mbarrier.init (or it was invalidated)")
        raise checks.abort(m, "mbarrier-uninitialized", ins, "uninitialized mbarrier")
    return mb


def arrive(m, mb, t, ins, count=1, snapshot=None, when=None):
    """Thread t arrives `count` times on mb, releasing its clock (snapshot: the clock at a deferred arrival)."""
    row = m.VC[t].copy() if snapshot is None else snapshot
    row[t] = m.gtime if when is None else when
    np.maximum(mb.acc, row, out=mb.acc)
    mb.arriving = (ins, int(t))                  # the arrival that may complete the phase (a race names it)
    completed = mb.arrive(count)
    if mb.over_arrived:
        m.fail("mbarrier-arrivals", ins,
               f"{m.tdesc(t)} arrived on {m.mbar_name(mb.off, mb)} in phase {mb.phase} after "
               f"all {mb.count} expected arrivals were already in"
               + (f", while its tx-count still waits for {mb.tx} bytes" if mb.tx else "")
               + ": more arrivals than mbarrier.init's count")
    if completed:
        phase_completed(m, mb, ins)


def load_pc(m, ld) -> int:
    """The instruction that issued a queued TMA/bulk load (m.tma_loads): where its first word was marked."""
    w = ld["words"]
    return int(m.w_pc[ld["cta"], w[0]]) if len(w) else m.cur_pc


def phase_completed(m, mb, ins):
    """mb's phase just completed (judge.hw.mbarrier said so): the TMA bytes of the phase land in a
    scrambled order, its arrivals' clocks become what a successful wait acquires, sleepers wake."""
    done_phase = mb.phase - 1
    mb.completed_by, mb.arriving = getattr(mb, "arriving", None), None
    acc = mb.acc
    acc[mb.col] = m.gtime
    np.maximum(mb.done, acc, out=mb.done)
    mb.acc = np.zeros_like(acc)
    loads = [ld for ld in m.tma_loads if ld["mb"] is mb]
    m.tma_loads = [ld for ld in m.tma_loads if ld["mb"] is not mb]
    for i in m.rng.permutation(len(loads)):
        ld = loads[i]
        if "land" in ld:                         # a red.async: the reduction with the word's value now
            ld["land"]()
        else:
            order = m.rng.permutation(len(ld["pos"]) // 16) if len(ld["pos"]) % 16 == 0 else None
            if order is not None:
                pos = ld["pos"].reshape(-1, 16)[order].ravel()
                data = ld["data"].reshape(-1, 16)[order].ravel()
            else:
                pos, data = ld["pos"], ld["data"]
            m.sm[ld["cta"], pos] = data
        if "after" in ld:                        # a peer bulk copy: its source is no longer being read
            ld["after"]()
        w = ld["words"]
        m.w_state[ld["cta"], w] = TMA_LANDED
        m.w_thread[ld["cta"], w] = mb.col
        m.w_time[ld["cta"], w] = m.gtime
        m.w_group[ld["cta"], w] = done_phase
    if loads:                                    # known complete only to a wait that observes this phase
        mb.tma_phase = done_phase
        mb.tma_pc = load_pc(m, loads[0])
    m.event("phase", mbarrier=f"0x{mb.off:x}", block=mb.cta, completed=done_phase, tma_loads=len(loads))
    for t in mb.waiters:
        m.blocked[t] = False
        m.block_why.pop(int(t), None)
    mb.waiters = []


def flush_clc_responses(m, mb=None) -> bool:
    """The latest legal moment for a try_cancel response (judge.model.ops.clc queues them): its 16 bytes'
    complete-tx reaches the mbarrier (mb, or every one) only when someone needs that phase."""
    todo = [x for x in m.clc_pending if mb is None or x is mb]
    if not todo:
        return False
    m.clc_pending = [x for x in m.clc_pending if not (mb is None or x is mb)]
    for x in todo:
        if x.complete_tx(16):
            phase_completed(m, x, m.k.code[m.cur_pc])
    return True


def flush_cp_async_arrivals(m, mb=None):
    """The latest legal moment: the copies behind a cp.async.mbarrier.arrive land only when someone
    needs the mbarrier's phase (or nothing else can run). A try_cancel response and a tcgen05.commit's
    arrival are due as late."""
    clc = flush_clc_responses(m, mb)
    if flush_tcgen05_commits(m, mb):          # a tcgen05.commit's arrival is due as late, one at a time
        return True
    todo = [a for a in m.cpa_arrivals if mb is None or a["mb"] is mb]
    if not todo:
        return clc
    m.cpa_arrivals = [a for a in m.cpa_arrivals if not (mb is None or a["mb"] is mb)]
    for a in todo:
        t = a["thread"]
        msk = np.zeros(m.n, bool)
        msk[t] = True
        upto = np.zeros(m.n, np.int64)
        upto[t] = a["seq"]
        save = m.gtime
        land_cp_async(m, msk, None, m.k.code[m.cur_pc], upto_seq=upto)
        # landed data is visible to whoever acquires this arrival
        m.w_time[(m.w_state == CPA_LANDED) & (m.w_thread == t) & (m.w_time == save)] = a["time"]
        arrive(m, a["mb"], t, m.k.code[m.cur_pc], 1, snapshot=a["snap"], when=a["time"])
    return True


# ---------------------------------------------------------------------------- bulk / TMA stores
def tensor_region(m, spec, ins):
    """(base, size, bytes) of the argument array that holds a tensor map's tensor."""
    base = spec.address
    for b, size, u8 in m.regions:
        if b <= base < b + size:
            return b, size, u8
    raise Unsupported(ins.text, "the tensor map's address is not inside an array passed to the kernel "
                      "(build the map over one of the NumPy arguments)")


def _reduce(op, old, val, dt):
    """cp.reduce.async.bulk's combination of what is in global memory (old) with the box (val)."""
    if op == "add":
        return (old.astype(np.float64) + val.astype(np.float64)).astype(dt) if dt.kind == "f" else old + val
    if op in ("min", "max"):
        return np.minimum(old, val) if op == "min" else np.maximum(old, val)
    if op in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, val)
    if op == "inc":
        return np.where(old >= val, 0, old + 1).astype(dt)
    return np.where((old == 0) | (old > val), val, old - 1).astype(dt)


def bulk_complete(m, b, ins):
    """The store b reads its shared bytes now (the latest legal point) and writes global memory."""
    if b["done"]:
        return
    c = b["cta"]
    data = m.sm[c, b["pos"]].reshape(-1, b["eb"])
    if b["kind"] == "tensor":
        spec = b["spec"]
        base, size, u8 = tensor_region(m, spec, ins)
        off = b["addr"][b["inb"]] - base
        new = np.ascontiguousarray(data[b["inb"]])
        if b.get("redop"):                      # cp.reduce.async.bulk: combine with what is in memory
            import ml_dtypes
            dt = np.dtype(ml_dtypes.bfloat16) if spec.dtype == "bfloat16" else np.dtype(spec.dtype)
            old = np.ascontiguousarray(u8[off[:, None] + np.arange(b["eb"])]).view(dt)[:, 0]
            val = new.view(dt)[:, 0]
            res = _reduce(b["redop"], old, val, dt)
            new = np.ascontiguousarray(res.astype(dt)).view(np.uint8).reshape(-1, b["eb"])
        u8[off[:, None] + np.arange(b["eb"])] = new
        m.counts["tma.store.bytes"] += int(b["inb"].sum()) * b["eb"]
        m.counts["gstore.bytes"] += int(b["inb"].sum()) * b["eb"]
        marked = m.mem_taint.get("shared")        # bytes that came out of tcgen05.ld (or wgmma)
        if marked is not None:
            m.counts[f"gstore.from.{m.taint_source}.bytes"] += int(
                marked[c, b["pos"]].reshape(-1, b["eb"])[b["inb"]].sum())
    else:
        one = np.array([b["thread"]])
        a = np.zeros(m.n, np.uint64)
        a[b["thread"]] = np.uint64(b["gaddr"])
        marked = m.mem_taint.get("shared")
        saved, m.cur_taint = m.cur_taint, None   # the mark of these bytes is in shared memory, not a register
        if marked is not None and marked[c, b["pos"]].any():
            m.counts[f"gstore.from.{m.taint_source}.bytes"] += int(marked[c, b["pos"]].sum())
        m.gstore(a, data.reshape(1, -1), one, ins)
        m.cur_taint = saved
    m.bulk_reading[c, b["words"]] -= 1
    m.bulk_waited_t[c, b["words"]] = b["thread"]   # only what that thread's wait happens-before may rewrite them
    m.bulk_waited_time[c, b["words"]] = m.gtime
    m.bulk_waited_any = True
    b["read"] = b["done"] = True
    m.bulk[:] = [x for x in m.bulk if x is not b]   # by identity: == on these dicts compares arrays
    m.event("bulk.read", thread=b["thread"])


# ---------------------------------------------------------------------------- tcgen05.commit
def flush_tcgen05_commits(m, mb=None) -> bool:
    """Deliver the earliest tcgen05.commit still pending (on mbarrier mb, or any): its MMAs complete,
    their results land in tensor memory, and it arrives once on its mbarrier. A thread's commits are
    delivered in their order. False when none is pending (judge.model.ops.tcgen05 queues them)."""
    tc = getattr(m, "tc", None)
    if tc is None or not tc.commits:
        return False
    pick = next((x for x in tc.commits if mb is None or x.mb is mb or any(y is mb for y in x.also)), None)
    if pick is None:
        return False
    for x in [x for x in tc.commits if x.thread == pick.thread]:
        _deliver_commit(m, tc, x)
        if x is pick:
            break
    return True


def _deliver_commit(m, tc, cmt):
    tc.commits.remove(cmt)
    targets = [cmt.mb] + list(cmt.also)
    for r in cmt.ops:
        if r.done:
            continue
        cm = tc.cta[r.cta]
        cols = np.arange(r.cols.start, r.cols.stop)
        cm.cells[r.lanes.start:r.lanes.stop, r.cols.start:r.cols.stop] = r.values
        mine = cols[cm.col_op[cols] == r.index]
        cm.col_op[mine] = -1
        # a reader learns of the result through the arrival on an mbarrier of ITS CTA when the commit
        # arrives there (.multicast::cluster), else through the one mbarrier the commit names
        here = next((b for b in targets if b.cta == r.cta), cmt.mb)
        cm.col_done_vc[cols] = here.col
        cm.col_done_t[cols] = m.gtime
        # the reading warp is the issuing thread's (in its own CTA), also where a pair's MMA read the peer's words
        w = int(m.lt[r.thread]) // 32 + int(m.cta[r.thread]) * (m.nthr_cta // 32 or 1)
        for words in r.words:                    # the operands count as read until now
            m.bulk_reading[r.cta, words] -= 1
            m.r_wt[r.cta, words, min(w, m.r_wt.shape[2] - 1)] = cmt.time
            m.r_solo[r.cta, words, min(w, m.r_wt.shape[2] - 1)] = checks.WARP_READ
            m.r_pc[r.cta, words] = r.pc
        r.done = True
    m.event("tcgen05.complete", thread=cmt.thread, block=int(m.cta[cmt.thread]), mbarrier=f"0x{cmt.mb.off:x}",
            mmas=len(cmt.ops))
    # The commit tracks every earlier tcgen05 operation of its thread (PTX ISA 9.7.16.12.1), also those an
    # earlier commit tracked: its arrival implies theirs (a thread's commits are delivered in order).
    snap = cmt.snap.copy()
    seen = tc.delivered.setdefault(cmt.thread, {})
    for col, t in seen.items():
        snap[col] = max(snap[col], t)
    for b in targets:
        seen[b.col] = m.gtime
    for b in targets:                            # one arrival on each mbarrier it signals
        arrive(m, b, cmt.thread, m.k.code[cmt.pc], 1, snapshot=snap.copy(), when=cmt.time)
