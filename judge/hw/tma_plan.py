"""Plan a TMA descriptor for a tile, as a compiler does, instead of refusing what does not fit.

    from judge.hw import tma_plan
    p = tma_plan.plan((8, 256), "float16", (8, 256), swizzle="128B")
    p.rank, p.dims, p.box, p.strides     # 3, (64, 8, 4), (64, 8, 4), (512, 128)  (inner first)
    p.copies                             # 1: one cp.async.bulk.tensor.3d moves the whole tile
    p.steps                              # what the planner did, in words
    q = tma_plan.plan((4, 512), "uint8", (4, 512))   # merged to one dimension, moved as uint64
    q.dtype, q.dims, q.box                           # 'uint64', (256,), (256,)
    r = tma_plan.plan((2, 2, 2, 2, 2, 4), "float32", (4, 4, 4, 4, 4, 8))   # a Refusal: rule 'rank'
    r.rule, r.fallback

judge.hw.tma.tensor_map() checks ONE map against the hardware rules and refuses a tile that breaks
one (an inner box row wider than the swizzle span, a box dimension above 256, rank above 5).
A compiler lowering "copy this tile to shared memory" has more freedom: it chooses the map.
This module plans it in five steps, each one a rule of the hardware:

  1. contiguous  the innermost global stride must be one element (TMA walks rows of bytes);
                 otherwise refuse (rule 'contiguous').
  2. atoms       with a swizzle, a box row may be at most the swizzle span (32/64/128 bytes).
                 A wider tile row is cut into ATOMS of one span each: the inner dimension
                 becomes (atom, ...) and the atom index becomes a new OUTERMOST dimension
                 with a byte stride of one span. Shared memory then holds the tile atom by
                 atom (each atom a block of rows x span bytes, swizzled on its own): the
                 layout the tensor cores read. The 8x256 float16 tile under the 128-byte
                 swizzle becomes dims (64, 8, 4), one copy. A row that is not a whole number
                 of atoms is refused (rule 'swizzle_span').
  3. merge       a dimension that the tile covers entirely (box == global extent) and whose
                 next dimension starts right after it (stride[i+1] == stride[i] * dim[i]) is
                 merged with that next one: one dimension fewer, same bytes, same order. A
                 merge is made only if the merged box stays legal: at most 256 elements and,
                 for the innermost dimension under a swizzle, at most the span in bytes (else
                 a rank-1 row would merge its atoms back); or, for the innermost dimension
                 without swizzle, at most 256 after step 4.
  4. promote     an innermost box above 256 elements (no swizzle) is moved as a wider element
                 type: the smallest factor 2, 4 or 8 (at most 8-byte elements: uint16, uint32,
                 uint64) that brings it to 256 and divides both the box and the dimension. TMA
                 moves bits, so the bytes are the same. Any box dimension still above 256 is
                 split into several copies (the smallest count that divides it).
  5. check       rank above 5 is refused with a fallback (rule 'rank'); then the map goes through
                 judge.hw.tma's own validation (TensorMapSpec.validate: strides, box, swizzle span,
                 ...), so every rule is checked in one place and a broken one is refused by name.

All tuples of a Plan are INNERMOST FIRST (the order of the driver call and of the PTX
coordinates); the arguments of plan() are in NumPy order (outermost first), like the arrays.
`simulate(plan, ...)` is a CPU model of what the copies put in shared memory (byte offsets of
the global tensor, in shared-memory order before the swizzle): tests and the tma_plan exercise
use it to prove that a plan moves exactly the tile, each byte once, in the expected order.
Run on an H200: chapters/ch02_tma/run.py plan_probe() loads the page's 8x256 float16 tile with
the planned rank-3 map and compares every byte with this model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from judge.hw import tma

MAX_RANK = 5
MAX_BOX = 256
PROMOTE = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


@dataclass(frozen=True)
class Plan:
    """A legal tensor map for the tile plus how many copies to issue. INNERMOST FIRST."""
    dtype: str                     # the map's element type (promoted when step 4 widened it)
    dims: tuple[int, ...]          # global extent per dimension, elements of `dtype`
    strides: tuple[int, ...]       # byte strides of dims 1..rank-1
    box: tuple[int, ...]           # elements per box dimension
    swizzle: str
    copies: tuple[int, ...]        # copies along each dimension (1 = the box covers the tile's extent)
    steps: tuple[str, ...] = field(default=(), compare=False)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_strides(self) -> tuple[int, ...]:
        return (1,) * self.rank

    @property
    def elem_bytes(self) -> int:
        return tma.DTYPES[self.dtype][1]

    @property
    def box_bytes(self) -> int:
        """Bytes one copy delivers: the expect_tx count of one box."""
        return math.prod(self.box) * self.elem_bytes

    @property
    def n_copies(self) -> int:
        return math.prod(self.copies)

    @property
    def smem_bytes(self) -> int:
        return self.box_bytes * self.n_copies

    def spec(self, address: int = 0) -> tma.TensorMapSpec:
        """The judge.hw.tma spec of this map at a (16-byte aligned) global address."""
        return tma.TensorMapSpec(self.dtype, address, self.dims, self.strides, self.box,
                                 self.elem_strides, self.swizzle, kind="host")

    def coords(self) -> list[tuple[int, ...]]:
        """The box coordinates of every copy, inner first, for a tile at the origin; copy c lands
        at shared offset c * box_bytes. The innermost split dimension varies fastest."""
        ranges = [range(0, c * b, b) for c, b in zip(self.copies, self.box)]
        out = [()]
        for r in ranges:                               # inner first: build then reverse order
            out = [o + (x,) for x in r for o in out]
        return out

    def tensor_map(self, array) -> tma.TensorMap:
        """Encode the planned map over `array` (the tensor the plan was made for; GPU only).
        A promoted plan views the array's bytes as the wider unsigned type first."""
        view = array
        if tma.DTYPES[_dtype_name(array)][1] != self.elem_bytes:
            view = array.view(PROMOTE[self.elem_bytes]) if hasattr(array, "view") else array
        return tma.tensor_map(view, box=self.box, swizzle=self.swizzle, dims=self.dims,
                              strides=self.strides)

    def __str__(self):
        return (f"TMA plan: rank {self.rank}, {self.dtype}, dims {self.dims}, byte strides {self.strides}, "
                f"box {self.box} = {self.box_bytes} B, swizzle {self.swizzle}, "
                f"{self.n_copies} cop{'y' if self.n_copies == 1 else 'ies'} (inner first)")

    def as_dict(self) -> dict:
        return {"rank": self.rank, "dtype": self.dtype, "dims": list(self.dims), "strides": list(self.strides),
                "box": list(self.box), "swizzle": self.swizzle, "copies": self.n_copies}


