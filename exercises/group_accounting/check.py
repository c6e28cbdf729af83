"""check.py - the grader of group_accounting: the learner's accounting.py against judge.hw.pipesim.

The judge runs it in a child process:  python practice/judge.py check group_accounting
or, from Python,  judge.grading.grade.check("group_accounting", "accounting.py").
The reference is judge.hw.pipesim, which replays the loop op by op (seed_loop, then safe_tiles).
Loops graded, each for S = 2..6 and K = 1..12: the standard loop; no empty commits;
wait_prior(S-1); wait_prior(0); no empty commits with wait_prior(S-1). A failure names the
call, the round, and how the groups stood at that round's wait.
"""
from __future__ import annotations

from judge.hw import pipesim
from judge.grading.grade import Result, Verdict, learner_error

SIZES = [(S, K) for S in range(2, 7) for K in range(1, 13)]
# (what the loop is, empty_commit, wait as a function of S; None passes wait=None: S - 2)
LOOPS = [
    ("the standard loop", True, lambda S: None),
    ("the loop without empty commits", False, lambda S: None),
    ("the loop with wait_prior(S-1)", True, lambda S: S - 1),
    ("the loop with wait_prior(0)", True, lambda S: 0),
    ("the loop without empty commits and with wait_prior(S-1)", False, lambda S: S - 1),
]


class _Fail(Exception):
    def __init__(self, message, details=()):
        super().__init__(message)
        self.message, self.details = message, list(details)


def _call_text(fn, S, K, ec, w):
    return f"{fn}({S}, {K}, empty_commit={ec}, wait={w})"


def _fmt(tiles) -> str:
    return "{" + ", ".join(map(str, sorted(tiles))) + "}" if tiles else "set()"


def _explain(rep: pipesim.Report, kt: int) -> str:
    r = rep.rounds[kt]
    done = len(r.complete)
    cover = {0: "no group", 1: "group #0"}.get(done, f"groups #0..#{done - 1}")
    holds = f"tiles {_fmt(r.safe)}" if r.safe else "no tile"
    return (f"at round {kt}, {r.committed} group(s) had been committed when wait_prior({r.wait}) ran, "
            f"so it guarantees {cover}: {holds}")


def _as_sets(got, K, call):
    try:
        rounds = [set(x) for x in got]
    except TypeError:
        raise _Fail(f"{call} returned {str(got)[:80]}: expected a list with one set of tiles per round") from None
    if len(rounds) != K:
        raise _Fail(f"{call} returned {len(rounds)} set(s): expected one per round, K = {K}")
    for kt, s in enumerate(rounds):
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in s):
            raise _Fail(f"{call}: round {kt} holds {str(s)[:60]}: tiles are ints")
    return rounds


def _check_one(mod, S, K, ec, w):
    ops = pipesim.seed_loop(S, K, empty_commit=ec, wait=w)
    rep = pipesim.check(ops, S)
    want = [r.safe for r in rep.rounds]
    call = _call_text("safe_tiles", S, K, ec, w)
    try:
        got = mod.safe_tiles(S, K, empty_commit=ec, wait=w)
    except Exception as e:  # noqa: BLE001 - whatever the learner's code raises is the answer
        raise _Fail(learner_error(e, call)) from None
    got = _as_sets(got, K, call)
    for kt in range(K):
        if got[kt] != want[kt]:
            extra, missing = got[kt] - want[kt], want[kt] - got[kt]
            say = (f"tile(s) {_fmt(extra)} may still be in flight" if extra
                   else f"tile(s) {_fmt(missing)} are guaranteed too")
            raise _Fail(f"{call}: round {kt} says {_fmt(got[kt])}, but {say}",
                        [_explain(rep, kt)])
    first = rep.first_unsafe_round()
    call = _call_text("first_unsafe_round", S, K, ec, w)
    try:
        got_first = mod.first_unsafe_round(S, K, empty_commit=ec, wait=w)
    except Exception as e:  # noqa: BLE001
        raise _Fail(learner_error(e, call)) from None
    if got_first != first or (first is not None and isinstance(got_first, bool)):
        if first is None:
            raise _Fail(f"{call} returned {got_first!r}; expected None: every round's tile is guaranteed")
        raise _Fail(f"{call} returned {got_first!r}; expected {first}", [_explain(rep, first)]
                    + ([rep.violations[0]] if rep.violations else []))


def check(sub) -> Result:
    sub.progress("loading accounting.py")
    mod = sub.learner_module("safe_tiles", "first_unsafe_round")
    checked, n = [], 0
    for what, ec, wait_of in LOOPS:
        sub.progress(f"{what}: S = 2..6, K = 1..12")
        try:
            for S, K in SIZES:
                _check_one(mod, S, K, ec, wait_of(S))
                n += 1
        except _Fail as f:
            return Result(Verdict.WRONG, f.message, details=f.details + [
                f"grading {what}; passed {n} case(s) before this one"], checked=checked)
        checked.append(f"{what} ({len(SIZES)} cases)")
    return Result(Verdict.PASS, f"all {n} cases agree with the op-by-op simulation (judge.hw.pipesim)",
                  checked=checked)
