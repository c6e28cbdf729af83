"""judge.grading.cpu_flow: the one flow of the Python exercises (calls, comparing, drawn inputs, messages).

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_cpu_flow.py -q -p no:cacheprovider

The flow is driven here with a stand-in Submission whose learner module is a plain object in this
process (the real one runs the learner's file in a process of its own: judge.grading.learner_process);
the last tests grade a real exercise through judge.grading.grade.check end to end. The flow's own budget
of drawn inputs is tested here: this module runs with the default, not the suite's (tests/conftest.py).
"""
import math
import time
import types

import numpy as np
import pytest
from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.grading import grade
from judge.grading.result import Stop, Verdict

from tests.checking import graded_here


@pytest.fixture(autouse=True, scope="module")
def _default_budget():
    """The default budget of drawn inputs (2 s), whatever tests/conftest.py sets for the rest of the suite."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(flow.BUDGET_ENV, raising=False)
        yield


class FakeSub:
    """What cpu_flow needs of a Submission: learner_module, progress, exercise.id."""

    def __init__(self, **functions):
        self.mod = types.SimpleNamespace(**functions)
        self.exercise = types.SimpleNamespace(id="demo", learner_file="demo.py")
        self.progressed = []

    def learner_module(self, *names):
        missing = [n for n in names if not hasattr(self.mod, n)]
        if missing:
            raise Stop(grade.Result(Verdict.WRONG, "demo.py defines no function " + " and no ".join(missing)))
        return self.mod

    def progress(self, text):
        self.progressed.append(text)


def add_ref(a, b):
    return a + b


def ADD(**kw):
    return flow.Function("add", reference=add_ref, args=st.tuples(st.integers(-10**6, 10**6),
                                                                   st.integers(-10**6, 10**6)), **kw)


# ------------------------------------------------------------------ same(): numbers of any type
@pytest.mark.parametrize("got", [420, 420.0, np.int64(420), np.int32(420), np.uint16(420), np.float32(420),
                                 np.float64(420), np.float16(420)])
def test_any_integral_or_floating_scalar_is_a_number(got):
    assert flow.same(got, 420) is None
    assert flow.same(got, np.int64(420)) is None


@pytest.mark.parametrize("got", [True, "420", None, [420], 420.5, np.float32(419.99)])
def test_what_is_not_the_number_is_named(got):
    why = flow.same(got, 420)
    assert why and "expected" in why and "420" in why.split("expected")[1]


def test_nan_equals_nan_where_the_spec_says_so_and_inf_is_exact():
    assert flow.same(np.float32("nan"), float("nan")) is None
    assert flow.same(float("nan"), np.float64("nan")) is None
    assert flow.same(float("nan"), float("nan"), nan_equal=False)
    assert flow.same(1.0, float("nan"))
    assert flow.same(float("inf"), float("-inf"))
    assert flow.same(np.float16("inf"), float("inf")) is None
    assert flow.same(1.0 + 1e-9, 1.0)                      # no tolerance unless asked
    assert flow.close(rel=1e-6)(1.0 + 1e-9, 1.0) is None


def test_structures_report_the_first_difference_by_its_path():
    assert flow.same([1, (2, np.int64(3))], (1, [2, 3])) is None    # tuple and list alike
    assert "item [1][0]: got 5, expected 2" in flow.same([1, (5, 3)], (1, (2, 3)))
    assert "got 3 items, expected 2" in flow.same([1, 2, 3], [1, 2])
    assert "item ['a']" in flow.same({"a": 1}, {"a": 2})
    assert "missing ['b']" in flow.same({"a": 1}, {"a": 1, "b": 2})
    assert flow.same(True, True) is None and flow.same(1, True)      # a bool is asked: 1 is not one


def test_arrays_compare_by_shape_and_value_naming_the_first_index():
    rng = np.random.default_rng(7)
    want = rng.standard_normal((5, 7))
    want[2, 3] = np.nan
    assert flow.same(want.copy(), want) is None
    assert flow.same(want.astype(np.float32), want, rel=1e-6) is None
    assert flow.same(want.tolist(), want) is None                     # anything NumPy reads
    bad = want.copy()
    bad[4, 1] += 1
    why = flow.same(bad, want)
    assert "1 of 35 elements differ" in why and "[4, 1]" in why
    assert "shape (5, 7)" in flow.same(want[:4], want)
    big = np.array([2 ** 62 + 1], dtype=np.int64)
    assert flow.same(big - 1, big)                                    # int64 exactly, not through float64


# ------------------------------------------------------------------ run(): edge cases and drawn inputs
def test_a_right_function_passes_on_listed_and_drawn_inputs(monkeypatch):
    # drawn inputs stop at a time budget (2 s by default): on a loaded 2-core CI machine hypothesis's first
    # examples can take most of it, so this test, which counts them, gives them room (they stop at EXAMPLES)
    monkeypatch.setenv(flow.BUDGET_ENV, "30.0")
    sub = FakeSub(add=lambda a, b: np.int64(a + b))
    r = flow.run(sub, [ADD(edges=[flow.Edge((1, 2), "small"), (0, 0)])], seed=5)
    assert r.verdict == Verdict.PASS, str(r)
    assert "right on 2 cases of the statement" in r.message and "seed 5" in r.message
    drawn = int(r.message.split(" and ")[1].split()[0])
    assert drawn >= 50, r.message


def test_a_listed_edge_case_fails_first_with_its_reason_and_the_seed():
    sub = FakeSub(add=lambda a, b: a + b if a else -1)
    r = flow.run(sub, [ADD(edges=[flow.Edge((0, 7), "a zero first argument")],
                           explain=lambda call, got, want: "addition has no special case for zero")], seed=11)
    assert r.verdict == Verdict.WRONG
    assert r.message == "add(a=0, b=7): got -1, expected 7"
    assert "addition has no special case for zero" in r.details
    assert "listed case: a zero first argument" in r.details
    assert any("JUDGE_SEED=11" in d for d in r.details)


def test_a_drawn_failure_is_shrunk_to_the_smallest_input(monkeypatch):
    # wrong only from a = 1000 on: hypothesis must find it and shrink it to exactly a = 1000, b = 0
    monkeypatch.setattr(flow, "SHRINK_S", 60.0)         # no time limit here: a loaded machine shrinks slowly
    sub = FakeSub(add=lambda a, b: a + b + (a >= 1000))
    r = flow.run(sub, [ADD()], seed=3)
    assert r.verdict == Verdict.WRONG, str(r)
    assert r.message == "add(a=1000, b=0): got 1001, expected 1000", r.message
    assert any("shrunk" in d and "seed 3" in d for d in r.details), r.details


def test_the_same_seed_replays_the_same_failure(monkeypatch):
    wrong = FakeSub(add=lambda a, b: a + b + (a % 7 == 3 and b > 500))
    monkeypatch.setenv(flow.SEED_ENV, "1234")
    monkeypatch.setenv(flow.BUDGET_ENV, "60.0")          # replays are exact when no time limit cuts them
    monkeypatch.setattr(flow, "SHRINK_S", 60.0)
    first = flow.run(wrong, [ADD()])
    again = flow.run(wrong, [ADD()])
    assert first.verdict == again.verdict == Verdict.WRONG
    assert first.message == again.message and first.details == again.details
    assert "seed 1234" in " ".join(first.details)


def test_fresh_seeds_differ_between_runs(monkeypatch):
    monkeypatch.delenv(flow.SEED_ENV, raising=False)
    assert len({flow.seed_for_run() for _ in range(5)}) > 1


def test_a_learner_exception_is_a_wrong_answer_with_the_call():
    def add(a, b):
        if b < 0:
            raise KeyError("negative")
        return a + b
    r = flow.run(FakeSub(add=add), [ADD(edges=[(1, 1)])], seed=1)
    assert r.verdict == Verdict.WRONG
    assert r.message.startswith("add(a=0, b=-1) raised KeyError"), r.message


def test_a_refusal_the_reference_makes_must_be_made_naming_its_rule():
    def ref(n):
        if n % 3:
            raise ValueError(f"divides: {n} is not a multiple of 3")
        return n // 3
    fn = lambda **kw: flow.Function("third", reference=ref, raises=ValueError, must_name=True,  # noqa: E731
                                    args=st.tuples(st.integers(0, 100)), edges=[(3,), (4,)], **kw)
    good = FakeSub(third=lambda n: n // 3 if n % 3 == 0 else (_ for _ in ()).throw(ValueError("divides: no")))
    assert flow.run(good, [fn()], seed=2).verdict == Verdict.PASS
    silent = flow.run(FakeSub(third=lambda n: n // 3), [fn()], seed=2)
    assert silent.verdict == Verdict.WRONG and "must raise ValueError: divides: 4" in silent.message
    vague = FakeSub(third=lambda n: n // 3 if n % 3 == 0 else (_ for _ in ()).throw(ValueError("bad")))
    r = flow.run(vague, [fn()], seed=2)
    assert r.verdict == Verdict.WRONG and "containing 'divides'" in r.message
    refuses = FakeSub(third=lambda n: (_ for _ in ()).throw(ValueError("divides: never")))
    r = flow.run(refuses, [fn()], seed=2)
    assert r.verdict == Verdict.WRONG and "has an answer: 1" in r.message


def test_validate_runs_before_compare():
    fn = ADD(validate=lambda call, got: None if isinstance(got, int) else "return a Python int here")
    r = flow.run(FakeSub(add=lambda a, b: float(a + b)), [fn], seed=1)
    assert r.verdict == Verdict.WRONG and r.message.endswith("return a Python int here")


def test_a_defect_of_the_reference_is_not_blamed_on_the_learner():
    fn = flow.Function("add", reference=lambda a, b: 1 / 0, args=st.tuples(st.integers(), st.integers()))
    with pytest.raises(checks.JudgeError):
        flow.run(FakeSub(add=add_ref), [fn], seed=1)


def test_an_ended_learner_process_is_not_swallowed_by_hypothesis():
    from judge.grading.learner_process import Ended

    def add(a, b):
        if a > 10:
            raise Ended(grade.Result(Verdict.HANG, "your add did not return"))
        return a + b
    with pytest.raises(Ended):
        flow.run(FakeSub(add=add), [ADD()], seed=1)


def test_drawn_inputs_and_shrinking_stay_within_the_budget(monkeypatch):
    monkeypatch.setenv(flow.BUDGET_ENV, "0.5")
    monkeypatch.setattr(flow, "SHRINK_S", 0.5)
    slow = lambda a, b: (time.sleep(0.005), a + b + (a > 10))[1]  # noqa: E731
    t = time.monotonic()
    r = flow.run(FakeSub(add=slow), [ADD(examples=10_000)], seed=9)
    assert time.monotonic() - t < 3.0
    assert r.verdict == Verdict.WRONG and "got" in r.message
    t = time.monotonic()
    r = flow.run(FakeSub(add=lambda a, b: (time.sleep(0.005), a + b)[1]), [ADD(examples=10_000)], seed=9)
    assert time.monotonic() - t < 2.5 and r.verdict == Verdict.PASS


def test_the_budget_is_the_default_or_the_environment_s(monkeypatch):
    monkeypatch.delenv(flow.BUDGET_ENV, raising=False)
    assert flow.budget_s() == flow.DEFAULT_BUDGET_S == 2.0
    monkeypatch.setenv(flow.BUDGET_ENV, "0.25")
    assert flow.budget_s() == 0.25
    assert not hasattr(flow, "BUDGET_S"), "no module state carries a run's settings: the environment does"


def test_a_missing_function_stops_with_wrong():
    with pytest.raises(Stop) as e:
        flow.run(FakeSub(), [ADD()])
    assert "defines no function add" in e.value.result.message


def test_call_text_names_the_arguments_and_keywords():
    ref = lambda codes, scales, block=32: None  # noqa: E731
    assert flow.call_text("dq", flow.Args([1], [2], block=16), ref) == "dq(codes=[1], scales=[2], block=16)"
    assert flow.call_text("f", flow.Args(np.float32(math.inf))) == "f(float32(inf))"


# ------------------------------------------------------------------ end to end, through the real processes
def test_a_real_exercise_graded_in_its_processes_passes_numpy_scalars_and_names_the_seed(tmp_path):
    from judge.grading import exercise
    ex = exercise.get("swizzle_address")
    r = grade.check(ex.id, ex.fixture_path("correct_numpy_scalars.py"), quiet=True)
    assert r.verdict == Verdict.PASS and "inputs drawn with seed" in r.message, str(r)
    wrong = tmp_path / "swizzle.py"
    # right everywhere except rows 2048 and up, which only drawn inputs reach
    wrong.write_text(ex.solution_path.read_text().replace(
        "return row * 128 + (chunk ^ (row % 8)) * 16 + byte",
        "return row * 128 + (chunk ^ (row % 8 if row < 2048 else 0)) * 16 + byte"))
    r = grade.check(ex.id, wrong, quiet=True)
    assert r.verdict == Verdict.WRONG, str(r)
    import re
    row = int(re.match(r"swizzle128\(row=(\d+), col_bytes=\d+\)", r.message).group(1))
    assert row >= 2049 and row % 8, r.message          # shrunk towards row 2049 (time allowing)
    assert any("JUDGE_SEED=" in d for d in r.details)


# ------------------------------------------------------------------ the exercises of chapters 1-3 on the flow
CH123 = ["pipeline_timeline", "group_accounting", "smem_budget", "tensormap_args", "swizzle_address",
         "barrier_phases", "tma_plan", "cluster_geometry", "dsmem_addressing", "multicast_plan"]
# wrong fixtures a check must find from drawn inputs alone, without the statement's listed cases
NOT_BY_DRAWING = {("multicast_plan", "wrong_peer_no_expect_tx.py")}    # found, as HANG: a drawn load skips its issuer


def _wrong_fixtures():
    from judge.grading import exercise
    return [(i, n) for i in CH123 for n, v in exercise.get(i).fixtures.items()
            if v == "WRONG" and (i, n) not in NOT_BY_DRAWING]


@pytest.mark.parametrize("ex_id", CH123)
def test_the_solution_passes_on_drawn_inputs_and_the_check_needs_no_solution_file(ex_id):
    from judge.grading import exercise
    ex = exercise.get(ex_id)
    assert "reference()" not in (ex.folder / "check.py").read_text() and "solution" not in \
        [line.split()[-1] for line in (ex.folder / "check.py").read_text().splitlines() if line.startswith("import")]
    r = graded_here(ex_id, ex.solution_path, drawn_only=True, seed=7)
    assert r.verdict == Verdict.PASS and "seed 7" in r.message, str(r)
    assert int(r.message.split(" inputs drawn")[0].split()[-1]) >= 100, r.message


@pytest.mark.parametrize("job", _wrong_fixtures(), ids=lambda j: f"{j[0]}/{j[1]}")
def test_drawn_inputs_alone_find_each_wrong_fixture(job):
    from judge.grading import exercise
    ex_id, name = job
    # hypothesis also draws, now and then, constants from the code loaded in this process, which depends
    # on the tests run before in it: a seed that finds the mistake in one test process may miss it in
    # another. Three seeds, of which one must find it.
    for seed in (20261201, 2, 3):
        r = graded_here(ex_id, exercise.get(ex_id).fixture_path(name), drawn_only=True, seed=seed)
        if r.verdict != Verdict.PASS:
            break
    assert r.verdict == Verdict.WRONG, str(r)
    assert f"seed {seed}" in " ".join(r.details), str(r)


@pytest.mark.parametrize("ex_id", CH123)
def test_numpy_scalars_are_numbers_in_every_chapter_1_to_3_exercise(ex_id):
    from judge.grading import exercise
    ex = exercise.get(ex_id)
    assert ex.fixtures["correct_numpy_scalars.py"] == "PASS"
    r = graded_here(ex_id, ex.fixture_path("correct_numpy_scalars.py"), seed=3)
    assert r.verdict == Verdict.PASS, str(r)


# ------------------------------------------------------------------ what a statement's words allow
@pytest.mark.parametrize("got", [np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0], np.float32), range(1, 4),
                                 (1, 2, 3), [np.int64(1), np.array(2), 3]])
def test_any_sequence_of_numbers_is_a_list(got):
    assert flow.same(got, [1, 2, 3]) is None
    assert flow.same(got, (1, 2, 3)) is None


@pytest.mark.parametrize("got", [np.array(420), np.array(420.0, np.float32), np.array(420, np.uint16)])
def test_a_zero_dimensional_array_is_a_number(got):
    assert flow.same(got, 420) is None
    assert flow.conform(got, 420) == 420 and np.ndim(flow.conform(got, 420)) == 0
    assert flow.same(np.array(421), 420)                            # still compared by value


def test_conform_keeps_what_does_not_fit_for_the_check_to_name():
    assert "got 3 items, expected 2" in flow.same(np.array([1, 2, 3]), [1, 2])
    assert flow.same(np.array([[1, 2], [3, 4]]), [(1, 2), (3, 4)]) is None      # a list of tuples
    assert flow.same(np.array([1]), 1)                                        # a one-element array is not a number
    assert flow.same({1, 2}, [1, 2]) and flow.same("12", ["1", "2"])         # a set has no order, a text is not a list
    assert flow.conform({"a": np.array(3), "b": np.arange(2)}, {"a": 3, "b": [0, 1]}) == {"a": 3, "b": [0, 1]}


def test_an_exercise_s_own_validate_sees_the_answer_in_the_reference_s_containers():
    seen = []

    def validate(call, got):
        seen.append(got)
        return None if isinstance(got, list) and all(isinstance(t, tuple) for t in got) else "not a list of tuples"

    fn = flow.Function("pairs", reference=lambda n: [(i, i * i) for i in range(n)], validate=validate,
                       edges=[flow.Edge((3,))])
    sub = FakeSub(pairs=lambda n: np.array([(i, i * i) for i in range(n)]))
    r = flow.run(sub, [fn])
    assert r.verdict == Verdict.PASS, str(r)
    assert seen == [[(0, 0), (1, 1), (2, 4)]]


def test_a_real_exercise_accepts_numpy_arrays_where_its_statement_says_a_list(tmp_path):
    # pipeline_timeline: schedule() returns "a list of (copy_start, copy_end, compute_start, compute_end)
    # tuples"; here a NumPy array of shape (K, 4), and pipeline_time() a zero-dimensional array
    from judge.grading import exercise
    ex = exercise.get("pipeline_timeline")
    src = ex.solution_path.read_text()
    src = src.replace("    return tiles\n", "    return np.array(tiles, dtype=np.float64).reshape(len(tiles), 4)\n", 1)
    src = src.replace("    return tiles[-1][3] if tiles else 0\n", "    return np.array(tiles[-1][3] if len(tiles) else 0)\n")
    learner = tmp_path / "timeline.py"
    learner.write_text("import numpy as np\n" + src)
    assert src.count("np.array") == 2
    r = graded_here(ex.id, learner, seed=5)
    assert r.verdict == Verdict.PASS, str(r)
