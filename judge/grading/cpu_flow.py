"""The one grading flow of the Python exercises: call every function the statement names, compare.

An exercise's check.py holds only what is its own: which functions, how to draw their inputs
(hypothesis strategies), the statement's edge cases, the reference (a rule of judge/hw/* where
one exists), how to compare, and its explanations of a wrong answer. This module does the rest:

    from hypothesis import strategies as st
    from judge.grading import cpu_flow as flow

    FUNCTIONS = [flow.Function(
        "swizzle128", reference=ref128,
        args=st.tuples(st.integers(0, 63), st.integers(0, 127)),      # drawn afresh every run
        edges=[flow.Edge((3, 20), "the statement's example: 3*128 + (1^3)*16 + 4")],
        explain=lambda args, got, want: ["the chunk index is XORed with row % 8"])]

    def check(sub):
        return flow.run(sub, FUNCTIONS)

What run() does, for each function in order:
  1. imports the learner's file in its own process (sub.learner_module: WRONG when a function
     is missing, HANG/CRASH when the import hangs or dies);
  2. calls it on every listed edge case, then on inputs drawn by hypothesis, each call within the
     exercise's time limit; the first answer that differs from the reference (or that raises)
     ends the check with WRONG. A failing drawn input is shrunk by hypothesis to a small one;
  3. writes the failure out: the call with its arguments named, got vs expected (the first
     differing element of a structure), the exercise's own explanation, and the seed.

Seeds: a fresh seed every run (JUDGE_SEED=N replays run N: the same inputs in the same order, the
same shrinking), shown in every failure message. (Hypothesis also draws, now and then, constants
it finds in the Python code loaded in its process: in the grader's process that is the judge and
the check, so a replay is exact for the same course files; a process that loaded other code, such
as a test run, may draw other inputs from the same seed.) Hypothesis runs with database=None and
deadline=None. Time is bounded, so a check stays within a few seconds on a small machine: drawn
inputs stop after the function's share of budget_s() seconds (2 s, or JUDGE_DRAW_BUDGET_S; the PASS
message says how many were tried: a slower machine tries fewer), and shrinking a failure stops after
SHRINK_S seconds with the smallest failing input found so far.

Comparing (same()): any integral or floating scalar is accepted where a number is expected
(Python or NumPy, any width, a zero-dimensional array included; a bool is not a number), any
sequence where a list or tuple is (a list, a tuple, a range, a NumPy array of one or more dimensions),
arrays by shape and values; NaN equals NaN unless nan_equal=False. Before an exercise's own
validate() and compare() see an answer, conform() rewrites it into the containers the reference
used, where the statement's words allow it (a NumPy array where it says a list becomes a list, a
zero-dimensional array where it says a number becomes that number), so every check.py accepts them.
A check.py that writes a message of its own shows values and accepts numbers through
judge.grading.checks (show, is_number, as_integer), as this flow does.

Run its tests: PYTHONPATH=$PWD python -m pytest tests/grading/test_cpu_flow.py -q
"""
from __future__ import annotations

import collections.abc
import copy
import inspect
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from judge.grading import checks
from judge.grading.result import Result, Stop, Verdict
from judge.grading.submission import learner_error

DEFAULT_BUDGET_S = 2.0  # seconds of drawn inputs for a whole check (shared out as it is spent)
BUDGET_ENV = "JUDGE_DRAW_BUDGET_S"   # sets another (judge.config lists it); the test suite sets a smaller one
SHRINK_S = 1.5          # seconds to shrink a failing drawn input, once one is found
EXAMPLES = 150          # drawn inputs per function unless the Function says otherwise
SEED_ENV = "JUDGE_SEED"


