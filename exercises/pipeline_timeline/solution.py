"""timeline.py - when does each tile of a multi-stage pipeline copy and compute?

K tiles stream through S shared-memory buffers. One copy engine moves one tile at a time
(L each, in tile order); the compute works on one tile at a time (C each). See README.md.
Check it: python practice/judge.py check pipeline_timeline
"""


def schedule(K, L, C, S):
    """One (copy_start, copy_end, compute_start, compute_end) tuple per tile, in tile order."""
    # BEGIN SOLUTION
    #> raise NotImplementedError(
    #>     "schedule(K, L, C, S): walk the tiles in order; copy k may start once it is issued "
    #>     "(t = 0 for the first S tiles, else when compute k - S ends) and the copy engine is "
    #>     "free; compute k starts once copy k and compute k - 1 have both ended")
    if not isinstance(K, int) or not isinstance(S, int):
        raise ValueError(f"K and S count tiles and buffers: whole numbers, got K={K!r}, S={S!r}")
    if K < 0 or S < 1 or not (L >= 0 and C >= 0):
        raise ValueError(f"need K >= 0, L >= 0, C >= 0 and S >= 1, got {(K, L, C, S)}")
    tiles = []
    engine_free = 0          # one copy engine: a copy starts only after the previous one ended
    for k in range(K):
        issued = 0 if k < S else tiles[k - S][3]     # buffer k % S is free once compute k-S ends
        copy_start = max(issued, engine_free)
        copy_end = copy_start + L
        compute_start = max(copy_end, tiles[-1][3] if tiles else 0)
        tiles.append((copy_start, copy_end, compute_start, compute_start + C))
        engine_free = copy_end
    return tiles
    # END SOLUTION


def pipeline_time(K, L, C, S):
    """When the last compute ends (0 when K = 0)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError(
    #>     "pipeline_time(K, L, C, S): the end of the last compute; schedule() has it")
    tiles = schedule(K, L, C, S)
    return tiles[-1][3] if tiles else 0
    # END SOLUTION
