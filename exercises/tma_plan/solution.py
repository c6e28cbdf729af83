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
    # BEGIN SOLUTION
    #> raise NotImplementedError("widen: try f = 1, 2, 4, 8 while elem_bytes * f <= 8")
    f = 1
    while elem_bytes * f <= 8:
        if box % f == 0 and dim % f == 0 and box // f <= MAX_BOX:
            return f
        f *= 2
    return None
    # END SOLUTION


def plan(tile, dtype, shape, strides=None, swizzle="none"):
    """tile, shape and strides (in elements) come outermost-first, as NumPy writes them
    (strides=None: row-major). Returns, INNERMOST-FIRST:
        {"dtype": element type of the map, "dims": [...], "strides": [byte strides of dims 1..],
         "box": [...], "copies": [boxes along each dimension]}
    or raises ValueError whose message names the rule no plan can satisfy:
    "contiguous", "swizzle_span", "rank", "strides" or "box_inner" (see the statement)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("plan: the five steps of the statement, in order")
    eb = ELEM_BYTES[dtype]
    if strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
    g, b, st = list(reversed(shape)), list(reversed(tile)), list(reversed(strides))

    # 1. the innermost dimension must be contiguous; dimensions of extent 1 carry nothing
    if st[0] != 1:
        raise ValueError(f"contiguous: the innermost stride is {st[0]} elements, not 1")
    keep = [i for i in range(len(g)) if i == 0 or g[i] > 1]
    g, b, st = [g[i] for i in keep], [b[i] for i in keep], [st[i] for i in keep]

    # 2. a row wider than the swizzle span becomes atoms; the atom index goes outermost
    span = SPAN[swizzle]
    if span and b[0] * eb > span:
        atom = span // eb
        if b[0] % atom or g[0] % atom:
            raise ValueError(f"swizzle_span: a row of {b[0] * eb} bytes is not a whole number of {span}-byte atoms")
        g = [atom] + g[1:] + [g[0] // atom]
        b = [atom] + b[1:] + [b[0] // atom]
        st = [1] + st[1:] + [atom]

    # 3. merge a fully boxed dimension with the next one when that one starts right after it
    i = 0
    while i + 1 < len(g):
        box, dim = b[i] * b[i + 1], g[i] * g[i + 1]
        # under a swizzle the inner box may not grow past the span again (that would undo the atoms)
        legal = (box <= MAX_BOX and not (i == 0 and span and box * eb > span)) or \
            (i == 0 and not span and widen(box, dim, eb) is not None)
        if b[i] == g[i] and st[i + 1] == st[i] * g[i] and legal:
            g[i:i + 2], b[i:i + 2], st[i:i + 2] = [dim], [box], [st[i]]
        else:
            i += 1

    # 4. a long innermost box travels as a wider element; what is still too big, as several copies
    if b[0] > MAX_BOX and not span:
        f = widen(b[0], g[0], eb)
        if f:
            dtype = UNSIGNED[eb * f]
            g[0], b[0] = g[0] // f, b[0] // f
    copies = []
    for d in range(len(b)):
        c = 1
        while b[d] // c > MAX_BOX or b[d] % c:
            c += 1
        b[d] //= c
        copies.append(c)

    # 5. what no plan can change: rank, strides, the bytes of the inner box
    if len(g) > 5:
        raise ValueError(f"rank: the tile needs {len(g)} dimensions, a tensor map takes at most 5")
    byte_strides = [s * eb for s in st[1:]]
    bad = [s for s in byte_strides if s % 16]
    if bad:
        raise ValueError(f"strides: byte stride {bad[0]} is not a multiple of 16")
    inner = b[0] * ELEM_BYTES[dtype]
    if inner % 16:
        raise ValueError(f"box_inner: the inner box is {inner} bytes, not a multiple of 16")
    return {"dtype": dtype, "dims": g, "strides": byte_strides, "box": b, "copies": copies}
    # END SOLUTION
