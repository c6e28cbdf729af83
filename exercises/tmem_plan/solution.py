"""plan.py - lay out a kernel's accumulators in Blackwell tensor memory (chapter 5).

Tensor memory: 128 lanes x 512 columns of 32 bits per SM. An fp32 accumulator of a 128 x N tile
(tcgen05.mma with M = 128) takes N columns, one row per lane. A CTA allocates once, a power of two
between 32 and 512 columns, and places every buffer of every accumulator inside it.
Check it: python practice/judge.py check tmem_plan   (README.md has the rules and examples)
"""

COLUMNS = 512          # per SM, shared by every CTA resident there
MIN_ALLOC = 32


def plan(accumulators):
    """accumulators: list of (name, N, buffers), each buffer an fp32 128 x N accumulator.

    Returns {"alloc": ncols, "columns": {name: [first column of buffer 0, of buffer 1, ...]}}:
    ncols the smallest power of two >= 32 that holds every buffer, and buffers that do not overlap.
    Raises ValueError when they need more than 512 columns.
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("plan: place the buffers one after another, then round the total up")
    columns, next_col = {}, 0
    for name, n, buffers in accumulators:
        columns[name] = []
        for _ in range(buffers):
            columns[name].append(next_col)
            next_col += n
    if next_col > COLUMNS:
        raise ValueError(f"{next_col} columns needed; tensor memory has {COLUMNS}")
    alloc = MIN_ALLOC
    while alloc < next_col:
        alloc *= 2
    return {"alloc": alloc, "columns": columns}
    # END SOLUTION


def ctas_per_sm(alloc):
    """How many CTAs that each allocate `alloc` columns can hold their columns on one SM at once."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("ctas_per_sm: the SM's columns shared by CTAs of this allocation")
    return COLUMNS // alloc
    # END SOLUTION
