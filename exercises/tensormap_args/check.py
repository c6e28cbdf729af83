"""Grader of tensormap_args: python practice/judge.py check tensormap_args

encode_args is called directly (judge.grading.cpu_flow) on the statement's cases, then on tensors and
boxes drawn at random each run (ranks 0 to 6, every element size, row-major, padded and strided
layouts, boxes inside and past the tensor, every swizzle). The reference is the statement's table of
rules, each checked on its own (the same rules judge.hw.tma validates a tensor map with; a test
checks that they agree). Legal tensors and tiles must give the exact innermost-first lists (the
seed's 1024x2048 int32 case is also written out by hand). For an illegal one the learner must raise
ValueError whose message names a rule the call breaks and no rule it does not break (a message
listing every rule names none of them); where several rules are broken, any one of them will do.
"""
from __future__ import annotations

from hypothesis import strategies as st

from judge.grading import cpu_flow as flow

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
SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}


# ------------------------------------------------------------------ the reference (the statement's table)
def row_major(shape, dtype_bytes):
    strides, step = [], dtype_bytes
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return strides


def broken_rules(shape, dtype_bytes, strides_bytes, box, swizzle="none"):
    """Every rule of the table this call breaks, each checked on its own."""
    rank = len(shape)
    if not 1 <= rank <= 5:
        out = ["tensorRank"]
        if rank == 0:
            return out
    else:
        out = []
    strides = row_major(shape, dtype_bytes) if strides_bytes is None else list(strides_bytes)
    if strides[-1] != dtype_bytes:
        out.append("innermost stride")
    if any(s % 16 for s in strides[:-1]):
        out.append("globalStrides")
    if any(not 1 <= b <= 256 for b in box):
        out.append("boxDim")
    inner = box[-1] * dtype_bytes
    if inner % 16:
        out.append("inner box bytes")
    if SPAN[swizzle] is not None and inner > SPAN[swizzle]:
        out.append("swizzle")
    return out


def encode_args(shape, dtype_bytes, strides_bytes, box, swizzle="none"):
    broken = broken_rules(shape, dtype_bytes, strides_bytes, box, swizzle)
    if broken:
        e = ValueError(f"{broken[0]}: cuTensorMapEncodeTiled refuses this map (broken: {', '.join(broken)})")
        e.rules = broken
        raise e
    strides = row_major(shape, dtype_bytes) if strides_bytes is None else list(strides_bytes)
    return dict(dims=list(reversed(shape)), global_strides=list(reversed(strides[:-1])),
                box=list(reversed(box)), elem_strides=[1] * len(shape))


# ------------------------------------------------------------------ judging a refusal, explaining
def _rules_named(message: str) -> list[str]:
    low = message.lower()
    return [r for r in RULES if r.lower() in low]


def refusal(call, learner_exc, reference_exc):
    """None when the message names a broken rule and no rule this call does not break."""
    broken = reference_exc.rules
    named = _rules_named(str(learner_exc))
    if not any(r in named for r in broken):
        return ("does not name the broken rule: expected the message to contain "
                + " or ".join(repr(r) for r in broken))
    allowed = set(broken) | {m for r in broken for m in MAY_ALSO_NAME.get(r, ())}
    others = [r for r in named if r not in allowed]
    if others:
        return (f"names other rules too ({', '.join(repr(o) for o in others)}), which this call does not break: "
                f"the message must name the rule the tensor or box breaks ({', '.join(repr(r) for r in broken)}), "
                f"and no other")
    return None


def explain(call, got, want):
    if isinstance(want, BaseException):
        return [f"cuTensorMapEncodeTiled would refuse it: rule {', '.join(repr(r) for r in want.rules)} is broken; "
                f"raise ValueError naming it"]
    lines = []
    shape, box = call.args[0], call.args[3]
    if isinstance(got, BaseException):
        lines.append("the driver accepts this tensor and box")
        if any(b > n for b, n in zip(box, shape)):
            lines.append("a box larger than the tensor is legal: a load fills the part outside (OOB) with zeros, "
                         "a store drops it")
    if isinstance(got, dict):
        for k in KEYS:
            g = got.get(k)
            try:
                g = [int(v) for v in g]
            except (TypeError, ValueError):
                continue
            if g != want[k]:
                if list(reversed(g)) == want[k]:
                    lines.append(f"{k} is reversed: the descriptor lists dims innermost-first")
                elif k == "global_strides" and len(g) == len(want[k]) + 1:
                    lines.append("the innermost stride is implied and left out: rank - 1 entries")
                break
    return lines


# ------------------------------------------------------------------ inputs
@st.composite
def tensors(draw):
    rank = draw(st.sampled_from([0, 1, 2, 2, 3, 3, 4, 5, 6]))
    eb = draw(st.sampled_from([1, 2, 4, 8]))
    aligned = st.integers(1, 16).map(lambda k: k * 16 // eb)          # whole 16-byte rows, most of the time
    shape = tuple(draw(st.one_of(aligned, aligned, st.integers(1, 300))) for _ in range(rank))
    box = tuple(draw(st.one_of(st.integers(1, 256), st.integers(0, 300), st.just(n), aligned, aligned)) for n in shape)
    layout = draw(st.sampled_from(["row-major", "row-major", "padded", "strided", "slice", "slice", "outer", "outer"]))
    strides = None
    if rank and layout != "row-major":
        inner = eb * (2 if layout == "strided" else 1)
        strides, step = [inner], shape[-1] * inner
        for n in reversed(shape[:-1]):
            # padded: the rows only; slice: every dimension padded on its own (a slice of a larger tensor);
            # outer: rows padded to 16 bytes, an outer dimension not (the 16-byte rule holds for every stride)
            if layout == "outer":
                pad = draw(st.sampled_from([0, 16, 48] if len(strides) == 1 else [8, 24]))
            else:
                pad = draw(st.sampled_from([0, 16, 16, 48, 8, 24])) if layout == "slice" or len(strides) == 1 else 0
            step += 0 if layout == "strided" else pad
            strides.insert(0, step)
            step *= n
        strides = tuple(strides)
    return (shape, eb, strides, box, draw(st.sampled_from(["none", "none", "32B", "64B", "128B"])))


def check(sub):
    fn = flow.Function("encode_args", reference=encode_args, args=tensors(), raises=ValueError, refusal=refusal,
                       edges=[flow.Edge(c[1:], c[0]) for c in LEGAL] + [flow.Edge(c[1:6], c[0]) for c in ILLEGAL],
                       explain=explain)
    return flow.run(sub, [fn], checked=[f"{len(LEGAL)} legal tensors/tiles (ranks 1-5, strided, swizzled, OOB box)",
                                        f"{len(ILLEGAL)} illegal ones, one broken rule each",
                                        "tensors and boxes drawn at random: legal ones exact, illegal ones "
                                        "refused naming a rule they break"])
