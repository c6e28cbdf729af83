"""Grader of multicast_plan: python practice/judge.py check multicast_plan

Every function of the statement is called directly (judge.grading.cpu_flow), on the statement's
cases and on inputs drawn each run:
  cta_mask(ranks)            rank sets of 1 to 16 ranks in any order, compared with the reference;
  split(tile, rows, rb, ranks)  compared with the reference load by load (any order of the loads):
                             ranks in any order and not from 0, one row per rank, 16 ranks;
  gemm_plan(cx, cy, ...)     SIMULATED, not compared: every load delivers rows * row_bytes bytes to
                             every block in its mask; each block must end with exactly A{y} and
                             B{x}, every row once, and a load's "bytes" must be what it carries;
  expect_tx(loads, size)     compared with what each block receives, on the reference's GEMM plans,
                             on plans where one block loads for others, and on random loads. A
                             wrong count is graded by what the barrier does (PTX ISA 9.7.13.15,
                             mbarrier: a phase completes when its pending arrivals and its tx-count
                             are both zero; the tx-count may go below zero):
                             a block expecting MORE bytes than it receives never completes its
                             phase: HANG. A block expecting FEWER completes its phase while bytes
                             are still landing, so the consumer may read a tile that has not
                             arrived: a race, WRONG. (The surplus then lowers the next phase's
                             tx-count: that phase completes early too, or, when the surplus is more
                             than it expects, never; the message says which.)
"""
from __future__ import annotations

from collections import Counter

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.grading.result import Verdict

SHAPES = [(1, 2, 64, 64, 128), (2, 1, 64, 128, 128), (2, 2, 128, 64, 128), (4, 1, 64, 256, 64),
          (2, 4, 128, 128, 128), (4, 4, 64, 64, 256), (1, 16, 128, 32, 128)]

# Plans that are not symmetric: one block loads for others (e.g. a producer block).
UNEVEN = [
    (2, [{"issuer": 0, "tile": "T", "row": 0, "rows": 64, "bytes": 8192, "mask": 0b11}]),
    (4, [{"issuer": 0, "tile": "T", "row": 0, "rows": 64, "bytes": 16384, "mask": 0b1110},
         {"issuer": 3, "tile": "U", "row": 0, "rows": 32, "bytes": 4096, "mask": 0b1001}]),
]


# ------------------------------------------------------------------ the reference (the statement's rules)
def cta_mask(ranks):
    m = 0
    for r in ranks:
        m |= 1 << int(r)
    return m


def split(tile, tile_rows, row_bytes, ranks):
    n = tile_rows // len(ranks)
    return [{"issuer": r, "tile": tile, "row": i * n, "rows": n, "bytes": n * row_bytes, "mask": cta_mask(ranks)}
            for i, r in enumerate(ranks)]


def gemm_plan(cx, cy, a_rows, b_rows, row_bytes):
    loads = []
    for y in range(cy):
        loads += split(f"A{y}", a_rows, row_bytes, [x + y * cx for x in range(cx)])
    for x in range(cx):
        loads += split(f"B{x}", b_rows, row_bytes, [x + y * cx for y in range(cy)])
    return loads


def received(loads, cluster_size):
    """What each rank's barrier is signalled with: every load counts for every rank in its mask."""
    out = [0] * cluster_size
    for ld in loads:
        for r in range(cluster_size):
            if int(ld["mask"]) >> r & 1:
                out[r] += int(ld["bytes"])
    return out


# ------------------------------------------------------------------ grading what the barriers do
def barrier_outcome(announced, got_bytes):
    """None when every barrier expects what it receives; else (Verdict, why) for the first that does not."""
    if not isinstance(announced, (list, tuple)) or len(announced) != len(got_bytes):
        return f"expected a list of {len(got_bytes)} byte counts, one per rank, got {checks.show(announced)}"
    if not all(checks.as_integer(a) is not None for a in announced):
        return f"every count must be an integer number of bytes, got {checks.show(announced)}"
    for r, (a, b) in enumerate(zip(announced, got_bytes)):
        if a > b:
            return Verdict.HANG, (f"block rank {r}'s barrier expects {int(a)} bytes but receives {b}: its "
                                  f"tx-count never reaches zero, the phase never completes")
    for r, (a, b) in enumerate(zip(announced, got_bytes)):
        if a < b:
            surplus = b - int(a)
            nxt = int(a) - surplus          # the next phase's tx-count after its own expect_tx, before its bytes
            then = (f"its next phase then waits for only {nxt} of its {b} bytes: early again" if nxt > 0 else
                    "its next phase then completes at its own arrive, before any of its bytes" if nxt == 0 else
                    "its next phase's tx-count then sits below zero and its bytes only push it further: "
                    "that phase never completes")
            return Verdict.WRONG, (f"block rank {r}'s barrier expects {int(a)} bytes but receives {b}: the phase "
                                   f"completes while {surplus} bytes are still landing, so the consumer may read "
                                   f"the tile before it arrived (a race); the {surplus} surplus bytes count "
                                   f"against the next phase: {then}")
    return None


