"""umma_desc.py - the descriptors a Blackwell tcgen05.mma reads its operands and its shape through.

Your task: fill in smem_descriptor(), tile_descriptor() and instr_descriptor(). Check with
    python practice/judge.py check umma_descriptor

tcgen05.mma names A and B in shared memory by 64-bit descriptors (PTX ISA, tcgen05 "Shared memory
descriptor"):

    bits  0-13  start address >> 4            bits 46-48  the fixed value 0b001
    bits 16-29  leading byte offset >> 4      bits 49-51  base offset
    bits 32-45  stride byte offset >> 4       bit  52     LBO mode (0 here)
    bits 61-63  swizzle: 0 none, 1 128B with 32-byte atoms, 2 128B, 4 64B, 6 32B
and its shape, types and majors by a 32-bit instruction descriptor (README.md has its table).
"""

SWIZZLES = ("none", "128B_base32B", "128B", "64B", "32B")


def smem_descriptor(start, lbo, sbo, swizzle, base_offset=0):
    """The 64-bit shared-memory descriptor (an int below 2**64); start, lbo, sbo in bytes."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("smem_descriptor: bytes >> 4 at bits 0, 16, 32; 0b001 at 46; base offset at 49; swizzle at 61")
    code = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}[swizzle]
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 \
        | 1 << 46 | (base_offset & 7) << 49 | code << 61
    # END SOLUTION


def tile_descriptor(start, swizzle, major, ks):
    """Descriptor of K-slice ks (0..3: 16 bf16 of K) of a 128 x 64 bf16 operand tile (128 rows of M or
    N, 64 of K) at shared address `start` (a multiple of 128), in the canonical layout of `swizzle`
    ("none", "32B", "64B", "128B") and `major` ("K": K contiguous; "MN": M or N contiguous). README.md
    draws the four layouts:
      K-major, swizzled: column blocks one span wide along K, all 128 rows each (block b at
        start + b * 128 * span); SBO = 8 rows; LBO unused (16 bytes, as CUTLASS sets it).
      K-major, none: 8 x 16-byte core matrices, K fastest: LBO = 128 (next along K), SBO = 1024.
      MN-major, swizzled: blocks one span wide along M/N, all 64 k-rows each (block b at
        start + b * 64 * span): LBO = 64 * span (the next block along M/N), SBO = 8 * span (8 k-rows).
      MN-major, none: core matrices of 8 k-rows x 16 bytes of M/N, M/N fastest: SBO = 128 (next 16
        bytes of M/N), LBO = 2048 (next 8 k-rows).
    A tile that does not start on its swizzle's repeat (1024 / 512 / 256 bytes) needs the base offset
    (start >> 7) & 7 (0 without swizzle).
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("tile_descriptor: the strides of the layout, the slice's start, the base offset")
    span = {"none": 16, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    repeat = {"none": 128, "32B": 256, "64B": 512, "128B": 1024}[swizzle]
    base_offset = 0 if swizzle == "none" or start % repeat == 0 else (start >> 7) & 7
    if major == "K":
        kbyte = 32 * ks                                   # 16 bf16 per slice
        if swizzle == "none":
            return smem_descriptor(start + 256 * ks, 128, 1024, "none")
        first = start + (kbyte // span) * 128 * span + kbyte % span
        return smem_descriptor(first, 16, 8 * span, swizzle, base_offset)
    if swizzle == "none":
        return smem_descriptor(start + 2 * 2048 * ks, 2048, 128, "none")   # 16 k-rows = two 8-row groups
    return smem_descriptor(start + 16 * span * ks, 64 * span, 8 * span, swizzle, base_offset)
    # END SOLUTION


def instr_descriptor(M, N, a_major, b_major):
    """The 32-bit instruction descriptor of a dense tcgen05.mma.kind::f16 with bf16 A and B and an f32
    D of M x N; a_major / b_major "K" or "MN". No negation, no sparsity."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("instr_descriptor: D format at 4, A and B formats at 7 and 10, majors at 15 and 16, N >> 3 at 17, M >> 4 at 24")
    a_mn, b_mn = int(a_major == "MN"), int(b_major == "MN")
    return 1 << 4 | 1 << 7 | 1 << 10 | a_mn << 15 | b_mn << 16 | (N >> 3) << 17 | (M >> 4) << 24
    # END SOLUTION
