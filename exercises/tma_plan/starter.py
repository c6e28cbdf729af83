"""tma_plan.py - plan a TMA descriptor for a tile, as a compiler does.

Your task: fill in plan() below. Check it with
    python practice/judge.py check tma_plan

judge.hw.tma refuses a map that breaks a hardware rule. A compiler that lowers "copy this tile into
shared memory" chooses the map instead: it cuts a row wider than the swizzle span into atoms,
merges dimensions that are really one, moves a long row as a wider element type, splits a box
that is still too big into several copies, and refuses (falls back to other copies) only when
no legal map exists. The statement (README.md) gives the five steps and their order.
The checker grades each plan against judge.hw.tma's rules (the same validation a tensor map goes
through before the driver sees it) and against a CPU model of the copies: every byte of the tile
delivered exactly once, in the order the statement gives.
"""
MAX_BOX = 256
ELEM_BYTES = {"uint8": 1, "uint16": 2, "uint32": 4, "int32": 4, "uint64": 8, "int64": 8,
              "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}     # swizzle span in bytes
UNSIGNED = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def widen(box, dim, elem_bytes):
    """The smallest factor f in 1, 2, 4, 8 (elem_bytes * f at most 8) with box % f == 0,
    dim % f == 0 and box // f <= 256; None if there is none."""
    raise NotImplementedError("widen: try f = 1, 2, 4, 8 while elem_bytes * f <= 8")


def plan(tile, dtype, shape, strides=None, swizzle="none"):
    """tile, shape and strides (in elements) come outermost-first, as NumPy writes them
    (strides=None: row-major). Returns, INNERMOST-FIRST:
        {"dtype": element type of the map, "dims": [...], "strides": [byte strides of dims 1..],
         "box": [...], "copies": [boxes along each dimension]}
    or raises ValueError whose message names the rule no plan can satisfy:
    "contiguous", "swizzle_span", "rank", "strides" or "box_inner" (see the statement)."""
    raise NotImplementedError("plan: the five steps of the statement, in order")
