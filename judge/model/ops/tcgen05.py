"""judge.model.ops.tcgen05 - Blackwell's tensor memory and tcgen05 instructions in the CPU model.

The handlers are registered with judge.model.registry under their dotted PTX names; the state they
keep (per CTA: 128 lanes x 512 columns of 32-bit cells) is judge.model.tensor_memory.
Try it: python -m pytest tests/model/test_model_tcgen05.py -q

Every rule below is checked while the kernel's own PTX runs, thread by thread, so a rule broken on
one path of one warp is found however the kernel reaches it. The sections named are the PTX ISA's
(chapter "TensorCore 5th Generation Family Instructions", tcgen05):

  tcgen05-aligned        alloc, dealloc, relinquish_alloc_permit, ld, st, wait::ld, wait::st are
                         .sync.aligned: every thread of the warp executes them together ("Issue
                         granularity"); one thread alone is a Violation.
  tcgen05-alloc-size     nCols is a power of two in [32, 512] (9.7.16.7.1).
  tcgen05-alloc-grows    the columns allocated do not increase from one allocation to the next (9.7.16.7.1).
  tcgen05-relinquished   no tcgen05.alloc after the CTA's tcgen05.relinquish_alloc_permit.
                         An alloc that cannot be satisfied blocks until columns are freed (HANG when
                         nothing frees them). The column it returns is drawn at random among the free
                         aligned places (as another CTA on the SM may hold the first ones), written
                         to shared memory at [dst].
  tcgen05-dealloc        dealloc frees exactly an allocation (its base and its column count).
  tcgen05-leak           every allocation is freed before the CTA exits ("tcgen05.alloc": the
                         columns are not released at exit).
  tcgen05-unallocated    every column an MMA writes or a warp reads or writes is allocated.
  tcgen05.mma            a single-thread instruction ("Issue granularity"): each thread that executes
                         it issues one MMA of its own. So a kernel where every thread issues them
                         runs 128 MMAs per instruction (its C is wrong) and 128 commits: no rule is
                         invented for it, the arithmetic shows it.
                         Supported: .cta_group::1 (and ::2, below), kind::f16 (bf16 / f16 inputs), kind::tf32,
                         kind::f8f6f4 with E4M3 / E5M2 / E3M2 / E2M3 / E2M1 inputs (FP6 / FP4 in
                         padded 16-byte units, 9.7.16.10.4), the block-scaled kinds
                         kind::mxf8f6f4 (same formats, E8M0 scale per 32), kind::mxf4 (E2M1, E8M0
                         per 32) and kind::mxf4nvf4 (E2M1, E8M0 per 32 or E8M0 / UE4M3 per 16 =
                         NVFP4) with .block16 / .block32 / .scale_vec::NX, scale factors read from
                         tensor memory at [scale-A-tmem] / [scale-B-tmem] with the scale factor IDs
                         of the instruction descriptor (judge.model.block_scale: layout, decoding
                         through judge.hw.formats), f32 accumulators, M = 128, N = 16..256 (step
                         16), K-major or MN-major operands (instruction descriptor bits 15-16) from
                         shared-memory descriptors (every swizzle, any base offset: judge.hw.umma /
                         judge.hw.mma_layout), enable-input-d.
  tcgen05-scale-vec      a block-scaled MMA's kind, scale vector size (.block16 / .block32 /
                         .scale_vec::NX), scale type (idesc bit 23) and scale factor IDs form a valid
                         combination (9.7.16.10.7.1 Tables 54, 55; 9.7.16.10.7.2/3).
  tcgen05-scale-visibility  the scale columns an MMA reads were written by a tcgen05.cp of the same
                         thread (the tensor core runs one thread's tcgen05.cp and tcgen05.mma in issue
                         order), or by one whose commit the MMA's thread observed, followed by
                         tcgen05.fence::after_thread_sync; the columns are allocated
                         ("tcgen05-unallocated") and any tcgen05.st of them was waited for.
  tcgen05.cp             judge.model.ops.tcgen05_cp: shared memory -> tensor memory, one thread, the
                         shapes .128x256b, .4x256b, .128x128b, .64x128b.warpx2::02_13 / 01_23 and
                         .32x128b.warpx4, tracked by tcgen05.commit like an MMA ("tcgen05-cp-shape").
                         The result lands in tensor memory when its commit arrives; until then the
                         columns are in flight. Operands are read through the async proxy (a generic
                         store needs fence.proxy.async and a barrier: "proxy-fence"), and count as
                         being read until the commit's arrival (an overwrite before it is
                         "async-read-overwritten" / "async-overwrite-race").
  tcgen05.commit         makes the mbarrier track the completion of every earlier tcgen05.mma of the
                         executing thread ("tcgen05.commit"); the arrival comes as late as allowed:
                         when a thread waits on that mbarrier and cannot go on, or when nothing else
                         can run.
  tcgen05-ld-in-flight   a tcgen05.ld of columns whose MMA has not completed (no commit, or its
                         arrival not yet come).
  tcgen05-visibility     a tcgen05.ld of an MMA's result by a thread that has not observed the
                         commit's mbarrier phase (nor synchronized with a thread that did)
                         ("Memory consistency model for 5th generation of TensorCore operations").
  tcgen05-fence-after    ... or that did not execute tcgen05.fence::after_thread_sync after the
                         phase completed ("tcgen05.fence").
  tcgen05-lane-quarter   warp w reaches lanes 32*(w % 4) .. 32*(w % 4) + 31 only ("Tensor Memory",
                         access restrictions); a 32x32b access starts at the quarter's first lane.
  tcgen05-uniform        the tensor-memory address of ld / st / dealloc is the same in every thread
                         of the warp.
  tcgen05-mma-overwrite  an MMA that writes columns another warp read with tcgen05.ld needs the same
                         ordering (a persistent kernel's accumulator reused for the next tile).
  tcgen05-wait-st        cells a tcgen05.st wrote are read (tcgen05.ld, or an MMA accumulating on
                         them) before the storing warp's tcgen05.wait::st.
  tcgen05-wait-ld        a register written by tcgen05.ld is read (or overwritten) before
                         tcgen05.wait::ld ("tcgen05.wait": the load is asynchronous).
  tcgen05-dealloc-order  a dealloc of columns another warp read with tcgen05.ld needs that warp's
                         tcgen05.fence::before_thread_sync after its last read, a barrier, and
                         tcgen05.fence::after_thread_sync in the deallocating warp; a dealloc of
                         columns an MMA may still write is a Violation too.

CTA pairs, .cta_group::2 (PTX ISA 9.7.16.5 Issue granularity, and the tcgen05.mma / commit sections).
The pair is two CTAs of one cluster whose %cluster_ctarank differ in bit 0 only.
  Supported: alloc / relinquish_alloc_permit / dealloc with .cta_group::2, executed by one warp in each
                         CTA of the pair: the first alloc blocks until the peer's warp executes it, then
                         the same columns are allocated in both CTAs (each address written to its own
                         CTA's shared memory); relinquish and dealloc act on the executing CTA, and each
                         side frees its own (tcgen05-leak). tcgen05.mma.cta_group::2 kind::f16 / tf32 /
                         f8f6f4 (FP8) with M = 256, issued by ONE thread of either CTA: each CTA's shared
                         memory holds its 128 rows of A at adesc and its N / 2 rows of B at bdesc (B = the
                         even CTA's rows, then the odd CTA's), D's rows 0..127 land in the even CTA's tensor
                         memory and 128..255 in the odd CTA's, at the same address. tcgen05.commit with
                         .multicast::cluster and ctaMask (either .cta_group): one arrival on the mbarrier at
                         the same offset in each CTA of the mask; a reader learns the result through the
                         arrival in its own CTA. cp.async.bulk.tensor with .cta_group::2 (judge/model/ops/
                         bulk.py): the bytes land in the destination CTA, the complete_tx goes to the
                         mbarrier of that CTA or of its peer.
  tcgen05-cta-group-mix  every tcgen05 instruction of a kernel names the same .cta_group (ptxas refuses a
                         kernel that mixes them; the model says so for PTX given to it directly).
  tcgen05-pair           a .cta_group::2 instruction in a CTA with no peer (no cluster, or an odd size).
  tcgen05-pair-exited    a .cta_group::2 MMA or commit issued after the peer CTA exited.
  tcgen05-pair-alloc     a CTA exits while its peer's warp waits in alloc.cta_group::2 for it; the two
                         sides allocating different column counts. One side that never allocates while the
                         other waits is a HANG that says so.
  tcgen05-commit-mask    a ctaMask naming no CTA, or a CTA outside the cluster.
  tma-barrier-cta        (bulk.py) a TMA load whose mbarrier is in another CTA than its destination,
                         unless it is the destination's peer and the load has .cta_group::2.

Not covered (Unsupported, never a verdict): M = 128 with .cta_group::2 (its data-path layout puts
64 rows in each CTA), .multicast::cluster TMA loads with .cta_group::2, a second pair allocation
issued in a CTA while its first still waits for the peer, block-scaled MMAs and tcgen05.cp with
.cta_group::2, kind::i8, the K = 96
block-scaled forms (idesc bit 31), A from tensor memory, M = 64, LBO mode 1,
disable-output-lane and scale-input-d, .ws, sparse MMAs, tcgen05.cp's decompressing forms
(.b8x16.b6x16_p32 / .b4x16_p64), tcgen05.shift, ld/st shapes other than 32x32b
and .pack/.unpack.

"The feature carries the data": every register a tcgen05.ld writes is marked, and the mark follows
the value through any instruction that reads it (judge.model.machine's taint); a global store of a
marked value counts under "gstore.from.tcgen05.ld.bytes" (all global stores: "gstore.bytes"), so an
exercise can require that its output came out of tensor memory (exercise.toml [carries]). The mark
travels with the bytes through shared and local memory (a C staged in shared memory and written by a
TMA or bulk store still counts). It is a union: a value computed from a marked one in any way is marked.
"""
from __future__ import annotations

