"""timeline.py - when does each tile of a multi-stage pipeline copy and compute?

K tiles stream through S shared-memory buffers. One copy engine moves one tile at a time
(L each, in tile order); the compute works on one tile at a time (C each). See README.md.
Check it: python practice/judge.py check pipeline_timeline
"""


def schedule(K, L, C, S):
    """One (copy_start, copy_end, compute_start, compute_end) tuple per tile, in tile order."""
    raise NotImplementedError(
        "schedule(K, L, C, S): walk the tiles in order; copy k may start once it is issued "
        "(t = 0 for the first S tiles, else when compute k - S ends) and the copy engine is "
        "free; compute k starts once copy k and compute k - 1 have both ended")


def pipeline_time(K, L, C, S):
    """When the last compute ends (0 when K = 0)."""
    raise NotImplementedError(
        "pipeline_time(K, L, C, S): the end of the last compute; schedule() has it")
