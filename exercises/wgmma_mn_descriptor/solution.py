"""mn_descriptor.py - the wgmma descriptor of an N-major B tile, and the bytes wgmma reads through it.

Your task: fill in nmajor_slice_descriptor(), then byte_of(). Check with
    python practice/judge.py check wgmma_mn_descriptor

B (K x N, bf16) held N-major: each k-row is a run of consecutive n. Chapter 4's gemm_mn_major.cu has
TMA bring a tile of 64 k-rows x n columns into shared memory as n / (span / 2) boxes side by side:
    box j = columns j*span/2 .. (j+1)*span/2 - 1, all 64 k-rows, one k-row = span bytes,
            at start + j * 64 * span                      (span = 128, 64, 32 bytes: the swizzle's)
Inside a box, 8 k-rows (8 * span bytes) make one swizzle pattern: the 16-byte chunk index of each
128-byte line is XORed with the line's index, counted from where the pattern starts (`start`).

The descriptor (PTX ISA, "Matrix Descriptor Format"), as in wgmma_descriptor:
    bits  0-13  start address >> 4            bits 32-45  stride byte offset (SBO) >> 4
    bits 16-29  leading byte offset (LBO) >> 4  bits 49-51  base offset
    bits 62-63  layout: 1 = 128B swizzle, 2 = 64B, 3 = 32B   (0 = no swizzle: not used here)
Every other bit is 0. For a swizzled MN-major operand, LBO steps along N and SBO along K.
"""

SPAN = {"128B": 128, "64B": 64, "32B": 32}


def nmajor_slice_descriptor(start, swizzle, k, n=128):
    """The descriptor (an int below 2**64) of k16 slice k (0..3: k-rows 16k..16k+15) of the N-major B
    tile of 64 k-rows x n bf16 columns at shared address `start` (a multiple of 128), laid out as above
    with `swizzle` ("128B", "64B" or "32B"); its swizzle pattern starts at `start`.
      LBO: from one box to the next (the next span bytes of N).
      SBO: from one group of 8 k-rows to the next.
      start address: where the slice's first k-row begins.
      base offset: 0 when `start` is on the swizzle's repeat (8 * span bytes: 1024, 512, 256), else
        (start >> 7) & 7; the same in every slice's descriptor.
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("nmajor_slice_descriptor: the two strides, the slice's start, the base offset, the layout")
    span = SPAN[swizzle]
    lbo = 64 * span                                  # the next box: 64 k-rows of span bytes
    sbo = 8 * span                                   # the next 8 k-rows: one swizzle pattern
    first = start + 16 * span * k                    # 16 k-rows per slice
    base_offset = 0 if start % (8 * span) == 0 else (start >> 7) & 7
    layout = {"128B": 1, "64B": 2, "32B": 3}[swizzle]
    desc = ((first >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 \
        | base_offset << 49 | layout << 62
    return desc
    # END SOLUTION


def byte_of(desc, n, k):
    """The shared-memory byte address wgmma reads element B[k][n] from, following descriptor `desc`
    of a swizzled N-major operand (layout 1, 2 or 3; any LBO and SBO) as the hardware does; k = 0..15
    counts k-rows from the slice's first, n = 0..255 columns from the tile's first. Fields, then:
      n's byte 2n lies in block 2n // span (LBO each) at byte 2n % span of its k-row;
      k lies in group k // 8 (SBO each), k-row k % 8 of it (span bytes each);
      the sum from the start address, then its 16-byte chunk index XORed with its line index
      ((address >> 7) - base offset), kept to 3, 2 or 1 bits for 128B, 64B, 32B.
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("byte_of: read the fields, walk block, group and k-row, then apply the swizzle")
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    base_offset = (desc >> 49) & 7
    span = {1: 128, 2: 64, 3: 32}[desc >> 62]
    nb = 2 * n                                       # bf16: 2 bytes per column
    plain = start + (nb // span) * lbo + (k // 8) * sbo + (k % 8) * span + nb % span
    line = ((plain >> 7) - base_offset) % (span // 16)
    return plain ^ (line << 4)
    # END SOLUTION
