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
    raise NotImplementedError("smem_descriptor: bytes >> 4 at bits 0, 16, 32; 0b001 at 46; base offset at 49; swizzle at 61")


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
    raise NotImplementedError("tile_descriptor: the strides of the layout, the slice's start, the base offset")


def instr_descriptor(M, N, a_major, b_major):
    """The 32-bit instruction descriptor of a dense tcgen05.mma.kind::f16 with bf16 A and B and an f32
    D of M x N; a_major / b_major "K" or "MN". No negation, no sparsity."""
    raise NotImplementedError("instr_descriptor: D format at 4, A and B formats at 7 and 10, majors at 15 and 16, N >> 3 at 17, M >> 4 at 24")
