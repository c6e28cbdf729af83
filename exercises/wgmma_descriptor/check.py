"""Grader of wgmma_descriptor: python practice/judge.py check wgmma_descriptor

Graded bit-exact against solution.py, in two steps:
1. encode() on fixed and random fields (every swizzle, base offsets, the largest values);
2. tile_descriptor() for every swizzle, slices k = 0..3 and three tile addresses.
A wrong descriptor is decoded (judge.hw.wgmma.decode) and the first differing field is named with its
bits. For tile_descriptor the judge also says what wgmma would do with it: it follows the
descriptor the way the hardware does (judge.hw.wgmma.operand_address) and names the first element of
the slice it would read from a byte where the tile does not hold it.
"""
import random

from judge.hw import wgmma
from judge.grading.grade import Result, Verdict, learner_error

SWIZZLES = ("none", "32B", "64B", "128B")
FIXED = [
    (0x400, 16, 1024, "128B", 0), (0x400, 16, 512, "64B", 0), (0x400, 16, 256, "32B", 0),
    (0x400, 128, 1024, "none", 0), (0, 0, 0, "none", 0), (0x3FFF0, 0x3FFF0, 0x3FFF0, "32B", 7),
    (0x8420, 16, 1024, "128B", 0), (0x1230, 4096, 2048, "64B", 3),
]
STARTS = (0x400, 0x2000, 0x8400)


def _differs(got, want) -> list[str]:
    """The fields (with their bits) in which two descriptors differ, stray bits included."""
    if not isinstance(got, int) or isinstance(got, bool):
        return [f"a descriptor is an int, got {type(got).__name__} {got!r}"]
    if not 0 <= got < 1 << 64:
        return [f"{got:#x} does not fit in 64 bits"]
    out = []
    for name, lo, width, shift in wgmma.FIELDS:
        mask = (1 << width) - 1
        g, w = (got >> lo) & mask, (want >> lo) & mask
        if g != w:
            unit = f" ({g << shift} bytes)" if shift else ""
            wunit = f" ({w << shift} bytes)" if shift else ""
            meaning = {"start": "start address >> 4", "lbo": "leading byte offset >> 4",
                       "sbo": "stride byte offset >> 4", "base_offset": "base offset",
                       "swizzle": "layout (0 none, 1 = 128B, 2 = 64B, 3 = 32B)"}[name]
            out.append(f"field {meaning}, bits {lo}-{lo + width - 1}: you have {g}{unit}, expected {w}{wunit}")
    used = sum(((1 << w) - 1) << lo for _, lo, w, _ in wgmma.FIELDS)
    stray = got & ~used & ((1 << 64) - 1)
    if stray:
        bits = [b for b in range(64) if stray >> b & 1]
        out.append(f"bits {bits} are set, but they belong to no field and must be 0")
    return out


def _consequence(got, start, swizzle, k) -> str | None:
    """What wgmma would read with the learner's descriptor: the first misplaced element of the slice."""
    try:
        wgmma.decode(got)
        for row in range(64):
            for kk in range(16):
                have = wgmma.operand_address(got, row, kk)
                want = start + wgmma.kmajor_offset(row, 16 * k + kk, swizzle, k_elems=64)
                if have != want:
                    return (f"with it, wgmma would read A[{row}][{16 * k + kk}] from shared byte {have:#x}; "
                            f"the tile holds it at {want:#x}")
    except (ValueError, TypeError, OverflowError):
        return None
    return None


def check(sub) -> Result:
    sub.progress("importing descriptor.py")
    mod = sub.learner_module("encode", "tile_descriptor")
    ref = sub.exercise.reference()

    rng = random.Random(90)
    cases = FIXED + [(16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14),
                      rng.choice(SWIZZLES), rng.randrange(8)) for _ in range(40)]
    sub.progress(f"encode: {len(cases)} field sets")
    for start, lbo, sbo, sw, base in cases:
        call = f"encode(start={start:#x}, lbo={lbo}, sbo={sbo}, swizzle={sw!r}, base_offset={base})"
        try:
            got = mod.encode(start, lbo, sbo, sw, base)
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, call))
        want = ref.encode(start, lbo, sbo, sw, base)
        if got != want:
            diffs = _differs(got, want)
            return Result(Verdict.WRONG, f"{call}: {diffs[0]}",
                          details=[f"got {got:#018x}" if isinstance(got, int) else f"got {got!r}",
                                   f"expected {want:#018x}", *diffs[1:]])

    sub.progress("tile_descriptor: 4 swizzles x 4 slices x 3 addresses")
    for start in STARTS:
        for sw in SWIZZLES:
            for k in range(4):
                call = f"tile_descriptor(start={start:#x}, swizzle={sw!r}, k={k})"
                try:
                    got = mod.tile_descriptor(start, sw, k)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, call))
                want = ref.tile_descriptor(start, sw, k)
                if got != want:
                    diffs = _differs(got, want)
                    details = [f"got {got:#018x}" if isinstance(got, int) else f"got {got!r}",
                               f"expected {want:#018x}", *diffs[1:]]
                    why = _consequence(got, start, sw, k)
                    if why:
                        details.insert(0, why)
                    elif isinstance(got, int) and sw != "none" and all("leading" in d for d in diffs):
                        details.insert(0, "the hardware ignores this field for a swizzled K-major tile, "
                                          "but the exercise fixes it to 16 bytes (field value 1), as CUTLASS does")
                    return Result(Verdict.WRONG, f"{call}: {diffs[0]}", details=details)
    return Result(Verdict.PASS, f"encode right on {len(cases)} field sets; tile_descriptor right for every "
                  "swizzle, slice and address",
                  checked=[f"encode: {len(FIXED)} fixed + 40 random field sets, bit-exact",
                           "tile_descriptor: none/32B/64B/128B x k = 0..3 x 3 addresses, bit-exact"])
