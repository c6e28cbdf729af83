"""A cheat for group_accounting: it asks the judge's own simulator (judge.hw.pipesim) for the answers."""
from judge.hw import pipesim


def safe_tiles(S, K, empty_commit=True, wait=None):
    return [r.safe for r in pipesim.check(pipesim.seed_loop(S, K, empty_commit=empty_commit, wait=wait), S).rounds]


def first_unsafe_round(S, K, empty_commit=True, wait=None):
    return pipesim.check(pipesim.seed_loop(S, K, empty_commit=empty_commit, wait=wait), S).first_unsafe_round()
