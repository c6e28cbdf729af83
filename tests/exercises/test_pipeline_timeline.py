"""Tests of the pipeline_timeline exercise (reference, starter, grader, fixtures) and judge/draw/timeline.py.

Run: python -m pytest tests/exercises/test_pipeline_timeline.py -q     (CPU only, ~25 s)

The reference (exercises/pipeline_timeline/solution.py) is a recurrence over tiles; here it is
checked against hand-written schedules and against an independent discrete-event simulation
(a heap of completion events), then the judge grades every fixture end to end, drawing its timeline
(JUDGE_FIGURES=1 in this module: the rest of the suite grades without figures, tests/conftest.py).
"""
from __future__ import annotations

import heapq
import itertools
import random
from pathlib import Path

import pytest

from judge import config
from judge.grading import exercise, grade
from judge.draw import timeline

EX = exercise.get("pipeline_timeline")


@pytest.fixture(autouse=True, scope="module")
def _figures_drawn():
    """The figure is this module's subject too: drawn here, whatever tests/conftest.py sets."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUDGE_FIGURES", "1")
        yield


def _load(path: Path, name: str):
    return exercise.import_file(path, name)


ref = _load(EX.solution_path, "pipeline_timeline_solution")


# ------------------------------------------------------------------ an independent simulation
def simulate(K, L, C, S):
    """Discrete-event simulation: two resources, a heap of completion events.

    Copies wait in a queue of issued tiles (issued in tile order, so a min-heap on the
    index is FIFO); the copy engine takes one at a time. The compute takes tile `due`
    once it has landed. Finishing compute j issues copy j + S.
    """
    out = [[None] * 4 for _ in range(K)]
    events, seq = [], itertools.count()
    issued = list(range(min(S, K)))
    engine_busy = compute_busy = False
    landed, due = set(), 0

    def dispatch(t):
        nonlocal engine_busy, compute_busy
        if not engine_busy and issued:
            k = heapq.heappop(issued)
            out[k][0], engine_busy = t, True
            heapq.heappush(events, (t + L, next(seq), "copied", k))
        if not compute_busy and due in landed:
            landed.discard(due)
            out[due][2], compute_busy = t, True
            heapq.heappush(events, (t + C, next(seq), "computed", due))

    dispatch(0)
    while events:
        t, _, kind, k = heapq.heappop(events)
        if kind == "copied":
            out[k][1], engine_busy = t, False
            landed.add(k)
        else:
            out[k][3], compute_busy = t, False
            due += 1
            if k + S < K:
                heapq.heappush(issued, k + S)
        dispatch(t)
    assert due == K, "the simulation stalled"
    return [tuple(tile) for tile in out]


# ------------------------------------------------------------------ the README examples, by hand
EXAMPLES = {
    (4, 10, 10, 1): [(0, 10, 10, 20), (20, 30, 30, 40), (40, 50, 50, 60), (60, 70, 70, 80)],
    (4, 10, 10, 2): [(0, 10, 10, 20), (10, 20, 20, 30), (20, 30, 30, 40), (30, 40, 40, 50)],
    (8, 4, 10, 3): [(0, 4, 4, 14), (4, 8, 14, 24), (8, 12, 24, 34), (14, 18, 34, 44),
                    (24, 28, 44, 54), (34, 38, 54, 64), (44, 48, 64, 74), (54, 58, 74, 84)],
}


@pytest.mark.parametrize("case", list(EXAMPLES))
def test_examples_exact(case):
    assert ref.schedule(*case) == EXAMPLES[case]
    assert simulate(*case) == EXAMPLES[case]
    assert ref.pipeline_time(*case) == {(4, 10, 10, 1): 80, (4, 10, 10, 2): 50, (8, 4, 10, 3): 84}[case]


def test_sweep_against_simulation():
    rng = random.Random(7)
    for _ in range(2000):
        K, S = rng.randint(0, 24), rng.randint(1, 7)
        if rng.random() < 0.3:
            L, C = round(rng.uniform(0, 9), 3), round(rng.uniform(0, 9), 3)
        else:
            L, C = rng.randint(0, 12), rng.randint(0, 12)
        got = ref.schedule(K, L, C, S)
        assert got == simulate(K, L, C, S), (K, L, C, S)
        assert ref.pipeline_time(K, L, C, S) == (got[-1][3] if K else 0)
        # invariants of any valid schedule
        assert all(a[1] <= b[0] for a, b in zip(got, got[1:])), "two copies overlap"
        assert all(a[3] <= b[2] for a, b in zip(got, got[1:])), "two computes overlap"
        assert all(t[1] <= t[2] for t in got), "a compute started before its tile landed"
        assert max((n for _, n in timeline.occupancy(got)), default=0) <= min(S, K)
        if K:
            assert ref.pipeline_time(K, L, C, S) >= max(L + K * C, K * L + C) - 1e-9


# ------------------------------------------------------------------ edge cases
def test_the_graders_rule_is_the_simulation():
    """The grader's reference is judge.hw.pipesim.timeline (released copies ship without solution.py)."""
    from judge.hw import pipesim
    rng = random.Random()
    for _ in range(300):
        K, S = rng.randint(0, 20), rng.randint(1, 6)
        L, C = rng.choice([rng.randint(0, 12), round(rng.uniform(0, 12), 2)]), rng.randint(0, 12)
        assert pipesim.timeline(K, L, C, S) == simulate(K, L, C, S) == ref.schedule(K, L, C, S), (K, L, C, S)
    for bad in [(-1, 1, 1, 1), (2, 1, 1, 0), (2.0, 1, 1, 1), (2, 1, 1, True), (2, -1, 1, 1)]:
        with pytest.raises(ValueError):
            pipesim.timeline(*bad)


