"""swizzle.py - where TMA's swizzle modes put a byte of a tile in shared memory.

Your task: fill in swizzle128(), then swizzle64() and swizzle32(). Check with
    python practice/judge.py check swizzle_address

A tile loaded with CU_TENSOR_MAP_SWIZZLE_<span> has rows exactly `span` bytes wide (the inner
box is the span). TMA keeps every 16-byte chunk whole but moves it within its row: the chunk
index is XORed with the index of the 128-byte line the row sits in, modulo the number of
chunks in a row. Eight consecutive 128-byte lines then put a given logical chunk in eight
different bank groups, so a column read by eight threads hits no bank twice.
(The pattern is on shared-memory address bits, so the tile must start at a multiple of its
repeat: 1024 B for 128B, 512 B for 64B, 256 B for 32B.)
"""


def swizzle128(row, col_bytes):
    """Byte offset from the tile's start of logical byte `col_bytes` (0..127) of row `row`,
    rows 128 B wide. The 8x128-byte atom (1024 B) repeats every 8 rows."""
    raise NotImplementedError("swizzle128: XOR the 16-byte chunk index with the row's 128-byte line")


def swizzle64(row, col_bytes):
    """Same for CU_TENSOR_MAP_SWIZZLE_64B: rows 64 B wide (4 chunks), two rows per 128-byte line."""
    raise NotImplementedError("swizzle64: 4 chunks per row, 2 rows share a 128-byte line")


def swizzle32(row, col_bytes):
    """Same for CU_TENSOR_MAP_SWIZZLE_32B: rows 32 B wide (2 chunks), four rows per 128-byte line."""
    raise NotImplementedError("swizzle32: 2 chunks per row, 4 rows share a 128-byte line")
