"""tests/exercises/test_group_accounting_smem_budget.py - the CPU exercises group_accounting and smem_budget, graded as a learner's file is.

Their solutions' and fixtures' verdicts are tests/grading/test_exercises.py's; here: what the chapter expects of them.

Run: python -m pytest tests/exercises/test_group_accounting_smem_budget.py -q      (no GPU; each grade runs in a child process)
"""
import pytest

from judge.grading import exercise, grade

IDS = ["group_accounting", "smem_budget"]
# what the untouched starter must say: it names the function and how to begin
STARTER_SAYS = {"group_accounting": ["safe_tiles", "NotImplementedError", "wait_prior(n)"],
                "smem_budget": ["stage_bytes", "NotImplementedError", "A tile (BM x BK)"]}


def test_orders_within_the_chapter():
    assert (exercise.get("group_accounting").order, exercise.get("smem_budget").order) == (2, 3)


@pytest.mark.parametrize("ex_id", IDS)
def test_untouched_starter_is_wrong_and_says_what_to_do(ex_id):
    r = grade.check(ex_id, exercise.get(ex_id).starter_path, quiet=True)
    assert r.verdict == grade.Verdict.WRONG, str(r)
    for words in STARTER_SAYS[ex_id]:
        assert words in r.message, r.message


def test_group_accounting_reference_matches_the_readme_examples():
    from judge.hw import pipesim as p
    safe = lambda *a, **kw: p.safe_tiles(p.seed_loop(*a, **kw))   # noqa: E731
    assert safe(3, 4) == [{0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}]
    assert safe(3, 4, empty_commit=False) == [{0}, {0, 1}, {0, 1, 2}, {0, 1, 2}]
    assert safe(3, 4, wait=2) == [set(), {0}, {0, 1}, {0, 1, 2}]
    assert p.check(p.seed_loop(2, 8, empty_commit=False)).first_unsafe_round() is None


def test_smem_budget_readme_numbers():
    m = exercise.get("smem_budget").reference()
    assert m.stage_bytes(128, 128, 8) == 8 * 1024
    assert [m.pipeline_bytes(128, 128, 8, s) for s in (2, 3, 4)] == [16384, 24576, 32768]
    assert m.blocks_per_sm(24576, 256, 128) == 2
    assert m.blocks_per_sm(32768, 128, 32) == 6
    assert m.blocks_per_sm(0, 1024, 32) == 2
    assert m.blocks_per_sm(227 * 1024, 128, 32, gpu="H200") == 1
    assert m.blocks_per_sm(227 * 1024 + 1, 128, 32) == 0


def test_the_graders_rules_are_the_solutions():
    """The graders hold their own references (released copies ship without solution.py): the same answers."""
    import random
    from judge.hw import pipesim
    ref = exercise.get("smem_budget").reference()
    chk = exercise.import_file(exercise.get("smem_budget").folder / "check.py", "smem_budget_check")
    rng = random.Random()
    for _ in range(2000):
        args = (rng.randrange(0, 229 * 1024), rng.randrange(1, 1100), rng.randrange(0, 260))
        gpu = rng.choice(["H100", "H200"])
        assert chk.blocks_per_sm(*args, gpu=gpu) == ref.blocks_per_sm(*args, gpu=gpu), args
    acc = exercise.get("group_accounting").reference()
    chk = exercise.import_file(exercise.get("group_accounting").folder / "check.py", "group_accounting_check")
    for _ in range(300):
        S, K = rng.randrange(2, 9), rng.randrange(1, 21)
        kw = {"empty_commit": rng.random() < 0.5, "wait": rng.choice([None, *range(S + 1)])}
        assert chk.safe_tiles(S, K, **kw) == acc.safe_tiles(S, K, **kw), (S, K, kw)
        assert chk.first_unsafe_round(S, K, **kw) == acc.first_unsafe_round(S, K, **kw)
    assert pipesim.timeline(8, 4, 10, 3)[-1][3] == 84
