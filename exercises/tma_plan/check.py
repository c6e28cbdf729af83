"""Grader of tma_plan: python practice/judge.py check tma_plan

plan() is called directly (judge.grading.cpu_flow) on the statement's cases, then on tiles drawn at
random: 1 to 6 dimensions, every element type, tiles that cover their tensor or part of it, rows
padded or strided, every swizzle. The reference planner (judge/hw/tma_plan.py) decides whether a
legal descriptor exists. Where it refuses, the learner must raise ValueError naming the same rule.
Where it plans, the learner's plan must
  1. pass judge.hw.tma's own validation (the rules a tensor map is checked against before the driver:
     rank, strides, box 1..256, inner box bytes, swizzle span),
  2. deliver exactly the tile, each byte once, in the promised order (judge.hw.tma_plan.simulate: a CPU
     model of the copies, against judge.hw.tma_plan.tile_bytes: row-major, or atom-major with a swizzle;
     copy after copy where a box is split into copies),
  3. be as small as the rules allow: no more dimensions and no more copies than the reference.
A plan written differently but equal on these three counts passes.
"""
import math

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.hw import tma, tma_plan

# (name, tile, dtype, shape, strides in elements or None, swizzle): NumPy order, outermost first
CASES = [
    ("the page's 8x256 float16 tile, 128B swizzle", (8, 256), "float16", (8, 256), None, "128B"),
    ("8x256 float16 tile of a 64x1024 tensor, 128B swizzle", (8, 256), "float16", (64, 1024), None, "128B"),
    ("16x96 float16 tile, 64B swizzle (3 atoms)", (16, 96), "float16", (64, 96), None, "64B"),
    ("16x48 float16 tile, 128B swizzle, a row within one atom", (16, 48), "float16", (64, 48), None, "128B"),
    ("64x64 float32 tile of a 1024x64 tensor (merging would exceed 256)", (64, 64), "float32", (1024, 64), None, "none"),
    ("4x64 float32 rows of a 100x64 tensor (merge: 256 contiguous floats)", (4, 64), "float32", (100, 64), None, "none"),
    ("2x8x32 float16 tile of a 10x8x32 tensor (merge twice, then move as uint32)", (2, 8, 32), "float16", (10, 8, 32), None, "none"),
    ("4x512 uint8 tensor, whole (one dimension of uint64)", (4, 512), "uint8", (4, 512), None, "none"),
    ("512x8 float32 tile (512 rows: two copies)", (512, 8), "float32", (4096, 100), None, "none"),
    ("16x64 float32 tile of rows padded to 80 floats", (16, 64), "float32", (64, 64), (80, 1), "none"),
    ("4x32 float32 tile, half of each 64-float row", (4, 32), "float32", (100, 64), None, "none"),
    ("6-D float32 tile that merges to rank 5", (4, 4, 4, 4, 4, 8), "float32", (4, 5, 6, 7, 9, 8), None, "none"),
    ("1x64x64 float32 tile (a unit dimension)", (1, 64, 64), "float32", (1, 128, 64), None, "none"),
    ("every other float32 column (innermost stride 2)", (64, 64), "float32", (64, 64), (128, 2), "none"),
    ("6-D float32 tile with no contiguous neighbours", (2, 2, 2, 2, 2, 4), "float32", (4, 4, 4, 4, 4, 8), None, "none"),
    ("8x96 float16 tile, 128B swizzle (192-byte rows: 1.5 atoms)", (8, 96), "float16", (8, 96), None, "128B"),
    ("8x8 float32 tile of a 10x10 tensor (40-byte rows)", (8, 8), "float32", (10, 10), None, "none"),
    ("8x5 float32 tile (20-byte inner box)", (8, 5), "float32", (64, 64), None, "none"),
    # a byte stride that breaks the 16-byte rule before merging and is gone after it: plan, do not refuse
    ("a whole 4x6 float32 tensor: its 24-byte row stride disappears when the rows merge",
     (4, 6), "float32", (4, 6), None, "none"),
    ("a whole 3x10x6 float16 tensor: 12- and 120-byte strides merge away", (3, 10, 6), "float16", (3, 10, 6), None, "none"),
    # a box above 256 whose size the smallest count of copies must divide
    ("261 float32 rows: 3 copies of 87 (2 copies do not divide 261)", (261, 8), "float32", (4096, 100), None, "none"),
    ("257 float32 rows, a prime: 257 copies of one row", (257, 8), "float32", (300, 100), None, "none"),
]
KEYS = ("dtype", "dims", "strides", "box", "copies")
DTYPES = sorted(tma.DTYPES)
EXTENTS = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 100, 128, 192, 256, 257, 259, 261, 263, 300, 387, 512]
MAX_TILE_BYTES = 1 << 15          # keeps the CPU model of the copies quick


def reference(tile, dtype, shape, strides=None, swizzle="none"):
    """judge.hw.tma_plan.plan, its refusal raised as ValueError('<rule>: ...') as the statement asks."""
    p = tma_plan.plan(tile, dtype, shape, strides, swizzle)
    if not p:
        raise ValueError(f"{p.rule}: {p.message}")
    return p


