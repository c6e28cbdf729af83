"""judge.model.checks - the race and ordering rules of the CPU model, each tied to its PTX ISA section.

    from judge.model import checks
    checks.RULES["cp.async-wait"]          # Rule(section=..., rule=...): what the PTX ISA states
    checks.fail(m, "cp.async-wait", ins, "what happened and what to fix")   # -> Violation

Used by the instruction families (judge/model/ops/) and the scheduler; read judge/model/__init__.py
for the rules in prose. Every Violation the model raises names a rule of RULES; its message ends
with the PTX ISA section that states the rule.

Happens-before is tracked with vector clocks: m.VC[b, a] >= t means thread b has synchronized with
what thread a did up to time t (through bar.sync / barrier.sync, a cluster barrier, or an mbarrier
arrive -> wait). Extra columns stand for the asynchronous agents: one per mbarrier (the TMA bytes it
completes). Each word of shared memory has a state (below), its last writer and the time of that
write, and the last time each warp read it: the checks compare these with the reader's clock.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from judge.model.errors import Violation

POISON32 = 0x7FC0DEAD                    # a quiet NaN: what a read of unlanded bytes returns

# the state of a shared-memory word, as the checks see it
PLAIN, CPA_PENDING, CPA_LANDED, TMA_LANDED, GENERIC, TMA_PENDING, FENCED = range(7)
# PLAIN        known to every thread of the block (a full barrier passed since it was written)
# CPA_PENDING  a cp.async into it has not landed (no covering wait yet): reads are poison
# CPA_LANDED   landed at its issuer's wait; other threads need a barrier after that wait
# TMA_PENDING  a TMA/bulk load into it waits for its mbarrier phase
# TMA_LANDED   the phase completed; readers must have observed it
# GENERIC      written by an ordinary store, not yet fenced for the async proxy
# FENCED       written and fenced with fence.proxy.async by its writer


class Rule(NamedTuple):
    """One rule the model enforces: its PTX ISA section and the rule in one line."""
    section: str      # the PTX ISA section that states the rule
    rule: str         # the rule in one line


_MCM = "Memory Consistency Model"
RULES: dict[str, Rule] = {
    "alignment": Rule("Data Movement and Conversion Instructions: cp.async, cp.async.bulk, "
                      "cp.async.bulk.tensor, ld/st; mbarrier (Size and alignment of mbarrier object); "
                      "wmma.load / wmma.store",
                      "an address must be aligned to its access: cp.async to its cp-size, bulk copies and TMA "
                      "boxes to 16 bytes, an mbarrier object to 8 bytes, a vector ld/st to its size, a wmma "
                      "matrix to 32 bytes with a stride of whole 16 bytes"),
    "async-overwrite-race": Rule(f"{_MCM}: Ordering of memory operations (causality order); cp.async, "
                                 "cp.async.bulk.tensor",
                                 "an asynchronous write into shared memory must be ordered after every "
                                 "earlier read of those bytes by other threads, and after earlier copies "
                                 "into them completed"),
    "async-store-mbarrier": Rule("Data Movement and Conversion Instructions: st.async, cp.async.bulk; Parallel "
                                 "Synchronization and Communication Instructions: red.async",
                                 "the destination and the mbarrier of st.async, red.async and a bulk copy into a "
                                 "block of the cluster lie in the shared memory of the same block"),
    "async-read-overwritten": Rule("cp.async.bulk.wait_group (.read); wgmma.wait_group; 9.7.16.12.1 "
                                   "tcgen05.commit",
                                   "shared memory that an asynchronous operation reads may not be written "
                                   "until the wait that covers the read"),
    "cp.async-visibility": Rule(f"cp.async.wait_group / cp.async.wait_all; {_MCM}",
                                "another thread's cp.async bytes are visible only through synchronization "
                                "(a barrier) after the issuing thread's covering wait"),
    "cp.async-wait": Rule("Data Movement and Conversion Instructions: cp.async.wait_group / cp.async.wait_all",
                          "the writes of a cp.async become visible to the executing thread only when a "
                          "wait_group / wait_all covering its group completes"),
    "dsmem-after-exit": Rule("Memory Hierarchy: distributed shared memory; barrier.cluster",
                             "a block's shared memory may be accessed by peers of its cluster only while "
                             "the block is running: peers must be done before it exits"),
    "dsmem-unordered": Rule(f"{_MCM}: Ordering of memory operations; barrier.cluster; mbarrier",
                            "two accesses to a word of shared::cluster memory from different blocks, one of "
                            "them a write, must be ordered (cluster barrier, mbarrier) unless both are atomic"),
    "exit-before-bulk-read": Rule("cp.async.bulk.wait_group",
                                  "a thread must wait (cp.async.bulk.wait_group.read) until its bulk/TMA "
                                  "stores have read their shared memory before the block's shared memory "
                                  "is released at exit"),
    "exit-before-tma-load": Rule("cp.async.bulk.tensor / cp.async.bulk: completion mechanism "
                                 "(mbarrier::complete_tx::bytes); Memory Hierarchy: shared memory",
                                 "a block's shared memory is released when its last thread exits: a TMA "
                                 "(bulk) load into it must be known complete first, by a wait that "
                                 "observes the mbarrier phase its bytes complete (or a later one)"),
    "global-bounds": Rule("State Spaces: Global State Space",
                          "a global access must lie inside memory the kernel was given"),
    "mapa-address": Rule("Data Movement and Conversion Instructions: mapa",
                         "mapa maps an address of a shared variable: a generic operand must point into "
                         "shared memory"),
    "mbarrier-arrivals": Rule("mbarrier: Phase Completion of the mbarrier object",
                              "a phase expects exactly the count of mbarrier.init arrivals; more arrivals "
                              "than that are undefined"),
    "mbarrier-reinit": Rule("mbarrier.init",
                            "mbarrier.init on a location that holds a valid mbarrier object is undefined; "
                            "mbarrier.inval it first"),
    "mbarrier-uninitialized": Rule("mbarrier.init",
                                   "an mbarrier object must be initialized with mbarrier.init before any "
                                   "other mbarrier operation on it (and not after mbarrier.inval)"),
    "proxy-fence": Rule(f"{_MCM}: Proxies; Parallel Synchronization and Communication Instructions: "
                        "membar/fence (fence.proxy.async)",
                        "generic-proxy writes to shared memory are visible to the async proxy (TMA, bulk "
                        "copies, wgmma operands) only after the writer executes fence.proxy.async"),
    "proxy-fence-barrier": Rule(f"{_MCM}: Proxies; membar/fence (fence.proxy.async)",
                                "another thread's fenced generic writes are visible to an async-proxy read "
                                "only when a barrier orders the fence before the asynchronous operation"),
    "shared-bounds": Rule("State Spaces: Shared State Space",
                          "a shared access must lie inside the block's static plus dynamic shared memory"),
    "shared-window": Rule("State Spaces: Shared State Space (shared::cta and shared::cluster windows)",
                          "a .shared::cta access needs an address of the executing block; a .shared::cluster "
                          "address must name a block of the cluster"),
    "tma-barrier-cta": Rule("Data Movement and Conversion Instructions: cp.async.bulk.tensor",
                            "the mbarrier a TMA load signals is in the destination CTA; with .cta_group::2 it "
                            "may be in the destination CTA's peer"),
    "tensormap-object": Rule("Data Movement and Conversion Instructions: Tensor Map; cp.async.bulk.tensor; "
                             "tensormap.replace",
                             "a tensor map is an opaque 128-byte object: it is used and edited only as a whole "
                             "object created by the driver (or a whole copy of one)"),
    "tensormap-proxy-fence": Rule(f"{_MCM}: Proxies (tensormap proxy); membar/fence "
                                  "(fence.proxy.tensormap::generic); tensormap.cp_fenceproxy",
                                  "a tensor map written through the generic proxy is used by a TMA only after "
                                  "the writer's fence.proxy.tensormap::generic.release and the using thread's "
                                  ".acquire on that map, the release ordered before the acquire"),
    "tensormap-space": Rule("Data Movement and Conversion Instructions: cp.async.bulk.tensor (tensorMap operand)",
                            "the tensor map of a TMA is in the .param, .const or .global state space"),
    "clc-after-failure": Rule("Parallel Synchronization and Communication Instructions: "
                              "clusterlaunchcontrol.try_cancel",
                              "a CTA that has observed a try_cancel request fail may not issue another "
                              "try_cancel (undefined behaviour)"),
    "clc-response": Rule("clusterlaunchcontrol.query_cancel",
                         "query_cancel decodes the 16-byte response a try_cancel wrote, read after its "
                         "mbarrier phase completed"),
    "tma-rank": Rule("Data Movement and Conversion Instructions: cp.async.bulk.tensor",
                     "the tensor coordinates must have as many dimensions as the tensor map"),
    "tma-read-before-complete": Rule("cp.async.bulk.tensor; mbarrier: Tracking asynchronous operations "
                                     "by the mbarrier object",
                                     "the bytes of a TMA load may be read only after the mbarrier phase "
                                     "that tracks them completed"),
    "tma-visibility": Rule(f"mbarrier.test_wait / mbarrier.try_wait; {_MCM}",
                           "a thread sees a TMA load's bytes only after observing the completion of its "
                           "mbarrier phase (or synchronizing with a thread that did)"),
    # tensor memory and tcgen05 (judge/model/ops/tcgen05.py); sections of the TensorCore 5th Generation chapter
    "tcgen05-aligned": Rule("9.7.16.7.1 tcgen05.alloc/dealloc/relinquish_alloc_permit, 9.7.16.8.3 tcgen05.ld "
                            "(.sync.aligned)",
                            "every thread of the warp executes the instruction together; a thread left out, or "
                            "exited, is undefined behaviour"),
    "tcgen05-alloc-size": Rule("9.7.16.7.1 tcgen05.alloc",
                               "nCols is a power of two within [32, 512]"),
    "tcgen05-alloc-grows": Rule("9.7.16.7.1 tcgen05.alloc",
                                "the number of columns allocated should not increase between two allocations "
                                "in the execution order within the CTA"),
    "tcgen05-relinquished": Rule("9.7.16.7.1 tcgen05.relinquish_alloc_permit",
                                 "a CTA may not perform tcgen05.alloc after any of its threads executed "
                                 "tcgen05.relinquish_alloc_permit"),
    "tcgen05-dealloc": Rule("9.7.16.7.1 tcgen05.dealloc",
                            "taddr must point to a previous allocation, freed with its column count"),
    "tcgen05-commit-at-exit": Rule("9.7.16.12.1 tcgen05.commit; Memory Hierarchy: shared memory",
                                   "tcgen05.commit's arrival on an mbarrier is an asynchronous write to the "
                                   "shared memory that holds it: a block may exit only once every commit that "
                                   "arrives there is known to have arrived (a wait observed its phase)"),
    "tcgen05-leak": Rule("9.7.16.7.1 tcgen05.alloc",
                         "all tensor memory allocated with tcgen05.alloc must be deallocated with tcgen05.dealloc "
                         "before the kernel exits"),
    "tcgen05-unallocated": Rule("9.7.16.7.1 tcgen05.alloc; 9.7.16.1 Tensor Memory",
                                "tensor memory is used through the address tcgen05.alloc returned, inside the "
                                "columns it allocated"),
    "tcgen05-mma-address": Rule("9.7.16.10.9 tcgen05.mma (data path layout)",
                                "an M = 128 MMA of one CTA writes D into lanes 0..127: the lane field of d-tmem is 0"),
    "tcgen05-cta-group-mix": Rule("9.7.16 TensorCore 5th Generation Family Instructions (.cta_group)",
                                  "all tcgen05 instructions of a kernel specify the same .cta_group"),
    "tcgen05-pair": Rule("9.7.16.5 Issue granularity (the CTA pair)",
                         "a .cta_group::2 operation acts on a CTA pair: two CTAs of one cluster whose "
                         "%cluster_ctarank differ in bit 0 only"),
    "tcgen05-pair-exited": Rule("9.7.16.5 Issue granularity",
                                "when a CTA issues a .cta_group::2 operation, the peer CTA is active and has "
                                "not exited"),
    "tcgen05-pair-alloc": Rule("9.7.16.5 Issue granularity; 9.7.16.7.1 tcgen05.alloc",
                               "alloc/dealloc/relinquish_alloc_permit with .cta_group::2 are issued by two warps, "
                               "one in each CTA of the pair, collectively (the first blocks until the other)"),
    "tcgen05-commit-mask": Rule("9.7.16.12.1 tcgen05.commit",
                                "with .multicast::cluster, ctaMask names the CTAs of the cluster whose mbarrier "
                                "at the same offset receives the arrival"),
    "tcgen05-idesc": Rule("9.7.16.4.2 Instruction descriptor",
                          "the A/B formats are formats of the MMA's kind; M >> 4 in bits 24-28, N >> 3 in bits "
                          "17-22, N a multiple of 16 from 16 to 256 for M = 128; the transpose (MN-major) bits "
                          "15-16 only for 8-bit, 16-bit and tf32 inputs"),
    "tcgen05-descriptor": Rule("9.7.16.4.1 Shared memory descriptor",
                               "bits 46-48 of a shared-memory matrix descriptor hold the fixed value 0b001"),
    "tcgen05-ld-in-flight": Rule("9.7.16.12.1 tcgen05.commit; 9.7.16.6 Memory consistency model for 5th "
                                 "generation of TensorCore operations",
                                 "an MMA's result is known complete only through the mbarrier its tcgen05.commit "
                                 "arrives on"),
    "tcgen05-visibility": Rule("9.7.16.6 Memory consistency model for 5th generation of TensorCore operations",
                               "a thread reads an MMA's result after observing the commit's mbarrier phase (or "
                               "synchronizing with a thread that did)"),
    "tcgen05-fence-after": Rule("9.7.16.11.1 tcgen05.fence",
                                "tcgen05.fence::after_thread_sync orders the tcgen05 operations after a thread "
                                "synchronization (the mbarrier wait, the barrier) with what came before it"),
    "tcgen05-dealloc-order": Rule("9.7.16.11.1 tcgen05.fence; 9.7.16.6 Memory consistency model for 5th "
                                  "generation of TensorCore operations",
                                  "columns are freed after every access to them completed and is ordered "
                                  "before the dealloc: fence::before_thread_sync, a barrier, fence::after_thread_sync"),
    "tcgen05-lane-quarter": Rule("9.7.16.8.1 Access restrictions",
                                 "warp w of a warpgroup accesses lanes 32*(w % 4) .. 32*(w % 4) + 31 only"),
    "tcgen05-uniform": Rule("9.7.16.8.3 tcgen05.ld, 9.7.16.8.4 tcgen05.st",
                            "all threads of the warp specify the same taddr, the base address of the "
                            "collective access"),
    "tcgen05-wait-ld": Rule("9.7.16.8.3 tcgen05.ld; tcgen05.wait",
                            "tcgen05.ld is asynchronous: its destination registers are used only after "
                            "tcgen05.wait::ld"),
    "tcgen05-mma-overwrite": Rule("9.7.16.11.1 tcgen05.fence; 9.7.16.6 Memory consistency model for 5th "
                                  "generation of TensorCore operations",
                                  "an MMA may overwrite columns only after every tcgen05.ld of them is ordered "
                                  "before it: fence::before_thread_sync, a synchronization, fence::after_thread_sync"),
    "tcgen05-cp-shape": Rule("9.7.16.9.2 tcgen05.cp",
                             ".64x128b requires .warpx2::02_13 or .warpx2::01_23, .32x128b requires .warpx4; the "
                             "copy's lanes lie inside the 128 lanes of tensor memory"),
    "tcgen05-scale-vec": Rule("9.7.16.10.7.1 Valid combinations of scale_vectorsize (Tables 54, 55); "
                              "9.7.16.10.7.2 Scale Factor A ID; 9.7.16.10.7.3 Scale Factor B ID",
                              "mxf8f6f4 takes scale_vec::1X (block32, UE8M0), mxf4 2X (block32, UE8M0), mxf4nvf4 2X "
                              "(block32, UE8M0) or 4X (block16, UE8M0 or UE4M3); the scale factor ID selects bytes "
                              "aligned to the vector size"),
    "tcgen05-scale-visibility": Rule("9.7.16.6 Memory consistency model for 5th generation of TensorCore "
                                     "operations; 9.7.16.12.1 tcgen05.commit",
                                     "an MMA reads scale factors another thread's tcgen05.cp wrote only after that "
                                     "copy's commit was observed and tcgen05.fence::after_thread_sync executed; one "
                                     "thread's tcgen05.cp and tcgen05.mma run in issue order"),
    "tcgen05-wait-st": Rule("9.7.16.8.4 tcgen05.st; tcgen05.wait",
                            "tcgen05.st is asynchronous: the cells it writes are read only after the storing "
                            "warp's tcgen05.wait::st"),
    "trap": Rule("Control Flow Instructions: trap",
                 "trap aborts the kernel (a device-side assert that failed)"),
    "wgmma-accumulator": Rule("Asynchronous Warpgroup Level Matrix Instructions: wgmma.mma_async, "
                              "wgmma.wait_group",
                              "the accumulator registers (and, in the register form, the A-fragment registers) "
                              "of a wgmma.mma_async may not be accessed until a wgmma.wait_group covers it"),
    "warp-aligned": Rule("Warp-level matrix load and store instructions: ldmatrix, stmatrix; Warp-level matrix "
                         "multiply-accumulate instructions: mma (.sync.aligned)",
                         "all 32 threads of the warp execute the same ldmatrix, stmatrix or mma.sync together"),
    "wgmma-aligned": Rule("Asynchronous Warpgroup Level Matrix Instructions (.sync.aligned)",
                          "all 128 threads of the warpgroup execute the same wgmma instruction together"),
    "wgmma-descriptor": Rule("Asynchronous Warpgroup Level Matrix Instructions: Matrix Descriptor Format",
                             "a shared-memory matrix descriptor must be well formed"),
    "wgmma-fence": Rule("Asynchronous Warpgroup Level Matrix Instructions: wgmma.fence",
                        "wgmma.fence must come before the first wgmma.mma_async and between register "
                        "accesses to the accumulators and a wgmma.mma_async that uses them"),
}


def cite(rule: str) -> str:
    """The PTX ISA citation that ends every message of this rule."""
    r = RULES[rule]
    return f"(PTX ISA, {r.section}: {r.rule})"


def _violation(m, rule: str, ins, message: str) -> Violation:
    """The Violation of `rule` at `ins`: the message, the place (m.where: the source line the instruction
    came from, and its PTX line) unless the message names it already, then the rule's citation."""
    if rule not in RULES:
        raise KeyError(f"rule {rule!r} has no entry in judge.model.checks.RULES")
    where = m.where(ins)
    placed = message if where in message else f"{message} (at {where})"
    return Violation(rule, where, f"{placed} {cite(rule)}")


