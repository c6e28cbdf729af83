"""Blackwell tensor memory and the tcgen05 protocol as a list of steps: for teaching and for drawing.

Kernels are not judged here: their verdicts come from running their own PTX on the CPU model
(judge.model.ops.tcgen05). This module replays protocol steps written by hand (or taken from such a run)
to show each rule on its own and to draw the schedule of the tensor core and the epilogue.

    from judge.hw import tmem
    sim = tmem.Simulator()
    base = sim.alloc(warp=0, ncols=128)           # tcgen05.alloc (a power of two >= 32)
    sim.relinquish(warp=0)                        # tcgen05.relinquish_alloc_permit
    sim.mma(warp=0, col=base, ncols=128)          # tcgen05.mma: D in columns base..base+127, 128 lanes
    sim.init("done", count=1)                     # mbarrier.init (a barrier never initialized counts 1)
    sim.commit(warp=0, bar="done")                # tcgen05.commit -> arrives on mbarrier "done"
    sim.wait(warp=1, bar="done", parity=0)        # mbarrier.try_wait.parity
    sim.ld(warp=1, lane=32, col=base, ncols=8)    # tcgen05.ld.32x32b: lanes 32..63 (warp 1's quarter)
    sim.dealloc(warp=0, col=base, ncols=128)      # tcgen05.dealloc
    sim.exit()                                    # leaks and loose ends are errors here
    fig = timeline.draw({"tcgen05 tile": sim.schedule()}, S=1, **tmem.TIMELINE_ROWS)

Or replay a list of steps: tmem.replay([("alloc", 0, 128), ("mma", 0, 0, 128), ...]); or take them
from a run of the kernel's own PTX on the CPU model (where the rules are enforced thread by thread,
judge.model.ops.tcgen05): tmem.replay(tmem.protocol_from_run(judge.model.tiles.run_tile(build, "kernel"))).
Try it: python -m judge.hw.tmem

The rules it enforces (each error names its rule and the step that broke it):

    alloc.size            the column count is a power of two, 32 <= n <= 512
    alloc.capacity        at most 512 columns allocated at once (one CTA alone would wait forever)
    alloc.after_relinquish  no tcgen05.alloc after this CTA relinquished its allocation permit
    lane.quarter          warp w reaches only lanes 32*(w % 4) .. 32*(w % 4) + 31
    access.unallocated    every column an MMA writes or a warp reads lies inside an allocation
    mbarrier.parity       the n-th wait on a barrier waits for phase n, of parity n % 2
    wait.deadlock         a wait for a phase that no committed MMA will ever complete
    ld.in_flight          reading accumulator columns before the commit's phase was waited
    dealloc.in_flight     freeing columns an MMA still writes (commit, wait for its phase, then free)
    dealloc.unknown       freeing something that is not a live allocation (double free, wrong size)
    exit.uncommitted      an MMA that was never committed: nothing will ever say it finished
    exit.leak             columns still allocated when the CTA exits

Time is in notional cycles (an MMA takes `mma_cycles`, a tcgen05.ld `ld_cycles`, anything else 1);
it orders the drawing and is not a measurement of any GPU. One tensor core executes MMAs in
issue order. A barrier (__syncthreads) is the step ("sync",).
"""
from __future__ import annotations

from dataclasses import dataclass, field

LANES = 128
COLUMNS = 512
#: keyword arguments for judge.draw.timeline.draw that label its rows for a TMEM schedule
TIMELINE_ROWS = {"rows": ("tensor core (MMA)", "epilogue (tcgen05.ld)"),
                 "occupancy_label": "accumulators\nin use"}


class TmemError(Exception):
    """A broken rule: .rule (its name above), .step (index of the step), .op (the step)."""

    def __init__(self, rule: str, step: int, op: str, message: str):
        self.rule, self.step, self.op = rule, step, op
        super().__init__(f"step {step} ({op}): [{rule}] {message}")


@dataclass
class _Mma:
    step: int
    warp: int
    cols: range
    lanes: range
    start: float
    end: float
    bar: str | None = None       # the barrier its commit arrives on
    phase: int | None = None     # the phase of that barrier it completes
    waited: bool = False


