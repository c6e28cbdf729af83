"""check.py - the grader of group_accounting: python practice/judge.py check group_accounting

Both functions of the statement are called directly (judge.grading.cpu_flow) and compared with
judge.hw.pipesim, which replays the loop op by op (seed_loop, then check). Listed cases: the README
examples and five loops (the standard one; no empty commits; wait_prior(S-1); wait_prior(0); no
empty commits with wait_prior(S-1)) for S = 2..6 at the sizes where they differ; then S, K,
empty_commit and wait drawn at random each run (any wait from 0 to S). A failure names the call,
the round, and how the groups stood at that round's wait.
"""
from __future__ import annotations

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import pipesim

# (what the loop is, empty_commit, wait as a function of S; None passes wait=None: S - 2)
LOOPS = [
    ("the standard loop", True, lambda S: None),
    ("the loop without empty commits", False, lambda S: None),
    ("the loop with wait_prior(S-1)", True, lambda S: S - 1),
    ("the loop with wait_prior(0)", True, lambda S: 0),
    ("the loop without empty commits and with wait_prior(S-1)", False, lambda S: S - 1),
]
README = [flow.Edge(flow.Args(3, 4), "README: the standard loop"),
          flow.Edge(flow.Args(3, 4, empty_commit=False), "README: no empty commits, round 3 breaks"),
          flow.Edge(flow.Args(3, 4, wait=2), "README: wait_prior(2) is one too loose"),
          flow.Edge(flow.Args(2, 8, empty_commit=False), "README: S = 2 needs no empty commits")]
EDGES = README + [flow.Edge(flow.Args(S, K, empty_commit=ec, wait=w(S)), what)
                  for what, ec, w in LOOPS for S in range(2, 7) for K in sorted({1, 2, S - 1, S, S + 1, 12})]


def _report(S, K, empty_commit=True, wait=None):
    return pipesim.check(pipesim.seed_loop(S, K, empty_commit=empty_commit, wait=wait), S)


def safe_tiles(S, K, empty_commit=True, wait=None):
    return [set(r.safe) for r in _report(S, K, empty_commit, wait).rounds]


def first_unsafe_round(S, K, empty_commit=True, wait=None):
    return _report(S, K, empty_commit, wait).first_unsafe_round()


def _fmt(tiles) -> str:
    return "{" + ", ".join(map(str, sorted(tiles))) + "}" if tiles else "set()"


def _as_sets(got):
    """The learner's rounds as a list of sets of ints, or what is wrong with them."""
    if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__iter__"):
        return None, f"returned {checks.show(got, 80)}: expected a list with one set of tiles per round"
    rounds = []
    for kt, s in enumerate(got):
        if isinstance(s, (str, bytes, dict)) or not hasattr(s, "__iter__"):
            return None, f"round {kt} holds {checks.show(s, 60)}: expected a set of tiles"
        s = list(s)
        if not all(checks.as_integer(t) is not None for t in s):
            return None, f"round {kt} holds {checks.show(s, 60)}: tiles are ints"
        rounds.append({int(t) for t in s})
    return rounds, None


def compare_rounds(got, want):
    rounds, problem = _as_sets(got)
    if problem:
        return problem
    if len(rounds) != len(want):
        return f"returned {len(rounds)} set(s): expected one per round, K = {len(want)}"
    for kt, (g, w) in enumerate(zip(rounds, want)):
        if g != w:
            extra, missing = g - w, w - g
            say = (f"tile(s) {_fmt(extra)} may still be in flight" if extra
                   else f"tile(s) {_fmt(missing)} are guaranteed too")
            return f"round {kt} says {_fmt(g)}, but {say}"
    return None


def _explain_round(call, kt):
    rep = _report(*call.args, **call.kwargs)
    r = rep.rounds[kt]
    done = len(r.complete)
    cover = {0: "no group", 1: "group #0"}.get(done, f"groups #0..#{done - 1}")
    holds = f"tiles {_fmt(r.safe)}" if r.safe else "no tile"
    return (f"at round {kt}, {r.committed} group(s) had been committed when wait_prior({r.wait}) ran, "
            f"so it guarantees {cover}: {holds}")


def explain_rounds(call, got, want):
    rounds, _ = _as_sets(got)
    if not rounds or len(rounds) != len(want):
        return []
    kt = next((k for k, (g, w) in enumerate(zip(rounds, want)) if g != w), None)
    return [] if kt is None else _explain_round(call, kt)


def explain_first(call, got, want):
    if want is None:
        return "every round's tile is guaranteed: return None (not -1, not False)"
    rep = _report(*call.args, **call.kwargs)
    return [_explain_round(call, want)] + ([rep.violations[0]] if rep.violations else [])


@st.composite
def loops(draw):
    S, K = draw(st.integers(2, 8)), draw(st.integers(1, 20))
    kw = {}
    if draw(st.booleans()):
        kw["empty_commit"] = draw(st.booleans())
    if draw(st.booleans()):
        kw["wait"] = draw(st.one_of(st.none(), st.integers(0, S)))
    return flow.Args(S, K, **kw)


def check(sub):
    functions = [
        flow.Function("safe_tiles", reference=safe_tiles, args=loops(), edges=EDGES,
                      compare=compare_rounds, explain=explain_rounds),
        flow.Function("first_unsafe_round", reference=first_unsafe_round, args=loops(), edges=EDGES,
                      explain=explain_first),
    ]
    return flow.run(sub, functions, checked=["the reference: judge.hw.pipesim's op-by-op replay of the loop"])
