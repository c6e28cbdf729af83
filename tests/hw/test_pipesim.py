"""tests/hw/test_pipesim.py - the cp.async commit/wait simulator (judge.hw.pipesim) on the loops the chapter shows.

Run: python -m pytest tests/hw/test_pipesim.py -q      (pure Python, no GPU)
"""
import io

import pytest
from matplotlib.figure import Figure

from judge.hw import pipesim as p
from judge.hw.pipesim import BARRIER, COMMIT, Load, Read, Wait

SIZES = [(S, K) for S in range(2, 7) for K in range(0, 13)]


@pytest.mark.parametrize("S,K", SIZES)
def test_seed_loop_is_clean_and_guarantees_tiles_0_to_kt(S, K):
    rep = p.check(p.seed_loop(S, K), S)
    assert rep.ok, rep.violations
    assert len(rep.rounds) == K
    # round kt waits with kt + S - 1 groups committed; wait_prior(S-2) completes groups 0..kt
    assert [r.committed for r in rep.rounds] == [kt + S - 1 for kt in range(K)]
    assert p.safe_tiles(p.seed_loop(S, K)) == [set(range(kt + 1)) for kt in range(K)]
    assert all(len(r.in_flight) <= S - 1 for r in rep.rounds)   # S-2 after the wait, +1 committed since


@pytest.mark.parametrize("S,K", SIZES)
def test_dropping_empty_commits_breaks_the_last_S_minus_2_rounds(S, K):
    rep = p.check(p.seed_loop(S, K, empty_commit=False), S)
    # with S = 2, wait_prior(0) waits for everything; with S >= 3 the count falls short
    # as soon as a round issues no load, i.e. in rounds kt >= K - S + 2
    unsafe = [kt for kt in range(K) if S >= 3 and kt >= K - S + 2]
    assert [r.round for r in rep.rounds if not r.ok] == unsafe
    assert rep.ok == (not unsafe) == (S == 2 or K == 0)
    assert rep.first_unsafe_round() == (max(0, K - S + 2) if unsafe else None)
    assert all("may still be in flight" in v for v in rep.violations)


def test_dropped_empty_commit_message_names_round_group_and_wait():
    rep = p.check(p.seed_loop(3, 8, empty_commit=False), 3)
    assert len(rep.violations) == 1
    v = rep.violations[0]
    assert v.startswith("at round 7 (op ")
    assert "tile 7 is read but its group (#7) may still be in flight" in v
    assert "wait_prior(1)" in v and "8 groups were committed" in v and "newest 1 outstanding (#7)" in v


@pytest.mark.parametrize("S,K", [(S, K) for S in range(2, 7) for K in range(1, 13)])
def test_wait_prior_S_minus_1_is_too_loose_in_every_round(S, K):
    rep = p.check(p.seed_loop(S, K, wait=S - 1), S)
    assert [r.round for r in rep.rounds if not r.ok] == list(range(K))
    assert p.safe_tiles(p.seed_loop(S, K, wait=S - 1)) == [set(range(kt)) for kt in range(K)]


@pytest.mark.parametrize("S,K", [(2, 5), (4, 9), (6, 3)])
def test_wait_prior_0_is_safe_but_waits_for_everything(S, K):
    rep = p.check(p.seed_loop(S, K, wait=0), S)
    assert rep.ok
    assert all(r.in_flight == [] or len(r.in_flight) == 1 for r in rep.rounds)  # only the round's own commit


@pytest.mark.parametrize("S,K", [(S, K) for S in range(2, 7) for K in range(1, 13)])
def test_missing_barrier_is_flagged(S, K):
    rep = p.check(p.seed_loop(S, K, barrier=False), S)
    kinds = {i.kind for i in rep.issues}
    # the wait only covers this thread's copies: no round's tile is visible to the block
    assert "not visible" in kinds and not rep.rounds[0].ok
    # refilling buffer (kt-1) % S while others may still read tile kt-1: from round 1, if it loads
    assert ("overwrite" in kinds) == (K >= S + 1)


def test_overwrite_race_message():
    rep = p.check(p.seed_loop(3, 6, barrier=False), 3)
    race = next(i for i in rep.issues if i.kind == "overwrite")
    assert race.round == 1
    assert "tile 3 is loaded into buffer 0 while other threads may still be reading tile 0" in race.text


def test_hand_written_ops_without_round_markers():
    ops = [Load(0, 0), COMMIT, Load(1, 1), COMMIT,
           Wait(1), BARRIER, Read(0, 0),           # round 0: fine
           Read(2, 0),                             # round 1: tile 2 never loaded (d)
           Read(0, 1),                             # round 2: buffer 1 holds tile 1 (b)
           Load(2, 0),                             # round 3: overwrites tile 0, read with no barrier since (c)
           Read(2, 0)]                             # never committed (a)
    rep = p.check(ops, S=2)
    assert [i.kind for i in rep.issues] == ["never loaded", "wrong tile", "overwrite", "in flight"]
    assert [i.round for i in rep.issues] == [1, 2, 3, 3]
    assert "tile 2 is read from buffer 0 but was never loaded" in rep.violations[0]
    assert "that buffer holds tile 1" in rep.violations[1]
    assert "never committed" in rep.violations[3]
    assert rep.rounds[0].ok and rep.rounds[0].safe == {0}


def test_load_over_a_tile_not_yet_read():
    ops = [Load(0, 0), COMMIT, Load(1, 0), COMMIT, Wait(0), BARRIER, Read(0, 0), Read(1, 0)]
    rep = p.check(ops)
    assert rep.issues[0].kind == "overwrite" and "a later read expects tile 0 there" in rep.violations[0]
    assert rep.issues[1].kind == "wrong tile"


def test_an_empty_group_counts():
    # one real group, then an empty one: wait_prior(1) leaves only the empty group outstanding
    ops = [Load(0, 0), COMMIT, COMMIT, Wait(1), BARRIER, Read(0, 0)]
    assert p.check(ops).ok
    # without the empty commit the same wait leaves tile 0's group outstanding
    assert not p.check([Load(0, 0), COMMIT, Wait(1), BARRIER, Read(0, 0)]).ok


def test_buffer_out_of_range_with_S():
    rep = p.check([Load(0, 3), COMMIT, Wait(0), BARRIER, Read(0, 3)], S=3)
    assert rep.issues[0].kind == "no buffer"


def test_draw_returns_a_figure():
    for ops in (p.seed_loop(3, 6), p.seed_loop(3, 6, empty_commit=False), p.seed_loop(4, 7, barrier=False)):
        fig = p.draw(p.check(ops, 3), title="test")
        assert isinstance(fig, Figure)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=50)
        assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = p.draw(p.check(p.seed_loop(3, 6, empty_commit=False), 3)).axes[0]
    assert "1 violation" in ax.get_title()


def test_seed_loop_rejects_nonsense():
    with pytest.raises(ValueError):
        p.seed_loop(0, 4)
    with pytest.raises(ValueError):
        p.seed_loop(1, 4)        # wait_prior(S-2) = wait_prior(-1)
    # one buffer: each round loads its own tile after its wait, so no wait ever covers it
    rep = p.check(p.seed_loop(1, 4, wait=0), 1)
    assert [i.kind for i in rep.issues] == ["in flight"] * 4
    assert "no wait_prior came after its commit" in rep.violations[0]