@dataclass
class _Barrier:
    count: int = 1                               # arrivals per phase (mbarrier.init)
    phases: list = field(default_factory=list)   # completion time of phase 0, 1, ...
    pending: list = field(default_factory=list)  # arrival times in the current phase
    waits: dict = field(default_factory=dict)    # warp -> how many waits it made

    def arrive(self, t: float) -> int:
        """One arrival at time t; returns the phase it belongs to."""
        phase = len(self.phases)
        self.pending.append(t)
        if len(self.pending) == self.count:
            self.phases.append(max(self.pending))
            self.pending = []
        return phase


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Simulator:
    """One CTA's view of its SM's tensor memory (see the module docstring)."""

    def __init__(self, *, mma_cycles: float = 64, ld_cycles: float = 8, columns: int = COLUMNS):
        self.mma_cycles, self.ld_cycles, self.columns = mma_cycles, ld_cycles, columns
        self.allocs: dict[int, int] = {}          # base column -> ncols (live)
        self.relinquished = False
        self.mmas: list[_Mma] = []
        self.bars: dict[str, _Barrier] = {}
        self.clock: dict[int, float] = {}         # warp -> its time
        self.tc_free = 0.0                        # when the tensor core finishes its queue
        self.lds: list[tuple[int, range, float, float, int]] = []  # warp, cols, start, end, step
        self.steps: list[str] = []
        self.exited = False

    # ------------------------------------------------------------------ helpers
    def _step(self, text: str) -> int:
        self.steps.append(text)
        return len(self.steps) - 1

    def _now(self, warp: int) -> float:
        return self.clock.setdefault(warp, 0.0)

    def _advance(self, warp: int, t: float) -> None:
        self.clock[warp] = max(self._now(warp), t)

    def _allocation_of(self, cols: range):
        for base, n in self.allocs.items():
            if base <= cols.start and cols.stop <= base + n:
                return base
        return None

    # ------------------------------------------------------------------ allocation
    def alloc(self, warp: int, ncols: int) -> int:
        """tcgen05.alloc by a whole warp: returns the first column (aligned to ncols)."""
        s = self._step(f"warp {warp}: tcgen05.alloc {ncols} columns")
        op = self.steps[s]
        if self.relinquished:
            raise TmemError("alloc.after_relinquish", s, op, "this CTA already gave up its allocation permit "
                            "(tcgen05.relinquish_alloc_permit): allocate everything first, then relinquish")
        if not isinstance(ncols, int) or not _power_of_two(ncols) or not 32 <= ncols <= self.columns:
            raise TmemError("alloc.size", s, op, f"{ncols} columns: an allocation is a power of two "
                            f"between 32 and {self.columns} columns (round {ncols} up to "
                            f"{max(32, 1 << max(0, int(ncols) - 1).bit_length())})")
        used = sum(self.allocs.values())
        for base in range(0, self.columns, ncols):           # first free aligned slot
            if all(b + n <= base or base + ncols <= b for b, n in self.allocs.items()):
                self.allocs[base] = ncols
                self._advance(warp, self._now(warp) + 1)
                return base
        raise TmemError("alloc.capacity", s, op, f"{used} of {self.columns} columns are already allocated; "
                        f"{ncols} more do not fit: tcgen05.alloc would wait forever for columns this "
                        f"CTA never frees")

    def relinquish(self, warp: int) -> None:
        self._step(f"warp {warp}: tcgen05.relinquish_alloc_permit")
        self.relinquished = True
        self._advance(warp, self._now(warp) + 1)

    def dealloc(self, warp: int, col: int, ncols: int) -> None:
        s = self._step(f"warp {warp}: tcgen05.dealloc columns {col}..{col + ncols - 1}")
        op = self.steps[s]
        if self.allocs.get(col) != ncols:
            live = ", ".join(f"{b}..{b + n - 1}" for b, n in sorted(self.allocs.items())) or "none"
            raise TmemError("dealloc.unknown", s, op, f"no live allocation of {ncols} columns at column {col} "
                            f"(live: {live}): free exactly what tcgen05.alloc returned, once")
        cols = range(col, col + ncols)
        for m in self.mmas:
            if set(m.cols) & set(cols) and not m.waited:
                why = ("it was never committed" if m.bar is None else
                       f"its commit arrives on mbarrier {m.bar!r} phase {m.phase}, which no warp waited for")
                raise TmemError("dealloc.in_flight", s, op, f"the MMA of step {m.step} still writes columns "
                                f"{m.cols.start}..{m.cols.stop - 1} ({why}): commit, wait for the phase, then free")
        del self.allocs[col]
        self._advance(warp, self._now(warp) + 1)

    # ------------------------------------------------------------------ MMA and completion
    def mma(self, warp: int, col: int, ncols: int, lanes: int = LANES) -> None:
        """tcgen05.mma issued by one thread of `warp`: D in columns col..col+ncols-1, lanes 0..lanes-1."""
        cols = range(col, col + ncols)
        s = self._step(f"warp {warp}: tcgen05.mma into columns {col}..{col + ncols - 1}")
        if self._allocation_of(cols) is None:
            raise TmemError("access.unallocated", s, self.steps[s], f"columns {col}..{col + ncols - 1} "
                            f"are not inside one live allocation")
        start = max(self._now(warp), self.tc_free)
        self.tc_free = start + self.mma_cycles
        self.mmas.append(_Mma(s, warp, cols, range(lanes), start, self.tc_free))
        self._advance(warp, self._now(warp) + 1)              # issue is asynchronous

    def init(self, bar: str, count: int = 1) -> None:
        """mbarrier.init: `count` arrivals complete each phase (a barrier never initialized counts 1)."""
        self._step(f"mbarrier.init {bar!r}, {count}")
        self.bars[bar] = _Barrier(count=count)

    def commit(self, warp: int, bar: str) -> None:
        """tcgen05.commit: every MMA of this warp not yet committed arrives once on `bar` when done."""
        self._step(f"warp {warp}: tcgen05.commit -> mbarrier {bar!r}")
        b = self.bars.setdefault(bar, _Barrier())
        mine = [m for m in self.mmas if m.warp == warp and m.bar is None]
        done = max([m.end for m in mine], default=self._now(warp))
        phase = b.arrive(done)
        for m in mine:
            m.bar, m.phase = bar, phase
        self._advance(warp, self._now(warp) + 1)

    def arrive(self, warp: int, bar: str) -> None:
        """mbarrier.arrive by one thread of `warp` (e.g. the epilogue releasing an accumulator)."""
        self._step(f"warp {warp}: mbarrier.arrive {bar!r}")
        self.bars.setdefault(bar, _Barrier()).arrive(self._now(warp))
        self._advance(warp, self._now(warp) + 1)

    def wait(self, warp: int, bar: str, parity: int) -> None:
        s = self._step(f"warp {warp}: mbarrier wait {bar!r} parity {parity}")
        op = self.steps[s]
        b = self.bars.setdefault(bar, _Barrier())
        n = b.waits.get(warp, 0)
        if parity != n % 2:
            raise TmemError("mbarrier.parity", s, op, f"this is warp {warp}'s wait number {n} on {bar!r}: it "
                            f"waits for phase {n}, parity {n % 2}; parity {parity} "
                            + ("passes at once (the phase before phase 0 counts as complete)" if n == 0
                               else "names the phase it already waited for"))
        if n >= len(b.phases):
            raise TmemError("wait.deadlock", s, op, f"phase {n} of {bar!r} is never completed: its arrivals "
                            f"(tcgen05.commit or mbarrier.arrive, {b.count} per phase) do not come before "
                            f"this wait ({len(b.phases)} phase(s) completed so far)")
        b.waits[warp] = n + 1
        self._advance(warp, b.phases[n])
        for m in self.mmas:
            if m.bar == bar and m.phase == n:
                m.waited = True
        self._advance(warp, self._now(warp) + 1)

    def sync(self) -> None:
        """__syncthreads(): every warp continues from the latest warp's time."""
        self._step("__syncthreads")
        t = max(self.clock.values(), default=0.0)
        for w in self.clock:
            self.clock[w] = t

    # ------------------------------------------------------------------ TMEM <-> registers
    def ld(self, warp: int, lane: int, col: int, ncols: int, shape_lanes: int = 32) -> None:
        """tcgen05.ld of a 32-lane shape: lanes lane..lane+31, columns col..col+ncols-1."""
        s = self._step(f"warp {warp}: tcgen05.ld lanes {lane}..{lane + shape_lanes - 1}, "
                       f"columns {col}..{col + ncols - 1}")
        self._access(s, warp, lane, col, ncols, shape_lanes, "reads")
        cols = range(col, col + ncols)
        for m in self.mmas:
            if set(m.cols) & set(cols) and not m.waited:
                raise TmemError("ld.in_flight", s, self.steps[s], f"the MMA of step {m.step} may still be "
                                f"writing these columns: wait for its commit's mbarrier phase first")
        start = self._now(warp)
        self.lds.append((warp, cols, start, start + self.ld_cycles, s))
        self._advance(warp, start + self.ld_cycles)

    def st(self, warp: int, lane: int, col: int, ncols: int, shape_lanes: int = 32) -> None:
        s = self._step(f"warp {warp}: tcgen05.st lanes {lane}..{lane + shape_lanes - 1}, "
                       f"columns {col}..{col + ncols - 1}")
        self._access(s, warp, lane, col, ncols, shape_lanes, "writes")
        self._advance(warp, self._now(warp) + self.ld_cycles)

    def _access(self, s, warp, lane, col, ncols, shape_lanes, verb):
        q = 32 * (warp % 4)
        if not (q <= lane and lane + shape_lanes <= q + 32):
            raise TmemError("lane.quarter", s, self.steps[s], f"warp {warp} {verb} lanes {lane}.."
                            f"{lane + shape_lanes - 1}, but warp {warp} reaches only lanes {q}..{q + 31} "
                            f"(warp id % 4 = {warp % 4} picks the quarter)")
        if self._allocation_of(range(col, col + ncols)) is None:
            raise TmemError("access.unallocated", s, self.steps[s], f"columns {col}..{col + ncols - 1} "
                            f"are not inside one live allocation")

    # ------------------------------------------------------------------ the end
    def exit(self) -> None:
        s = self._step("the CTA exits")
        for m in self.mmas:
            if m.bar is None:
                raise TmemError("exit.uncommitted", s, self.steps[s], f"the MMA of step {m.step} was never "
                                f"committed (tcgen05.commit): nothing can wait for it")
        if self.allocs:
            live = ", ".join(f"{n} columns at {b}" for b, n in sorted(self.allocs.items()))
            raise TmemError("exit.leak", s, self.steps[s], f"still allocated: {live}; every tcgen05.alloc "
                            f"needs its tcgen05.dealloc before the CTA exits")
        self.exited = True

    # ------------------------------------------------------------------ drawing
    def schedule(self) -> list[tuple[float, float, float, float]]:
        """One (mma_start, mma_end, drain_start, drain_end) tuple per commit group, for timeline.draw.

        A group is the MMAs of one commit; its drain is the tcgen05.ld steps that read its columns
        after it completed (until the next group writes them). A group nobody read drains at 0 width.
        """
        groups: dict[tuple[str, int], list[_Mma]] = {}
        for m in self.mmas:
            if m.bar is not None:
                groups.setdefault((m.bar, m.phase), []).append(m)
        out = []
        ordered = sorted(groups.values(), key=lambda g: g[0].start)
        for i, g in enumerate(ordered):
            start, end = min(m.start for m in g), max(m.end for m in g)
            cols = set().union(*(set(m.cols) for m in g))
            later = [n for h in ordered[i + 1:] for n in h if set(n.cols) & cols]
            limit = min((n.start for n in later), default=float("inf"))
            reads = [(a, b) for _, c, a, b, _ in self.lds if set(c) & cols and a >= end and a <= limit]
            d0 = min((a for a, _ in reads), default=end)
            d1 = max((b for _, b in reads), default=end)
            out.append((start, end, d0, d1))
        return out


