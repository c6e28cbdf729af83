"""judge.model.tensor_memory - the tensor memory of each CTA, as the CPU model keeps it.

Used by judge.model.ops.tcgen05 (the tcgen05.* instructions); read that module for the rules.
Try it: python -m pytest tests/model/test_model_tcgen05.py -q

Per CTA (PTX ISA, "Tensor Memory"): 128 lanes x 512 columns of 32-bit cells, allocated by columns.
An address is (lane << 16) | column. Cells start as poison (NaN bits): a kernel that accumulates
into columns no MMA wrote first (enable-input-d on the first MMA) reads NaN.

What is kept, per CTA:
  cells        uint32 (128, 512): what a tcgen05.ld sees now
  future       uint32 (128, 512): what the cells hold once every MMA issued so far has completed
               (an MMA with enable-input-d accumulates onto the MMAs before it, in issue order)
  allocs       base column -> column count, of the live allocations
  relinquished whether the CTA gave up its allocation permit
  pair_allocs  bases of the allocations made with .cta_group::2 (the same columns in the peer CTA)
  col_op       per column: the pending MMA writing it (index into .ops), or -1
  col_done     per column: (vector-clock column, time) of the mbarrier arrival that completed the
               last MMA writing it: a reader must know it (wait on that mbarrier, or a barrier after
               a thread that did)
  reads        per column and thread: the time of the thread's last tcgen05.ld of it (dealloc must be
               ordered after every such read of the columns it frees)
A tcgen05.mma.cta_group::2 is two Mma records, one per CTA of the pair (its half of D, the words of
that CTA's shared memory it reads), completed by the commit's arrival in that CTA (State.pair_alloc
holds a warp that waits in alloc.cta_group::2 for its peer).
And per thread of the cluster (.Threads): the time of its last tcgen05.fence::before_thread_sync and
::after_thread_sync, the MMAs it issued and has not committed, and its tcgen05.ld destination
registers that no tcgen05.wait::ld has covered yet.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LANES = 128
COLUMNS = 512
POISON32 = 0x7FC0DEAD          # the model's poison (a quiet NaN), as in judge.model.machine


@dataclass(eq=False)
class Mma:
    """One tcgen05.mma (or tcgen05.cp) in flight: its result lands in .cells at its commit's arrival."""
    thread: int
    pc: int
    cta: int
    cols: range
    lanes: range
    values: np.ndarray                 # uint32 (len(lanes), len(cols)): D after this MMA
    words: tuple                       # shared-memory words of A and B it reads (async proxy)
    issuers: int = 1                   # how many threads issued this instruction together
    index: int = -1                    # its place in State.ops
    committed: bool = False
    done: bool = False
    copy: bool = False                 # a tcgen05.cp (shared memory -> tensor memory), tracked like an MMA


@dataclass(eq=False)
class Commit:
    """A tcgen05.commit whose mbarrier arrival is still to come (when its MMAs complete)."""
    thread: int
    pc: int
    mb: dict                           # the machine's mbarrier record
    ops: list                          # the Mma records it tracks
    snap: np.ndarray                   # the issuing thread's vector clock at the commit
    time: int
    also: list = field(default_factory=list)   # further mbarriers it arrives on (.multicast::cluster: the
    #                                    same offset in each CTA of ctaMask), one arrival each


@dataclass
class CtaMemory:
    """The tensor memory of one CTA."""
    cells: np.ndarray = field(default_factory=lambda: np.full((LANES, COLUMNS), POISON32, np.uint32))
    future: np.ndarray = field(default_factory=lambda: np.full((LANES, COLUMNS), POISON32, np.uint32))
    allocs: dict = field(default_factory=dict)
    alloc_pc: dict = field(default_factory=dict)          # base -> pc of the tcgen05.alloc
    relinquished: bool = False
    pair_allocs: set = field(default_factory=set)         # bases allocated with .cta_group::2 (with the peer)
    last_alloc: int = 0                                   # columns of the CTA's last tcgen05.alloc
    col_op: np.ndarray = field(default_factory=lambda: np.full(COLUMNS, -1, np.int64))
    col_done_vc: np.ndarray = field(default_factory=lambda: np.full(COLUMNS, -1, np.int64))
    col_done_t: np.ndarray = field(default_factory=lambda: np.zeros(COLUMNS, np.int64))
    reads: np.ndarray = None                              # (column, thread): time of its last ld, -1
    read_fenced: np.ndarray = None                        # (column, thread): time of the thread's first
    #              tcgen05.fence::before_thread_sync after that last ld, -1 while none
    read_pc: dict = field(default_factory=dict)           # thread -> pc of its last tcgen05.ld
    leak_checked: bool = False
    st_warp: np.ndarray = field(default_factory=lambda: np.full((LANES, COLUMNS), -1, np.int16))  # warp whose
    #              tcgen05.st into the cell has not been covered by its tcgen05.wait::st, or -1
    st_pc: dict = field(default_factory=dict)             # warp -> pc of its last tcgen05.st

    def allocation_of(self, lo: int, hi: int):
        """The base of the live allocation holding columns lo..hi-1, or None."""
        for base, n in self.allocs.items():
            if base <= lo and hi <= base + n:
                return base
        return None

    def free_slots(self, ncols: int) -> list[int]:
        """Every base column where ncols columns (aligned to ncols) are free."""
        out = []
        for base in range(0, COLUMNS, ncols):
            if all(b + n <= base or base + ncols <= b for b, n in self.allocs.items()):
                out.append(base)
        return out


