"""plan.py - a TMA multicast plan: who loads which slice of a shared tile, the CTA mask of each
load, and the bytes each block's mbarrier must expect.

Your task: fill in the four functions. Check with
    python practice/judge.py check multicast_plan

A multicast load (cp.async.bulk.tensor...multicast::cluster) is issued by ONE block and writes
its box into the shared memory of every block whose bit is set in a 16-bit CTA mask (bit r =
cluster rank r), at the same offset, and signals each destination's mbarrier at the same offset
with the bytes that destination received. Each destination must announce exactly those bytes
with its own mbarrier.arrive.expect_tx: a barrier that expects more than it receives never
completes (HANG); one that expects less completes while data is still landing, so the consumer
may read a tile that has not arrived (a race), and the surplus bytes count against its next
phase (PTX ISA, mbarrier: the tx-count may go below zero), which completes early too, or never
when the surplus is more than that phase expects.

A load is a dict: {"issuer": rank, "tile": name, "row": first row, "rows": n, "bytes": n * row_bytes,
"mask": CTA mask}.
"""


def cta_mask(ranks):
    """The 16-bit CTA mask that delivers to every rank in `ranks`."""
    raise NotImplementedError("cta_mask: one bit per rank")


def split(tile, tile_rows, row_bytes, ranks):
    """Share one tile of `tile_rows` rows among the blocks `ranks`: each of them loads an equal,
    consecutive slice of rows (the first rank the first slice) and multicasts it to all of them.
    tile_rows is a multiple of len(ranks). Returns the list of loads."""
    raise NotImplementedError("split: one load per rank, rows tile_rows / len(ranks) each")


def gemm_plan(cx, cy, a_rows, b_rows, row_bytes):
    """A cluster of cx x cy blocks computes a (cy x cx) grid of output tiles: the block at (x, y)
    of the cluster (rank x + y * cx) needs A tile "A{y}" (a_rows rows) and B tile "B{x}" (b_rows).
    The blocks of one cluster row share A{y}; those of one cluster column share B{x}.
    Returns every load of one k-step (use split)."""
    raise NotImplementedError("gemm_plan: split each A tile over its row, each B tile over its column")


def expect_tx(loads, cluster_size):
    """Bytes each rank 0 .. cluster_size-1 must announce on its own mbarrier for these loads."""
    raise NotImplementedError("expect_tx: every load counts for every rank in its mask")
