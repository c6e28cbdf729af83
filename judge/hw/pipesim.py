"""pipesim - the cp.async commit/wait protocol of an S-stage pipeline, checked op by op (pure Python).

    from judge.hw import pipesim
    ops = pipesim.seed_loop(S=3, K=8)                       # what the standard loop issues
    rep = pipesim.check(ops, S=3)                           # rep.ok, rep.violations, rep.rounds
    pipesim.check(pipesim.seed_loop(3, 8, empty_commit=False)).violations[0]
    pipesim.draw(rep)                                       # groups in flight, round by round
    pipesim.timeline(K=8, L=4, C=10, S=3)                   # copy/compute times per tile (exercise 1)
    Try it: python -m judge.hw.pipesim 3 8 [--no-empty-commit] [--wait N] [--no-barrier]

The model is ONE thread's view of a block-wide pipeline; every thread of the block runs the
same ops on its own slice of each tile. The ops:

    Load(tile, buf)   __pipeline_memcpy_async / cp.async: this thread's part of `tile` into
                      shared buffer `buf`. The copy joins the open (uncommitted) group.
    COMMIT            __pipeline_commit / cp.async.commit_group: closes the open group. A group
                      with no copies in it is legal and counts like any other.
    Wait(n)           __pipeline_wait_prior(n) / cp.async.wait_group n: afterwards every
                      committed group but the most recent n is complete.
    BARRIER           __syncthreads()
    Read(tile, buf)   the compute reads buffer `buf`, expecting `tile` in it.
    Round(kt)         a marker (no hardware op): round kt of the main loop begins here.

The hardware rule (PTX ISA 9.7.9.25.1.1, async-group mechanism, and 9.7.9.25.3.3,
cp.async.wait_group): a thread's groups complete in the order it committed them, and a copy's
writes are visible to the thread only after a wait_group that covers its group has completed.
A group that has landed without such a wait gives the thread nothing it may read, so the model
takes no completion for granted: a group counts as arrived only once a Wait covers it. That is
the visibility rule itself, so a loop the model passes is correct on the hardware, and a loop
that is correct on the hardware (reads only what a covering wait and a barrier made visible)
passes. And a Wait only speaks for this thread's copies: the tile is whole (every thread's slice
landed and is visible to all) only after a BARRIER that follows the Wait. A Read is safe when
the buffer holds the tile and the tile's group was covered by a Wait followed by a BARRIER.

Violations, each a sentence naming the round and op index:
  (a) the tile's group may still be in flight (no Wait covers it, or it was never committed),
      or a Wait covers it but no BARRIER followed, so other threads' slices may be missing;
  (b) the buffer holds a different tile (or nothing);
  (c) a Load into a buffer whose tile was read with no BARRIER since that Read (other threads
      may still be reading it: the overwrite race), or whose tile is still to be read;
  (d) a tile read that was never loaded.

The counting the standard loop relies on (seed_loop, with the empty commits):
  * the prologue commits S-1 groups and every round commits one, so when round kt waits,
    kt + S - 1 groups have been committed, group g holding tile g (groups >= K are empty);
  * wait_prior(S-2) leaves at most the newest S-2 outstanding, so groups 0..kt, and with
    them tile kt, are complete;
  * without the empty commits the count stops growing once the loads run out: in the last
    S-2 rounds wait_prior(S-2) still leaves the newest S-2 *tile* groups outstanding, and
    tile kt is one of them. For S >= 3 and K >= 1 the first unsafe round is max(0, K-S+2);
  * wait_prior(S-1) is one too loose in every round: it covers groups 0..kt-1, never kt.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field


# ------------------------------------------------------------------ the ops
@dataclass(frozen=True)
class Load:
    tile: int
    buf: int

    def __str__(self):
        return f"load tile {self.tile} -> buf {self.buf}"


@dataclass(frozen=True)
class Commit:
    def __str__(self):
        return "commit"


@dataclass(frozen=True)
class Wait:
    n: int

    def __str__(self):
        return f"wait_prior({self.n})"


@dataclass(frozen=True)
class Barrier:
    def __str__(self):
        return "__syncthreads()"


@dataclass(frozen=True)
class Read:
    tile: int
    buf: int

    def __str__(self):
        return f"read tile {self.tile} <- buf {self.buf}"


@dataclass(frozen=True)
class Round:
    kt: int

    def __str__(self):
        return f"-- round {self.kt} --"


Op = Load | Commit | Wait | Barrier | Read | Round
LOAD, WAIT, READ, ROUND = Load, Wait, Read, Round
COMMIT, BARRIER = Commit(), Barrier()


def seed_loop(S: int, K: int, *, empty_commit: bool = True, wait: int | None = None,
              barrier: bool = True) -> list[Op]:
    """The ops one thread issues in the standard S-stage cp.async loop over K tiles.

        for s in range(S - 1):                 # prologue: S-1 tiles in flight
            if s < K: load(tile s -> buf s)
            commit()                           # (only after a load if empty_commit is False)
        for kt in range(K):
            wait_prior(wait)                   # default S-2
            __syncthreads()                    # if barrier
            if kt + S - 1 < K: load(tile kt+S-1 -> buf (kt+S-1) % S)   # buf of tile kt-1
            commit()                           # (only after a load if empty_commit is False)
            read(tile kt <- buf kt % S)
    """
    if S < 1 or K < 0:
        raise ValueError(f"need S >= 1 and K >= 0, got S={S}, K={K}")
    w = S - 2 if wait is None else wait
    if w < 0:
        raise ValueError(f"wait_prior takes n >= 0, got {w} (S={S}: pass wait= for S < 2)")
    ops: list[Op] = []
    for s in range(S - 1):
        if s < K:
            ops.append(Load(s, s))
        if empty_commit or s < K:
            ops.append(COMMIT)
    for kt in range(K):
        ops.append(Round(kt))
        ops.append(Wait(w))
        if barrier:
            ops.append(BARRIER)
        nxt = kt + S - 1
        if nxt < K:
            ops.append(Load(nxt, nxt % S))
        if empty_commit or nxt < K:
            ops.append(COMMIT)
        ops.append(Read(kt, kt % S))
    return ops


# ------------------------------------------------------------------ the report
@dataclass
class Group:
    index: int                       # commit order: group #0 is the first committed
    tiles: list[int]                 # empty list: an empty group
    commit_op: int
    first_load_op: int | None        # where its first copy was issued
    complete_op: int | None = None   # the Wait that covered it
    visible_op: int | None = None    # the first BARRIER after that Wait

    @property
    def label(self) -> str:
        return "empty" if not self.tiles else "tile " + ",".join(map(str, self.tiles))


@dataclass
class RoundInfo:
    round: int | None                # kt (None: ops before any round, the prologue)
    read_op: int                     # op index of the Read closing the round
    tile: int                        # the tile read
    buf: int
    committed: int                   # groups committed when the round's last Wait ran
    wait: int | None                 # that Wait's n (None: no Wait in the round)
    complete: list[int]              # group indices complete at the Read
    in_flight: list[int]             # committed groups not yet covered by any Wait, at the Read
    safe: set[int]                   # tiles guaranteed arrived and visible at the Read
    ok: bool                         # this Read broke no rule


@dataclass
class Issue:
    op: int
    round: int | None
    kind: str                        # "in flight", "not visible", "wrong tile", "overwrite", "never loaded", "no buffer"
    text: str


@dataclass
class Report:
    ops: list
    S: int | None
    groups: list[Group]
    rounds: list[RoundInfo]
    issues: list[Issue]
    open_loads: list[int] = field(default_factory=list)   # Load ops never committed

    @property
    def ok(self) -> bool:
        return not self.issues

    @property
    def violations(self) -> list[str]:
        return [i.text for i in self.issues]

    def safe(self, tile: int, round: int) -> bool:
        """Is `tile` guaranteed arrived and visible when round `round` reads?"""
        return any(r.round == round and tile in r.safe for r in self.rounds)

    def first_unsafe_round(self) -> int | None:
        """The first round whose Read is not guaranteed its tile (None: every round is)."""
        return next((r.round for r in self.rounds if r.tile not in r.safe), None)

    def __str__(self):
        if self.ok:
            return f"ok: {len(self.rounds)} reads, {len(self.groups)} groups, no violation"
        more = f" (+{len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        return f"{len(self.issues)} violation(s); first: {self.issues[0].text}{more}"


def _where(rnd: int | None, i: int) -> str:
    return f"in the prologue (op {i})" if rnd is None else f"at round {rnd} (op {i})"


def check(ops, S: int | None = None) -> Report:
    """Walk the ops and report every violation of the protocol (first first)."""
    ops = list(ops)
    markers = any(isinstance(o, Round) for o in ops)
    groups: list[Group] = []
    open_g: list[tuple[int, int, int]] = []        # (tile, buf, op) of the open group
    buf_holds: dict[int, dict] = {}                 # buf -> {tile, load_op, group (None: open)}
    loaded_ever: set[int] = set()
    issues: list[Issue] = []
    rounds: list[RoundInfo] = []
    rnd: int | None = None if markers else 0
    last_wait: tuple[int, int, int] | None = None   # (op, n, committed then)
    wait_in_round: tuple[int, int] | None = None    # (n, committed) of this round's last Wait
    reads_left = {}                                 # (tile, buf) -> count of Reads still ahead
    for o in ops:
        if isinstance(o, Read):
            reads_left[(o.tile, o.buf)] = reads_left.get((o.tile, o.buf), 0) + 1

    def flag(i, kind, text):
        issues.append(Issue(i, rnd, kind, text))

    for i, o in enumerate(ops):
        if isinstance(o, Round):
            rnd, wait_in_round = o.kt, None
        elif isinstance(o, Load):
            if S is not None and not 0 <= o.buf < S:
                flag(i, "no buffer", f"{_where(rnd, i)}: tile {o.tile} is loaded into buffer {o.buf}, "
                     f"but with S={S} the buffers are 0..{S - 1}")
            occ = buf_holds.get(o.buf)
            if occ is not None and occ.get("read_op") is not None and not occ["barrier_since_read"]:
                flag(i, "overwrite",
                     f"{_where(rnd, i)}: tile {o.tile} is loaded into buffer {o.buf} while other threads "
                     f"may still be reading tile {occ['tile']} there (read at op {occ['read_op']}, no "
                     f"__syncthreads() since): every thread must finish reading a buffer before any "
                     f"thread refills it")
            elif occ is not None and reads_left.get((occ["tile"], o.buf), 0) > 0 and occ["tile"] != o.tile:
                flag(i, "overwrite",
                     f"{_where(rnd, i)}: tile {o.tile} is loaded into buffer {o.buf}, which still holds "
                     f"tile {occ['tile']}, and a later read expects tile {occ['tile']} there")
            open_g.append((o.tile, o.buf, i))
            entry = {"tile": o.tile, "load_op": i, "group": None, "read_op": None,
                     "barrier_since_read": False}
            buf_holds[o.buf] = entry
            loaded_ever.add(o.tile)
        elif isinstance(o, Commit):
            g = Group(len(groups), [t for t, _, _ in open_g], i, open_g[0][2] if open_g else None)
            groups.append(g)
            for t, b, j in open_g:
                e = buf_holds.get(b)
                if e is not None and e["load_op"] == j:
                    e["group"] = g.index
            open_g = []
        elif isinstance(o, Wait):
            covered = len(groups) - o.n
            for g in groups[:max(0, covered)]:
                if g.complete_op is None:
                    g.complete_op = i
            last_wait = (i, o.n, len(groups))
            wait_in_round = (o.n, len(groups))
        elif isinstance(o, Barrier):
            for g in groups:
                if g.complete_op is not None and g.visible_op is None:
                    g.visible_op = i
            for e in buf_holds.values():
                if e["read_op"] is not None:
                    e["barrier_since_read"] = True
        elif isinstance(o, Read):
            reads_left[(o.tile, o.buf)] -= 1
            n_before = len(issues)
            e = buf_holds.get(o.buf)
            where = _where(rnd, i)
            if o.tile not in loaded_ever:
                flag(i, "never loaded", f"{where}: tile {o.tile} is read from buffer {o.buf} but was "
                     f"never loaded")
            elif e is None:
                flag(i, "wrong tile", f"{where}: tile {o.tile} is read from buffer {o.buf}, which was "
                     f"never loaded")
            elif e["tile"] != o.tile:
                flag(i, "wrong tile", f"{where}: tile {o.tile} is read from buffer {o.buf}, but that "
                     f"buffer holds tile {e['tile']} (loaded at op {e['load_op']})")
            elif e["group"] is None:
                flag(i, "in flight", f"{where}: tile {o.tile} is read but its copies (op {e['load_op']}) "
                     f"were never committed, so no wait_prior covers them")
            else:
                g = groups[e["group"]]
                if g.complete_op is None:
                    if last_wait is None or last_wait[0] < g.commit_op:
                        why = f"no wait_prior came after its commit (op {g.commit_op})"
                    else:
                        wi, wn, wc = last_wait
                        newest = ", ".join(f"#{k}" for k in range(max(0, wc - wn), wc))
                        why = (f"the last wait, wait_prior({wn}) at op {wi}, came when {wc} groups "
                               f"were committed and leaves the newest {wn} outstanding ({newest})")
                    flag(i, "in flight", f"{where}: tile {o.tile} is read but its group (#{g.index}) "
                         f"may still be in flight: {why}")
                elif g.visible_op is None:
                    flag(i, "not visible", f"{where}: tile {o.tile} is read after wait_prior covered its "
                         f"group (#{g.index}, op {g.complete_op}) but with no __syncthreads() since: the "
                         f"wait only covers this thread's copies; other threads' parts of the tile may "
                         f"not have landed")
            if e is not None and e["tile"] == o.tile:
                e["read_op"], e["barrier_since_read"] = i, False
            safe = {t for g in groups if g.visible_op is not None for t in g.tiles}
            rounds.append(RoundInfo(
                round=rnd, read_op=i, tile=o.tile, buf=o.buf,
                committed=wait_in_round[1] if wait_in_round else len(groups),
                wait=wait_in_round[0] if wait_in_round else None,
                complete=[g.index for g in groups if g.complete_op is not None],
                in_flight=[g.index for g in groups if g.complete_op is None],
                safe=safe, ok=len(issues) == n_before))
            if not markers:
                rnd, wait_in_round = rnd + 1, None
        else:
            raise TypeError(f"op {i} is {o!r}: not one of Load, COMMIT, Wait, BARRIER, Read, Round")
    return Report(ops=ops, S=S, groups=groups, rounds=rounds, issues=issues,
                  open_loads=[j for _, _, j in open_g])


def safe_tiles(ops) -> list[set[int]]:
    """For each Read, in order: the tiles guaranteed arrived and visible to the whole block then.

    A tile counts once its group was covered by a Wait and a BARRIER followed. The set says
    nothing about which buffer still holds what: a later Load may already be refilling an old
    tile's buffer (check() flags a Read of such a buffer)."""
    return [r.safe for r in check(ops).rounds]


