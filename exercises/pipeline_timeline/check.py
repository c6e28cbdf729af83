"""check.py - the grader of pipeline_timeline: the learner's timeline.py against solution.py.

The judge runs it in a child process:  python practice/judge.py check pipeline_timeline
or, from Python,  judge.grading.grade.check("pipeline_timeline", "timeline.py").
Phases: README examples and K = 0; exact schedules on fixed cases; a random sweep (a fixed
seed, then a fresh one, named in any failure); ValueError on invalid inputs. On every case
pipeline_time must equal the last compute_end of schedule. The learner's schedule is drawn
next to the reference (judge.draw.timeline) for the first failing case, else for (8, 4, 10, 3).
"""
from __future__ import annotations

import numbers
import random
from pathlib import Path

from judge.grading.grade import Result, Verdict, learner_error

HERE = Path(__file__).resolve().parent
FIELDS = ("copy_start", "copy_end", "compute_start", "compute_end")
EXAMPLES = [((4, 10, 10, 1), 80), ((4, 10, 10, 2), 50), ((8, 4, 10, 3), 84), ((0, 10, 10, 2), 0)]
FIXED = [
    (1, 10, 10, 1),      # one tile
    (3, 5, 7, 8),        # more buffers than tiles: every copy issued at t = 0
    (5, 5, 5, 5),        # S == K
    (6, 3, 9, 1),        # one buffer: fully serial
    (6, 9, 3, 2),        # copy-bound: the copy engine is the bottleneck
    (12, 1, 10, 2),      # compute-bound
    (12, 10, 1, 4),      # copy-bound with many buffers
    (10, 7, 7, 4),       # L == C
    (6, 0, 4, 2),        # copies take no time
    (6, 4, 0, 2),        # computes take no time
    (5, 0, 0, 3),        # nothing takes time
    (7, 2.5, 1.25, 3),   # times are floats
    (9, 3.3, 2.2, 2),
]
INVALID = [
    ((-1, 10, 10, 2), "K < 0"),
    ((4, -1, 10, 2), "L < 0"),
    ((4, 10, -0.5, 2), "C < 0"),
    ((4, 10, 10, 0), "S < 1"),
    ((4, 10, 10, -2), "S < 1"),
    ((2.5, 10, 10, 2), "K is not a whole number"),
    ((4, 10, 10, 1.5), "S is not a whole number"),
]
SWEEP_SEED, SWEEP_N, FRESH_N = 2024, 200, 100
ILLUSTRATION = (8, 4, 10, 3)
HINTS = {
    "copy_start": "copy k starts once it is issued (t = 0 for k < S, else when compute k - S "
                  "ends: that frees its buffer) and the one copy engine is free (copy k - 1 ended)",
    "copy_end": "a copy takes L",
    "compute_start": "compute k starts once copy k and compute k - 1 have both ended",
    "compute_end": "a compute takes C",
}


class _Fail(Exception):
    def __init__(self, message: str, case=None, details=(), got_schedule=None):
        super().__init__(message)
        self.message, self.case, self.details, self.got_schedule = message, case, list(details), got_schedule



def _name(fn: str, case) -> str:
    K, L, C, S = case
    return f"{fn}(K={K!r}, L={L!r}, C={C!r}, S={S!r})"


def _close(a, b) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _fmt(tile) -> str:
    return "(" + ", ".join(f"{t:g}" for t in tile) + ")"