def replay(steps, **kw) -> Simulator:
    """Run a list of steps through a Simulator; raises TmemError at the first broken rule.

    Steps: ("alloc", warp, ncols), ("relinquish", warp), ("mma", warp, col, ncols),
    ("init", bar, count), ("commit", warp, bar), ("arrive", warp, bar), ("wait", warp, bar, parity), ("sync",), ("ld", warp, lane, col, ncols),
    ("st", warp, lane, col, ncols), ("dealloc", warp, col, ncols), ("exit",).
    """
    sim = Simulator(**kw)
    for st in steps:
        kind, *args = st
        fn = {"alloc": sim.alloc, "relinquish": sim.relinquish, "mma": sim.mma, "commit": sim.commit,
              "init": sim.init, "arrive": sim.arrive,
              "wait": sim.wait, "sync": sim.sync, "ld": sim.ld, "st": sim.st, "dealloc": sim.dealloc,
              "exit": sim.exit}.get(kind)
        if fn is None:
            raise ValueError(f"unknown step {kind!r}")
        fn(*args)
    return sim


def tile_protocol(*, n_acc: int = 1, tiles: int = 1, k_steps: int = 4, ncols: int = 128,
                  warps: int = 4, chunk: int = 32) -> list[tuple]:
    """The steps of a persistent tcgen05 GEMM CTA with n_acc accumulator buffers in TMEM.

    Warp 0 allocates n_acc * ncols columns (rounded up to a power of two), issues k_steps MMAs per
    tile into buffer tile % n_acc and commits to mbarrier full[b]; epilogue warps 1..warps wait on
    full[b], read their lane quarter in chunks and arrive on empty[b] (count = warps); before it
    reuses buffer b, warp 0 waits on empty[b]. With n_acc = 2 the MMAs of tile t+1 overlap the
    epilogue of tile t.
    """
    alloc_cols = 1 << max(5, (n_acc * ncols - 1).bit_length())
    steps: list[tuple] = [("alloc", 0, alloc_cols), ("relinquish", 0)]
    steps += [("init", f"full[{b}]", 1) for b in range(n_acc)]
    steps += [("init", f"empty[{b}]", warps) for b in range(n_acc)]
    steps.append(("sync",))
    drained = 0                             # tiles whose epilogue is already in the list
    for t in range(tiles):
        b, lap = t % n_acc, t // n_acc
        if lap > 0:                         # buffer b is free once the epilogue drained it
            while drained <= t - n_acc:
                steps += _drain(drained, n_acc, ncols, warps, chunk)
                drained += 1
            steps.append(("wait", 0, f"empty[{b}]", (lap - 1) % 2))
        steps += [("mma", 0, b * ncols, ncols)] * k_steps
        steps.append(("commit", 0, f"full[{b}]"))
        while drained < t:                  # the epilogue drains the previous tile meanwhile
            steps += _drain(drained, n_acc, ncols, warps, chunk)
            drained += 1
    while drained < tiles:
        steps += _drain(drained, n_acc, ncols, warps, chunk)
        drained += 1
    steps += [("sync",), ("dealloc", 0, 0, alloc_cols), ("exit",)]
    return steps


