"""tests/exercises/test_hints.py - each hint that states a rule is that rule: the rule, written here as the hint
words it, gives the solution's answer on a grid of inputs (and on the inputs where a looser reading differs).

A hint is shown to a learner who is stuck; followed literally, it must give PASS. Here every hint that states a
computable rule is coded as it reads (the hint's number beside it) and compared with the exercise's solution.

Run: PYTHONPATH=$PWD python -m pytest tests/exercises/test_hints.py -q
"""
from __future__ import annotations

import itertools
import math

import pytest

from judge.grading import exercise

pytestmark = pytest.mark.filterwarnings("ignore")


def _hints(ex_id):
    return exercise.get(ex_id).hints


def _solution(ex_id):
    return exercise.get(ex_id).reference()


# ------------------------------------------------------------------ setmaxnreg_split
def _r8(regs):                                           # hints 1-3: "rounded up to a multiple of 8"
    return -(-regs // 8) * 8


def _pool(threads, regs):                                # hint 1
    return threads * _r8(regs)


def _split(threads, regs, producers=1, consumers=2, producer_regs=40):    # hint 2
    others = threads // 128 - producers - consumers
    left = _pool(threads, regs) - 128 * producer_regs * producers - 128 * _r8(regs) * others
    return producer_regs, min(256, left // (128 * consumers) // 8 * 8)


def _outcome(threads, regs, plan):                       # hints 3, 4, 5 in their order
    r8 = _r8(regs)
    for wg in plan:
        for w in wg:
            if w is not None:
                action, n = w
                if n % 8 or not 24 <= n <= 256 or (action == "dec" and n > r8) or (action == "inc" and n < r8):
                    return "illegal"                     # hint 3
    if any(len(set(wg)) > 1 for wg in plan):
        return "hang"                                    # hint 4
    ends = sum(128 * (wg[0][1] if wg[0] is not None else r8) for wg in plan)
    return "hang" if ends > _pool(threads, regs) else "ok"   # hint 5


def _plans():
    D = lambda n: [("dec", n)] * 4          # noqa: E731
    I = lambda n: [("inc", n)] * 4          # noqa: E731
    for regs in (100, 160, 165, 166, 168):
        for p in (24, 40, 160, 168):
            for c in (176, 224, 232, 240):
                yield 384, regs, [D(p), I(c), I(c)]
                yield 384, regs, [I(c), D(p), I(c)]
            yield 384, regs, [D(p)[:3] + [None], I(232), I(232)]
        yield 384, regs, [[None] * 4] * 3


def test_setmaxnreg_split_hints_state_its_rules():
    hints = _hints("setmaxnreg_split")
    assert "rounded up to a multiple of 8" in hints[0] and "R8" in hints[1] and "R8" in hints[2]
    sol = _solution("setmaxnreg_split")
    launches = [(t, r) for t in range(128, 1025, 128) for r in range(1, 256) if t * _r8(r) <= 65536]
    for t, r in launches:
        assert _pool(t, r) == sol.cta_pool(t, r), (t, r)
    for t, r in launches:
        wgs = t // 128
        for p, c in itertools.product(range(1, wgs), range(1, wgs)):
            if p + c > wgs:
                continue
            for keep in range(24, _r8(r) + 1, 8):
                assert _split(t, r, p, c, keep) == tuple(sol.best_split(t, r, p, c, keep)), (t, r, p, c, keep)
    for t, r, plan in _plans():
        assert _outcome(t, r, plan) == sol.outcome(t, r, plan), (t, r, plan)
    # where the launch count is not R8, reading "the launch count" for R8 gives another answer: the grid has them
    assert sol.outcome(384, 165, [[("dec", 168)] * 4, [None] * 4, [None] * 4]) == "ok"      # a .dec above 165
    assert tuple(sol.best_split(1024, 58, 1, 1, 40)) == (40, 88)    # six others keep 64, not 58: 120 otherwise


# ------------------------------------------------------------------ pipeline_timeline
def _schedule(K, L, C, S):                               # hints 1, 2, 3
    out = []
    for k in range(K):
        issue = 0 if k < S else out[k - S][3]                                   # hint 2
        cs = max(issue, out[k - 1][1] if k else 0)
        ce = cs + L
        ks = max(ce, out[k - 1][3] if k else 0)                                 # hint 3
        out.append((cs, ce, ks, ks + C))
    return out


def test_pipeline_timeline_hints_state_its_rule():
    sol = _solution("pipeline_timeline")
    for K, L, C, S in itertools.product(range(0, 9), (0, 1, 4, 10, 2.5), (0, 1, 4, 10, 7.5), range(1, 6)):
        want = sol.schedule(K, L, C, S)
        assert [tuple(t) for t in _schedule(K, L, C, S)] == [tuple(t) for t in want], (K, L, C, S)
        assert (_schedule(K, L, C, S)[-1][3] if K else 0) == sol.pipeline_time(K, L, C, S)      # hint 3


# ------------------------------------------------------------------ smem_budget
def _blocks(smem, threads, regs):                        # hints 2, 3, 4
    if threads > 1024 or regs > 255 or smem > 227 * 1024:
        return 0
    warps = math.ceil(threads / 32)
    per_block = -(-(smem + 1024) // 128) * 128
    by_smem = 228 * 1024 // per_block
    per_warp = -(-(regs * 32) // 256) * 256
    by_regs = 4 * (16384 // per_warp) // warps if per_warp else 64
    return min(32, 64 // warps, by_smem, by_regs)


def test_smem_budget_hints_state_its_rules():
    sol = _solution("smem_budget")
    for BM, BN, BK, st, eb in itertools.product((64, 128), (64, 128, 256), (8, 16, 32), (1, 2, 3, 4), (2, 4)):
        assert (BM * BK + BK * BN) * eb == sol.stage_bytes(BM, BN, BK, eb)                      # hint 1
        assert st * (BM * BK + BK * BN) * eb == sol.pipeline_bytes(BM, BN, BK, st, eb)
    for smem, threads, regs in itertools.product((0, 1, 1000, 24576, 32768, 100_000, 232448, 232449),
                                                 (32, 100, 128, 256, 512, 1024, 1056), (16, 32, 40, 64, 128, 255, 256)):
        assert _blocks(smem, threads, regs) == sol.blocks_per_sm(smem, threads, regs), (smem, threads, regs)


# ------------------------------------------------------------------ swizzle_address
def test_swizzle_address_hint_states_its_rule():
    assert "a ^ (((a >> 7) & (span // 16 - 1)) << 4)" in _hints("swizzle_address")[3]
    sol = _solution("swizzle_address")
    for span, fn in ((128, sol.swizzle128), (64, sol.swizzle64), (32, sol.swizzle32)):
        for row, col in itertools.product(range(24), range(span)):
            a = row * span + col
            assert a ^ (((a >> 7) & (span // 16 - 1)) << 4) == fn(row, col), (span, row, col)      # hint 4


# ------------------------------------------------------------------ barrier_phases
def test_barrier_phases_hints_state_its_rule():
    sol = _solution("barrier_phases")
    for i, S in itertools.product(range(40), range(1, 7)):
        slot, lap = i % S, i // S                                                              # hint 1
        assert tuple(sol.consumer_wait(i, S)) == (slot, lap % 2)                               # hint 2
        assert tuple(sol.producer_wait(i, S)) == (slot, (lap - 1) % 2)                         # hints 3, 4


# ------------------------------------------------------------------ dsmem_addressing
def test_dsmem_addressing_hints_state_its_rules():
    sol = _solution("dsmem_addressing")
    for rank, off in itertools.product(range(16), (0, 1, 0x400, 0xFFFFFF)):
        a = (rank << 24) | off                                                                 # hint 1
        assert sol.encode(rank, off) == a and tuple(sol.decode(a)) == (rank, off)
        for other in (0, 3, 15):
            assert sol.mapa(a, other) == (other << 24) | (a & 0xFFFFFF)                         # hint 2