# ============================================================== what a check.py declares
class Args:
    """Positional and keyword arguments of one call: Args(3, 20) or Args(codes, scales, block=16).

    A plain tuple stands for positional arguments only; a strategy may draw either."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = tuple(args), dict(kwargs)

    def __repr__(self):
        return "Args(" + ", ".join([checks.show(a) for a in self.args]
                                   + [f"{k}={checks.show(v)}" for k, v in self.kwargs.items()]) + ")"


@dataclass
class Edge:
    """An edge case the statement lists: its arguments and why it is there (shown when it fails)."""
    args: Any                      # a tuple of positional arguments, or Args(...)
    why: str = ""


@dataclass
class Function:
    """One function of the statement, and how to grade it.

    reference(*args, **kwargs) -> the expected value (called on a deep copy of the arguments);
    args: a hypothesis strategy drawing a tuple (or Args) per call, or None for edge cases only;
    edges: the statement's edge cases, each called directly before any drawn input;
    compare(got, want) -> None when right, else what differs in words (default: same());
    validate(call, got) -> None or what is wrong, run before compare (types, shapes, rules that
        hold whatever the expected value is); call is an Args. Both may return (Verdict, text)
        instead of a text where the wrong answer has another verdict than WRONG (e.g. HANG);
    explain(call, got, want) -> a line or lines: the rule the wrong answer breaks (the exercise's own);
    raises: for a call where the reference raises this exception type, the learner must raise it
        too; with must_name, its message must contain the word before the first ':' of the
        reference's (the rule's name, e.g. 'contiguous: ...');
    refusal(call, learner_exc, reference_exc) -> None or what is wrong with the learner's refusal
        (replaces must_name where the exercise judges the message itself).
    """
    name: str
    reference: Callable
    args: Any = None
    edges: list = field(default_factory=list)
    compare: Callable | None = None
    validate: Callable | None = None
    explain: Callable | None = None
    raises: type | None = None
    must_name: bool = False
    refusal: Callable | None = None
    examples: int = EXAMPLES


# ============================================================== comparing
def _num_equal(got, want, nan_equal: bool, rel: float, abs_: float) -> bool:
    g, w = float(got), float(want)
    if isinstance(want, (int, np.integer)) and isinstance(got, (int, np.integer)):
        return int(got) == int(want)
    if math.isnan(w) or math.isnan(g):
        return nan_equal and math.isnan(w) and math.isnan(g)
    if math.isinf(w) or math.isinf(g):
        return g == w
    if isinstance(want, (int, np.integer)) and not float(g).is_integer():
        return False
    if isinstance(want, (int, np.integer)) and abs(w) >= 2 ** 53:
        return g == w and int(g) == int(want)
    return abs(g - w) <= max(abs_, rel * abs(w))


def _sequence(v) -> bool:
    """A sequence a statement's 'list' allows: list, tuple, range, array.array, deque, a NumPy array
    of one or more dimensions; not a text, a mapping or a set (no order)."""
    if isinstance(v, np.ndarray):
        return v.ndim >= 1
    return isinstance(v, collections.abc.Sequence) and not isinstance(v, (str, bytes, bytearray))


def conform(got, want):
    """`got` in the containers `want` uses, where the statement's words allow it: a zero-dimensional
    NumPy array where a number is expected becomes that number (a NumPy scalar of its dtype); any
    sequence (a NumPy array, a range, ...) where a list or tuple is expected becomes a list (a tuple
    where the reference gave a tuple), item by item; a dict's values likewise. Anything else, and
    every value that does not fit, is returned as it was, for same() or validate() to name."""
    if isinstance(want, (bool, np.bool_)):
        return got
    if checks.is_number(want):
        if isinstance(got, np.ndarray) and got.ndim == 0 and got.dtype.kind in "iuf":
            return got[()]
        return got
    if isinstance(want, (tuple, list)) and _sequence(got) and len(got) == len(want):
        items = [conform(g, w) for g, w in zip(got, want)]
        if isinstance(got, (list, tuple)) and all(a is b for a, b in zip(items, got)):
            return got
        return type(got)(items) if type(got) in (list, tuple) else (tuple(items) if type(want) is tuple else items)
    if isinstance(want, (tuple, list)) and _sequence(got) and not isinstance(got, (list, tuple)):
        return got.tolist() if isinstance(got, np.ndarray) else list(got)   # the wrong length: same() names it
    if isinstance(want, dict) and isinstance(got, dict):
        return {k: conform(v, want[k]) if k in want else v for k, v in got.items()}
    return got


def same(got, want, *, nan_equal: bool = True, rel: float = 0.0, abs: float = 0.0, _path: str = "") -> str | None:
    """None when `got` is the expected value `want`, else the first difference in words.

    Numbers: any int/float of Python or NumPy, equal in value (within rel/abs for floats; NaN
    equal to NaN when nan_equal). Sequences: tuple and list alike, same length, item by item.
    Dicts: same keys. Arrays: anything NumPy reads with the same shape and values. Else ==.
    """
    at = f"item {_path}: " if _path else ""
    if isinstance(want, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)):
            return f"{at}got {checks.show(got)} ({checks.kind(got)}), expected {want} (a bool: True or False)"
        return None if bool(got) == bool(want) else f"{at}got {got}, expected {want}"
    got = conform(got, want)
    if checks.is_number(want):
        if not checks.is_number(got):
            return f"{at}got {checks.show(got)} ({checks.kind(got)}), expected the number {checks.show(want)}"
        if _num_equal(got, want, nan_equal, rel, abs):
            return None
        return f"{at}got {checks.show(got)}, expected {checks.show(want)}"
    if isinstance(want, np.ndarray):
        try:
            g = np.asarray(got)
        except Exception:  # noqa: BLE001 - anything NumPy cannot read is wrong
            return f"{at}got {checks.show(got)} ({checks.kind(got)}) where an array is expected"
        if g.dtype.kind not in "biuf" or g.shape != want.shape:
            return (f"{at}got {checks.kind(got) if isinstance(got, np.ndarray) else checks.show(got)}"
                    f"{'' if g.dtype.kind in 'biuf' else ' (not numbers)'}, expected an array of shape "
                    f"{want.shape}")
        gf, wf = g.astype(np.float64), want.astype(np.float64)
        ok = np.abs(gf - wf) <= np.maximum(abs, rel * np.abs(wf))
        ok |= (gf == wf)
        if nan_equal:
            ok |= np.isnan(gf) & np.isnan(wf)
        if want.dtype.kind in "iu" and g.dtype.kind in "iu":
            ok = g.astype(object) == want.astype(object) if max(g.itemsize, want.itemsize) >= 8 else (g == want)
        if bool(np.all(ok)):
            return None
        bad = np.argwhere(~np.asarray(ok, dtype=bool))
        idx = tuple(int(i) for i in bad[0])
        return (f"{at}{len(bad)} of {want.size} elements differ; the first at index {list(idx)}: "
                f"got {checks.show(g[idx])}, expected {checks.show(want[idx])}")
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return f"{at}got {checks.show(got)} ({checks.kind(got)}) where a sequence of {len(want)} is expected"
        if len(got) != len(want):
            return f"{at}got {len(got)} items, expected {len(want)}: got {checks.show(got)}, expected {checks.show(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = same(g, w, nan_equal=nan_equal, rel=rel, abs=abs, _path=f"{_path}[{i}]")
            if why:
                return why
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{at}got {checks.show(got)} ({checks.kind(got)}) where a dict is expected"
        if set(got) != set(want):
            missing, extra = sorted(map(str, set(want) - set(got))), sorted(map(str, set(got) - set(want)))
            return (f"{at}the dict's keys differ: " + (f"missing {missing}" if missing else "")
                    + ("; " if missing and extra else "") + (f"unexpected {extra}" if extra else ""))
        for k in want:
            why = same(got[k], want[k], nan_equal=nan_equal, rel=rel, abs=abs, _path=f"{_path}[{k!r}]")
            if why:
                return why
        return None
    if want is None:
        return None if got is None else f"{at}got {checks.show(got)}, expected None"
    try:
        equal = bool(got == want)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is not the expected one
        equal = False
    return None if equal else f"{at}got {checks.show(got)}, expected {checks.show(want)}"


def close(rel: float = 0.0, abs: float = 0.0, nan_equal: bool = True) -> Callable:
    """A compare for same() with a tolerance: compare=flow.close(rel=1e-6)."""
    return lambda got, want: same(got, want, nan_equal=nan_equal, rel=rel, abs=abs)


# ============================================================== one call, written out
def as_args(a) -> Args:
    if isinstance(a, Args):
        return a
    return Args(*a) if isinstance(a, tuple) else Args(a)


def call_text(fn: Function | str, call: Args, reference: Callable | None = None) -> str:
    """'swizzle128(row=3, col_bytes=20)': the arguments named after the reference's parameters."""
    name = fn.name if isinstance(fn, Function) else fn
    ref = reference if reference is not None else (fn.reference if isinstance(fn, Function) else None)
    parts = None
    if ref is not None:
        try:
            bound = inspect.signature(ref).bind(*call.args, **call.kwargs)
            parts = [f"{k}={checks.show(v, 60)}" for k, v in bound.arguments.items()]
        except (TypeError, ValueError):
            parts = None
    if parts is None:
        parts = [checks.show(a, 60) for a in call.args] + [f"{k}={checks.show(v, 60)}" for k, v in call.kwargs.items()]
    return f"{name}({', '.join(parts)})"


