"""Chapter 5: the tensor-memory step simulator (judge.hw.tmem) catches each rule, naming rule and step.

Kernels themselves are judged by the CPU model (tests/model/test_model_tcgen05.py); the last test here
replays what the model ran for the chapter's tile.

Run: python -m pytest tests/hw/test_tmem.py -q
"""
import pytest

from judge import config
from judge.model import tiles
from judge.draw import timeline
from judge.hw import tmem
from judge.hw.tmem import TmemError, replay

GOOD = [("alloc", 0, 128), ("relinquish", 0), ("sync",),
        ("mma", 0, 0, 128), ("mma", 0, 0, 128), ("commit", 0, "done"),
        *[("wait", w, "done", 0) for w in range(4)],
        *[("ld", w, 32 * w, c, 8) for w in range(4) for c in range(0, 128, 8)],
        ("sync",), ("dealloc", 0, 0, 128), ("exit",)]


def broken(steps, rule):
    with pytest.raises(TmemError) as e:
        replay(steps)
    assert e.value.rule == rule, str(e.value)
    return e.value


def test_the_tile_protocol_passes_and_draws():
    sim = replay(GOOD)
    assert sim.exited and not sim.allocs
    (s,) = sim.schedule()
    assert s[0] < s[1] <= s[2] < s[3]            # MMAs, then the drain after they completed
    fig = timeline.draw({"tile": sim.schedule()}, S=1, **tmem.TIMELINE_ROWS)
    assert fig.axes[0].get_yticklabels()[0].get_text() == "tensor core (MMA)"


@pytest.mark.parametrize("ncols", [0, 16, 31, 48, 96, 100, 1024])
def test_alloc_must_be_a_power_of_two_from_32_to_512(ncols):
    e = broken([("alloc", 0, ncols)], "alloc.size")
    assert e.step == 0 and str(ncols) in str(e)


def test_alloc_beyond_512_columns_waits_forever():
    e = broken([("alloc", 0, 256), ("alloc", 0, 256), ("alloc", 0, 32)], "alloc.capacity")
    assert e.step == 2


def test_alloc_after_relinquish():
    broken([("alloc", 0, 64), ("relinquish", 0), ("alloc", 0, 64)], "alloc.after_relinquish")


def test_allocations_are_aligned_and_disjoint():
    sim = replay([("alloc", 0, 32), ("alloc", 0, 128), ("alloc", 0, 64)])
    assert sorted(sim.allocs.items()) == [(0, 32), (64, 64), (128, 128)]


@pytest.mark.parametrize("warp,lane", [(0, 32), (1, 0), (5, 64), (3, 64)])
def test_a_warp_reaches_only_its_lane_quarter(warp, lane):
    steps = GOOD[:10] + [("ld", warp, lane, 0, 8)]
    e = broken(steps, "lane.quarter")
    assert f"lanes {32 * (warp % 4)}..{32 * (warp % 4) + 31}" in str(e)


def test_warp_5_uses_the_second_quarter():
    replay(GOOD[:10] + [("ld", 5, 32, 0, 8)])


def test_dealloc_before_the_commit_phase_was_waited():
    steps = [("alloc", 0, 128), ("mma", 0, 0, 128), ("commit", 0, "done"), ("dealloc", 0, 0, 128)]
    e = broken(steps, "dealloc.in_flight")
    assert e.step == 3 and "no warp waited" in str(e)
    steps = [("alloc", 0, 128), ("mma", 0, 0, 128), ("dealloc", 0, 0, 128)]
    assert "never committed" in str(broken(steps, "dealloc.in_flight"))


def test_reading_before_the_wait():
    broken([("alloc", 0, 128), ("mma", 0, 0, 128), ("commit", 0, "done"), ("ld", 0, 0, 0, 8)], "ld.in_flight")


def test_leak_double_free_and_uncommitted():
    broken([x for x in GOOD if x[0] != "dealloc"], "exit.leak")
    broken(GOOD[:-1] + [("dealloc", 0, 0, 128)], "dealloc.unknown")
    broken([("alloc", 0, 128), ("dealloc", 0, 0, 64)], "dealloc.unknown")
    broken([("alloc", 0, 32), ("mma", 0, 0, 32), ("exit",)], "exit.uncommitted")


def test_outside_the_allocation():
    broken([("alloc", 0, 64), ("mma", 0, 0, 128)], "access.unallocated")


def test_parity_and_deadlock():
    broken([("alloc", 0, 32), ("mma", 0, 0, 32), ("commit", 0, "b"), ("wait", 1, "b", 1)], "mbarrier.parity")
    broken([("alloc", 0, 32), ("mma", 0, 0, 32), ("commit", 0, "b"), ("wait", 1, "b", 0),
            ("wait", 1, "b", 1)], "wait.deadlock")


def test_double_buffered_accumulators_overlap_the_epilogue():
    one = replay(tmem.tile_protocol(n_acc=1, tiles=4)).schedule()
    two = replay(tmem.tile_protocol(n_acc=2, tiles=4)).schedule()
    assert all(one[i + 1][0] >= one[i][3] for i in range(3))       # MMAs wait for the drain
    assert all(two[i + 1][0] == two[i][1] for i in range(3))       # back to back on the tensor core
    assert two[-1][3] < one[-1][3]


def test_the_steps_of_a_model_run_replay_and_draw():
    """The chapter's tile runs on the CPU model (its own PTX); the protocol it ran replays here."""
    from judge.gpu import build
    b = build.compile(config.CHAPTERS_DIR / "ch05_blackwell" / "tcgen05_tile.cu", target="sm_100a")
    rep = tiles.run_tile(b, "tcgen05_tile", K=128, seed=7)
    steps = tmem.protocol_from_run(rep)
    kinds = [s[0] for s in steps]
    assert kinds.index("alloc") < kinds.index("mma") < kinds.index("commit") < kinds.index("wait") \
        < kinds.index("ld") < kinds.index("dealloc")
    assert {s[1]: s[2] for s in steps if s[0] == "ld"} == {0: 0, 1: 32, 2: 64, 3: 96}
    assert kinds.count("mma") == 8 and kinds.count("commit") == 2          # K = 128: two stages of 4 MMAs
    assert len(replay(steps).schedule()) == 2
    assert rep.counts["tcgen05.alloc.columns"] == 128