def _drain(t, n_acc, ncols, warps, chunk):
    b, lap = t % n_acc, t // n_acc
    out = []
    for w in range(1, warps + 1):
        out.append(("wait", w, f"full[{b}]", lap % 2))
        out += [("ld", w, 32 * (w % 4), b * ncols + c, chunk) for c in range(0, ncols, chunk)]
        out.append(("arrive", w, f"empty[{b}]"))
    return out



# ---------------------------------------------------------------------------------- from the model
def protocol_from_run(report, *, warps: int = 4, block: int = 0) -> list[tuple]:
    """The tensor-memory protocol of block `block` as the CPU model ran it (report.timeline), as
    replay() steps: alloc, relinquish, mbarrier init, mma, commit, a wait of every warp when a commit's
    arrival completes (every thread of the course's tiles waits on it), __syncthreads, tcgen05.ld of
    each warp, dealloc, exit. Columns are given relative to where the Simulator allocates (the model
    draws the allocation's place at random, as another CTA may hold the first columns)."""
    steps: list[tuple] = []
    shift: dict[int, int] = {}                    # model base column -> Simulator base column
    sim_allocs: dict[int, int] = {}
    waits: dict[tuple, int] = {}

    def col(c):
        for base, to in shift.items():
            if base <= c < base + sim_allocs.get(to, 0):
                return c - base + to
        return c
    for e in report.timeline:
        k = e["kind"]
        if e.get("block", block) != block:
            continue
        if k == "tcgen05.alloc":
            n = e["columns"]
            to = next(b for b in range(0, COLUMNS, n)
                      if all(x + m <= b or b + n <= x for x, m in sim_allocs.items()))
            sim_allocs[to] = n
            shift[e["base"]] = to
            steps.append(("alloc", e["warp"], n))
        elif k == "tcgen05.relinquish":
            steps.append(("relinquish", e["warp"]))
        elif k == "mbarrier.init":
            steps.append(("init", e["mbarrier"], e["count"]))
        elif k == "tcgen05.mma":
            steps.append(("mma", e["warp"], col(e["col"]), e["n"]))
        elif k == "tcgen05.commit":
            steps.append(("commit", e["warp"], e["mbarrier"]))
        elif k == "tcgen05.complete":
            for w in range(warps):
                n = waits.get((w, e["mbarrier"]), 0)
                waits[(w, e["mbarrier"])] = n + 1
                steps.append(("wait", w, e["mbarrier"], n % 2))
        elif k == "barrier":
            steps.append(("sync",))
        elif k == "tcgen05.ld":
            steps.append(("ld", e["warp"], e["lane"], col(e["col"]), e["ncols"]))
        elif k == "tcgen05.dealloc":
            steps.append(("dealloc", e["warp"], col(e["base"]), e["columns"]))
            sim_allocs.pop(shift.pop(e["base"], -1), None)
    steps.append(("exit",))
    return steps


if __name__ == "__main__":
    sim = replay(tile_protocol(n_acc=2, tiles=4))
    print("double-buffered accumulators, 4 tiles:", sim.schedule())
    try:
        replay([("alloc", 0, 96)])
    except TmemError as e:
        print(e)
