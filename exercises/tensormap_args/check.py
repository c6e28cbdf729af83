"""Grader of tensormap_args: python practice/judge.py check tensormap_args

Legal tensors and tiles must give the exact innermost-first argument lists (the expected
values come from solution.py, plus the seed's 1024x2048 int32 case written out by hand);
illegal ones must raise ValueError whose message names the broken rule and no other rule
(a message listing every rule names none of them). Each illegal case breaks exactly one rule,
so the order in which a solution checks them does not matter.
"""

from judge.grading.grade import Result, Verdict, learner_error

F32, F16, I8 = 4, 2, 1

# (name, shape, dtype_bytes, strides_bytes, box, swizzle)
LEGAL = [
    ("seed 1024x2048 int32, 16x32 box", (1024, 2048), 4, None, (16, 32), "none"),
    ("8x32 float32 tile of an 8x32 tensor", (8, 32), F32, None, (8, 32), "none"),
    ("4x100x64 fp16, 1x32x64 box, 128B swizzle", (4, 100, 64), F16, None, (1, 32, 64), "128B"),
    ("64x48 column slice of a 64x256 float32", (64, 48), F32, (1024, 4), (16, 16), "none"),
    ("box larger than the 5x12 tensor (OOB fill)", (5, 12), F32, None, (8, 16), "none"),
    ("rank 5, 32B swizzle at its limit", (2, 3, 4, 5, 8), F32, None, (1, 1, 2, 5, 8), "32B"),
    ("rank 1, 1000 floats, 256 box", (1000,), F32, None, (256,), "none"),
    ("int8 100x160, 64x64 box, 64B swizzle", (100, 160), I8, None, (64, 64), "64B"),
    ("bf16 128x64, 64x64 box, 128B swizzle at its limit", (128, 64), F16, None, (64, 64), "128B"),
    ("float32 8x64 box = 256 B inner, no swizzle", (64, 64), F32, None, (8, 64), "none"),
]
SEED_EXPECTED = dict(dims=[2048, 1024], global_strides=[8192], box=[32, 16], elem_strides=[1, 1])

# (name, shape, dtype_bytes, strides_bytes, box, swizzle, rule the message must name)
ILLEGAL = [
    ("rank 6", (2, 2, 2, 2, 2, 8), F32, None, (1, 1, 1, 1, 1, 8), "none", "tensorRank"),
    ("rank 0", (), F32, None, (), "none", "tensorRank"),
    ("every other column (innermost stride 8 B)", (64, 64), F32, (512, 8), (8, 8), "none", "innermost stride"),
    ("10x10 float32: 40 B row stride", (10, 10), F32, None, (8, 8), "none", "globalStrides"),
    ("outermost stride 88 B of a 3-D fp16 tensor", (4, 5, 8), F16, (88, 16, 2), (1, 1, 8), "none", "globalStrides"),
    ("box dim 300", (1024, 1024), F32, None, (300, 16), "none", "boxDim"),
    ("box dim 0", (1024, 1024), F32, None, (0, 16), "none", "boxDim"),
    ("272-element inner box of int8 (272 B, a multiple of 16)", (4, 512), I8, None, (1, 272), "none", "boxDim"),
    ("5 floats inner box = 20 B", (64, 64), F32, None, (8, 5), "none", "inner box bytes"),
    ("24 int8 inner box = 24 B", (64, 64), I8, None, (8, 24), "none", "inner box bytes"),
    ("256 B inner box under 128B swizzle", (64, 64), F32, None, (8, 64), "128B", "swizzle"),
    ("64 B inner box under 32B swizzle", (64, 64), F16, None, (8, 32), "32B", "swizzle"),
]

KEYS = ("dims", "global_strides", "box", "elem_strides")
RULES = ("tensorRank", "innermost stride", "globalStrides", "boxDim", "inner box bytes", "swizzle")
# the swizzle limit is a limit on the inner box bytes: its message may say so
MAY_ALSO_NAME = {"swizzle": {"inner box bytes"}}


