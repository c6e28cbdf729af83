"""fragment.py - which thread and register of a warpgroup hold each element of a wgmma accumulator.

Your task: fill in coord(), then owner(). Check with
    python practice/judge.py check wgmma_fragment

wgmma.mma_async.m64nNk16 with fp32 accumulation leaves the 64 x N result C spread over the 128
threads of the warpgroup: thread t holds N/2 fp32 registers d[0] .. d[N/2 - 1]. The layout is
the one of the PTX ISA's figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"
(README.md draws it): warp w = t // 32 owns rows 16w .. 16w + 15; inside a warp, lane l sits in
row l // 4 of an 8-row band and holds two neighbouring columns, 2 * (l % 4) and the next; the
band repeats 8 rows lower and every 8 columns.
"""


def coord(thread, reg, n):
    """(row, col) of C that register d[reg] of `thread` (0..127) holds, for wgmma m64n{n}k16."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("coord: warp = thread // 32, lane = thread % 32; registers go in fours per 8 columns")
    warp, lane = thread // 32, thread % 32
    row = 16 * warp + lane // 4 + 8 * ((reg // 2) % 2)     # d[4j], d[4j+1]: upper row; d[4j+2], d[4j+3]: +8
    col = 8 * (reg // 4) + 2 * (lane % 4) + reg % 2
    return row, col
    # END SOLUTION


def owner(row, col, n):
    """(thread, reg) holding C[row][col] of an m64n{n} accumulator: coord's inverse."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("owner: undo coord - which warp, which lane, which register")
    warp, r = divmod(row, 16)
    lower, band_row = divmod(r, 8)           # lower = 1 for the second 8-row band of the warp
    j, c = divmod(col, 8)
    pair, odd = divmod(c, 2)
    return 32 * warp + 4 * band_row + pair, 4 * j + 2 * lower + odd
    # END SOLUTION
