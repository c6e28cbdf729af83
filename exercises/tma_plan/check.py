"""Grader of tma_plan: python practice/judge.py check tma_plan

Each case is a tile of a global tensor. The reference planner (judge/hw/tma_plan.py) decides whether a
legal descriptor exists. Where it refuses, the learner must raise ValueError naming the same rule.
Where it plans, the learner's plan must
  1. pass judge.hw.tma's own validation (the rules a tensor map is checked against before the driver:
     rank, strides, box 1..256, inner box bytes, swizzle span),
  2. deliver exactly the tile, each byte once, in the promised order (judge.hw.tma_plan.simulate: a CPU
     model of the copies, against judge.hw.tma_plan.tile_bytes: row-major, or atom-major with a swizzle),
  3. be as small as the rules allow: no more dimensions and no more copies than the reference.
A plan written differently but equal on these three counts passes.
"""

from judge.hw import tma, tma_plan
from judge.grading.grade import Result, Verdict, learner_error

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
]
KEYS = ("dtype", "dims", "strides", "box", "copies")


def _call(case):
    _, tile, dtype, shape, strides, swz = case
    return f"plan({tile}, {dtype!r}, {shape}, {strides}, {swz!r})"


def _as_plan(got, swizzle):
    """The learner's dict as a judge.hw.tma_plan.Plan, or an error message."""
    if not isinstance(got, dict) or any(k not in got for k in KEYS):
        return f"expected a dict with keys {', '.join(KEYS)}, got {got!r}"
    try:
        dims, strides, box, copies = ([int(v) for v in got[k]] for k in ("dims", "strides", "box", "copies"))
    except (TypeError, ValueError):
        return f"dims, strides, box and copies must be lists of integers, got {got!r}"
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
                f"dimension must be fully boxed and its neighbour must start right after it")
    if missing:
        return f"the copies miss {len(missing)} bytes of the tile (first: tensor byte {missing[0]})"
    return f"the copies deliver {got.size} bytes for a tile of {want.size}: some bytes arrive twice"


def check(sub) -> Result:
    sub.progress("importing tma_plan.py")
    learner = sub.learner_module("plan").plan
    for i, case in enumerate(CASES):
        name, tile, dtype, shape, strides, swz = case
        sub.progress(f"case {i + 1}/{len(CASES)}: {name}")
        ref = tma_plan.plan(tile, dtype, shape, strides, swz)
        call = _call(case)
        try:
            got = learner(tile, dtype, shape, strides, swz)
        except ValueError as e:
            if not ref:
                if ref.rule.lower() in str(e).lower():
                    continue
                return Result(Verdict.WRONG, f"case '{name}': ValueError('{e}') does not name the broken rule: "
                              f"expected the message to contain '{ref.rule}' ({ref.message})")
            return Result(Verdict.WRONG, f"case '{name}': {call} raised ValueError('{e}'), but a legal plan "
                          f"exists: {ref}", details=list(ref.steps))
        except Exception as e:  # noqa: BLE001 - any learner error is reported
            return Result(Verdict.WRONG, f"case '{name}': " + learner_error(e, call))
        if not ref:
            return Result(Verdict.WRONG, f"case '{name}': {call} returned {got!r}, but no legal descriptor "
                          f"exists (rule '{ref.rule}': {ref.message}); raise ValueError naming '{ref.rule}'")
        p = _as_plan(got, swz)
        if isinstance(p, str):
            return Result(Verdict.WRONG, f"case '{name}': {call}: {p}")
        try:
            p.spec().validate()
        except tma.TensorMapError as e:
            return Result(Verdict.WRONG, f"case '{name}': the planned map breaks a hardware rule: {e}",
                          details=[f"your plan: {p}", f"a legal one: {ref}"])
        problem = _compare_bytes(p, tma_plan.tile_bytes(tile, dtype, shape, strides, swz))
        if problem:
            return Result(Verdict.WRONG, f"case '{name}': {problem}", details=[f"your plan: {p}", f"a legal one: {ref}"])
        if p.rank > ref.rank:
            return Result(Verdict.WRONG, f"case '{name}': rank {p.rank} where {ref.rank} suffices: merge each fully "
                          f"boxed dimension with the next one when that one starts right after it",
                          details=[f"your plan: {p}", f"a legal one: {ref}", *ref.steps])
        if p.n_copies > ref.n_copies:
            return Result(Verdict.WRONG, f"case '{name}': {p.n_copies} copies where {ref.n_copies} suffice: move a "
                          f"long innermost row as a wider element type before splitting it",
                          details=[f"your plan: {p}", f"a legal one: {ref}", *ref.steps])
    planned = sum(1 for c in CASES if tma_plan.plan(*c[1:]))
    return Result(Verdict.PASS, f"{planned} tiles planned legally and exactly, {len(CASES) - planned} refused "
                  f"with the rule named",
                  checked=[f"{planned} plans: judge.hw.tma's rules, every byte of the tile once and in order, "
                           f"minimal rank and copies", f"{len(CASES) - planned} refusals naming the rule"])