def fail(m, rule: str, ins, message: str) -> None:
    """Record a Violation of `rule` at instruction `ins` (raised at once when the run is strict)."""
    tc = getattr(m, "tc", None)
    if tc is not None and tc.notes:               # what the tcgen05 model saw that explains the failure
        message += ". Note: " + "; ".join(tc.notes)
    v = _violation(m, rule, ins, message)
    m.violations.append(v)
    m.event("violation", rule=rule, where=v.where)
    if m.strict:
        raise v


def abort(m, rule: str, ins, message: str) -> Violation:
    """The Violation that ends a run which cannot go on (after fail() recorded the details)."""
    return _violation(m, rule, ins, message)


# ---------------------------------------------------------------------------- vector clocks
def join(m, members, receivers):
    """Vector clocks: members release (their clocks, own entry = now), receivers acquire the join."""
    ms = np.nonzero(members)[0]
    rows = m.VC[ms]                      # a copy (indexed by an array)
    rows[np.arange(len(ms)), ms] = m.gtime
    j = rows.max(axis=0)
    rs = np.nonzero(receivers)[0]
    if len(rs) and rs[-1] - rs[0] + 1 == len(rs):    # consecutive threads (a warpgroup, a block): in place
        got = m.VC[rs[0]:rs[-1] + 1]
        np.maximum(got, j, out=got)
    else:
        got = m.VC[rs]                   # a copy, raised in place (no second temporary)
        np.maximum(got, j, out=got)
        m.VC[rs] = got
    m.VC[rs, rs] = np.maximum(m.VC[rs, rs], m.gtime)


