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
    # BEGIN SOLUTION
    #> raise NotImplementedError(
    #>     "safe_tiles(S, K, empty_commit, wait): replay the loop of README.md, keeping a list of "
    #>     "committed groups (each a list of tiles, maybe empty); at each wait_prior(n) every group "
    #>     "but the newest n is complete; the round's set is the tiles of the complete groups")
    n = S - 2 if wait is None else wait
    groups = []             # committed groups, oldest first; each a list of tiles (maybe empty)
    pending = []            # loads issued since the last commit
    complete = 0            # groups 0 .. complete-1 are guaranteed complete

    def load(tile):
        pending.append(tile)

    def commit():
        nonlocal pending
        if pending or empty_commit:          # without empty commits, nothing to close, no group
            groups.append(pending)
        pending = []

    for s in range(S - 1):                   # prologue
        if s < K:
            load(s)
        commit()
    rounds = []
    for kt in range(K):
        # wait_prior(n): every group but the newest n is complete (a count, never a tile number)
        complete = max(complete, len(groups) - n)
        # __syncthreads() comes next in the loop: what this thread knows, the block knows
        rounds.append({t for g in groups[:complete] for t in g})
        if kt + S - 1 < K:
            load(kt + S - 1)
        commit()
    return rounds
    # END SOLUTION


def first_unsafe_round(S, K, empty_commit=True, wait=None):
    """The first round kt whose own tile kt is not guaranteed when it is read, or None."""
    # BEGIN SOLUTION
    #> raise NotImplementedError(
    #>     "first_unsafe_round(S, K, empty_commit, wait): the first kt with kt not in "
    #>     "safe_tiles(...)[kt], or None when every round is safe")
    for kt, tiles in enumerate(safe_tiles(S, K, empty_commit, wait)):
        if kt not in tiles:
            return kt
    return None
    # END SOLUTION