import numpy as np

from judge.hw import mma_layout as _layout
from judge.hw import umma as _umma
from judge.model import block_scale as BS
from judge.model import checks, completion
from judge.model import tensor_memory as TM
from judge.model.errors import Unsupported
from judge.model.registry import op



def state(m) -> TM.State:
    """The tcgen05 state of the cluster the machine runs now (created at first use)."""
    tc = getattr(m, "tc", None)
    if tc is None:
        tc = m.tc = TM.State(m.n, m.ncta)
    return tc


def _group(m, ins) -> int:
    """The instruction's .cta_group (1 or 2). Every tcgen05 instruction of a kernel that has the qualifier
    names the same one (rule tcgen05-cta-group-mix)."""
    g = 2 if "cta_group::2" in ins.parts else 1
    tc = state(m)
    if tc.group is None:
        tc.group = (g, m.cur_pc)
    elif tc.group[0] != g:
        first, pc = tc.group
        m.fail("tcgen05-cta-group-mix", ins,
               f"{ins.op} with .cta_group::{g} at {m.where(ins)}, after the .cta_group::{first} "
               f"{m.k.code[pc].op} at {m.where(m.k.code[pc])}: all tcgen05 instructions of a kernel use the same "
               f".cta_group. A kernel of CTA pairs allocates, issues, commits and frees with ::2 everywhere")
        raise checks.abort(m, "tcgen05-cta-group-mix", ins, "mixed .cta_group")
    return g


def _peer(m, ins, c, who):
    """The peer of block rank c: the CTA of its cluster whose %cluster_ctarank differs in bit 0 only."""
    p = c ^ 1
    if p >= m.ncta:
        m.fail("tcgen05-pair", ins,
               f"{who} executes {ins.op} with .cta_group::2 at {m.where(ins)}, but block rank {c} has no peer "
               f"CTA in its cluster of {m.ncta}: a CTA pair is two CTAs of one cluster whose %cluster_ctarank "
               f"differ in bit 0 only. Launch clusters of an even number of CTAs (__cluster_dims__(2, 1, 1))")
        raise checks.abort(m, "tcgen05-pair", ins, "no peer CTA")
    return p


def _peer_alive(m, ins, c, p, who):
    rows = np.arange(p * m.nthr_cta, (p + 1) * m.nthr_cta)
    if not m.alive[rows].any():
        m.fail("tcgen05-pair-exited", ins,
               f"{who} issues {ins.op} with .cta_group::2 at {m.where(ins)} after its peer CTA (block rank "
               f"{p}) exited: the operation reads and writes the peer's shared and tensor memory, so the peer "
               f"must still run. Keep both CTAs of the pair alive until the pair's last operation completed "
               f"(a cluster barrier before exit)")
        raise checks.abort(m, "tcgen05-pair-exited", ins, "peer CTA exited")