# ------------------------------------------------------------------ the timeline of an S-buffer pipeline
def timeline(K: int, L: float, C: float, S: int) -> list[tuple[float, float, float, float]]:
    """(copy_start, copy_end, compute_start, compute_end) per tile of K tiles through S buffers.

    The rules (exercise pipeline_timeline, chapter 1): one copy engine, copies in tile order, each
    L long; the first min(S, K) copies are issued at t = 0; copy k >= S is issued when compute k - S
    ends (that frees buffer k % S); compute k (C long) starts once copy k and compute k - 1 have
    ended. ValueError for K or S not an int, K < 0, L < 0, C < 0 or S < 1.
    """
    if isinstance(K, bool) or isinstance(S, bool) or not isinstance(K, int) or not isinstance(S, int):
        raise ValueError(f"K and S count tiles and buffers: whole numbers, got K={K!r}, S={S!r}")
    if K < 0 or S < 1 or not (L >= 0 and C >= 0):
        raise ValueError(f"need K >= 0, L >= 0, C >= 0 and S >= 1, got {(K, L, C, S)}")
    tiles: list[tuple[float, float, float, float]] = []
    engine_free = 0
    for k in range(K):
        issued = 0 if k < S else tiles[k - S][3]
        copy_start = max(issued, engine_free)
        compute_start = max(copy_start + L, tiles[-1][3] if tiles else 0)
        tiles.append((copy_start, copy_start + L, compute_start, compute_start + C))
        engine_free = copy_start + L
    return tiles