class State:
    """Tensor memory of every CTA of the cluster the machine runs, and the per-thread tcgen05 state."""

    def __init__(self, n_threads: int, n_cta: int):
        self.cta = [CtaMemory(reads=np.full((COLUMNS, n_threads), -1, np.int64),
                              read_fenced=np.full((COLUMNS, n_threads), -1, np.int64)) for _ in range(n_cta)]
        self.fence_before = np.full(n_threads, -1, np.int64)
        self.fence_after = np.full(n_threads, -1, np.int64)
        self.uncommitted: dict[int, list] = {}           # thread -> [Mma]
        self.ops: list[Mma] = []
        self.commits: list[Commit] = []
        # thread -> {mbarrier clock column: time} of its commits delivered so far. PTX ISA 9.7.16.12.1: a
        # commit tracks ALL prior tcgen05 operations of the thread, also those an earlier commit tracked,
        # so its arrival carries these (a reader that observed it knows every earlier MMA's result).
        self.delivered: dict[int, dict[int, int]] = {}
        self.ld_pending: dict[str, np.ndarray] = {}      # register -> lanes whose tcgen05.ld is not waited
        self.ld_pending_pc: dict[str, int] = {}
        self.alloc_blocked: dict[int, list] = {}         # cta -> threads waiting in tcgen05.alloc
        self.notes: list[str] = []                       # said with any Violation (e.g. MMAs issued by many threads)
        # .cta_group of the kernel's tcgen05 instructions: (1 or 2, pc of the first); all must agree
        self.group: tuple | None = None
        # CTA pair (rank // 2) -> the warp of one CTA waiting in tcgen05.alloc.cta_group::2 for its peer:
        # {"cta", "warp", "threads", "ncols", "dst": (cta, offset), "pc"}
        self.pair_alloc: dict[int, dict] = {}


def early_register(m, name, ins, what):
    """A tcgen05.ld destination register read or written before tcgen05.wait::ld (hook of Machine.rd / wr)."""
    tc = m.tc
    t = int(np.nonzero(tc.ld_pending[name] & m.cur_mask)[0][0])
    ins = ins or m.k.code[m.cur_pc]
    pc = tc.ld_pending_pc.get(name, m.cur_pc)
    tc.ld_pending[name][m.cur_mask] = False
    if not tc.ld_pending[name].any():
        del tc.ld_pending[name]
    m.fail("tcgen05-wait-ld", ins,
           f"{m.tdesc(t)} {what}s register {name} at {m.where(ins)}, which the tcgen05.ld at "
           f"{m.where(m.k.code[pc])} writes asynchronously: it holds the value only after "
           f"tcgen05.wait::ld.sync.aligned. Wait before using the registers")


def check_exit(m, ins, finished=()):
    """Hook of the scheduler's on_exit: a block whose threads all exited must have freed its columns, and
    must not leave its peer waiting in tcgen05.alloc.cta_group::2; a block whose last thread exits now (in
    `finished`) must have no tcgen05.commit still to arrive on its mbarriers."""
    tc = m.tc
    for pair, w in list(tc.pair_alloc.items()):
        peer = w["cta"] ^ 1
        rows = np.arange(peer * m.nthr_cta, (peer + 1) * m.nthr_cta)
        if peer < len(tc.cta) and not m.alive[rows].any():
            del tc.pair_alloc[pair]
            m.fail("tcgen05-pair-alloc", ins,
                   f"warp {w['warp']} of block rank {w['cta']} waits in tcgen05.alloc.cta_group::2 at "
                   f"{m.where(m.k.code[w['pc']])} for a warp of its peer CTA (block rank {peer}), which exited "
                   f"without allocating: with .cta_group::2 one warp in EACH CTA of the pair executes the "
                   f"alloc (and the dealloc), and the first to arrive blocks until the other does")
    for c in finished:
        late = next((x for x in tc.commits if any(b.cta == c for b in [x.mb, *x.also])), None)
        if late is not None:
            b = next(b for b in [late.mb, *late.also] if b.cta == c)
            who = f"block rank {c}" if m.ncta > 1 else "the block"
            m.fail("tcgen05-commit-at-exit", ins,
                   f"{who} exits at {m.where(ins)} while the tcgen05.commit at {m.where(m.k.code[late.pc])} has "
                   f"not arrived on {m.mbar_name(b.off)}: no wait observed the phase it completes, and its "
                   f"arrival writes shared memory the block releases at exit. Wait for that phase (a final "
                   f"drain of the ring's barriers) before the block's threads exit")
    for c, cm in enumerate(tc.cta):
        if cm.leak_checked or not cm.allocs:
            continue
        rows = np.arange(c * m.nthr_cta, (c + 1) * m.nthr_cta)
        if m.alive[rows].any():
            continue
        cm.leak_checked = True
        base, n = sorted(cm.allocs.items())[0]
        who = f"block rank {c}" if m.ncta > 1 else "the block"
        m.fail("tcgen05-leak", ins,
               f"{who} exits with {n} tensor-memory columns (from column {base}) still allocated by the "
               f"tcgen05.alloc at {m.where(m.k.code[cm.alloc_pc.get(base, 0)])}: every allocation needs its "
               f"tcgen05.dealloc before the CTA exits; the columns are not freed at exit and the next CTA on "
               f"the SM waits for them")