def _tiles_delivered(loads, cx, cy, a_rows, b_rows, row_bytes):
    """None if every block ends with A{y} and B{x}, every row once; else what is wrong."""
    size = cx * cy
    if not isinstance(loads, (list, tuple)) or not all(isinstance(ld, dict) for ld in loads):
        return f"gemm_plan must return a list of load dicts, got {checks.show(loads)}"
    got = [Counter() for _ in range(size)]
    for ld in loads:
        missing = [k for k in ("issuer", "tile", "row", "rows", "bytes", "mask") if k not in ld]
        if missing:
            return f"load {ld} lacks {', '.join(missing)}"
        mask, rows = int(ld["mask"]), int(ld["rows"])
        if mask >> size:
            return f"load {ld} has mask bits above rank {size - 1}: no such block in a cluster of {size}"
        if int(ld["bytes"]) != rows * row_bytes:
            return (f"load {ld} says {int(ld['bytes'])} bytes but carries {rows} rows of {row_bytes} B = "
                    f"{rows * row_bytes}: each destination's barrier is signalled with what the box holds")
        for r in range(size):
            if mask >> r & 1:
                for row in range(int(ld["row"]), int(ld["row"]) + rows):
                    got[r][(ld["tile"], row)] += 1
    for r in range(size):
        x, y = r % cx, r // cx
        need = Counter({(f"A{y}", i): 1 for i in range(a_rows)}) + Counter({(f"B{x}", i): 1 for i in range(b_rows)})
        if got[r] != need:
            missing = sorted(set(need) - set(got[r]))[:3]
            extra = sorted(k for k in got[r] if got[r][k] != need.get(k, 0))[:3]
            if missing:
                return f"block rank {r} (x={x}, y={y}) needs A{y} and B{x} once each; missing rows {missing}"
            return f"block rank {r} (x={x}, y={y}) receives {extra} the wrong number of times"
    return None


def _by_row(loads):
    if isinstance(loads, (list, tuple)) and all(isinstance(ld, dict) for ld in loads):
        return sorted(loads, key=lambda ld: (str(ld.get("tile")), int(ld.get("row", 0))))
    return loads


# ------------------------------------------------------------------ inputs
RANK_SETS = [[0], [1], [0, 1], [0, 2], [1, 3], [0, 1, 2, 3], list(range(8)), list(range(16)), [15], [3, 1]]
rank_sets = st.lists(st.integers(0, 15), min_size=1, max_size=16, unique=True)


@st.composite
def split_args(draw):
    ranks = draw(rank_sets)
    return ("T", len(ranks) * draw(st.integers(1, 64)), 16 * draw(st.integers(1, 32)), ranks)


@st.composite
def clusters(draw):
    cx = draw(st.sampled_from([1, 2, 4, 8, 16]))
    cy = draw(st.sampled_from([c for c in (1, 2, 4, 8, 16) if cx * c <= 16]))
    return (cx, cy, cx * draw(st.integers(1, 8)), cy * draw(st.integers(1, 8)), 16 * draw(st.integers(1, 16)))


@st.composite
def load_lists(draw):
    size = draw(st.integers(1, 16))
    loads = [{"issuer": draw(st.integers(0, size - 1)), "tile": f"T{i}", "row": 0, "rows": rows,
              "bytes": rows * 128, "mask": draw(st.integers(1, (1 << size) - 1))}
             for i, rows in enumerate(draw(st.lists(st.integers(1, 64), min_size=1, max_size=6)))]
    return (loads, size)


def check(sub):
    functions = [
        flow.Function("cta_mask", reference=cta_mask, args=st.tuples(rank_sets),
                      edges=[flow.Edge((r,), "") for r in RANK_SETS],
                      explain=lambda call, got, want: "bit r of the mask is cluster rank r"),
        flow.Function("split", reference=split, args=split_args(),
                      edges=[flow.Edge(("A0", 128, 128, [0, 1]), "two ranks from 0"),
                             flow.Edge(("A1", 64, 256, [2, 3]), "ranks that do not start at 0: rows still start at 0"),
                             flow.Edge(("B1", 64, 128, [1, 3]), "a cluster column: ranks 1 and 3"),
                             flow.Edge(("T", 96, 64, [5, 2, 9]), "ranks in any order: the first rank the first slice"),
                             flow.Edge(("T", 16, 32, list(range(16))), "16 ranks, one row each"),
                             flow.Edge(("T", 64, 128, [7]), "a single rank loads the whole tile for itself")],
                      compare=lambda got, want: flow.same(_by_row(got), _by_row(want)),
                      explain=lambda call, got, want: "each rank loads tile_rows / len(ranks) consecutive rows, "
                                                      "bytes = rows * row_bytes, multicast to all of ranks"),
        flow.Function("gemm_plan", reference=gemm_plan, args=clusters(),
                      edges=[flow.Edge(s, f"a {s[0]}x{s[1]} cluster") for s in SHAPES],
                      validate=lambda call, got: _tiles_delivered(got, *call.args),
                      compare=lambda got, want: None,
                      explain=lambda call, got, want: "the block at (x, y) is rank x + y * cx: it needs A{y}, "
                                                      "shared by its cluster row, and B{x}, shared by its column"),
        flow.Function("expect_tx", reference=received, args=load_lists(), examples=100,
                      edges=[flow.Edge((loads, size), "one block loads for others") for size, loads in UNEVEN]
                      + [flow.Edge((gemm_plan(*s), s[0] * s[1]), f"the plan of a {s[0]}x{s[1]} cluster")
                         for s in SHAPES],
                      compare=barrier_outcome,
                      explain=lambda call, got, want: "a destination announces what it receives, whoever issued "
                                                      "the copy: every load counts for every rank in its mask"),
    ]
    return flow.run(sub, functions, checked=["loads delivered block by block (simulated)",
                                             "barriers graded by what a wrong tx count does (PTX ISA mbarrier)"])