# ------------------------------------------------------------------ the drawing
def draw(report: Report, title: str | None = None):
    """A timeline of the groups: one row per group, x = op index.

    A bar runs from the group's commit to the wait that covers it (orange: tiles, grey hatched:
    empty group); a bar still open at the right edge was never covered. A circle marks each
    read on the row of the tile's group (green: safe, red cross: a violation); red triangles
    mark loads that race; dotted lines are the waits, shaded bands the rounds."""
    from matplotlib.figure import Figure          # no pyplot: nothing global, safe under Agg

    groups, n_ops = report.groups, max(1, len(report.ops))
    fig = Figure(figsize=(min(16, 4 + 0.2 * n_ops), 1.6 + 0.32 * max(1, len(groups))))
    ax = fig.add_subplot(111)
    y = {g.index: len(groups) - 1 - g.index for g in groups}       # group #0 at the top

    # rounds as shaded bands, labelled on top
    starts = [(i, o.kt) for i, o in enumerate(report.ops) if isinstance(o, Round)]
    for k, (i0, kt) in enumerate(starts):
        i1 = starts[k + 1][0] if k + 1 < len(starts) else n_ops
        if k % 2 == 0:
            ax.axvspan(i0 - 0.5, i1 - 0.5, color="#f0f3f6", zorder=0)
        ax.text((i0 + i1 - 1) / 2, len(groups) - 0.3, f"kt={kt}", ha="center", va="bottom",
                fontsize=8, color="#57606a")
    for i, o in enumerate(report.ops):
        if isinstance(o, Wait):
            ax.axvline(i, color="#6e7781", ls=":", lw=1, zorder=1)
            ax.text(i, -0.9, f"w{o.n}", ha="center", va="top", fontsize=7, color="#6e7781")
        elif isinstance(o, Barrier):
            ax.axvline(i, color="#0969da", ls="-", lw=0.6, alpha=0.5, zorder=1)

    for g in groups:
        end = g.complete_op if g.complete_op is not None else n_ops
        start = g.first_load_op if g.first_load_op is not None else g.commit_op
        if g.first_load_op is not None and g.first_load_op < g.commit_op:   # issued, not yet committed
            ax.plot([start, g.commit_op], [y[g.index]] * 2, color="#d4a72c", lw=1.5, zorder=2)
        kw = dict(color="#fb8f44", edgecolor="#bc4c00") if g.tiles else \
            dict(color="#eaeef2", edgecolor="#8c959f", hatch="//")
        ax.barh(y[g.index], end - g.commit_op, left=g.commit_op, height=0.5, zorder=2, **kw)
        if g.complete_op is None:
            ax.text(n_ops + 0.3, y[g.index], "never covered" if g.tiles else "never covered (empty: harmless)",
                    va="center", fontsize=7, color="#cf222e" if g.tiles else "#6e7781")

    tile_group = {}
    bad_ops = {iss.op for iss in report.issues}
    for i, o in enumerate(report.ops):
        if isinstance(o, Load):
            tile_group[o.tile] = next((g.index for g in groups if g.first_load_op is not None
                                       and g.commit_op > i and o.tile in g.tiles), None)
            if i in bad_ops and tile_group[o.tile] is not None:
                ax.plot(i, y[tile_group[o.tile]], marker="v", color="#cf222e", ms=9, zorder=4)
        elif isinstance(o, Read):
            gi = tile_group.get(o.tile)
            row = y[gi] if gi is not None else -0.5
            if i in bad_ops:
                ax.plot(i, row, marker="X", color="#cf222e", ms=10, zorder=4)
            else:
                ax.plot(i, row, marker="o", color="#1a7f37", ms=7, zorder=4)

    ax.set_yticks([y[g.index] for g in groups], [f"#{g.index}: {g.label}" for g in groups], fontsize=8)
    ax.set_ylim(-1.3, len(groups) + 0.3)
    ax.set_xlim(-0.5, n_ops + (6 if any(g.complete_op is None for g in groups) else 0.5))
    ax.set_xlabel("op index  (bar: committed, not yet covered by a wait;  o read ok,  x read violates,"
                  "  v racing load;  :wN wait_prior(N))", fontsize=8)
    head = title or "cp.async groups in flight"
    verdict = "no violation" if report.ok else f"{len(report.issues)} violation(s)"
    ax.set_title(f"{head}: {verdict}", color="#1a7f37" if report.ok else "#cf222e", fontsize=10)
    if not report.ok:
        first = report.issues[0].text
        fig.text(0.01, 0.005, "first: " + (first if len(first) < 180 else first[:177] + "..."),
                 fontsize=7, color="#cf222e", va="bottom")
    fig.tight_layout(rect=(0, 0.04 if not report.ok else 0, 1, 1))
    return fig


# ------------------------------------------------------------------ command line
def _main(argv: list[str]) -> int:
    import argparse
    p = argparse.ArgumentParser(description="Check the standard S-stage cp.async loop op by op.")
    p.add_argument("S", type=int)
    p.add_argument("K", type=int)
    p.add_argument("--no-empty-commit", action="store_true")
    p.add_argument("--wait", type=int, default=None)
    p.add_argument("--no-barrier", action="store_true")
    p.add_argument("--ops", action="store_true", help="print the ops")
    a = p.parse_args(argv)
    ops = seed_loop(a.S, a.K, empty_commit=not a.no_empty_commit, wait=a.wait, barrier=not a.no_barrier)
    rep = check(ops, a.S)
    if a.ops:
        for i, o in enumerate(ops):
            print(f"{i:4d}  {o}")
    for r in rep.rounds:
        print(f"round {r.round}: {r.committed} committed, wait_prior({r.wait}) -> in flight "
              f"{r.in_flight}; read tile {r.tile}: {'ok' if r.ok else 'VIOLATION'}")
    for v in rep.violations:
        print("  " + v)
    print(rep)
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