def words_in(offsets) -> np.ndarray:
    """np.unique(offsets // 4) for byte offsets into one block's shared memory, by marking each word rather
    than sorting: a box or an operand is thousands of bytes, on every copy and every wgmma."""
    w = np.asarray(offsets).ravel() // 4
    if w.size == 0 or w.min() < 0:
        return np.unique(w)
    seen = np.zeros(int(w.max()) + 1, bool)
    seen[w] = True
    return np.nonzero(seen)[0].astype(w.dtype, copy=False)


def know(m, readers, writers, times):
    """Does each reader thread know the writer's events up to time (vector clocks)?"""
    return (readers == writers) | (m.VC[readers, writers] >= times)


# ---------------------------------------------------------------------------- shared-memory checks
def check_smem_range(m, off, w, lanes, ins):
    """A w-byte shared access at offsets off must lie inside the block's shared memory and be aligned."""
    if (off < 0).any() or (off + w > m.smem_size - 16).any():
        bad = int(np.argmax((off < 0) | (off + w > m.smem_size - 16)))
        fail(m, "shared-bounds", ins, f"{m.tdesc(lanes[bad])} accessed shared memory at offset "
                  f"{int(off[bad])} (+{w} bytes), beyond the {m.smem_size - 16} bytes this "
                  f"launch has (static {m.static_smem} + dynamic)")
        raise abort(m, "shared-bounds", ins, "shared memory out of range")
    if (off % min(w, 16)).any():
        bad = int(np.argmax(off % min(w, 16) != 0))
        fail(m, "alignment", ins, f"{m.tdesc(lanes[bad])}: a {w}-byte shared access at offset "
                  f"{int(off[bad])} is not {min(w, 16)}-byte aligned")


