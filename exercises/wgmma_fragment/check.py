"""Grader of wgmma_fragment: python practice/judge.py check wgmma_fragment

coord() and owner() are called directly, through the Python flow (judge.grading.cpu_flow), and
compared with judge.hw.wgmma.fragment_coord / fragment_owner (the PTX ISA's figure, checked against
CuTe's CLayout_64xN in tests/hw/test_wgmma.py): first every register and element of N = 16 (the
statement's drawing), N = 24 (an N that is not a power of two) and the corners of N = 8 and 256,
then (thread, register, N) and (row, column, N) drawn per run over every legal N = 8, 16, ..., 256.
A failure names the call, what came back, what was expected, and which part of the rule (warp
rows, lane row, register band, column pair) it broke.
"""
from hypothesis import strategies as st

from judge.grading import cpu_flow as flow
from judge.hw import wgmma

SHAPES_N = wgmma.SHAPES_N          # 8, 16, ..., 256


def coord_why(call, got, want):
    thread, reg = call.args[0], call.args[1]
    warp, lane = divmod(thread, 32)
    out = [f"thread {thread} is lane {lane} of warp {warp}: warp {warp} owns rows {16 * warp}..{16 * warp + 15}; "
           f"lane {lane} sits in row {lane // 4} of each 8-row band and holds columns {2 * (lane % 4)} and "
           f"{2 * (lane % 4) + 1} of each group of 8",
           f"d[{reg}] is in column group {reg // 4} (columns {8 * (reg // 4)}..{8 * (reg // 4) + 7}), "
           f"{'lower' if (reg // 2) % 2 else 'upper'} band (+{8 * ((reg // 2) % 2)} rows), "
           f"{'second' if reg % 2 else 'first'} column of the pair"]
    if isinstance(got, (tuple, list)) and len(got) == 2:
        for what, g, w in (("row", got[0], want[0]), ("column", got[1], want[1])):
            if flow.same(g, w) is not None:
                out.append(f"your {what} {g} should be {w}")
    return out


def owner_why(call, got, want):
    row, col, n = call.args[:3]
    out = [f"C[{row}][{col}] is held by thread {want[0]} (warp {want[0] // 32}, lane {want[0] % 32}) in d[{want[1]}]"]
    try:
        t, i = (int(v) for v in got)
        back = wgmma.fragment_coord(t, i, n)
        out.append(f"thread {t}'s d[{i}] holds C[{back[0]}][{back[1]}]: owner must undo coord")
    except (ValueError, TypeError):
        pass
    return out


def _coord_edges():
    out = [flow.Edge((t, i, 16), "N = 16, every thread and register (the statement's drawing)")
           for t in range(128) for i in range(8)]
    out += [flow.Edge((t, i, 24), "N = 24: not a power of two, and a legal wgmma shape")
            for t in (0, 5, 37, 127) for i in range(12)]
    out += [flow.Edge((t, i, n), f"N = {n}, the first and last thread and register")
            for n in (8, 256) for t in (0, 127) for i in (0, n // 2 - 1)]
    return out


def _owner_edges():
    out = [flow.Edge((r, c, 16), "N = 16, every element (the statement's drawing)") for r in range(64) for c in range(16)]
    out += [flow.Edge((r, c, 24), "N = 24: not a power of two, and a legal wgmma shape")
            for r in (0, 9, 40, 63) for c in range(24)]
    out += [flow.Edge((r, c, n), f"N = {n}, the corners") for n in (8, 256) for r in (0, 63) for c in (0, n - 1)]
    return out


COORD = flow.Function(
    "coord", reference=wgmma.fragment_coord, explain=coord_why, edges=_coord_edges(),
    args=st.sampled_from(SHAPES_N).flatmap(
        lambda n: st.tuples(st.integers(0, 127), st.integers(0, n // 2 - 1), st.just(n))))
OWNER = flow.Function(
    "owner", reference=wgmma.fragment_owner, explain=owner_why, edges=_owner_edges(),
    args=st.sampled_from(SHAPES_N).flatmap(
        lambda n: st.tuples(st.integers(0, 63), st.integers(0, n - 1), st.just(n))))


def check(sub):
    return flow.run(sub, [COORD, OWNER],
                    checked=["N = 16: every register and element", "N = 24: four threads, four rows",
                             "N = 8 and 256: the corners", "drawn per run over N = 8, 16, ..., 256"])
