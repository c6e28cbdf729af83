"""accounting.py - which tiles has the cp.async pipeline guaranteed when the compute reads?

One thread of an S-stage cp.async loop over K tiles commits groups and waits with
wait_prior(n); count the groups to say, round by round, which tiles have surely arrived.
The loop and the rules are in README.md.
Check it: python practice/judge.py check group_accounting
"""


def safe_tiles(S, K, empty_commit=True, wait=None):
    """One set per round kt = 0..K-1: the tiles guaranteed to have arrived when round kt reads.

    empty_commit: the loop commits a group even when it issued no load (the standard loop).
    wait: the argument of wait_prior in the loop; None means S - 2.
    """
    raise NotImplementedError(
        "safe_tiles(S, K, empty_commit, wait): replay the loop of README.md, keeping a list of "
        "committed groups (each a list of tiles, maybe empty); at each wait_prior(n) every group "
        "but the newest n is complete; the round's set is the tiles of the complete groups")


def first_unsafe_round(S, K, empty_commit=True, wait=None):
    """The first round kt whose own tile kt is not guaranteed when it is read, or None."""
    raise NotImplementedError(
        "first_unsafe_round(S, K, empty_commit, wait): the first kt with kt not in "
        "safe_tiles(...)[kt], or None when every round is safe")