def test_no_tiles():
    assert ref.schedule(0, 10, 10, 2) == [] and ref.pipeline_time(0, 10, 10, 2) == 0
    assert ref.schedule(0, 0, 0, 1) == [] and ref.pipeline_time(0, 0, 0, 1) == 0


def test_more_buffers_than_tiles():
    # every copy is issued at t = 0; the one engine still runs them back to back
    expected = [(0, 5, 5, 12), (5, 10, 12, 19), (10, 15, 19, 26)]
    assert ref.schedule(3, 5, 7, 8) == expected
    assert ref.schedule(3, 5, 7, 3) == expected          # S == K: same thing


@pytest.mark.parametrize("K,L,C", [(1, 3, 4), (5, 3, 4), (6, 9, 2)])
def test_one_buffer_is_serial(K, L, C):
    p = L + C
    assert ref.schedule(K, L, C, 1) == [(k * p, k * p + L, k * p + L, (k + 1) * p) for k in range(K)]


def test_zero_compute_and_zero_copy():
    assert ref.schedule(4, 3, 0, 2) == [(3 * k, 3 * k + 3, 3 * k + 3, 3 * k + 3) for k in range(4)]
    assert ref.schedule(4, 0, 5, 2) == [(0, 0, 0, 5), (0, 0, 5, 10), (5, 5, 10, 15), (10, 10, 15, 20)]
    assert ref.pipeline_time(5, 0, 0, 3) == 0


def test_float_times():
    # binary fractions, so the expected values are exact
    assert ref.schedule(3, 0.5, 0.25, 2) == [(0, 0.5, 0.5, 0.75), (0.5, 1.0, 1.0, 1.25),
                                             (1.0, 1.5, 1.5, 1.75)]
    assert ref.pipeline_time(3, 0.5, 0.25, 2) == 1.75


@pytest.mark.parametrize("case", [(-1, 10, 10, 2), (4, -1, 10, 2), (4, 10, -0.5, 2), (4, 10, 10, 0),
                                  (4, 10, 10, -1), (2.5, 10, 10, 2), (4, 10, 10, 1.5), (4.0, 1, 1, 2)])
def test_invalid_input_raises(case):
    with pytest.raises(ValueError):
        ref.schedule(*case)
    with pytest.raises(ValueError):
        ref.pipeline_time(*case)


# ------------------------------------------------------------------ starter
def test_starter_raises_not_implemented_with_guidance():
    starter = _load(EX.starter_path, "pipeline_timeline_starter")
    for fn in (starter.schedule, starter.pipeline_time):
        with pytest.raises(NotImplementedError, match="compute"):
            fn(4, 10, 10, 2)


# ------------------------------------------------------------------ the renderer
def test_occupancy_steps():
    assert timeline.occupancy([]) == []
    # (4, 10, 10, 2): a buffer freed and refilled at the same instant leaves the count unchanged
    assert timeline.occupancy(EXAMPLES[(4, 10, 10, 2)]) == [(0, 1), (10, 2), (40, 1), (50, 0)]
    assert timeline.occupancy([(0, 1, 1, 2), (0, 1, 1, 2)]) == [(0, 2), (2, 0)]


def test_draw_returns_a_figure_with_two_axes_per_schedule(tmp_path):
    from matplotlib.figure import Figure
    sched = EXAMPLES[(8, 4, 10, 3)]
    fig = timeline.draw({"yours": simulate(8, 4, 10, 2), "reference": sched}, S=3, title="t")
    assert isinstance(fig, Figure) and len(fig.axes) == 4
    out = tmp_path / "t.png"
    fig.savefig(out, dpi=60)
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert len(timeline.draw({"measured": sched}, unit="ns").axes) == 2
    assert len(timeline.draw({"empty": []}).axes) == 2
    with pytest.raises(ValueError):
        timeline.draw({})


# ------------------------------------------------------------------ the judge, end to end
def test_the_fixtures_tell_this_exercise_s_mistakes():      # the policy for every exercise: tests/grading/test_exercises.py
    verdicts = list(EX.fixtures.values())
    assert verdicts.count("WRONG") >= 4 and verdicts.count("HANG") == 1
    assert EX.fixtures["correct_event_sim.py"] == "PASS"


@pytest.mark.parametrize("name", sorted(EX.fixtures))
def test_fixture_gets_its_verdict(name, monkeypatch):     # conftest gives each test its workspace
    want = EX.fixtures[name]
    if want == "HANG":
        monkeypatch.setenv("JUDGE_TIMEOUT", "3")
    r = grade.check(EX.id, EX.fixture_path(name), quiet=True)
    assert r.verdict.value == want, f"{name}: {r}"
    if want == "WRONG":
        assert "K=" in r.message and "S=" in r.message, r.message      # the message names the case
        assert r.figures and Path(r.figures[0]).exists()
    if want == "PASS":
        assert r.figures and Path(r.figures[0]).read_bytes()[:4] == b"\x89PNG"


def test_solution_passes():
    r = grade.check(EX.id, EX.solution_path, quiet=True)
    assert r.verdict.value == "PASS", str(r)
    assert r.message.startswith("schedule, pipeline_time: right on ") and "inputs drawn with seed" in r.message
    assert not Path(r.figures[0]).is_relative_to(config.workspace_dir())   # only your own file draws there


def test_untouched_starter_is_wrong():
    r = grade.check(EX.id, EX.starter_path, quiet=True)
    assert r.verdict.value == "WRONG" and "NotImplementedError" in r.message, str(r)
    assert not r.figures                    # nothing to draw: schedule() does not run yet
