"""judge.model.scheduler - runs a cluster's threads: which threads go next, blocking, barriers, exits, hangs.

    from judge.model import scheduler
    scheduler.run_cluster(m, (0, 0, 0))    # m: a judge.model.state.Machine; runs until every thread exits

Used by judge.model.run. The runnable threads at the lowest PC execute one instruction together
(predicates and divergence become masks); an instruction's run function comes from its family
(judge/model/ops/, looked up in judge.model.registry). A thread that waits (bar.sync, an mbarrier
wait that cannot succeed yet, a cluster barrier) is blocked until it may go on; when every live
thread is blocked the run is a Hang carrying the wait-for graph, and a run past its budget of
instruction groups is a Hang too ("a loop that never ends").
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from judge.model import checks, completion, registry, tensor_memory
from judge.model.checks import CPA_LANDED, FENCED, PLAIN, TMA_LANDED
from judge.model.errors import Hang, Unsupported


def run_cluster(m, cluster_origin):
    """Run every thread of the cluster whose first block is at cluster_origin, to its end."""
    m.begin_cluster(cluster_origin)
    try:
        execute(m)
        finish(m)
    except Unsupported as e:           # name the learner's line of the instruction the model lacks
        e.at(m.where(m.k.code[min(m.cur_pc, len(m.k.code) - 1)]))
        raise


# instructions that cannot change which threads run next (no branch, barrier, wait or arrival)
_SAFE = frozenset("add sub mul mad fma div rem min max and or xor not neg abs cnot rcp sqrt rsqrt ex2 lg2 "
                  "sin cos tanh popc clz brev shl shr setp selp mov cvt cvta bfe lop3 prmt shf ld ldu st "
                  "shfl vote activemask mapa getctarank membar nanosleep prefetch prefetchu".split())

class Ahead:
    """A schedule in which warps run ahead of each other (judge.model.run(schedule="ahead")): the warps of the
    cluster (its warpgroups, in a kernel with wgmma or setmaxnreg) are dealt, in an order drawn from the seed,
    into 2 to 4 groups that take turns; the group whose
    turn it is runs alone (its warps together, as in lockstep) until all of them block (a barrier, an mbarrier
    wait that cannot succeed yet), exit, or the group has run its quantum of instruction groups (drawn from
    the seed too, so that a spin loop on memory lets the others run). So one group's arrivals may all come
    before another group's copies are issued, and a consumer warp may run as far ahead of its producer as
    its waits allow: orders lockstep never produces, all of which the PTX memory model allows (no
    forward-progress or fairness guarantee between warps without synchronization). A run costs about as many
    instruction groups as there are groups of warps times lockstep's. The same seed gives the same schedule
    (report.schedule says which)."""

    def __init__(self, m, seed):
        self.rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5EED])
        self.quantum = int(self.rng.choice([8, 32, 128, 512]))
        self.budget = m.budget
        self.warp_of = None

    def begin(self, m):
        """Deal this cluster's warps (or warpgroups) into the groups that take turns."""
        # the unit dealt is a warp, or a warpgroup where the kernel has warpgroup-wide .sync.aligned instructions
        # (wgmma, setmaxnreg: all 128 threads execute each one together, PTX ISA 9.7.15 / setmaxnreg)
        unit = 128 if any(i.parts[0] in ("wgmma", "setmaxnreg") for i in m.k.code) else 32
        wpc = -(-m.nthr_cta // unit)
        nw = wpc * m.ncta
        self.warp_of = m.cta * wpc + m.lt // unit
        order = self.rng.permutation(nw)
        k = min(nw, int(self.rng.integers(2, 5)))
        cuts = np.sort(self.rng.choice(np.arange(1, nw), k - 1, replace=False)) if k > 1 else []
        self.groups = [g for g in np.split(order, cuts) if len(g)]
        self.masks = [np.isin(self.warp_of, g) for g in self.groups]
        self.i = -1
        self.left = 0
        self.lead = np.zeros(m.n, bool)
        # each group now issues its instruction groups alone: the budget grows with the groups
        m.budget = self.budget * len(self.groups)
        m.schedule_note = (f"warps ahead (seed {m.seed}): groups of {'warpgroups' if unit == 128 else 'warps'} "
                           f"{[g.tolist() for g in self.groups]} "
                           f"take turns, each up to {self.quantum} instruction groups")

    def pick(self, runnable):
        """The runnable threads of the group whose turn it is (the next group with any, when the turn ends)."""
        lr = runnable & self.lead
        if self.left > 0 and lr.any():
            self.left -= 1
            return lr
        for _ in range(len(self.groups)):
            self.i = (self.i + 1) % len(self.groups)
            self.lead = self.masks[self.i]
            lr = runnable & self.lead
            if lr.any():
                self.left = self.quantum - 1
                return lr
        return runnable


def execute(m):
    """The loop: the runnable threads at the lowest PC execute one instruction together, until all exit
    (under schedule="ahead", those of the warp whose turn it is: Ahead)."""
    code = m.k.code
    ncode = len(code)
    big = np.int64(1 << 60)
    handlers = {}
    conv = None                       # (pc, active, count) while every runnable thread is at one pc
    safe = _SAFE
    ahead = m.ahead
    if ahead is not None:
        ahead.begin(m)
    while True:
        if conv is None:
            runnable = m.alive & ~m.blocked
            if not runnable.any():
                if not m.alive.any():
                    break
                _everyone_blocked(m)
                continue
            if ahead is not None:
                runnable = ahead.pick(runnable)
            pcs = np.where(runnable, m.pc, big)
            p = int(pcs.min())
            active = pcs == p
            nrun = int(np.count_nonzero(runnable))
            nall = int(np.count_nonzero(active))
            together = nall == nrun
        else:
            p, active, nall = conv
            together = True
        if p >= ncode:
            m.alive[active] = False
            on_exit(m, active, code[-1])
            conv = None
            continue
        ins = code[p]
        m.cur_pc = p
        m.steps += 1
        if m.steps > m.budget:
            _out_of_budget(m, ins)
        if ins.guard is not None:
            mask = active & m.rd(ins.guard, "pred", ins)
            nact = int(np.count_nonzero(mask))
        else:
            mask, nact = active, nall
        m.counts["instructions"] += nact
        m.pc[active] = p + 1
        conv = (p + 1, active, nall) if together and ins.parts[0] in safe else None
        if nact == 0:
            continue
        h = handlers.get(p)
        if h is None:
            h = handlers[p] = handler_for(m, ins)
        m.cur_mask = mask
        m.cur_taint = None
        h(ins, mask, nact == m.n)
        m.gtime += 1

def handler_for(m, ins):
    """The run function of instruction `ins`: its family's factory, found by the longest registered
    dotted prefix of its name (judge.model.registry). An unknown instruction is Unsupported."""
    factory = registry.lookup(ins.parts)
    if factory is None:
        raise Unsupported(ins.op, where=m.where(ins))
    try:
        return factory(m, ins)
    except (IndexError, KeyError) as e:
        # a factory that finds no entry for the instruction's type or modifier (a form its tables lack) would
        # otherwise end the run as an internal error: the model has no verdict for the form, and says so
        raise Unsupported(ins.op, f"a form of `{ins.parts[0]}` the model has no rule for "
                          f"({type(e).__name__}: {e})", where=m.where(ins)) from e


def _out_of_budget(m, ins):
    # Blocks of different clusters run one after another here. A kernel that waits for another
    # block through global memory (a flag, a counter) would spin forever in the model although
    # it finishes on a GPU: with such instructions and more than one cluster, give no verdict.
    clusters = int(np.prod([g // c for g, c in zip(m.grid, m.cluster)]))
    sync_like = [i for i in m.k.code if i.parts[0] in ("atom", "red") and "shared" not in "".join(i.parts)
                 or i.parts[0] == "ld" and any(q in i.parts for q in ("acquire", "volatile", "relaxed"))
                 and not any(q.startswith("shared") for q in i.parts)]
    if clusters > 1 and sync_like:
        raise Unsupported(sync_like[0].text, "the kernel ran past the step budget and may be waiting for "
                          "another block through global memory; the model runs one cluster at a time")
    live = np.nonzero(m.alive)[0]
    pcs = Counter(int(m.pc[t]) - 1 for t in live if not m.blocked[t])
    where = "; ".join(f"{n} threads at {m.where(m.k.code[max(p, 0)])}" for p, n in pcs.most_common(3))
    first = next((m.learner_at(m.k.code[max(p, 0)]) for p, _ in pcs.most_common(3)
                  if m.learner_at(m.k.code[max(p, 0)])), "")
    raise Hang(f"{first + ': ' if first else ''}the block ran {m.budget} instruction groups without finishing: "
               f"a loop that never ends (the threads were last at {where})",
               [{"thread": int(t), "pc": int(m.pc[t])} for t in live[:8]])

def _everyone_blocked(m):
    """Nothing can run. First the completions the hardware still performs on its own: the copies
    behind a cp.async.mbarrier.arrive land and arrive, and a tcgen05.commit's arrival comes (each at its
    latest legal moment). If none is left, a Hang whose message and graph say who waits on what, and
    what is missing."""
    if completion.flush_cp_async_arrivals(m) or completion.flush_tcgen05_commits(m):
        return
    graph, lines, first = [], [], ""
    seen = set()
    for t in np.nonzero(m.alive)[0]:
        kind, key = m.block_why.get(int(t), ("?", None))
        if (kind, key) in seen:
            continue
        seen.add((kind, key))
        who = np.nonzero(m.alive & np.array([m.block_why.get(int(u), (None, None)) == (kind, key)
                                                for u in range(m.n)]))[0]
        if kind == "bar":
            c, bid = key
            b = m.bars.get(key, {})
            arrived = int(np.count_nonzero(b.get("mask", np.zeros(m.n, bool))))
            exp = b.get("expected")
            rows = np.arange(c * m.nthr_cta, (c + 1) * m.nthr_cta)
            missing = rows[m.alive[rows] & ~b.get("mask", np.zeros(m.n, bool))[rows]]
            # bar.sync without a count waits for every thread of the block that has not exited
            of = f"{exp}" if exp is not None else f"the block's {int(np.count_nonzero(m.alive[rows]))} live threads"
            exp = exp if exp is not None else int(np.count_nonzero(m.alive[rows]))
            name = f"barrier {bid}" + (" (__syncthreads)" if bid == 0 else "")
            msg = (f"{len(who)} threads wait at {name}" + (f" of block rank {c}" if m.ncta > 1 else "")
                   + f" ({arrived} of {of} arrived); "
                   + (f"{len(missing)} live threads never arrive there (e.g. {m.tdesc(missing[0])}, "
                      f"blocked on {m.block_why.get(int(missing[0]), ('?',))[0]})" if len(missing) else
                      "the rest have exited"))
            graph.append({"waiters": who.tolist(), "on": f"barrier {bid}", "block": c,
                          "arrived": arrived, "expected": exp})
        elif kind == "mbar":
            mkey, parity = key
            mb = m.mbars[mkey]
            msg = (f"{len(who)} thread{'s' if len(who) > 1 else ''} ({m.tdesc(who[0])}{', ...' if len(who) > 1 else ''}) "
                   f"wait{'' if len(who) > 1 else 's'} for phase parity {parity} of {m.mbar_name(mb.off, mb)}"
                   + (f" of block rank {mb.cta}" if m.ncta > 1 else "") + f", now in phase {mb.phase}: "
                   f"{mb.pending} of {mb.count} arrivals missing, tx-count {mb.tx} bytes "
                   f"outstanding (expected {mb.tx_expected} bytes this phase, delivered "
                   f"{mb.tx_done})")
            graph.append({"waiters": who.tolist(), "on": f"mbarrier 0x{mb.off:x}", "name": m.mbar_name(mb.off, mb),
                          "parity": parity,
                          "phase": mb.phase, "pending_arrivals": mb.pending, "tx_missing": mb.tx})
        elif kind == "cluster":
            missing = np.nonzero(m.alive & (m.cl_count <= key))[0]
            msg = (f"{len(who)} threads wait at barrier.cluster.wait (cluster barrier phase {key}); "
                   f"{len(missing)} live threads of the cluster never arrive there"
                   + (f" (e.g. {m.tdesc(missing[0])}, blocked on "
                      f"{m.block_why.get(int(missing[0]), ('?',))[0]})" if len(missing) else ""))
            graph.append({"waiters": who.tolist(), "on": "barrier.cluster", "phase": key,
                          "missing": missing.tolist()})
        elif kind in m.wait_descriptions:           # a family's own wait (e.g. setmaxnreg)
            msg = m.wait_descriptions[kind](m, key, who)
            graph.append({"waiters": who.tolist(), "on": kind, "key": list(key)})
        else:
            msg = f"{len(who)} threads blocked ({kind})"
            graph.append({"waiters": who.tolist(), "on": kind})
        at = m.place_of(who)                     # the learner's line first: where they wait
        lines.append(f"{at}: {msg}" if at else msg)
        pcs = [m.block_why.at[int(u)] for u in who if int(u) in m.block_why.at]
        first = first or (m.learner_at(m.k.code[pcs[0]]) if pcs else "")
    raise Hang(f"{first + ': ' if first else ''}every live thread is blocked:\n  " + "\n  ".join(lines), graph)

def release_barrier(m, key, ins):
    """Open barrier `key` ((block, id) or ("warp", block, warp)) if every thread it waits for arrived."""
    b = m.bars.get(key)
    if b is None:
        return
    if key[0] == "warp":
        _, c, w = key
        done = int(np.count_nonzero(b["mask"])) >= b["expected"] or not (
            m.alive[c * m.nthr_cta + 32 * w: c * m.nthr_cta + 32 * w + 32] & ~b["mask"][
                c * m.nthr_cta + 32 * w: c * m.nthr_cta + 32 * w + 32]).any()
        cta = c
    else:
        cta = key[0]
        rows = slice(cta * m.nthr_cta, (cta + 1) * m.nthr_cta)
        if b["expected"] is not None:
            done = int(np.count_nonzero(b["mask"])) >= b["expected"]
        else:
            done = not (m.alive[rows] & ~b["mask"][rows]).any()
        b["expected_now"] = b["expected"] if b["expected"] is not None else int(np.count_nonzero(m.alive[rows]))
    b.setdefault("expected_now", b["expected"])
    if not done:
        return
    del m.bars[key]
    for write in b.get("on_release", ()):          # bar.red: each arrival's result, now that all are in
        write(b)
    checks.join(m, b["mask"], b["waiters"])
    m.blocked[b["waiters"]] = False
    for t in np.nonzero(b["waiters"])[0]:
        m.block_why.pop(int(t), None)
    m.event("barrier", id=str(key), threads=int(np.count_nonzero(b["mask"])))
    if key[0] != "warp":
        rows = slice(cta * m.nthr_cta, (cta + 1) * m.nthr_cta)
        if not (m.alive[rows] & ~b["mask"][rows]).any():
            _settle_full_barrier(m, cta)

def _settle_full_barrier(m, c):
    """Every live thread of block c passed one barrier: what they did before is known to all."""
    rows = np.arange(c * m.nthr_cta, (c + 1) * m.nthr_cta)
    rows = rows[m.alive[rows]]
    if len(rows) == 0:
        return
    colmin = m.VC[rows].min(axis=0)
    st = m.w_state[c]
    for s in (CPA_LANDED, TMA_LANDED, FENCED):
        hit = st == s
        if hit.any():
            idx = np.nonzero(hit)[0]
            wt = m.w_thread[c, idx]
            ok = colmin[wt] >= m.w_time[c, idx]
            st[idx[ok]] = PLAIN
    if m.bulk_waited_any:                   # every bulk store's covering wait is now known to the whole block
        m.bulk_waited_t[c] = -1
    if m.ncta == 1:
        m.r_wt[c] = 0
    else:                                   # only this block's warps are known to all of it
        m.r_wt[c][:, c * m.nthr_cta // 32:(c + 1) * m.nthr_cta // 32] = 0

def release_cluster_barrier(m, ins):
    """barrier.cluster.wait returns once every live thread of the cluster arrived for that phase."""
    live = m.cl_count[m.alive]
    fewest = int(live.min()) if live.size else None   # arrivals of the live thread that arrived least often
    done: dict = {}                                   # phase -> the waiters it releases
    for t in np.nonzero(m.blocked)[0].tolist():
        why = m.block_why.get(t)
        if not why or why[0] != "cluster":
            continue
        k = why[1]
        if fewest is None or fewest > k:              # no live thread has arrived only k times or fewer
            done.setdefault(k, []).append(t)
    for k, ts in done.items():
        ts = np.array(ts)
        rows = m.VC[ts]                               # a copy, raised in place (no second temporary)
        np.maximum(rows, m.cl_acc.get(k, 0), out=rows)
        m.VC[ts] = rows
        m.blocked[ts] = False
        for t in ts.tolist():
            m.block_why.pop(t, None)

def finish(m):
    """After the last exit: stores still pending complete (on_exit already reported a missing wait)."""
    for b in list(m.bulk):
        if not b["done"]:
            completion.bulk_complete(m, b, m.k.code[-1])


def _tma_loads_known_complete(m, c, ins):
    """Block c's last thread exits: every TMA (bulk) load into its shared memory must be known complete, by a
    wait of the block that observed the mbarrier phase its bytes complete (or a later phase of it). A load
    whose phase no wait observed may, on the GPU, still be writing shared memory that now belongs to the
    next block on the SM (rule exit-before-tma-load). on_exit calls it once per block."""
    late = [ld for ld in m.tma_loads if ld["cta"] == c and "land" not in ld]
    if late:
        checks.fail(m, "exit-before-tma-load", ins,
                    f"block rank {c} exits at {m.where(ins)} while the TMA load issued at "
                    f"{m.where(m.k.code[completion.load_pc(m, late[0])])} has not completed: its mbarrier "
                    f"{m.mbar_name(late[0]['mb'].off)} still waits for bytes or arrivals. A block's shared memory "
                    f"is released at exit; issue only the loads some thread will wait for")
        return
    for (cta, off), mb in m.mbars.items():
        if cta == c and getattr(mb, "tma_phase", -1) > getattr(mb, "observed", -1):
            checks.fail(m, "exit-before-tma-load", ins,
                        f"block rank {c} exits at {m.where(ins)} with no wait having observed phase "
                        f"{mb.tma_phase} of {m.mbar_name(off)}, which completes the TMA load issued at "
                        f"{m.where(m.k.code[mb.tma_pc])}: nothing tells the block that load has finished "
                        f"writing its shared memory, which is released at exit. Issue only the loads some "
                        f"thread will wait for (or wait for the last one before exiting)")
            return


def on_exit(m, mask, ins):
    """Threads in mask exited: a block's shared memory goes with its last thread; barriers stop waiting for them."""
    ts = np.nonzero(mask)[0]
    # the blocks whose last thread exits now (each one once: cta_done)
    finished = [int(c) for c in np.unique(m.cta[ts])
                if not m.cta_done[c] and not m.alive[c * m.nthr_cta:(c + 1) * m.nthr_cta].any()]
    m.cta_done[finished] = True
    if m.ncta > 1:
        for c in finished:
            rows = np.arange(c * m.nthr_cta, (c + 1) * m.nthr_cta)
            # every access of a peer into this block's shared memory must happen before it exits
            seen = m.VC[rows, :m.n].max(axis=0)
            late = m.remote_t[c] > seen
            if late.any():
                t = int(np.argmax(late))
                checks.fail(m, "dsmem-after-exit", ins,
                          f"block rank {c} exits at {m.where(ins)} with no cluster barrier after "
                          f"{m.tdesc(t)}'s access to its shared memory: a block may exit while "
                          f"peers still read or write its shared memory (DSMEM), and then the access "
                          f"faults. End with cluster.sync() so that no block leaves before its peers "
                          f"are done with it")
    for c in finished:
        _tma_loads_known_complete(m, c, ins)
    for b in list(m.bulk):
        if b["thread"] in set(ts.tolist()) and not b["read"]:
            checks.fail(m, "exit-before-bulk-read", ins,
                      f"{m.tdesc(b['thread'])} exits at {m.where(ins)} while its bulk/TMA store "
                      f"(issued at {m.where(m.k.code[b['pc']])}) may still be reading shared "
                      f"memory: the block's shared memory is released when it exits. Wait with "
                      f"cp.async.bulk.wait_group.read 0 before exiting")
            completion.bulk_complete(m, b, ins)
    if m.tc is not None:                     # tensor memory still allocated when a block exits
        tensor_memory.check_exit(m, ins, finished)
    # a barrier the exited threads no longer block
    for key, b in list(m.bars.items()):
        release_barrier(m, key, ins)
    if m.ncta > 1:
        release_cluster_barrier(m, ins)

