"""check.py - the grader of pipeline_timeline: python practice/judge.py check pipeline_timeline

Both functions of the statement are called directly (judge.grading.cpu_flow) and compared with the
rule, judge.hw.pipesim.timeline: first the README examples and K = 0, fixed cases that teach (one
buffer, more buffers than tiles, L = 0, C = 0, float times) and the invalid inputs that must raise
ValueError; then (K, L, C, S) drawn at random each run (integer and float times). The learner's
schedule is drawn next to the reference (judge.draw.timeline) for the first failing case, else for
(8, 4, 10, 3), unless JUDGE_FIGURES=0.
"""
from __future__ import annotations

from hypothesis import strategies as st

from judge import config
from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import pipesim

FIELDS = ("copy_start", "copy_end", "compute_start", "compute_end")
EXAMPLES = [((4, 10, 10, 1), "README: one buffer, 80"), ((4, 10, 10, 2), "README: double buffering, 50"),
            ((8, 4, 10, 3), "README: compute-bound, 84"), ((0, 10, 10, 2), "K = 0: no tiles, time 0")]
FIXED = [
    ((1, 10, 10, 1), "one tile"),
    ((3, 5, 7, 8), "more buffers than tiles: every copy issued at t = 0"),
    ((5, 5, 5, 5), "S == K"),
    ((6, 3, 9, 1), "one buffer: fully serial"),
    ((6, 9, 3, 2), "copy-bound: the copy engine is the bottleneck"),
    ((12, 1, 10, 2), "compute-bound"),
    ((12, 10, 1, 4), "copy-bound with many buffers"),
    ((10, 7, 7, 4), "L == C"),
    ((6, 0, 4, 2), "copies take no time"),
    ((6, 4, 0, 2), "computes take no time"),
    ((5, 0, 0, 3), "nothing takes time"),
    ((7, 2.5, 1.25, 3), "times are floats"),
    ((9, 3.3, 2.2, 2), "times are floats"),
]
INVALID = [
    ((-1, 10, 10, 2), "K < 0 raises ValueError"),
    ((4, -1, 10, 2), "L < 0 raises ValueError"),
    ((4, 10, -0.5, 2), "C < 0 raises ValueError"),
    ((4, 10, 10, 0), "S < 1 raises ValueError"),
    ((4, 10, 10, -2), "S < 1 raises ValueError"),
    ((2.5, 10, 10, 2), "K not a whole number raises ValueError"),
    ((4, 10, 10, 1.5), "S not a whole number raises ValueError"),
]
ILLUSTRATION = (8, 4, 10, 3)
HINTS = {
    "copy_start": "copy k starts once it is issued (t = 0 for k < S, else when compute k - S "
                  "ends: that frees its buffer) and the one copy engine is free (copy k - 1 ended)",
    "copy_end": "a copy takes L",
    "compute_start": "compute k starts once copy k and compute k - 1 have both ended",
    "compute_end": "a compute takes C",
}


def schedule(K, L, C, S):
    return pipesim.timeline(K, L, C, S)


def pipeline_time(K, L, C, S):
    tiles = pipesim.timeline(K, L, C, S)
    return tiles[-1][3] if tiles else 0


def _fmt(tile) -> str:
    return "(" + ", ".join(f"{float(t):g}" for t in tile) + ")"


def as_schedule(got):
    """The learner's value as a list of 4-tuples of floats, or None if it is not one."""
    if not isinstance(got, (list, tuple)):
        return None
    out = []
    for tile in got:
        if not isinstance(tile, (list, tuple)) or len(tile) != 4 or not all(checks.is_number(t) for t in tile):
            return None
        out.append(tuple(float(t) for t in tile))
    return out


def _close(a, b) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b))


def compare_schedule(got, want):
    sched = as_schedule(got)
    if sched is None:
        return (f"returned {checks.show(got, 80)}: expected a list with one "
                f"(copy_start, copy_end, compute_start, compute_end) tuple of numbers per tile")
    if len(sched) != len(want):
        return f"returned {len(sched)} tiles, expected K = {len(want)}"
    for k, (g, e) in enumerate(zip(sched, want)):
        if not all(_close(a, b) for a, b in zip(g, e)):
            return f"tile {k} got {_fmt(g)}, expected {_fmt(e)}"
    return None


def explain_schedule(call, got, want):
    sched = as_schedule(got)
    if sched is None or len(sched) != len(want):
        return []
    for g, e in zip(sched, want):
        bad = [f for f, a, b in zip(FIELDS, g, e) if not _close(a, b)]
        if bad:
            return f"{bad[0]} differs first: {HINTS[bad[0]]}"
    return []


def explain_time(call, got, want):
    return "pipeline_time is when the last compute ends: the compute_end of the last tile of schedule(), 0 when K = 0"


@st.composite
def cases(draw):
    K, S = draw(st.integers(0, 20)), draw(st.integers(1, 6))
    if draw(st.booleans()):
        times = st.integers(0, 12)
    else:
        times = st.floats(0, 12, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 2))
    return (K, draw(times), draw(times), S)


def _draw_timeline(result, failed, run):
    """The learner's schedule next to the reference: the failing case if it has one, else the example
    (nothing where figures are not wanted: JUDGE_FIGURES=0)."""
    if not config.figures_wanted():
        return
    case, mine = None, None
    if failed is not None and failed.function == "schedule":
        mine = as_schedule(failed.got)
        case = failed.call.args if mine and len(mine) <= 64 else None
    if case is None:
        case = ILLUSTRATION
        try:
            mine = as_schedule(run.mod.schedule(*ILLUSTRATION))
        except Exception:  # noqa: BLE001 - no drawing if even the example fails
            mine = None
        if not mine:
            return
    try:
        run.sub.progress("drawing your timeline next to the reference")
        from judge.draw import timeline
        K, L, C, S = case
        fig = timeline.draw({"yours": mine, "reference": schedule(*case)}, S=S, title=f"K={K}, L={L}, C={C}, S={S}")
        path = run.sub.figure("timeline.png")
        fig.savefig(path, dpi=90)
        result.figures.append(str(path))
    except Exception as e:  # noqa: BLE001 - a drawing must never hide the verdict
        result.details.append(f"(could not draw the timeline: {type(e).__name__}: {e})")


def check(sub):
    edges = [flow.Edge(c, why) for c, why in EXAMPLES + FIXED + INVALID]
    functions = [
        flow.Function("schedule", reference=schedule, args=cases(), edges=edges, raises=ValueError,
                      compare=compare_schedule, explain=explain_schedule),
        flow.Function("pipeline_time", reference=pipeline_time, args=cases(), edges=edges, raises=ValueError,
                      compare=flow.close(rel=1e-9, abs=1e-9), explain=explain_time),
    ]
    return flow.run(sub, functions, after=_draw_timeline,
                    checked=["README examples, K = 0 and fixed cases", "invalid inputs raise ValueError",
                             "the rule: judge.hw.pipesim.timeline"])
