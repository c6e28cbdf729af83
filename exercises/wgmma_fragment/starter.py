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
    raise NotImplementedError("coord: warp = thread // 32, lane = thread % 32; registers go in fours per 8 columns")


def owner(row, col, n):
    """(thread, reg) holding C[row][col] of an m64n{n} accumulator: coord's inverse."""
    raise NotImplementedError("owner: undo coord - which warp, which lane, which register")
