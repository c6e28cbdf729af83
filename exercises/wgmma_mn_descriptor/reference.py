"""The reference of exercise wgmma_mn_descriptor: the descriptor of one k16 slice of a swizzled MN-major tile,
and how wgmma reads an element through it, step by step (PTX ISA, Matrix Descriptor Format; the parts are
judge.hw.wgmma's and judge.hw.mma_layout's, which chapter 4 teaches; their assembly is the exercise's answer,
so a learners' release leaves this file out, as it leaves out the solution).

    from judge.grading import exercise
    ref = exercise.get("wgmma_mn_descriptor").reference_module()
    ref.mnmajor_slice_descriptor(0x480, "64B", 2, rows=128)   # k16 slice 2 of a 128 x 64 N-major tile, base offset 1
    ref.mnmajor_read_steps(d, mn=9, k=3)                       # that address, step by step (box, k-row, XOR)

Run its tests: PYTHONPATH=$PWD python -m pytest tests/hw/test_wgmma_mn_major.py -q
"""
from judge.hw import mma_layout as _layout
from judge.hw.wgmma import SPAN, base_offset_for, decode, encode, mnmajor_strides


def mnmajor_slice_descriptor(start: int, swizzle: str, ks: int, *, rows: int, k_elems: int = 64,
                             elem_bytes: int = 2) -> int:
    """The descriptor of k16 slice `ks` of the MN-major tile of `rows` (M or N) x `k_elems` k-rows at
    `start` (mnmajor_offset), swizzled: the layout a TMA box with M/N inner leaves, boxes of span/elem_bytes
    columns one after the other - chapters/ch04_wgmma/gemm_mn_major.cu's B slot. LBO = k_elems x span (the
    next box), SBO = 8 x span (the next 8 k-rows), the slice 16 k-rows per ks further on, and the base
    offset of a tile whose swizzle pattern starts at `start` (base_offset_for(start)): the same in every
    slice, since a slice moves whole patterns (16 x span is two repeats)."""
    if swizzle not in ("32B", "64B", "128B"):
        raise ValueError(f"swizzle {swizzle!r}: a swizzled MN-major tile is 32B, 64B or 128B")
    k_step = 32 // elem_bytes
    if not 0 <= ks < k_elems // k_step:
        raise ValueError(f"a tile of {k_elems} k-rows has k{k_step} slices 0..{k_elems // k_step - 1}, not {ks}")
    lbo, sbo = mnmajor_strides(swizzle, rows=rows, k_elems=k_elems, elem_bytes=elem_bytes)
    first = start + _layout.slice_start(ks, k_step, swizzle, "MN", rows=rows, k_elems=k_elems,
                                        elem_bytes=elem_bytes)
    return encode(first, lbo, sbo, swizzle, base_offset_for(start, swizzle))


def mnmajor_read_steps(desc: int, mn: int, k: int, *, elem_bytes: int = 2) -> dict:
    """How wgmma finds element [mn][k] (k < 16: in the slice) of a swizzled MN-major operand through its
    descriptor, step by step - operand_address(desc, mn, k, major="MN") with its parts named:
      block = mn bytes // span (LBO each), group = k // 8 (SBO each), k % 8 rows of span bytes, then
      mn bytes % span; plain = the sum from the start; line = ((plain >> 7) - base_offset) mod the
      pattern's lines; address = plain with its 16-byte chunk index XORed with line."""
    d = decode(desc)
    if d.swizzle == "none":
        raise ValueError("mnmajor_read_steps follows a swizzled descriptor (layout 1, 2 or 3)")
    span = SPAN[d.swizzle]
    mb = mn * elem_bytes
    plain = d.start + (mb // span) * d.lbo + (k // 8) * d.sbo + (k % 8) * span + mb % span
    line = ((plain >> 7) - d.base_offset) % (span // 16)
    address = _layout.swizzle_address(plain, d.swizzle, d.base_offset)
    return {"start": d.start, "block": mb // span, "lbo": d.lbo, "group": k // 8, "sbo": d.sbo,
            "row": k % 8, "span": span, "byte": mb % span, "plain": plain, "line": line,
            "base_offset": d.base_offset, "address": address}