def check_read(m, cta, words, thr, ins, proxy="generic"):
    """Thread thr (per row) reads words: each must hold landed bytes visible to it. Returns the mask
    of words it may not see (they read as poison), or None."""
    st = m.w_state[cta[:, None], words]
    if not ((st == CPA_PENDING) | (st == TMA_PENDING) | (st == CPA_LANDED) | (st == TMA_LANDED)).any():
        return None
    T = np.broadcast_to(thr[:, None], words.shape)
    C = np.broadcast_to(cta[:, None], words.shape)
    bad = np.zeros(words.shape, bool)         # words this read may not see: they read as poison
    for state in (CPA_PENDING, TMA_PENDING, CPA_LANDED, TMA_LANDED):
        hit = st == state
        if not hit.any():
            continue
        if state in (CPA_PENDING, TMA_PENDING):
            bad |= hit
        else:
            okw = np.ones(words.shape, bool)
            okw[hit] = know(m, T[hit], m.w_thread[C[hit], words[hit]], m.w_time[C[hit], words[hit]])
            bad |= ~okw
        i, j = np.argwhere(hit)[0] if state in (CPA_PENDING, TMA_PENDING) else (None, None)
        if state == CPA_PENDING:
            _report_pending_read(m, ins, int(T[i, j]), int(C[i, j]), int(words[i, j]))
            continue
        if state == TMA_PENDING:
            c, w = int(C[i, j]), int(words[i, j])
            mb = m.mbar_by_col.get(int(m.w_thread[c, w]))
            fail(m, "tma-read-before-complete", ins,
                      f"{m.tdesc(T[i, j])} read shared [0x{4 * w:x}] before the mbarrier phase "
                      f"that completes the asynchronous write into it (a TMA load, a bulk copy, a "
                      f"try_cancel response)"
                      + (f" ({m.mbar_name(mb.off, mb)}, now in phase {mb.phase})" if mb else "")
                      + ": wait on the mbarrier (try_wait.parity) before reading the tile")
            continue
        wt = m.w_thread[C[hit], words[hit]]
        tt = m.w_time[C[hit], words[hit]]
        ok = know(m, T[hit], wt, tt)
        if ok.all():
            continue
        k = int(np.argmin(ok))
        r, c, w = int(T[hit][k]), int(C[hit][k]), int(words[hit][k])
        if state == CPA_LANDED:
            fail(m, "cp.async-visibility", ins,
                      f"{m.tdesc(r)} read shared [0x{4 * w:x}] at {m.where(ins)}, written by "
                      f"{m.tdesc(wt[k])}'s cp.async (group {int(m.w_group[c, w])}), which that "
                      f"thread's wait_group completed at {m.where(m.k.code[int(m.w_pc[c, w])])}"
                      f" - but no barrier between that wait and this read: cp.async.wait_group "
                      f"covers only the calling thread's own copies; add __syncthreads() after it")
        else:
            mb = m.mbar_by_col.get(int(wt[k]))
            fail(m, "tma-visibility", ins,
                      f"{m.tdesc(r)} read shared [0x{4 * w:x}], written by an asynchronous copy (TMA load, bulk copy, "
                      f"try_cancel response) that completed "
                      f"phase {int(m.w_group[c, w])} of "
                      f"{m.mbar_name(mb.off, mb) if mb else 'its mbarrier'}, without having waited on that phase (nor "
                      f"synchronized with a thread that did)")
    return bad