def _is_time(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _call(fn, name: str, case):
    try:
        return fn(*case)
    except Exception as e:  # noqa: BLE001 - whatever the learner's code raises is the answer
        raise _Fail(learner_error(e, _name(name, case)), case) from None


def _as_schedule(got, case):
    """The learner's return value as a list of 4-tuples of numbers, or None if it is not one."""
    if not isinstance(got, (list, tuple)):
        return None
    out = []
    for tile in got:
        if not isinstance(tile, (list, tuple)) or len(tile) != 4 or not all(_is_time(t) for t in tile):
            return None
        out.append(tuple(float(t) for t in tile))
    return out


def _check_case(mod, ref, case, origin: str = ""):
    exp = ref.schedule(*case)
    got = _call(mod.schedule, "schedule", case)
    sched = _as_schedule(got, case)
    if sched is None:
        raise _Fail(f"{_name('schedule', case)}{origin} returned {str(got)[:80]}: expected a list "
                    f"with one (copy_start, copy_end, compute_start, compute_end) tuple per tile", case)
    if len(sched) != len(exp):
        raise _Fail(f"{_name('schedule', case)}{origin} returned {len(sched)} tiles, expected K = {len(exp)}",
                    case, got_schedule=sched)
    for k, (g, e) in enumerate(zip(sched, exp)):
        bad = [f for f, a, b in zip(FIELDS, g, e) if not _close(a, b)]
        if bad:
            raise _Fail(f"{_name('schedule', case)}{origin}: tile {k} got {_fmt(g)}, expected {_fmt(e)}",
                        case, [f"{bad[0]} differs first: {HINTS[bad[0]]}"], got_schedule=sched)
    t = _call(mod.pipeline_time, "pipeline_time", case)
    end = exp[-1][3] if exp else 0
    if not _is_time(t) or not _close(t, end):
        raise _Fail(f"{_name('pipeline_time', case)}{origin} returned {t!r}, expected {end:g}",
                    case, ["pipeline_time is when the last compute ends: the compute_end of the "
                           "last tile of schedule(), 0 when K = 0"])


def _random_case(rng: random.Random):
    K = rng.randint(0, 20)
    S = rng.randint(1, 6)
    if rng.random() < 0.25:                                   # some float times
        return K, round(rng.uniform(0, 12), 2), round(rng.uniform(0, 12), 2), S
    return K, rng.randint(0, 12), rng.randint(0, 12), S


def _check_invalid(mod, sub_progress):
    for case, why in INVALID:
        sub_progress(f"invalid input {case}")
        for name in ("schedule", "pipeline_time"):
            try:
                got = getattr(mod, name)(*case)
            except ValueError:
                continue
            except Exception as e:  # noqa: BLE001
                raise _Fail(f"{_name(name, case)} should raise ValueError ({why}); "
                            + learner_error(e, "it"), case) from None
            raise _Fail(f"{_name(name, case)} should raise ValueError ({why}); it returned {str(got)[:60]}",
                        case)


def _draw(sub, mod, ref, fail: _Fail | None) -> list[str]:
    """The learner's schedule next to the reference, for the failing case if it can be drawn."""
    case, mine = None, None
    if fail is not None and fail.got_schedule is not None and 0 < len(fail.got_schedule) <= 64:
        case, mine = fail.case, fail.got_schedule
    else:
        try:
            mine = _as_schedule(mod.schedule(*ILLUSTRATION), ILLUSTRATION)
            case = ILLUSTRATION
        except Exception:  # noqa: BLE001 - no drawing if even the example fails
            return []
        if not mine:
            return []
    sub.progress("drawing your timeline next to the reference")
    from judge.draw import timeline
    K, L, C, S = case
    fig = timeline.draw({"yours": mine, "reference": ref.schedule(*case)}, S=S,
                        title=f"K={K}, L={L}, C={C}, S={S}")
    path = sub.figure("timeline.png")
    fig.savefig(path, dpi=90)
    return [str(path)]


def check(sub) -> Result:
    sub.progress("loading timeline.py")
    mod = sub.learner_module("schedule", "pipeline_time")
    ref = sub.exercise.reference()
    checked, n, fail = [], 0, None
    try:
        sub.progress("README examples and K = 0")
        for case, end in EXAMPLES:
            assert ref.pipeline_time(*case) == end
            _check_case(mod, ref, case)
            n += 1
        checked.append("README examples and K = 0")
        sub.progress(f"{len(FIXED)} fixed cases")
        for case in FIXED:
            _check_case(mod, ref, case)
            n += 1
        checked.append(f"{len(FIXED)} fixed cases (one buffer, more buffers than tiles, L = 0, "
                       f"C = 0, float times)")
        fresh = random.SystemRandom().randrange(2**31)
        for seed, count in ((SWEEP_SEED, SWEEP_N), (fresh, FRESH_N)):
            sub.progress(f"{count} random cases, seed {seed}")
            rng = random.Random(seed)
            for i in range(count):
                _check_case(mod, ref, _random_case(rng), origin=f" (random case {i + 1} of seed {seed})")
                n += 1
            checked.append(f"{count} random cases (seed {seed})")
        _check_invalid(mod, sub.progress)
        checked.append(f"{len(INVALID)} invalid inputs raise ValueError")
    except _Fail as f:
        fail = f
    figures, details = [], []
    try:
        figures = _draw(sub, mod, ref, fail)
    except Exception as e:  # noqa: BLE001 - a drawing must never hide the verdict
        details.append(f"(could not draw the timeline: {type(e).__name__}: {e})")
    if fail is not None:
        return Result(Verdict.WRONG, fail.message, details=fail.details + details
                      + [f"passed {n} case(s) before this one"], checked=checked, figures=figures)
    return Result(Verdict.PASS, f"all {n} cases match the reference; invalid inputs raise ValueError",
                  details=details, checked=checked, figures=figures)