@dataclass(frozen=True)
class Refusal:
    """No legal descriptor: `rule` names the hardware rule (a key of judge.hw.tma.RULES)."""
    rule: str
    message: str
    fallback: str = ""

    def __bool__(self):                # `if plan(...)` reads naturally: a refusal is falsy
        return False

    def __str__(self):
        return f"TMA plan refused (rule '{self.rule}'): {self.message}" + (
            f". Fallback: {self.fallback}" if self.fallback else "")

    def as_dict(self) -> dict:
        return {"refuse": self.rule, "message": self.message}


def _dtype_name(array) -> str:
    d = getattr(array, "dtype", None)
    return str(d).removeprefix("torch.") if d is not None else ""


def _contiguous_strides(shape) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.insert(0, acc)
        acc *= n
    return tuple(out)


def _widen(box: int, dim: int, eb: int) -> int | None:
    """The smallest factor f (1, 2, 4, 8; eb * f <= 8 bytes) that brings an innermost box of `box`
    elements of eb bytes to at most 256 elements, dividing both the box and the dimension."""
    f = 1
    while eb * f <= 8:
        if box % f == 0 and dim % f == 0 and box // f <= MAX_BOX:
            return f
        f *= 2
    return None


def plan(tile, dtype: str, shape, strides=None, swizzle: str = "none") -> Plan | Refusal:
    """Plan the copy of a tile at the origin of a global tensor into shared memory.

    tile, shape: extents in NumPy order (outermost first); strides: element strides in NumPy
    order (default: C-contiguous); swizzle: "none", "32B", "64B", "128B".
    Returns a Plan, or a Refusal naming the rule no legal plan can satisfy.
    """
    if swizzle not in tma.SWIZZLES:
        raise ValueError(f"swizzle={swizzle!r}: choose one of {', '.join(tma.SWIZZLES)}")
    tile, shape = tuple(int(t) for t in tile), tuple(int(s) for s in shape)
    strides = _contiguous_strides(shape) if strides is None else tuple(int(s) for s in strides)
    if not (len(tile) == len(shape) == len(strides)) or not shape:
        raise ValueError(f"tile {tile}, shape {shape} and strides {strides} need one entry per dimension")
    if any(not 1 <= t <= s for t, s in zip(tile, shape)):
        raise ValueError(f"tile {tile} must fit inside the tensor {shape}, each extent at least 1")
    if dtype not in tma.DTYPES:
        return Refusal("dtype", f"{dtype} has no TMA data type", "view the bytes as an unsigned type")
    eb = tma.DTYPES[dtype][1]
    steps = []

    # inner first from here on: [global extent, tile extent, element stride]
    g, b, st = list(reversed(shape)), list(reversed(tile)), list(reversed(strides))

    # 1. contiguous innermost dimension
    if st[0] != 1:
        return Refusal("contiguous", f"the innermost stride is {st[0]} elements, not 1",
                       "copy with per-thread loads, or make the innermost dimension contiguous")
    # Dimensions of extent 1 carry nothing.
    keep = [i for i in range(len(g)) if g[i] > 1 or i == 0]
    if len(keep) < len(g):
        steps.append(f"dropped {len(g) - len(keep)} dimension(s) of extent 1")
        g, b, st = [g[i] for i in keep], [b[i] for i in keep], [st[i] for i in keep]

    # 2. swizzle atoms
    span = tma.SWIZZLE_SPAN[swizzle]
    if span and b[0] * eb > span:
        atom = span // eb
        if b[0] % atom or g[0] % atom:
            return Refusal("swizzle_span", f"the tile row of {b[0] * eb} bytes (tensor row {g[0] * eb} bytes) "
                           f"is not a whole number of {span}-byte swizzle atoms",
                           "pick a tile width that is a multiple of the swizzle span")
        n_atoms, row_atoms = b[0] // atom, g[0] // atom
        steps.append(f"split the {b[0] * eb}-byte tile row into {n_atoms} atoms of {span} B "
                     f"(a new outermost dimension of byte stride {span})")
        g = [atom] + g[1:] + [row_atoms]
        b = [atom] + b[1:] + [n_atoms]
        st = [1] + st[1:] + [atom]

    # 3. merge fully boxed, contiguous neighbours (while the merged box stays legal)
    i = 0
    while i + 1 < len(g):
        merged_box, merged_dim = b[i] * b[i + 1], g[i] * g[i + 1]
        # under a swizzle the inner box may not outgrow the span again: that would undo step 2
        legal = (merged_box <= MAX_BOX and not (i == 0 and span and merged_box * eb > span)) or \
            (i == 0 and not span and _widen(merged_box, merged_dim, eb) is not None)
        if b[i] == g[i] and st[i + 1] == st[i] * g[i] and legal:
            steps.append(f"merged dims {i} and {i + 1} (inner first): {g[i]} x {g[i + 1]} -> {merged_dim}")
            g[i:i + 2], b[i:i + 2], st[i:i + 2] = [merged_dim], [merged_box], [st[i]]
        else:
            i += 1

    # 4. promote the element type for a long innermost box; split what is still too big
    out_dtype = dtype
    if b[0] > MAX_BOX and not span:
        f = _widen(b[0], g[0], eb)
        if f:
            out_dtype = PROMOTE[eb * f]
            steps.append(f"promoted {dtype} to {out_dtype}: the inner box {b[0]} -> {b[0] // f} elements")
            g[0], b[0] = g[0] // f, b[0] // f
    copies = []
    for d in range(len(b)):
        c = 1
        if b[d] > MAX_BOX:
            c = next(k for k in range(2, b[d] + 1) if b[d] % k == 0 and b[d] // k <= MAX_BOX)
            steps.append(f"box dim {d} of {b[d]} > {MAX_BOX}: {c} copies of {b[d] // c}")
            b[d] //= c
        copies.append(c)

    # 5. rank, then every hardware rule through judge.hw.tma
    if len(g) > MAX_RANK:
        return Refusal("rank", f"the tile needs {len(g)} dimensions after merging; TMA takes at most "
                       f"{MAX_RANK}", "issue one map per slice of the outer dimensions, or copy with threads")
    byte_strides = tuple(s * eb for s in st[1:])
    p = Plan(out_dtype, tuple(g), byte_strides, tuple(b), swizzle, tuple(copies), tuple(steps))
    try:
        p.spec().validate()
    except tma.TensorMapError as e:
        return Refusal(e.rule, e.problem, tma.RULES[e.rule])
    return p


# ----------------------------------------------------------------------------- CPU model
def simulate(p: Plan) -> np.ndarray:
    """Byte offsets (from the tensor's start) of every byte the plan's copies deliver, in the
    order they land in shared memory before the swizzle: copy after copy (coords() order), each
    box innermost dimension fastest. A correct plan delivers each byte of the tile exactly once."""
    eb = p.elem_bytes
    stride = (eb,) + tuple(p.strides)
    grids = np.meshgrid(*[np.arange(n) for n in reversed(p.box)], indexing="ij")   # outer first
    within = sum(gr * s for gr, s in zip(grids, reversed(stride))).reshape(-1)
    out = []
    for c in p.coords():
        base = sum(x * s for x, s in zip(c, stride))
        out.append((base + within)[:, None] + np.arange(eb)[None, :])
    return np.concatenate(out).reshape(-1)


def tile_bytes(tile, dtype: str, shape, strides=None, swizzle: str = "none") -> np.ndarray:
    """The byte offsets a copy of `tile` must deliver, in the order the planner promises:
    row-major over the tile (NumPy order) without swizzle; with a swizzle and a row wider than
    the span, atom-major: all rows of atom 0, then all rows of atom 1, ..."""
    eb = tma.DTYPES[dtype][1]
    strides = _contiguous_strides(shape) if strides is None else tuple(strides)
    idx = np.meshgrid(*[np.arange(t) for t in tile], indexing="ij")
    elems = sum(i * s for i, s in zip(idx, strides))                  # tile-shaped element offsets
    span = tma.SWIZZLE_SPAN[swizzle]
    if span and tile[-1] * eb > span:
        atom = span // eb
        elems = elems.reshape(elems.shape[:-1] + (tile[-1] // atom, atom))
        elems = np.moveaxis(elems, -2, 0)                             # atom index outermost
    e = elems.reshape(-1)
    return (e[:, None] * eb + np.arange(eb)[None, :]).reshape(-1)


def expected_smem(p: Plan, tile_values: np.ndarray) -> np.ndarray:
    """What the H200 must leave in shared memory for the page's case: the tile's bytes in the
    plan's order, with the swizzle applied (judge.hw.tma.swizzle_offset per 16-byte chunk)."""
    src = np.ascontiguousarray(tile_values).view(np.uint8).reshape(-1)
    order = simulate(p)                                              # byte offsets into the tile
    lin = src[order]
    if p.swizzle == "none":
        return lin
    out = np.empty_like(lin)
    pos = np.arange(lin.size)
    out[tma.swizzle_offset(pos, p.swizzle)] = lin
    return out