def _report_pending_read(m, ins, t, c, w):
    issuer = int(m.w_thread[c, w])
    g = int(m.w_group[c, w])
    where_issue = m.where(m.k.code[int(m.w_pc[c, w])])
    if issuer == t:
        if m.last_wait_n[t] < 0:
            why = "this thread has executed no cp.async.wait_group yet"
        else:
            why = (f"its last cp.async.wait_group {int(m.last_wait_n[t])} covered groups "
                   f"<= {int(m.cover[t])} only (groups are numbered from 0 in commit order)")
        if g >= m.ncommit[t]:
            why += "; the group is not even committed yet"
        fail(m, "cp.async-wait", ins,
                  f"{m.tdesc(t)} read shared [0x{4 * w:x}] at {m.where(ins)} before the cp.async "
                  f"group that writes it completed: the copy was issued at {where_issue} into group "
                  f"{g}, and {why}")
    else:
        fail(m, "cp.async-wait", ins,
                  f"{m.tdesc(t)} read shared [0x{4 * w:x}] at {m.where(ins)} while "
                  f"{m.tdesc(issuer)}'s cp.async (group {g}, issued at {where_issue}) into it may "
                  f"still be in flight: that thread has not waited for the group "
                  f"(cp.async.wait_group in the issuing thread, then a barrier; or cp.async.mbarrier.arrive "
                  f"and a wait on that mbarrier)")