def _rules_named(message: str) -> list[str]:
    low = message.lower()
    return [r for r in RULES if r.lower() in low]


def _names_only(rule: str, message: str) -> str | None:
    """None when the message names `rule` and no other rule; else what is wrong with it."""
    named = _rules_named(message)
    if rule not in named:
        return f"does not name the broken rule: expected the message to contain '{rule}'"
    others = [r for r in named if r != rule and r not in MAY_ALSO_NAME.get(rule, ())]
    if others:
        return (f"names other rules too ({', '.join(repr(o) for o in others)}): the message must name the "
                f"one rule this tensor or box breaks, '{rule}', and no other")
    return None



def _normalize(got):
    if not isinstance(got, dict) or any(k not in got for k in KEYS):
        return None
    try:
        return {k: [int(v) for v in got[k]] for k in KEYS}
    except (TypeError, ValueError):
        return None


def _hint(key, got, want):
    if list(reversed(got)) == want and got != want:
        return " (reversed: the descriptor lists dims innermost-first)"
    if key == "global_strides" and len(got) == len(want) + 1:
        return " (the innermost stride is implied and left out: rank - 1 entries)"
    return ""


def check(sub) -> Result:
    sub.progress("importing tensormap.py")
    encode = sub.learner_module("encode_args").encode_args
    ref = sub.exercise.reference().encode_args
    assert ref(*LEGAL[0][1:]) == SEED_EXPECTED      # the reference agrees with the hand-written seed case

    for i, (name, shape, nbytes, strides, box, swz) in enumerate(LEGAL):
        sub.progress(f"legal case {i + 1}/{len(LEGAL)}: {name}")
        call = f"encode_args({shape}, {nbytes}, {strides}, {box}, {swz!r})"
        try:
            got = encode(shape, nbytes, strides, box, swz)
        except ValueError as e:
            return Result(Verdict.WRONG, f"case '{name}': {call} raised ValueError('{e}') "
                          f"but the driver accepts this tensor and box")
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, f"case '{name}': " + learner_error(e, call))
        want = ref(shape, nbytes, strides, box, swz)
        norm = _normalize(got)
        if norm is None:
            return Result(Verdict.WRONG, f"case '{name}': {call} returned {got!r}; expected a dict "
                          f"with lists {', '.join(KEYS)}: {want}")
        for k in KEYS:
            if norm[k] != want[k]:
                return Result(Verdict.WRONG, f"case '{name}': {k} got {norm[k]} expected {want[k]}"
                              + _hint(k, norm[k], want[k]), details=[f"call: {call}"])

    for i, (name, shape, nbytes, strides, box, swz, rule) in enumerate(ILLEGAL):
        sub.progress(f"illegal case {i + 1}/{len(ILLEGAL)}: {name}")
        call = f"encode_args({shape}, {nbytes}, {strides}, {box}, {swz!r})"
        try:
            got = encode(shape, nbytes, strides, box, swz)
        except ValueError as e:
            why = _names_only(rule, str(e))
            if why:
                return Result(Verdict.WRONG, f"case '{name}': ValueError('{e}') {why}",
                              details=[f"call: {call}"])
            continue
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, f"case '{name}': " + learner_error(e, call)
                          + f"; expected ValueError naming '{rule}'")
        return Result(Verdict.WRONG, f"case '{name}': {call} returned {got!r} but breaks the "
                      f"'{rule}' rule: cuTensorMapEncodeTiled would refuse it; raise ValueError")

    return Result(Verdict.PASS, f"{len(LEGAL)} legal descriptors right, {len(ILLEGAL)} illegal ones refused "
                  f"with the one broken rule named",
                  checked=[f"{len(LEGAL)} legal tensors/tiles (ranks 1-5, strided, swizzled, OOB box)",
                           f"{len(ILLEGAL)} illegal ones, one broken rule each"])