@st.composite
def tiles(draw):
    """(tile, dtype, shape, strides, swizzle), NumPy order, the tile inside the tensor."""
    rank = draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(DTYPES))
    eb = tma.DTYPES[dtype][1]
    swizzle = draw(st.sampled_from(["none", "none", "32B", "64B", "128B"]))
    shape = [draw(st.sampled_from(EXTENTS)) for _ in range(rank)]
    tile = [draw(st.one_of(st.just(n), st.integers(1, n))) for n in shape]
    while math.prod(tile) * eb > MAX_TILE_BYTES:
        i = max(range(rank), key=lambda k: tile[k])
        tile[i] = max(1, tile[i] // 2)
    layout = draw(st.sampled_from(["row-major", "row-major", "padded", "strided"]))
    strides = None
    if layout != "row-major":
        inner = 2 if layout == "strided" else 1
        row = shape[-1] * inner + (draw(st.integers(1, 16)) if layout == "padded" else 0)
        strides, acc = [inner], row
        for n in reversed(shape[:-1]):
            strides.insert(0, acc)
            acc *= n
        strides = tuple(strides)
    return (tuple(tile), dtype, tuple(shape), strides, swizzle)


def _as_plan(got, swizzle):
    """The learner's dict as a judge.hw.tma_plan.Plan, or an error message."""
    if not isinstance(got, dict) or any(k not in got for k in KEYS):
        return f"expected a dict with keys {', '.join(KEYS)}, got {checks.show(got)}"
    try:
        dims, strides, box, copies = ([int(v) for v in got[k]] for k in ("dims", "strides", "box", "copies"))
    except (TypeError, ValueError):
        return f"dims, strides, box and copies must be lists of integers, got {checks.show(got)}"
    if got["dtype"] not in tma.DTYPES:
        return f"dtype {got['dtype']!r} is not a TMA element type ({', '.join(tma.DTYPES)})"
    if not (len(dims) == len(box) == len(copies) == len(strides) + 1):
        return (f"dims, box and copies need one entry per dimension and strides one less "
                f"(got {len(dims)}, {len(box)}, {len(copies)} and {len(strides)})")
    if any(c < 1 for c in copies):
        return f"copies must be at least 1 along every dimension, got {copies}"
    return tma_plan.Plan(str(got["dtype"]), tuple(dims), tuple(strides), tuple(box), swizzle, tuple(copies))


def _compare_bytes(p, want):
    """None if the plan's copies deliver `want` exactly; else what is wrong, in words."""
    got = tma_plan.simulate(p)
    if got.size == want.size and (got == want).all():
        return None
    gs, ws = set(got.tolist()), set(want.tolist())
    if gs == ws and got.size == want.size:
        first = int((got != want).argmax())
        return (f"the right bytes in the wrong order: shared-memory byte {first} holds tensor byte {int(got[first])}, "
                f"expected {int(want[first])} (with a swizzle the tile lands atom by atom: every row of atom 0, "
                f"then atom 1, ...; without, row-major)")
    extra, missing = sorted(gs - ws), sorted(ws - gs)
    if extra:
        return (f"the copies read {len(extra)} bytes outside the tile (first: tensor byte {extra[0]}): a merged "
                f"dimension must be fully boxed and its neighbour must start right after it, and a box split "
                f"into copies must be split into equal parts that divide it")
    if missing:
        return (f"the copies miss {len(missing)} bytes of the tile (first: tensor byte {missing[0]}): the copies "
                f"along a dimension must cover its whole box (a count that divides it)")
    return f"the copies deliver {got.size} bytes for a tile of {want.size}: some bytes arrive twice"


def _promised_order(ref, tile, dtype, shape, strides, swz):
    """The tensor bytes in the order shared memory must hold them: the tile row-major (atom by atom with
    a swizzle), except where a box is split into copies: then copy after copy, the innermost
    dimension's copies first, as the statement says (a box split along one dimension while an
    outer one spans several rows cannot land row-major)."""
    order = tma_plan.simulate(ref)
    want = tma_plan.tile_bytes(tile, dtype, shape, strides, swz)
    if order.size != want.size or set(order.tolist()) != set(want.tolist()):
        raise checks.JudgeError(f"the reference plan {ref} does not move exactly the tile")
    return want if ref.n_copies == 1 else order


def validate(call, got):
    """The three counts of the module docstring (the reference plan exists here: refusals are the flow's)."""
    tile, dtype, shape, strides, swz = (list(call.args) + [None, "none"])[:5]
    ref = tma_plan.plan(tile, dtype, shape, strides, swz)
    p = _as_plan(got, swz)
    if isinstance(p, str):
        return p
    try:
        p.spec().validate()
    except tma.TensorMapError as e:
        return f"the planned map breaks a hardware rule (rule '{e.rule}'): {e}"
    problem = _compare_bytes(p, _promised_order(ref, tile, dtype, shape, strides, swz))
    if problem:
        return problem
    if p.rank > ref.rank:
        return (f"rank {p.rank} where {ref.rank} suffices: merge each fully boxed dimension with the next one "
                f"when that one starts right after it")
    if p.n_copies > ref.n_copies:
        return (f"{p.n_copies} copies where {ref.n_copies} suffice: move a long innermost row as a wider "
                f"element type before splitting it, and split a box into the smallest count that divides it")
    return None


def explain(call, got, want):
    if isinstance(want, BaseException):        # a refusal the learner did not make
        return [f"the rule: {tma.RULES.get(str(want).split(':')[0], '')}"]
    lines = [f"a legal plan: {want}", *want.steps]
    if isinstance(got, dict):
        p = _as_plan(got, want.swizzle)
        if not isinstance(p, str):
            lines.insert(0, f"your plan: {p}")
    return lines


def check(sub):
    fn = flow.Function("plan", reference=reference, raises=ValueError, must_name=True, args=tiles(), examples=120,
                       edges=[flow.Edge(c[1:], c[0]) for c in CASES],
                       validate=validate, compare=lambda got, want: None, explain=explain)
    return flow.run(sub, [fn], checked=["plans: judge.hw.tma's rules, every byte of the tile once and in order "
                                        "(judge.hw.tma_plan.simulate), minimal rank and copies",
                                        "refusals: ValueError naming the rule judge.hw.tma_plan refuses by"])