WARP_READ = -3          # r_solo: an asynchronous read the whole warp observes complete (wgmma, tcgen05)
MANY_LANES = -1        # r_solo: several lanes of the warp read the word


def note_read(m, cta, words, thr, pc):
    """Remember that the warps of threads thr read these words now, and which lane when only one did
    (for check_overwrite)."""
    nw = m.r_wt.shape[2]
    rows = cta.astype(np.int64) * m.r_wt.shape[1]
    m.r_pc.reshape(-1)[(rows[:, None] + words).ravel()] = pc
    flat = ((rows[:, None] + words) * nw + (thr // 32)[:, None]).ravel()   # one index into r_wt and r_solo
    m.r_wt.reshape(-1)[flat] = m.gtime
    solo = m.r_solo.reshape(-1)
    T = np.repeat(thr.astype(np.int32), words.shape[1])
    solo[flat] = T
    if len(thr) > 1:                        # lanes of one warp that read one word: no single reader
        many = solo[flat] != T
        if many.any():
            solo[flat[many]] = MANY_LANES


def check_overwrite(m, cta, words, thr, ins, what):
    """An asynchronous write into words: no other thread may still be reading them. The writer
    must be ordered after each warp's last read. Another warp: knowing one lane of that warp up to the
    read suffices (lenient where a warp hands a buffer back through one elected lane without __syncwarp,
    which the PTX memory model does not order). The writer's own warp: the writer must know the lanes that
    read (a __syncwarp() after the read), unless it read the word alone (PTX ISA, Memory Consistency Model:
    lanes of a warp are threads, ordered only by synchronization)."""
    rt = m.r_wt[cta[:, None], words]                      # (lanes, words, warps)
    if rt.any():
        for i in range(len(thr)):
            t = int(thr[i])
            row = m.VC[t, :m.n].copy()
            pad = (-len(row)) % 32
            know = np.concatenate([row, np.full(pad, -1)]).reshape(-1, 32).max(axis=1)
            mine = t // 32
            bad = rt[i] > know[None, :]
            if bad[:, mine].any():               # its own warp's read: excused where it alone read the word
                solo = m.r_solo[int(cta[i]), words[i], mine]
                bad[:, mine] &= (solo != t) & (solo != WARP_READ)
            if bad.any():
                j, w = np.argwhere(bad)[0]
                c, word = int(cta[i]), int(words[i, j])
                fail(m, "async-overwrite-race", ins,
                          f"{m.tdesc(t)}'s {what} at {m.where(ins)} overwrites shared "
                          f"[0x{4 * word:x}], which warp {w % (m.nthr_cta // 32 or 1)}"
                          f"{' of block rank ' + str(w * 32 // m.nthr_cta) if m.ncta > 1 else ''} "
                          f"read at {m.where(m.k.code[int(m.r_pc[c, word])])} with no barrier "
                          f"in between: that warp may still be reading the old data. A barrier (or an "
                          f"mbarrier arrive -> wait) must separate the last read of a buffer from the "
                          f"copy that refills it")
                break
    st = m.w_state[cta[:, None], words]
    if (st == CPA_PENDING).any() or (st == TMA_PENDING).any():
        i, j = np.argwhere((st == CPA_PENDING) | (st == TMA_PENDING))[0]
        fail(m, "async-overwrite-race", ins,
                  f"{m.tdesc(thr[i])}'s {what} writes shared [0x{4 * int(words[i, j]):x}] while an "
                  f"earlier asynchronous copy into it is still in flight")
    if (m.bulk_reading[cta[:, None], words] > 0).any():
        i, j = np.argwhere(m.bulk_reading[cta[:, None], words] > 0)[0]
        if _blame_early_release(m, int(thr[i]), int(words[i, j]), ins, what):
            return
        fail(m, "async-read-overwritten", ins,
                  f"{m.tdesc(thr[i])}'s {what} at {m.where(ins)} overwrites shared "
                  f"[0x{4 * int(words[i, j]):x}] while an asynchronous read of it may still run (a TMA/bulk "
                  f"store before its cp.async.bulk.wait_group.read, or a wgmma before the "
                  f"wgmma.wait_group that covers it, or a tcgen05.mma before its tcgen05.commit's mbarrier "
                  f"phase was waited for)")
    if m.bulk_waited_any:
        check_bulk_waited(m, cta, words, thr, ins, what)


def _first_unordered(m, cta, words, T, wt, mask, times):
    """Of the accesses where `mask` holds (thread T[i, j] to word words[i, j] of block cta[i], after thread
    wt[i, j] touched it at times[cta, word]), the first that nothing orders after that earlier access
    (know): (thread, earlier thread, block, word), or None when every one is ordered."""
    if not mask.any():
        return None
    C = np.broadcast_to(cta[:, None], words.shape)
    ok = know(m, T[mask], wt[mask], times[C[mask], words[mask]])
    if ok.all():
        return None
    k = int(np.argmin(ok))
    return int(T[mask][k]), int(wt[mask][k]), int(C[mask][k]), int(words[mask][k])


def check_bulk_waited(m, cta, words, thr, ins, what):
    """A write into shared words a bulk/TMA store read: the read ended at the covering
    cp.async.bulk.wait_group(.read) of the thread that committed the store (bulk async-groups are per thread,
    PTX ISA cp.async.bulk.wait_group): another thread's write must happen after that wait (a barrier), or it
    may overwrite bytes the store is still reading. A thread that runs wait_group without having committed
    the store waits for nothing."""
    wt = m.bulk_waited_t[cta[:, None], words]
    T = np.broadcast_to(thr[:, None], words.shape)
    found = _first_unordered(m, cta, words, T, wt, (wt >= 0) & (wt != T), m.bulk_waited_time)
    if found is None:
        return
    t, w, _, wd = found
    fail(m, "async-read-overwritten", ins,
         f"{m.tdesc(t)}'s {what} at {m.where(ins)} overwrites shared [0x{4 * wd:x}], which a bulk/TMA store of "
         f"{m.tdesc(w)} reads until that thread's cp.async.bulk.wait_group(.read) covers it; nothing orders that "
         f"wait before this write. Bulk async-groups belong to the thread that committed them: a wait_group in "
         f"another thread waits for nothing. Let the storing thread wait, then a barrier (__syncthreads(), a "
         f"named barrier, an mbarrier) before other threads rewrite the buffer")


def _blame_early_release(m, t, word, ins, what) -> bool:
    """The writer waited on an mbarrier whose phase a thread's plain mbarrier.arrive completed: that arrival
    released the buffer while an asynchronous read of it still ran, so the message blames the arrival's
    line (the learner's mistake), not the writer's (often code the exercise gave). False when it does not apply."""
    mb, by, wait_ins = m.last_mbar_wait.get(t, (None, None, None))
    if mb is None or by is None or not by[0].op.startswith("mbarrier.arrive"):
        return False
    arrive_ins, who = by
    fail(m, "async-read-overwritten", arrive_ins,
         f"{m.where(arrive_ins)}: {m.tdesc(who)}'s mbarrier.arrive here completed the phase of "
         f"{m.mbar_name(mb.off, mb)} that {m.tdesc(t)} waited for at {m.where(wait_ins)}, and its {what} at "
         f"{m.where(ins)} then overwrites shared [0x{4 * word:x}] while an asynchronous read of it may still run "
         f"(a tcgen05.mma before its tcgen05.commit's mbarrier phase, a wgmma before the wgmma.wait_group that "
         f"covers it, a TMA/bulk store before its cp.async.bulk.wait_group.read). An arrival releases the buffer "
         f"when it is made, not when the reads complete: release it with what arrives once they have "
         f"completed (tcgen05.commit for an MMA), or arrive after the wait that covers them")
    return True


def check_cross(m, cta, words, thr, ins, atomic):
    """DSMEM ordering: an access and the last write of a word, made by threads of different blocks
    of the cluster, must be ordered (cluster barrier, mbarrier) unless both are atomics."""
    wt = m.w_thread[cta[:, None], words]
    T = np.broadcast_to(thr[:, None], words.shape)
    real = (wt >= 0) & (wt < m.n)
    cross = real & ((np.where(real, wt, 0) // m.nthr_cta) != (T // m.nthr_cta))
    if atomic:
        cross &= ~m.w_atomic[cta[:, None], words]
    found = _first_unordered(m, cta, words, T, wt, cross, m.w_time)
    if found is None:
        return
    t, w, c, wd = found
    fail(m, "dsmem-unordered", ins,
              f"{m.tdesc(t)} accesses shared [0x{4 * wd:x}] of block rank {c} at {m.where(ins)}, "
              f"which {m.tdesc(w)} wrote with no cluster barrier (or mbarrier) ordering the two: "
              f"the access may see the value before that write, or be overwritten by it. Put a "
              f"cluster.sync() between them")


def early_accumulator_access(m, name, ins, what):
    """A register access to accumulator `name` while a wgmma writing it may still run."""
    ins = ins or m.k.code[m.cur_pc]
    t = int(np.nonzero(m.acc_pending[name] & m.cur_mask)[0][0])
    op = next((o for o in m.wg_ops if (name in o["names"] or name in o.get("a_names", ()))
               and t in set(o["lanes"].tolist())), None)
    reads_a = op is not None and name in op.get("a_names", ())
    fail(m, "wgmma-accumulator", ins,
              f"{m.tdesc(t)} {what}s {'A-fragment' if reads_a else 'accumulator'} register {name} at "
              f"{m.where(ins)} while the wgmma.mma_async {'reading' if reads_a else 'writing'} it"
              + (f" (issued at {m.where(m.k.code[op['pc']])})" if op else "")
              + " may still be running: wgmma.commit_group, then wgmma.wait_group must cover it first")




def check_same_block(m, ins, t, dst_cta: int, bar_cta: int, what: str) -> None:
    """st.async, red.async, a bulk copy into a cluster block: its destination and its mbarrier in one block."""
    if dst_cta != bar_cta:
        fail(m, "async-store-mbarrier", ins,
             f"{m.tdesc(t)}'s {what} writes shared memory of block rank {dst_cta} but names an mbarrier of block "
             f"rank {bar_cta}: the bytes are counted on the destination block's mbarrier, so map both addresses "
             f"(mapa) to the same block")
        raise abort(m, "async-store-mbarrier", ins, f"{what} with another block's mbarrier")


def check_store_source(m, ins, t, cta, words, what):
    """An async-proxy read (TMA/bulk store, wgmma operand) of shared words by thread t: the bytes must have
    landed, be fenced for the async proxy, and be known to t (a barrier after the fence or the landing)."""
    st = m.w_state[cta, words]
    bad = (st == CPA_PENDING) | (st == TMA_PENDING)
    if bad.any():
        w = int(words[np.argmax(bad)])
        fail(m, "async-overwrite-race", ins, f"{m.tdesc(t)}'s {what} reads shared [0x{4 * w:x}] while an "
               f"asynchronous copy into it is still in flight")
    gen = st == GENERIC
    if gen.any():
        w = int(words[np.argmax(gen)])
        fail(m, "proxy-fence", ins,
               f"{m.tdesc(t)}'s {what} at {m.where(ins)} reads shared [0x{4 * w:x}], which "
               f"{m.tdesc(m.w_thread[cta, w])} wrote with an ordinary store and has not fenced since: "
               f"generic-proxy writes are invisible to the async proxy (TMA) until the writing thread "
               f"executes fence.proxy.async.shared::cta and a barrier orders that fence before the store. "
               f"The store may read the old bytes")
        return
    for s, rule in ((FENCED, "proxy-fence-barrier"), (CPA_LANDED, "cp.async-visibility"),
                    (TMA_LANDED, "tma-visibility")):
        hit = st == s
        if not hit.any():
            continue
        wt = m.w_thread[cta, words[hit]]
        ok = know(m, np.full(len(wt), t), wt, m.w_time[cta, words[hit]])
        if not ok.all():
            w = int(words[hit][np.argmin(ok)])
            if s == FENCED:
                msg = (f"{m.tdesc(t)}'s {what} at {m.where(ins)} reads shared [0x{4 * w:x}], which "
                       f"{m.tdesc(m.w_thread[cta, w])} wrote and fenced, but no barrier orders that fence "
                       f"before the store: add __syncthreads() between the fences and the store")
            else:
                msg = (f"{m.tdesc(t)}'s {what} reads shared [0x{4 * w:x}] written asynchronously without "
                       f"having synchronized with its completion")
            fail(m, rule, ins, msg)