@dataclass
class Failed:
    """The call that ended a check: given to run()'s `after` hook (e.g. to draw the wrong answer)."""
    function: str
    call: Args
    got: Any = None
    want: Any = None


class _Failure(Exception):
    """One wrong answer: the Result it ends the check with (and the call, for run()'s `after`)."""

    def __init__(self, result: Result, failed: Failed | None = None):
        super().__init__(result.message)
        self.result, self.failed = result, failed


class _OutOfTime(BaseException):
    """The drawn inputs' share of the budget is spent (not an Exception, so hypothesis does not shrink it)."""


def _lines(v) -> list[str]:
    if not v:
        return []
    return [v] if isinstance(v, str) else [str(x) for x in v]


def budget_s() -> float:
    """Seconds of drawn inputs for a whole check: JUDGE_DRAW_BUDGET_S when set, else 2 s."""
    env = os.environ.get(BUDGET_ENV, "").strip()
    return float(env) if env else DEFAULT_BUDGET_S


def seed_for_run() -> int:
    """JUDGE_SEED when set (a replay), else a fresh seed."""
    env = os.environ.get(SEED_ENV, "").strip()
    return int(env) if env else random.SystemRandom().randrange(1, 2 ** 31)


class Run:
    """One check of one learner file: the learner's module, the seed, the counts."""

    def __init__(self, sub, names, seed: int | None = None):
        self.sub = sub
        self.mod = sub.learner_module(*names)
        self.seed = seed_for_run() if seed is None else int(seed)
        self.edges = 0
        self.drawn = 0

    def replay(self) -> str:
        ex = getattr(getattr(self.sub, "exercise", None), "id", "<exercise>")
        return f"seed {self.seed}: {SEED_ENV}={self.seed} python practice/judge.py check {ex} replays these inputs"

    def attempt(self, fn: Function, call: Args, *, edge: Edge | None = None) -> None:
        """Call the learner's fn once and compare; raise _Failure with the finished Result when wrong."""
        try:
            self._attempt(fn, call, edge)
        except _Failure as f:
            if f.failed is None:
                f.failed = Failed(fn.name, call)
            raise

    def _attempt(self, fn: Function, call: Args, edge: Edge | None) -> None:
        try:
            want = fn.reference(*copy.deepcopy(call.args), **copy.deepcopy(call.kwargs))
            ref_error = None
        except Exception as e:  # noqa: BLE001 - sorted below: an expected refusal, or a judge defect
            if fn.raises is None or not isinstance(e, fn.raises):
                raise checks.JudgeError(f"the reference {fn.name} failed on {call}: {type(e).__name__}: {e}") from e
            want, ref_error = None, e
        text = call_text(fn, call)
        where = ([f"listed case: {edge.why}"] if edge is not None and edge.why else []) + \
            ([f"an input drawn at random and shrunk to a small one; {self.replay()}"] if edge is None
             else [self.replay()])
        try:
            got = getattr(self.mod, fn.name)(*call.args, **call.kwargs)
        except Exception as e:  # noqa: BLE001 - the learner's error, reported with its line
            if ref_error is not None and isinstance(e, fn.raises):
                if fn.refusal is not None:
                    problem = fn.refusal(call, e, ref_error)
                    if not problem:
                        return
                    raise _Failure(Result(Verdict.WRONG, f"{text} raised {type(e).__name__}('{e}'): {problem}",
                                          details=where)) from None
                word = str(ref_error).split(":")[0].strip()
                if not fn.must_name or word.lower() in str(e).lower():
                    return
                raise _Failure(Result(Verdict.WRONG, f"{text} raised {type(e).__name__}('{e}'), which does not "
                                      f"name the broken rule: expected a message containing '{word}' "
                                      f"({ref_error})", details=where)) from None
            if ref_error is None and fn.raises is not None and isinstance(e, fn.raises):
                raise _Failure(Result(Verdict.WRONG, f"{text} raised {type(e).__name__}('{e}'), but this call "
                                      f"has an answer: {checks.show(want)}",
                                      details=_lines(fn.explain(call, e, want) if fn.explain else None) + where)) \
                    from None
            raise _Failure(Result(Verdict.WRONG, learner_error(e, text), details=where)) from None
        if ref_error is not None:
            raise _Failure(Result(Verdict.WRONG, f"{text} returned {checks.show(got)}, but it must raise "
                                  f"{type(ref_error).__name__}: {ref_error}",
                                  details=_lines(fn.explain(call, got, ref_error) if fn.explain else None) + where))
        got = conform(got, want)          # a NumPy array where the statement says a list, ...
        problem = fn.validate(call, got) if fn.validate else None
        if not problem:
            problem = (fn.compare or same)(got, want)
        if problem:
            verdict = Verdict.WRONG
            if isinstance(problem, tuple):          # (Verdict.HANG, "...") where the wrong answer would hang
                verdict, problem = problem
            why = _lines(fn.explain(call, got, want)) if fn.explain else []
            raise _Failure(Result(verdict, f"{text}: {problem}", details=why + where),
                           Failed(fn.name, call, got, want))

    def edge_cases(self, fn: Function) -> None:
        for e in fn.edges:
            e = e if isinstance(e, Edge) else Edge(e)
            self.attempt(fn, as_args(e.args), edge=e)
            self.edges += 1

    def drawn_inputs(self, fn: Function, budget_s: float) -> None:
        """fn on inputs drawn by hypothesis from fn.args, a failure shrunk; at most budget_s seconds."""
        if fn.args is None or fn.examples <= 0:
            return
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as hyp_seed

        start = time.monotonic()
        failures: dict[str, _Failure] = {}
        order: list[str] = []
        first_failure = [0.0]

        def one(a):
            now = time.monotonic()
            if (now - start > budget_s) if not order else (now - first_failure[0] > SHRINK_S):
                raise _OutOfTime          # a BaseException: hypothesis lets it through at once
            call = as_args(a)
            self.drawn += 1
            try:
                self.attempt(fn, call)
            except _Failure as f:
                key = repr((call.args, sorted(call.kwargs.items())))
                if not order:
                    first_failure[0] = time.monotonic()
                failures[key] = f
                order.append(key)
                raise

        test = settings(max_examples=fn.examples, database=None, deadline=None, derandomize=False,
                        suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                        print_blob=False, verbosity=Verbosity.quiet,
                        phases=(Phase.generate, Phase.shrink))(given(fn.args)(one))
        test = hyp_seed(self.seed)(test)
        try:
            test()
        except _OutOfTime:
            pass                          # the budget ran out: the smallest failure so far, if any
        except checks.JudgeError:
            raise
        except Exception:  # noqa: BLE001 - hypothesis re-raises the smallest failure (or a Flaky group)
            if not order:
                raise
        if order:
            # the shrinker only tries inputs smaller than its best: the last failure seen is the smallest
            raise failures[order[-1]]


