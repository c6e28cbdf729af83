"""descriptor.py - the 64-bit shared-memory matrix descriptor a wgmma reads its operands through.

Your task: fill in encode(), then tile_descriptor(). Check with
    python practice/judge.py check wgmma_descriptor

wgmma.mma_async takes A and B from shared memory not as pointers but as 64-bit descriptors
(PTX ISA, "Matrix Descriptor Format"):

    bits  0-13  start address >> 4            bits 32-45  stride byte offset >> 4
    bits 16-29  leading byte offset >> 4      bits 49-51  base offset (0 here)
    bits 62-63  layout: 0 = no swizzle, 1 = 128B swizzle, 2 = 64B, 3 = 32B
Every other bit is 0. Byte values are multiples of 16: the fields store them without the low 4 bits.
"""

SWIZZLES = ("none", "32B", "64B", "128B")


def encode(start, lbo, sbo, swizzle, base_offset=0):
    """The descriptor (an int below 2**64) of these fields; start, lbo, sbo in bytes."""
    raise NotImplementedError("encode: shift each byte value right by 4 and place it at its bits; layout at 62")


def tile_descriptor(start, swizzle, k):
    """Descriptor of the k-th 16-element slice (k = 0..3) of a 64 x 64 bf16 K-major tile stored
    at shared address `start` in the canonical layout of `swizzle` (README.md draws them):
      swizzled (span = 32, 64 or 128 bytes): the tile is cut along K into column blocks one span
        wide; a block holds all 64 rows, each row one span; block b starts at start + b * 64 * span.
        Stride byte offset: from one group of 8 rows to the next. Leading byte offset: unused by
        the hardware here; the course sets it to 16 bytes (field value 1).
      "none": 8 x 16-byte core matrices of 128 contiguous bytes, K-fastest: the core matrix of rows
        8r..8r+7 and K bytes 16c..16c+15 starts at start + (8 r + c) * 128. Leading byte offset:
        to the next core matrix along K; stride byte offset: to the next along M/N.
    """
    raise NotImplementedError("tile_descriptor: where does slice k start, and how far apart are 8-row groups?")