def _warps(m, ins, mask, what):
    """The warps executing a .sync.aligned instruction: every live thread of each must be in mask."""
    lanes = np.nonzero(mask)[0]
    groups: dict = {}
    for t in lanes:
        groups.setdefault((int(m.cta[t]), int(m.lt[t]) // 32), []).append(int(t))
    out = []
    for (c, w), ts in groups.items():
        first = c * m.nthr_cta + 32 * w
        rows = np.arange(first, min(first + 32, (c + 1) * m.nthr_cta))
        if len(ts) != len(rows):
            m.fail("tcgen05-aligned", ins,
                   f"{len(ts)} of the {len(rows)} threads of warp {w}{_blk(m, c)} executed {what} at "
                   f"{m.where(ins)} (e.g. {m.tdesc(ts[0])}): it is .sync.aligned, so the whole warp executes "
                   f"it together, converged. Put it under a condition that holds "
                   f"for every thread of one warp (if (warp == 0)), not for one thread")
        out.append((c, w, np.array(ts)))
    return out


def _blk(m, c):
    return f" of block rank {c}" if m.ncta > 1 else ""


def _u32(m, opnd, ins):
    return np.broadcast_to(np.asarray(m.rd(opnd, "u32", ins)).astype(np.int64), (m.n,))


def _smem_target(m, ins, aop, lanes):
    a = m.addr(aop, ins)
    if not any(s.startswith("shared") for s in ins.parts):
        sp, a = m.resolve_generic(a, lanes, ins)
        if sp != "shared":
            raise Unsupported(ins.op, "the destination of tcgen05.alloc must be in shared memory")
    return m.smem_split(a, lanes, ins, cluster_ok=False)


def _unblock_allocs(m, tc, c):
    """Columns of CTA c were freed: its warps blocked in tcgen05.alloc try again (a pair's warp is listed
    under both CTAs of the pair; one that another list woke already is not waiting for columns any more)."""
    ts = tc.alloc_blocked.pop(c, [])
    for t in ts:
        why = m.block_why.get(int(t))
        if m.blocked[t] and why is not None and str(why[0]).startswith("tcgen05.alloc of"):
            m.blocked[t] = False
            m.block_why.pop(int(t), None)


# ---------------------------------------------------------------------------- allocation
@op("tcgen05.alloc")
def alloc(m, ins):
    """tcgen05.alloc [dst], nCols: a whole warp allocates columns; the address goes to shared memory."""
    dst, nop = ins.args[:2]

    def allocate(ins, mask, full):
        tc = state(m)
        g = _group(m, ins)
        n_all = _u32(m, nop, ins)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.alloc"):
            cm = tc.cta[c]
            t0 = int(ts[0])
            ncols = int(n_all[t0])
            if cm.relinquished:
                m.fail("tcgen05-relinquished", ins,
                       f"warp {w}{_blk(m, c)} executes tcgen05.alloc at {m.where(ins)} after the CTA gave up its "
                       f"allocation permit (tcgen05.relinquish_alloc_permit): allocate everything first, then "
                       f"relinquish")
            if ncols < 32 or ncols > TM.COLUMNS or ncols & (ncols - 1):
                up = max(32, 1 << max(0, ncols - 1).bit_length())
                m.fail("tcgen05-alloc-size", ins,
                       f"warp {w}{_blk(m, c)} allocates {ncols} columns at {m.where(ins)}: nCols must be a power "
                       f"of two from 32 to 512; round up to {min(up, 512)}")
                raise checks.abort(m, "tcgen05-alloc-size", ins, f"{ncols} columns")
            if cm.last_alloc and ncols > cm.last_alloc:
                m.fail("tcgen05-alloc-grows", ins,
                       f"warp {w}{_blk(m, c)} allocates {ncols} columns at {m.where(ins)} after an allocation of "
                       f"{cm.last_alloc}: the number of columns allocated should not increase between two "
                       f"allocations of a CTA. Allocate the largest first")
            cm.last_alloc = ncols
            if g == 2:
                _pair_alloc(m, tc, ins, c, w, ts, ncols, dst)
                continue
            free = cm.free_slots(ncols)
            if not free:
                # the instruction blocks until columns are freed (by this CTA or another on the SM)
                m.pc[ts] = m.cur_pc
                m.blocked[ts] = True
                for t in ts:
                    m.block_why[int(t)] = ("tcgen05.alloc of " + str(ncols) + " columns (tensor memory full: "
                                           + ", ".join(f"{n} at column {b}" for b, n in sorted(cm.allocs.items()))
                                           + ")", c)
                tc.alloc_blocked.setdefault(c, []).extend(int(t) for t in ts)
                continue
            base = int(free[int(m.rng.integers(len(free)))])
            cta, off = _smem_target(m, ins, dst, ts[:1])
            _allocated(m, cm, ins, w, c, base, ncols, (int(cta[0]), int(off[0])), t0, m.cur_pc)
    return allocate


def _allocated(m, cm, ins, w, c, base, ncols, dst, t0, pc):
    """Columns base.. of CTA c are warp w's now; the address goes to shared memory at dst = (cta, offset)."""
    cm.allocs[base] = ncols
    cm.alloc_pc[base] = pc
    c2, o = dst
    checks.check_smem_range(m, np.array([o]), 4, np.array([t0]), ins)
    m.sm[c2, o:o + 4] = np.frombuffer(np.uint32(base).tobytes(), np.uint8)
    m.w_state[c2, o // 4] = checks.GENERIC
    m.w_thread[c2, o // 4] = t0
    m.w_time[c2, o // 4] = m.gtime
    m.counts["tcgen05.alloc"] += 1
    m.counts["tcgen05.alloc.columns"] += ncols
    m.event("tcgen05.alloc", warp=w, block=c, columns=ncols, base=base)


def _pair_alloc(m, tc, ins, c, w, ts, ncols, dst):
    """tcgen05.alloc.cta_group::2: one warp in each CTA of the pair; the first blocks until the other comes
    (PTX ISA 9.7.16.5 Issue granularity), then the same columns are allocated in both CTAs."""
    p = _peer(m, ins, c, f"warp {w}{_blk(m, c)}")
    key = c >> 1
    other = tc.pair_alloc.get(key)
    cta, off = _smem_target(m, ins, dst, ts[:1])
    here = {"cta": c, "warp": w, "threads": [int(t) for t in ts], "ncols": ncols,
            "dst": (int(cta[0]), int(off[0])), "pc": m.cur_pc}
    if other is not None and other["cta"] == c:
        raise Unsupported(ins.op, f"a second tcgen05.alloc.cta_group::2 in block rank {c} (warp {w}) while warp "
                                  f"{other['warp']}'s still waits for the peer: several pair allocations in "
                                  f"flight at once are not modelled")
    if other is None:                      # the first of the two: wait for the peer's warp
        tc.pair_alloc[key] = here
        m.blocked[ts] = True
        for t in ts:
            m.block_why[int(t)] = ("tcgen05.pair", (c, p))
        m.wait_descriptions["tcgen05.pair"] = _describe_pair_wait
        return
    if other["ncols"] != ncols:
        m.fail("tcgen05-pair-alloc", ins,
               f"warp {w}{_blk(m, c)} allocates {ncols} columns with tcgen05.alloc.cta_group::2 at "
               f"{m.where(ins)}, its peer's warp {other['warp']} (block rank {p}) {other['ncols']} at "
               f"{m.where(m.k.code[other['pc']])}: the pair allocates one allocation, the same columns in both")
        raise checks.abort(m, "tcgen05-pair-alloc", ins, "different column counts")
    mine, theirs = tc.cta[c], tc.cta[p]
    free = sorted(set(mine.free_slots(ncols)) & set(theirs.free_slots(ncols)))
    if not free:                           # blocks until columns are freed in both
        m.pc[ts] = m.cur_pc
        m.blocked[ts] = True
        for t in ts:
            m.block_why[int(t)] = ("tcgen05.alloc of " + str(ncols) + " columns in both CTAs of the pair "
                                   "(tensor memory full)", c)
        for q in (c, p):                   # a dealloc in either CTA may make room
            tc.alloc_blocked.setdefault(q, []).extend(int(t) for t in ts)
        return
    base = int(free[int(m.rng.integers(len(free)))])
    del tc.pair_alloc[key]
    for cm, who in ((mine, here), (theirs, other)):
        _allocated(m, cm, ins, who["warp"], who["cta"], base, ncols, who["dst"], who["threads"][0], who["pc"])
        cm.pair_allocs.add(base)
    for t in other["threads"]:
        m.blocked[t] = False
        m.block_why.pop(int(t), None)


def _describe_pair_wait(m, key, who):
    c, p = key
    return (f"{len(who)} threads ({m.tdesc(who[0])}, ...) wait in tcgen05.alloc.cta_group::2 of block rank {c} "
            f"for a warp of the peer CTA (block rank {p}) to execute it too: with .cta_group::2 one warp in EACH "
            f"CTA of the pair allocates, and the first blocks until the other does "
            f"(PTX ISA 9.7.16.5 Issue granularity)")


@op("tcgen05.relinquish_alloc_permit")
def relinquish(m, ins):
    """tcgen05.relinquish_alloc_permit: the CTA allocates no more."""
    def give_up_permit(ins, mask, full):
        tc = state(m)
        g = _group(m, ins)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.relinquish_alloc_permit"):
            if g == 2:
                _peer(m, ins, c, f"warp {w}{_blk(m, c)}")
            tc.cta[c].relinquished = True
            m.counts["tcgen05.relinquish_alloc_permit"] += 1
            m.event("tcgen05.relinquish", warp=w, block=c)
    return give_up_permit


@op("tcgen05.dealloc")
def dealloc(m, ins):
    """tcgen05.dealloc taddr, nCols: a whole warp frees an allocation, ordered after every use of it."""
    aop, nop = ins.args[:2]

    def free(ins, mask, full):
        tc = state(m)
        g = _group(m, ins)
        addr = _u32(m, aop, ins)
        n_all = _u32(m, nop, ins)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.dealloc"):
            cm = tc.cta[c]
            _uniform(m, ins, addr, ts, w, c, "tcgen05.dealloc")
            t0 = int(ts[0])
            a, ncols = int(addr[t0]), int(n_all[t0])
            col = a & 0xFFFF
            if cm.allocs.get(col) != ncols or a >> 16:
                live = ", ".join(f"{n} columns at {b}" for b, n in sorted(cm.allocs.items())) or "none"
                m.fail("tcgen05-dealloc", ins,
                       f"warp {w}{_blk(m, c)} frees {ncols} columns at tensor-memory address 0x{a:08x} at "
                       f"{m.where(ins)}, which is not a live allocation (live: {live}): free exactly the "
                       f"address tcgen05.alloc wrote and the same column count, once")
                continue
            cols = np.arange(col, col + ncols)
            busy = cols[cm.col_op[cols] >= 0]
            if len(busy):
                mma = tc.ops[int(cm.col_op[busy[0]])]
                m.fail("tcgen05-dealloc-order", ins,
                       f"warp {w}{_blk(m, c)} frees columns {col}..{col + ncols - 1} at {m.where(ins)} while the "
                       f"tcgen05.mma issued by {m.tdesc(mma.thread)} at {m.where(m.k.code[mma.pc])} may still write "
                       f"column {int(busy[0])}: "
                       + ("it was never committed" if not mma.committed else
                          "its commit's mbarrier phase was not waited for")
                       + ": commit, wait for the phase, then free")
            why = _unordered_read(m, tc, ins, c, ts, ts, cols,
                                  f"warp {w}{_blk(m, c)} frees columns {col}..{col + ncols - 1}",
                                  "freed (and reallocated) while that read still runs", "tcgen05.dealloc")
            if why:
                m.fail("tcgen05-dealloc-order", ins, why)
            if g == 2:
                _peer(m, ins, c, f"warp {w}{_blk(m, c)}")
            del cm.allocs[col]
            cm.pair_allocs.discard(col)
            cm.alloc_pc.pop(col, None)
            cm.reads[cols] = -1
            cm.read_fenced[cols] = -1
            cm.col_done_vc[cols] = -1
            m.counts["tcgen05.dealloc"] += 1
            m.event("tcgen05.dealloc", warp=w, block=c, columns=ncols, base=col)
            _unblock_allocs(m, tc, c)
    return free


def _unordered_read(m, tc, ins, c, ts, own, cols, doing, danger, then):
    """Every other warp's last tcgen05.ld of these columns must be ordered before what threads ts do
    now (a dealloc, an MMA that overwrites them): the reader's fence::before_thread_sync, a barrier,
    then fence::after_thread_sync in ts. Readers among `own` (the acting warp) are ordered already.
    Returns the message for the first read that is not ordered, or ''."""
    cm = tc.cta[c]
    reads = cm.reads[cols]                                   # (cols, threads) time of last ld, -1 none
    readers = np.nonzero((reads >= 0).any(axis=0))[0]
    mine = set(int(t) for t in own)
    know = m.VC[ts][:, :m.n].max(axis=0)
    my_after = int(tc.fence_after[ts].min())
    for r in readers:
        r = int(r)
        if r in mine:
            continue
        tr = int(reads[:, r].max())
        pc = cm.read_pc.get(r, m.cur_pc)
        # the fence that matters is the reader's FIRST fence::before_thread_sync after its last read of
        # these columns (a later one, e.g. after reading the other accumulator buffer, may not be known yet)
        rf = cm.read_fenced[cols, r][reads[:, r] >= 0]
        fb = -1 if (rf < 0).any() else int(rf.max())
        if know[r] < tr:
            why = "no barrier orders that read before this"
        elif fb < tr:
            why = ("that warp executed no tcgen05.fence::before_thread_sync between its last tcgen05.ld and "
                   "the barrier")
        elif know[r] < fb:
            why = "no barrier after that warp's tcgen05.fence::before_thread_sync"
        elif my_after < fb:
            why = ("no tcgen05.fence::after_thread_sync here after the barrier (or mbarrier wait) that "
                   "follows those reads")
        else:
            continue
        return (f"{doing} at {m.where(ins)}, which {m.tdesc(r)} read with tcgen05.ld at {m.where(m.k.code[pc])}; "
                f"{why}. The columns may be {danger}: tcgen05.fence::before_thread_sync after the reads, a "
                f"barrier (or an mbarrier arrive -> wait), tcgen05.fence::after_thread_sync, then {then}")
    return ""


# ---------------------------------------------------------------------------- MMA
_F8F6F4 = {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}


def decode_idesc(idesc: int, kind: str) -> dict:
    """The fields of a tcgen05.mma instruction descriptor (kind::f16 / tf32 / f8f6f4 / i8 layout):
    bits 4-5 D format (1 = F32), 7-9 A format, 10-12 B format, 13/14 negate A/B, 15/16 transpose
    (MN-major) A/B, 17-22 N >> 3, 24-28 M >> 4; bit 2 sparsity (judge.hw.umma.decode_idesc)."""
    return _umma.decode_idesc(idesc, kind)


def decode_sdesc(desc: int) -> dict:
    """The fields of a tcgen05 shared-memory matrix descriptor: start address >> 4 (bits 0-13), leading
    byte offset >> 4 (16-29), stride byte offset >> 4 (32-45), the fixed value 0b001 (46-48), base
    offset (49-51), LBO mode (52), swizzle (61-63: 0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B)
    (judge.hw.umma.fields; 'fixed' is its 'version')."""
    f = _umma.fields(desc)
    f["fixed"] = f["version"]
    return f


def operand_addresses(desc: int, rows: int, kbytes: int, major: str = "K", elem_bytes: int = 1) -> np.ndarray:
    """Byte addresses (rows, kbytes) of an operand described by `desc`: element byte b of element k of
    row r (M of A, N of B) at [r, k * elem_bytes + b], K-major or MN-major, any swizzle and base
    offset, as judge.hw.mma_layout.read_address states them (bits outside the fields are ignored here)."""
    r = np.arange(rows)[:, None]
    k = np.arange(kbytes // elem_bytes)[None, :]
    f = decode_sdesc(desc)
    first = np.asarray(_layout.read_address(f["start"], f["lbo"], f["sbo"], _umma.MODE_SWIZZLE[f["swizzle"]], major,
                                            r, k, elem_bytes=elem_bytes, base_offset=f["base_offset"]), np.int64)
    return (first[..., None] + np.arange(elem_bytes)).reshape(rows, kbytes)


#: the swizzle codes tcgen05.cp reads (judge.model.ops.tcgen05_cp)
_SWZ = {0: "none", 2: "128B", 4: "64B", 6: "32B"}


def _major(f: dict, which: str) -> str:
    """'MN' when the instruction descriptor's transpose bit of operand `which` ('a' / 'b') is set, else 'K'."""
    return "MN" if f["mn_" + which] else "K"


def _decode_elems(raw: np.ndarray, fmt: str) -> np.ndarray:
    """Bytes (rows, K * size) -> float64 values (rows, K)."""
    if fmt == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if fmt == "f16":
        return raw.view(np.float16).astype(np.float64)
    if fmt == "tf32":                      # the low 13 mantissa bits are ignored
        return (raw.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    from judge.hw import formats
    if fmt in BS.PACKED16:                 # FP6 / FP4 of kind::f8f6f4 / mxf8f6f4: 16 per 16-byte unit
        return formats.decode(BS.unpack_f8f6f4(raw, fmt), fmt)
    if fmt == "e2m1x2":                    # FP4 of kind::mxf4 / mxf4nvf4: two per byte
        return formats.decode(formats.unpack_fp4(raw), "e2m1")
    return formats.decode(raw, fmt)


# bytes per element as an operand spans shared memory; FP6 / FP4 of kind::f8f6f4 take a byte's place (padded
# 16-byte units), "e2m1x2" is a byte of two FP4 (kind::mxf4 / mxf4nvf4): see _geometry
_ESIZE = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "e2m1": 1, "e3m2": 1, "e2m3": 1, "e2m1x2": 1}
_KIND_K = {"kind::f16": 16, "kind::tf32": 8, "kind::f8f6f4": 32}


@op("tcgen05.mma")
def mma(m, ins):
    """tcgen05.mma [d], adesc, bdesc, idesc, enable-input-d: one MMA per executing thread, computed now, landing at its commit."""
    p = ins.parts
    pair = "cta_group::2" in p
    kind = next((x for x in p if x.startswith("kind::")), None)
    scaled = kind in BS.KINDS and "block_scale" in p          # block-scaled kinds: judge.model.block_scale
    if kind not in _KIND_K and not scaled:
        raise Unsupported(ins.op, f"tcgen05.mma {kind or ''} is not modelled (kind::f16, kind::tf32, kind::f8f6f4 "
                                  f"and the block-scaled kind::mxf8f6f4 / mxf4 / mxf4nvf4 are)")
    if "ws" in p or "sp" in p or any(x.startswith("collector") for x in p):
        raise Unsupported(ins.op, "tcgen05.mma.ws / .sp / collector usage")
    dop, aop, bop, iop = ins.args[:4]
    rest = ins.args[4:]
    if aop.kind == "addr":
        raise Unsupported(ins.op, "tcgen05.mma with A in tensor memory")
    if scaled:                                                # [scale-A-tmem], [scale-B-tmem], enable-input-d
        if len(rest) != 3:
            raise Unsupported(ins.op, "a block-scaled tcgen05.mma with other operands than scale-A, scale-B, "
                                      "enable-input-d")
        sa_op, sb_op = (_reg(x) if x.kind == "addr" else x for x in rest[:2])
        rest = rest[2:]
    if len(rest) != 1 or rest[0].kind == "vec":
        raise Unsupported(ins.op, "disable-output-lane and scale-input-d")
    eop = rest[0]
    K = BS.KINDS[kind] if scaled else _KIND_K[kind]

    def issue(ins, mask, full):
        tc = state(m)
        _group(m, ins)
        lanes = np.nonzero(mask)[0]
        daddr = np.broadcast_to(np.asarray(m.rd(dop if dop.kind != "addr" else _reg(dop), "u32", ins)),
                                (m.n,)).astype(np.int64)
        ad = np.broadcast_to(np.asarray(m.rd(aop, "b64", ins)), (m.n,)).astype(np.uint64)
        bd = np.broadcast_to(np.asarray(m.rd(bop, "b64", ins)), (m.n,)).astype(np.uint64)
        idv = _u32(m, iop, ins)
        en = np.broadcast_to(np.asarray(m.rd(eop, "pred", ins)), (m.n,))
        if scaled:
            sa_all, sb_all = _u32(m, sa_op, ins), _u32(m, sb_op, ins)
        issuers = len(lanes)
        for t in lanes:                                  # one MMA per executing thread, in lane order
            t = int(t)
            c = int(m.cta[t])
            cm = tc.cta[c]
            f = BS.decode_idesc(int(idv[t]), kind) if scaled else decode_idesc(int(idv[t]), kind)
            if pair:                                     # .cta_group::2: one MMA over both CTAs of the pair
                if scaled:
                    raise Unsupported(ins.op, "block-scaled MMAs with .cta_group::2 are not modelled")
                _issue_pair(m, ins, tc, t, c, f, kind, K, int(daddr[t]), int(ad[t]), int(bd[t]), bool(en[t]),
                            issuers)
                continue
            _check_idesc(m, ins, f, kind)
            Mr, N = f["m"], f["n"]
            a = int(daddr[t])
            col, lane = a & 0xFFFF, a >> 16
            if lane != 0:
                m.fail("tcgen05-mma-address", ins, f"{m.tdesc(t)}'s tcgen05.mma at {m.where(ins)} writes D at "
                       f"tensor-memory address 0x{a:08x} (lane {lane}): an M = 128 MMA of one CTA fills lanes 0..127, so the "
                       f"lane field of [d_tmem] is 0")
            if cm.allocation_of(col, col + N) is None:
                _unallocated(m, ins, t, c, col, col + N, "tcgen05.mma writes")
            first = c * m.nthr_cta + 32 * (int(m.lt[t]) // 32)
            why = _unordered_read(m, tc, ins, c, np.array([t]), np.arange(first, first + 32),
                                  np.arange(col, col + N),
                                  f"the tcgen05.mma issued by {m.tdesc(t)} overwrites columns {col}..{col + N - 1}",
                                  "overwritten while that read still runs (the epilogue of the previous tile)",
                                  "the next tile's tcgen05.mma")
            if why:
                m.fail("tcgen05-mma-overwrite", ins, why)
            A, wa = _operand(m, ins, t, c, int(ad[t]), Mr, *_geometry(kind, K, f["a"]), "A", _major(f, "a"))
            B, wb = _operand(m, ins, t, c, int(bd[t]), N, *_geometry(kind, K, f["b"]), "B", _major(f, "b"))
            if f["neg_a"]:
                A = -A
            if f["neg_b"]:
                B = -B
            if scaled:                                                   # (A * scale_A) (B * scale_B), per quarter
                prod = _scaled_product(m, ins, t, c, cm, A, B, f, kind, K, int(sa_all[t]), int(sb_all[t]))
            else:
                prod = A @ B.T                                           # (M, N), exact in float64
            cols = np.arange(col, col + N)
            if bool(en[t]):
                _stored_unwaited(m, ins, cm, np.arange(Mr), cols, f"the tcgen05.mma issued by {m.tdesc(t)}")
                prev = cm.future[:Mr, col:col + N].view(np.float32).astype(np.float64)
                d = (prev + prod).astype(np.float32)
            else:
                d = prod.astype(np.float32)
            vals = d.view(np.uint32)
            cm.future[:Mr, col:col + N] = vals
            rec = TM.Mma(thread=t, pc=m.cur_pc, cta=c, cols=range(col, col + N), lanes=range(Mr),
                         values=vals.copy(), words=(wa, wb), issuers=issuers, index=len(tc.ops))
            tc.ops.append(rec)
            cm.col_op[cols] = len(tc.ops) - 1
            for words in (wa, wb):
                m.bulk_reading[c, words] += 1
            tc.uncommitted.setdefault(t, []).append(rec)
            m.counts["tcgen05.mma"] += 1
            m.counts["tcgen05.mma.flops"] += 2 * Mr * N * K
            m.event("tcgen05.mma", thread=t, warp=int(m.lt[t]) // 32, block=c, col=col, n=N,
                    accumulate=bool(en[t]))
        if issuers > 1:
            m.counts["tcgen05.mma.issued_by_several_threads"] += 1
            note = (f"{issuers} threads executed the tcgen05.mma at {m.where(ins)} together: it is a single-thread "
                    f"instruction, so each of them issued an MMA of its own, and "
                    f"each tcgen05.commit tracks only its own thread's MMAs; let one thread issue them")
            if not any("single-thread instruction" in x for x in tc.notes):
                tc.notes.append(note)
    return issue


def _geometry(kind, K, fmt):
    """(units along K, format) of an operand as _operand reads it: kind::mxf4 / mxf4nvf4 pack two FP4 per
    byte (PTX ISA 9.7.16.10.4.6), so K elements span K / 2 bytes."""
    if kind in ("kind::mxf4", "kind::mxf4nvf4"):
        return K // 2, "e2m1x2"
    return K, fmt


def _scaled_product(m, ins, t, c, cm, A, B, f, kind, K, sa, sb):
    """(A * scale_A) (B * scale_B)^T of a block-scaled MMA, float64 (M, N), with the scales read from tensor
    memory at [scale-A-tmem] = sa and [scale-B-tmem] = sb (layout: judge.model.block_scale). Rows of D in
    lane quarter q use the scales of B held in that quarter (PTX ISA 9.7.16.10.7: scales are duplicated to
    all 32-lane partitions)."""
    nx, q = BS.scale_vector(kind, ins.parts)
    why = BS.scale_problem(kind, nx, f["stype"], f["sfa_id"], f["sfb_id"])
    if why:
        m.fail("tcgen05-scale-vec", ins, f"{m.tdesc(t)}'s tcgen05.mma.{kind[6:]}.block_scale{'.' + q if q else ''} "
               f"at {m.where(ins)}: {why}")
        raise checks.abort(m, "tcgen05-scale-vec", ins, "scale vector")
    Mr, N = A.shape[0], B.shape[0]
    reads = []
    for addr, rows, what in ((sa, Mr, "scale-A"), (sb, N, "scale-B")):
        col, lane = addr & 0xFFFF, addr >> 16
        ncol = BS.scale_columns(rows)
        if lane != 0:
            m.fail("tcgen05-mma-address", ins, f"{m.tdesc(t)}'s tcgen05.mma at {m.where(ins)} reads [{what}-tmem] at "
                   f"0x{addr:08x} (lane {lane}): the scales span lanes 0..127 (a copy in every 32-lane quarter), so "
                   f"the lane field is 0")
        if cm.allocation_of(col, col + ncol) is None:
            _unallocated(m, ins, t, c, col, col + ncol, f"tcgen05.mma reads its {what} factors from")
        _scales_ready(m, ins, t, c, cm, np.arange(col, col + ncol), what)
        reads.append(col)
    ca, cb = reads
    blk = K // nx
    sA = BS.scales_a(cm.future, ca, Mr, nx, f["sfa_id"], f["stype"])            # (M, nx)
    As = A * np.repeat(sA, blk, axis=1)
    prod = np.empty((Mr, N))
    for qd in range(Mr // 32):
        sB = BS.scales_b(cm.future, cb, N, nx, f["sfb_id"], f["stype"], qd)    # (N, nx) as quarter qd reads it
        rows = slice(32 * qd, 32 * qd + 32)
        prod[rows] = As[rows] @ (B * np.repeat(sB, blk, axis=1)).T
    m.counts["tcgen05.mma.block_scaled"] += 1
    return prod


def _scales_ready(m, ins, t, c, cm, cols, what):
    """The scale cells an MMA of thread t reads: written by a tcgen05.cp or MMA of t itself (the tensor core
    runs a thread's tcgen05.cp and tcgen05.mma in issue order), or completed and observed (the commit's
    mbarrier phase, then tcgen05.fence::after_thread_sync), or stored by tcgen05.st and waited for."""
    tc = state(m)
    busy = cols[cm.col_op[cols] >= 0]
    for col in busy:
        r = tc.ops[int(cm.col_op[col])]
        if r.thread != t:
            m.fail("tcgen05-scale-visibility", ins,
                   f"{m.tdesc(t)}'s tcgen05.mma at {m.where(ins)} reads its {what} factors in tensor-memory column "
                   f"{int(col)}, which the {'tcgen05.cp' if r.copy else 'tcgen05.mma'} issued by {m.tdesc(r.thread)} at "
                   f"{m.where(m.k.code[r.pc])} is still writing: "
                   + ("it was never committed" if not r.committed else "its commit's mbarrier arrival has not come")
                   + ". Issue the copy from the MMA's thread (same-thread tcgen05 operations run in order), or "
                     "commit it, wait on that mbarrier phase and execute tcgen05.fence::after_thread_sync")
            return
    vc = cm.col_done_vc[cols]
    for j in np.nonzero(vc >= 0)[0]:
        vcol, tdone = int(vc[j]), int(cm.col_done_t[cols[j]])
        if m.VC[t, vcol] < tdone:
            m.fail("tcgen05-scale-visibility", ins,
                   f"{m.tdesc(t)}'s tcgen05.mma at {m.where(ins)} reads its {what} factors in column {int(cols[j])}, "
                   f"written by another thread's tcgen05.cp whose commit's mbarrier phase {m.tdesc(t)} has not "
                   f"observed: wait on it, then tcgen05.fence::after_thread_sync")
            return
        if tc.fence_after[t] < tdone:
            m.fail("tcgen05-fence-after", ins,
                   f"{m.tdesc(t)}'s tcgen05.mma at {m.where(ins)} reads its {what} factors in column {int(cols[j])} "
                   f"with no tcgen05.fence::after_thread_sync after its wait on the commit that completed them")
            return
    _stored_unwaited(m, ins, cm, np.arange(TM.LANES), cols, f"the tcgen05.mma issued by {m.tdesc(t)} (its {what} factors)")


def _issue_pair(m, ins, tc, t, c, f, kind, K, a, adesc, bdesc, accumulate, issuers):
    """tcgen05.mma.cta_group::2 issued by thread t of block rank c: ONE MMA of M = 256 for the CTA pair.

    The same descriptors and tensor-memory address mean the same offsets in both CTAs: each CTA's shared
    memory holds its 128 rows of A at adesc and its N / 2 rows of B (K-major) at bdesc; B is the even
    CTA's rows followed by the odd CTA's. D's rows 0..127 land in the even CTA's tensor memory, rows
    128..255 in the odd CTA's, lane i = row i, N columns from the address's column in each. Either CTA of
    the pair may issue it (PTX ISA 9.7.16.5: "a single thread from the CTA-Pair"); the peer must not have
    exited. Each CTA's half is its own record, completed by the commit's arrival in that CTA."""
    who = m.tdesc(t)
    p = _peer(m, ins, c, who)
    _peer_alive(m, ins, c, p, who)
    if f["m"] == 128:
        raise Unsupported(ins.op, "M = 128 with .cta_group::2 (its data-path layout, 64 rows per CTA, is not "
                                  "modelled)")
    if f["m"] != 256:
        m.fail("tcgen05-idesc", ins, f"the instruction descriptor says M = {f['m']}: a .cta_group::2 MMA has "
               f"M = 128 or 256 across the pair (bits 24-28 hold M >> 4)")
        raise checks.abort(m, "tcgen05-idesc", ins, "shape")
    _check_idesc(m, ins, dict(f, m=128), kind)           # each CTA's half: 128 rows of A, N columns of D
    N = f["n"]
    col, lane = a & 0xFFFF, a >> 16
    if lane != 0:
        m.fail("tcgen05-mma-address", ins, f"{who}'s tcgen05.mma at {m.where(ins)} writes D at tensor-memory "
               f"address 0x{a:08x} (lane {lane}): an M = 256 MMA of a CTA pair fills lanes 0..127 of each CTA, so "
               f"the lane field of [d_tmem] is 0")
    pair = (c & ~1, c | 1)
    for q in pair:
        if tc.cta[q].allocation_of(col, col + N) is None:
            _unallocated(m, ins, t, q, col, col + N, f"tcgen05.mma.cta_group::2 writes (in block rank {q})")
    first = c * m.nthr_cta + 32 * (int(m.lt[t]) // 32)
    cols = np.arange(col, col + N)
    for q in pair:
        why = _unordered_read(m, tc, ins, q, np.array([t]), np.arange(first, first + 32), cols,
                              f"the tcgen05.mma issued by {who} overwrites columns {col}..{col + N - 1} of block "
                              f"rank {q}", "overwritten while that read still runs (the epilogue of the "
                              "previous tile)", "the next tile's tcgen05.mma")
        if why:
            m.fail("tcgen05-mma-overwrite", ins, why)
    As, Bs, words = {}, [], {}
    for q in pair:
        As[q], wa = _operand(m, ins, t, q, adesc, 128, K, f["a"], f"A (block rank {q})", _major(f, "a"))
        Bq, wb = _operand(m, ins, t, q, bdesc, N // 2, K, f["b"], f"B (block rank {q})", _major(f, "b"))
        Bs.append(Bq)
        words[q] = (wa, wb)
    B = np.vstack(Bs)                                                   # (N, K): the even CTA's rows first
    if f["neg_b"]:
        B = -B
    for q in pair:
        A = -As[q] if f["neg_a"] else As[q]
        prod = A @ B.T                                                  # (128, N), exact in float64
        cm = tc.cta[q]
        if accumulate:
            _stored_unwaited(m, ins, cm, np.arange(128), cols, f"the tcgen05.mma issued by {who}")
            d = (cm.future[:128, col:col + N].view(np.float32).astype(np.float64) + prod).astype(np.float32)
        else:
            d = prod.astype(np.float32)
        vals = d.view(np.uint32)
        cm.future[:128, col:col + N] = vals
        rec = TM.Mma(thread=t, pc=m.cur_pc, cta=q, cols=range(col, col + N), lanes=range(128),
                     values=vals.copy(), words=words[q], issuers=issuers, index=len(tc.ops))
        tc.ops.append(rec)
        cm.col_op[cols] = len(tc.ops) - 1
        for w in words[q]:
            m.bulk_reading[q, w] += 1
        tc.uncommitted.setdefault(t, []).append(rec)
    m.counts["tcgen05.mma"] += 1
    m.counts["tcgen05.mma.cta_group::2"] += 1
    m.counts["tcgen05.mma.flops"] += 2 * 256 * N * K
    m.event("tcgen05.mma", thread=t, warp=int(m.lt[t]) // 32, block=c, col=col, n=N, accumulate=accumulate,
            pair=True)


def _reg(a):
    from judge.model.ptx import Operand
    return Operand("reg", name=a.name)


def _check_idesc(m, ins, f, kind):
    if f.get("bit31"):
        raise Unsupported(ins.op, "instruction descriptor bit 31 of a block-scaled MMA (the K = 96 forms)")
    if f["sparse"]:
        raise Unsupported(ins.op, "sparse tcgen05.mma (instruction descriptor bit 2)")
    if (f["mn_a"] or f["mn_b"]) and kind not in _umma.FORMATS:
        raise Unsupported(ins.op, f"MN-major operands of {kind} (instruction descriptor bits 15-16)")
    for what, x, mn in (("A", f["a"], f["mn_a"]), ("B", f["b"], f["mn_b"])):
        if mn and x is not None and x not in _umma.MN_MAJOR_OK:
            m.fail("tcgen05-idesc", ins, f"the instruction descriptor makes {what} ({x}) MN-major (bit "
                   f"{15 if what == 'A' else 16}): only 8-bit, 16-bit and tf32 operands may be MN-major")
            raise checks.abort(m, "tcgen05-idesc", ins, "transpose bit")
    if f["dtype"] != 1:
        raise Unsupported(ins.op, f"D format {f['dtype']} (only F32 accumulators, bits 4-5 = 1, are modelled)")
    if f["a"] is None or f["b"] is None:
        m.fail("tcgen05-idesc", ins, f"the instruction descriptor's A/B formats ({f['atype']}, {f['btype']}) "
               f"are not formats of {kind}")
        raise checks.abort(m, "tcgen05-idesc", ins, "operand format")
    if f["a"] not in _ESIZE or f["b"] not in _ESIZE:
        raise Unsupported(ins.op, f"{f['a']} x {f['b']} operands (FP6 / FP4 of kind::f8f6f4 are not modelled)")
    if f["m"] == 64:
        raise Unsupported(ins.op, "M = 64 (its data-path layout is not modelled)")
    if f["m"] != 128 or f["n"] % 16 or not 16 <= f["n"] <= 256:
        m.fail("tcgen05-idesc", ins, f"the instruction descriptor says M = {f['m']}, N = {f['n']}: a "
               f".cta_group::1 MMA has M = 64 or 128 and N a multiple of 16 from 16 to 256 (bits 24-28 "
               f"hold M >> 4, bits 17-22 N >> 3)")
        raise checks.abort(m, "tcgen05-idesc", ins, "shape")


def _operand(m, ins, t, c, desc, rows, K, fmt, what, major="K"):
    d = decode_sdesc(desc)
    if d["fixed"] != 1:
        m.fail("tcgen05-descriptor", ins, f"{m.tdesc(t)}'s shared-memory descriptor of {what} ({desc:#018x}) "
               f"has {d['fixed']:#05b} in bits 46-48, which must hold the fixed value 0b001")
    if d["lbo_mode"]:
        raise Unsupported(ins.op, "descriptor LBO mode 1 (an absolute leading byte address)")
    if d["swizzle"] not in _umma.MODE_SWIZZLE:
        raise Unsupported(ins.op, f"swizzle code {d['swizzle']} of the shared-memory descriptor (reserved)")
    if major == "K" and d["swizzle"] == _umma.SWIZZLE_MODE["128B_base32B"]:
        raise Unsupported(ins.op, "a K-major operand with the 128B_base32B swizzle (an MN-major layout)")
    es = _ESIZE[fmt]
    addr = operand_addresses(desc, rows, K * es, major, es).astype(np.int64)
    if (addr < 0).any() or (addr + 1 > m.smem_size - 16).any():
        m.fail("shared-bounds", ins, f"tcgen05.mma operand {what} (descriptor {desc:#018x}) reaches past the "
               f"{m.smem_size - 16} bytes of shared memory")
        raise checks.abort(m, "shared-bounds", ins, "tcgen05.mma operand out of shared memory")
    words = checks.words_in(addr)
    checks.check_store_source(m, ins, t, c, words, f"tcgen05.mma operand {what} read (async proxy)")
    raw = np.ascontiguousarray(m.sm[c, addr])                      # (rows, K * es) bytes
    return _decode_elems(raw, fmt), words


def _unallocated(m, ins, t, c, lo, hi, verb):
    live = ", ".join(f"{n} columns at {b}" for b, n in sorted(state(m).cta[c].allocs.items())) or "none"
    m.fail("tcgen05-unallocated", ins, f"{m.tdesc(t)}: {verb} tensor-memory columns {lo}..{hi - 1} at "
           f"{m.where(ins)}, outside every live allocation of this CTA (live: {live}). Use the address "
           f"tcgen05.alloc wrote to shared memory")
    raise checks.abort(m, "tcgen05-unallocated", ins, "unallocated tensor memory")


# ---------------------------------------------------------------------------- commit
@op("tcgen05.commit")
def commit(m, ins):
    """tcgen05.commit [mbar] (, ctaMask): the executing thread's uncommitted MMAs arrive once on mbar when they
    complete; with .multicast::cluster once on the mbarrier at mbar's offset in each CTA ctaMask names."""
    mcast = "multicast::cluster" in ins.parts
    aop = ins.args[0]
    mop = ins.args[1] if mcast and len(ins.args) > 1 else None

    def track(ins, mask, full):
        tc = state(m)
        g = _group(m, ins)
        lanes = np.nonzero(mask)[0]
        cta, off = completion.mbarrier_address(m, ins, aop, lanes)
        cmask = (np.broadcast_to(np.asarray(m.rd(mop, "u16", ins)), (m.n,)).astype(np.int64)
                 if mop is not None else None)
        for t, c, o in zip(lanes, cta, off):
            t = int(t)
            if g == 2:
                own = int(m.cta[t])
                _peer_alive(m, ins, own, _peer(m, ins, own, m.tdesc(t)), m.tdesc(t))
            if cmask is not None:
                bits = int(cmask[t])
                ranks = [r for r in range(16) if (bits >> r) & 1]
                if not ranks or max(ranks) >= m.ncta:
                    m.fail("tcgen05-commit-mask", ins,
                           f"{m.tdesc(t)}'s tcgen05.commit.multicast::cluster at {m.where(ins)} has ctaMask "
                           f"0x{bits:04x}: each bit names a CTA of the cluster (ranks 0..{m.ncta - 1}) whose "
                           f"mbarrier at the same offset receives the arrival, and at least one must be set")
                    raise checks.abort(m, "tcgen05-commit-mask", ins, "ctaMask")
            else:
                ranks = [int(c)]
            mbs = [completion.mbarrier_at(m, ins, (r, int(o)), t) for r in ranks]
            mb = mbs[0]
            ops = tc.uncommitted.pop(t, [])
            for r in ops:
                r.committed = True
            tc.commits.append(TM.Commit(thread=t, pc=m.cur_pc, mb=mb, ops=ops, snap=m.VC[t].copy(), time=m.gtime,
                                        also=mbs[1:]))
            m.counts["tcgen05.commit"] += 1
            m.event("tcgen05.commit", thread=t, warp=int(m.lt[t]) // 32, block=int(c), mbarrier=f"0x{int(o):x}",
                    mmas=len(ops))
    return track


# ---------------------------------------------------------------------------- ld / st / wait / fence
def _shape(ins):
    p = ins.parts
    if any(x.startswith("pack") or x.startswith("unpack") for x in p):
        raise Unsupported(ins.op, ".pack::16b / .unpack::16b")
    if "32x32b" not in p:
        raise Unsupported(ins.op, "tcgen05.ld/st shapes other than .32x32b")
    x = next((q for q in p if q.startswith("x") and q[1:].isdigit()), "x1")
    return int(x[1:])


def _uniform(m, ins, addr, ts, w, c, what):
    v = addr[ts]
    if (v != v[0]).any():
        k = int(np.argmax(v != v[0]))
        m.fail("tcgen05-uniform", ins,
               f"the threads of warp {w}{_blk(m, c)} give {what} different tensor-memory addresses at "
               f"{m.where(ins)}: {m.tdesc(ts[0])} 0x{int(v[0]):08x}, {m.tdesc(ts[k])} 0x{int(v[k]):08x}. The "
               f"address is one per warp (the lane field names the warp's first lane; each thread gets lane "
               f"+ its lane id): compute it from the warp id only")
        raise checks.abort(m, "tcgen05-uniform", ins, "warp-varying tensor-memory address")


def _access(m, ins, tc, c, w, ts, a, ncols, verb):
    lane, col = a >> 16, a & 0xFFFF
    q = w % 4
    if lane != 32 * q:
        m.fail("tcgen05-lane-quarter", ins,
               f"warp {w}{_blk(m, c)} {verb} tensor-memory lanes {lane}..{lane + 31} at {m.where(ins)}, but warp "
               f"{w} may reach only lanes {32 * q}..{32 * q + 31}: warp id % 4 = {q} picks its quarter of the 128 "
               f"lanes. Address lane 32 * (warp % 4)")
        raise checks.abort(m, "tcgen05-lane-quarter", ins, "lane quarter")
    if tc.cta[c].allocation_of(col, col + ncols) is None:
        _unallocated(m, ins, int(ts[0]), c, col, col + ncols, verb)
    return lane, col


@op("tcgen05.ld")
def ld(m, ins):
    """tcgen05.ld.sync.aligned.32x32b.xN: a warp reads N columns of its 32 lanes into N registers per thread."""
    dst, aop = ins.args[:2]
    items = dst.items if dst.kind == "vec" else [dst]
    if not any(x in ins.parts for x in ("b32",)):
        raise Unsupported(ins.op)
    aop_r = _reg(aop) if aop.kind == "addr" else aop

    def load(ins, mask, full):
        tc = state(m)
        nrep = _shape(ins)
        if nrep != len(items):
            raise Unsupported(ins.op, f".x{nrep} with {len(items)} registers")
        addr = _u32(m, aop_r, ins) + (aop.value if aop.kind == "addr" else 0)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.ld"):
            cm = tc.cta[c]
            _uniform(m, ins, addr, ts, w, c, "tcgen05.ld")
            lane, col = _access(m, ins, tc, c, w, ts, int(addr[ts[0]]), nrep, "reads")
            cols = np.arange(col, col + nrep)
            busy = cols[cm.col_op[cols] >= 0]
            if len(busy):
                r = tc.ops[int(cm.col_op[busy[0]])]
                m.fail("tcgen05-ld-in-flight", ins,
                       f"warp {w}{_blk(m, c)} reads tensor-memory column {int(busy[0])} with tcgen05.ld at "
                       f"{m.where(ins)} while the {'tcgen05.cp' if r.copy else 'tcgen05.mma'} issued by "
                       f"{m.tdesc(r.thread)} at {m.where(m.k.code[r.pc])} may still be writing it: "
                       + ("it was never committed (tcgen05.commit)" if not r.committed else
                          "the mbarrier arrival of its tcgen05.commit has not come")
                       + ". Wait on the commit's mbarrier phase first")
            vc = cm.col_done_vc[cols]
            done = vc >= 0
            if done.any():
                j = int(np.argmax(done))
                vcol, tdone = int(vc[j]), int(cm.col_done_t[cols[j]])
                know = m.VC[ts, vcol] >= tdone
                if not know.all():
                    t = int(ts[int(np.argmin(know))])
                    m.fail("tcgen05-visibility", ins,
                           f"{m.tdesc(t)} reads the MMA result in column {int(cols[j])} with tcgen05.ld at "
                           f"{m.where(ins)} without having observed the mbarrier phase its tcgen05.commit "
                           f"completed (nor synchronized with a thread that did): wait on that mbarrier "
                           f"phase, then tcgen05.fence::after_thread_sync")
                elif (tc.fence_after[ts] < tdone).any():
                    t = int(ts[int(np.argmax(tc.fence_after[ts] < tdone))])
                    m.fail("tcgen05-fence-after", ins,
                           f"{m.tdesc(t)} reads the MMA result in column {int(cols[j])} with tcgen05.ld at "
                           f"{m.where(ins)} with no tcgen05.fence::after_thread_sync between its wait on the "
                           f"commit's mbarrier (or the barrier after it) and this read: the fence orders "
                           f"tcgen05 operations after a thread synchronization")
            rows = lane + (m.lt[ts] % 32)
            _stored_unwaited(m, ins, cm, rows, cols, f"warp {w}{_blk(m, c)}'s tcgen05.ld")
            vals = cm.cells[rows[:, None], cols[None, :]]               # (32, nrep)
            wmask = np.zeros(m.n, bool)
            wmask[ts] = True
            for j, it in enumerate(items):
                v = np.zeros(m.n, np.uint32)
                v[ts] = vals[:, j]
                m.wr(it, v, wmask, False, internal=True)
                if it.kind == "reg":
                    pm = tc.ld_pending.setdefault(it.name, np.zeros(m.n, bool))
                    pm[ts] = True
                    tc.ld_pending_pc[it.name] = m.cur_pc
                    tt = m.taint.setdefault(it.name, np.zeros(m.n, bool))
                    tt[ts] = True
            cm.reads[col:col + nrep, ts] = m.gtime
            cm.read_fenced[col:col + nrep, ts] = -1
            for t in ts:
                cm.read_pc[int(t)] = m.cur_pc
            m.counts["tcgen05.ld"] += 1
            m.counts["tcgen05.ld.bytes"] += 4 * nrep * len(ts)
            m.event("tcgen05.ld", warp=w, block=c, lane=lane, col=col, ncols=nrep)
    return load


def _stored_unwaited(m, ins, cm, rows, cols, who):
    """Cells a tcgen05.st wrote may be read (ld, or an MMA accumulating on them) only after the storing
    warp's tcgen05.wait::st."""
    pend = cm.st_warp[rows[:, None], cols[None, :]]
    if (pend >= 0).any():
        i, j = np.argwhere(pend >= 0)[0]
        w = int(pend[i, j])
        m.fail("tcgen05-wait-st", ins,
               f"{who} at {m.where(ins)} reads tensor-memory lane {int(rows[i])}, column {int(cols[j])}, which "
               f"warp {w}'s tcgen05.st at {m.where(m.k.code[cm.st_pc.get(w, m.cur_pc)])} writes asynchronously: "
               f"that warp must execute tcgen05.wait::st (and then synchronize with the reader) first")


@op("tcgen05.st")
def st(m, ins):
    """tcgen05.st.sync.aligned.32x32b.xN: a warp writes N registers per thread into its 32 lanes."""
    aop, src = ins.args[:2]
    items = src.items if src.kind == "vec" else [src]
    aop_r = _reg(aop) if aop.kind == "addr" else aop

    def store(ins, mask, full):
        tc = state(m)
        nrep = _shape(ins)
        if nrep != len(items):
            raise Unsupported(ins.op, f".x{nrep} with {len(items)} registers")
        addr = _u32(m, aop_r, ins) + (aop.value if aop.kind == "addr" else 0)
        vals = [np.broadcast_to(np.asarray(m.rd(it, "b32", ins)), (m.n,)) for it in items]
        for c, w, ts in _warps(m, ins, mask, "tcgen05.st"):
            cm = tc.cta[c]
            _uniform(m, ins, addr, ts, w, c, "tcgen05.st")
            lane, col = _access(m, ins, tc, c, w, ts, int(addr[ts[0]]), nrep, "writes")
            rows = lane + (m.lt[ts] % 32)
            for j, v in enumerate(vals):
                cm.cells[rows, col + j] = v[ts]
                cm.future[rows, col + j] = v[ts]
            cm.st_warp[rows[:, None], np.arange(col, col + nrep)[None, :]] = w
            cm.st_pc[w] = m.cur_pc
            m.counts["tcgen05.st"] += 1
    return store


@op("tcgen05.wait::ld")
def wait_ld(m, ins):
    """tcgen05.wait::ld: the warp's tcgen05.ld registers become usable."""
    def wait_loads(ins, mask, full):
        tc = state(m)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.wait::ld"):
            for name in list(tc.ld_pending):
                tc.ld_pending[name][ts] = False
                if not tc.ld_pending[name].any():
                    del tc.ld_pending[name]
            m.counts["tcgen05.wait::ld"] += 1
    return wait_loads


@op("tcgen05.wait::st")
def wait_st(m, ins):
    """tcgen05.wait::st: the warp's tcgen05.st have completed."""
    def wait_stores(ins, mask, full):
        tc = state(m)
        for c, w, ts in _warps(m, ins, mask, "tcgen05.wait::st"):
            cm = tc.cta[c]
            cm.st_warp[cm.st_warp == w] = -1
            m.counts["tcgen05.wait::st"] += 1
    return wait_stores


@op("tcgen05.fence::before_thread_sync")
def fence_before(m, ins):
    """tcgen05.fence::before_thread_sync: orders earlier tcgen05 operations before the next synchronization."""
    def mark_before(ins, mask, full):
        tc = state(m)
        tc.fence_before[mask] = m.gtime
        idx = np.nonzero(mask)[0]
        for cm in tc.cta:                   # this fence follows every read not yet fenced
            f = cm.read_fenced[:, idx]
            f[(cm.reads[:, idx] >= 0) & (f < 0)] = m.gtime
            cm.read_fenced[:, idx] = f
    return mark_before


@op("tcgen05.fence::after_thread_sync")
def fence_after(m, ins):
    """tcgen05.fence::after_thread_sync: orders later tcgen05 operations after the last synchronization."""
    def mark_after(ins, mask, full):
        state(m).fence_after[mask] = m.gtime
    return mark_after


@op("tcgen05")
def other(m, ins):
    """Any other tcgen05 instruction: Unsupported, never a verdict."""
    raise Unsupported(ins.op, "this tcgen05 instruction is not modelled (tcgen05.shift, ...)")