def run(sub, functions: list[Function], *, checked: list[str] | None = None, note: str = "",
        seed: int | None = None, after: Callable | None = None) -> Result:
    """Grade every function of the statement: its edge cases, then drawn inputs. The Result.

    after(result, failed, run): called last, with the Failed call (None on a PASS) and the Run (its
    .mod is the learner's module); it may add figures or details to the result."""
    r = Run(sub, [f.name for f in functions], seed)
    drawn_total = [f for f in functions if f.args is not None and f.examples > 0]
    left, spent, budget = len(drawn_total), 0.0, budget_s()
    try:
        for fn in functions:
            sub.progress(f"{fn.name}: {len(fn.edges)} cases of the statement")
            r.edge_cases(fn)
            if fn in drawn_total:
                sub.progress(f"{fn.name}: inputs drawn with seed {r.seed}")
                t0 = time.monotonic()
                try:      # a share of what is left: time a quick function leaves goes to the next ones
                    r.drawn_inputs(fn, (budget - spent) / left)
                finally:
                    spent += time.monotonic() - t0
                    left -= 1
    except _Failure as f:
        res, failed = f.result, f.failed
        if note:
            res.details.append(note)
        res.checked = list(checked or [])
    else:
        names = ", ".join(f.name for f in functions)
        msg = f"{names}: right on {r.edges} cases of the statement and {r.drawn} inputs drawn with seed {r.seed}"
        res, failed = Result(Verdict.PASS, msg + (f"; {note}" if note else ""),
                             checked=list(checked or []) + [f"{f.name}: {len(f.edges)} listed cases"
                                                            + (", drawn inputs" if f in drawn_total else "")
                                                            for f in functions]), None
    if after is not None:
        after(res, failed, r)
    return res


def call(sub_or_run, fn_name: str, *args, **kwargs):
    """Call one learner function outside the case loop; a learner error ends the check with WRONG."""
    mod = sub_or_run.mod if isinstance(sub_or_run, Run) else sub_or_run
    try:
        return getattr(mod, fn_name)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the learner's error, reported with its line
        raise Stop(Result(Verdict.WRONG, learner_error(e, call_text(fn_name, Args(*args, **kwargs))))) from None
