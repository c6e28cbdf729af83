"""Tensor maps for TMA: check the hardware rules in Python, then encode the 128-byte descriptor.

    from judge.hw import tma
    a = cupy.arange(1024 * 2048, dtype=cupy.int32).reshape(1024, 2048)
    m = tma.tensor_map(a, box=(32, 16))          # box: 32 columns (inner), 16 rows (outer)
    m.spec.box_bytes                             # 2048: the expect_tx count of one box
    kernel(grid, block, (m.as_kernel_arg(), ...))    # for `const __grid_constant__ TensorMap`
    m.to_constant(module, "g_map")               # or fill a `__constant__ TensorMap g_map`

    tma.swizzle_offset(byte_offset, "128B")      # where a byte of the box lands in shared memory
    tma.bank_conflicts([4 * 32 * r for r in range(32)])   # 32: a column of a 32x32 fp32 tile
    tma.aligned(a_host)                          # a NumPy copy on a 1024-byte boundary, as cudaMalloc's

!!! ORDER: INNERMOST FIRST, EVERYWHERE !!!
    dims, strides, box, elem_strides and the coordinates a kernel passes to
    cp.async.bulk.tensor all list the innermost (fastest-varying, last NumPy axis)
    dimension FIRST. A (rows, cols) = (1024, 2048) array has dims (2048, 1024); a box of
    16 rows by 32 columns is box=(32, 16); the tile at row y, column x has coordinates
    {x, y}. That is the order of the driver call and of the PTX instruction; NumPy's
    shape order is the reverse. Every repr of this module prints "(inner first)".

Rules checked before any driver call (each failure is a TensorMapError naming the rule
and the fix; the same checks run on a machine with no GPU):
    dtype         uint8/16/32/64, int32, int64, float16/32/64, bfloat16 (no int8, int16)
    rank          1..5 dimensions; 3..5 with an interleaved layout
    alignment     global address a multiple of 16 bytes (32 with interleave "32B"; 128
                  with a swizzle: CUDA Programming Guide, TMA swizzle section, table of
                  swizzle patterns. The H200's driver, 580.159.04, encoded a 128B-swizzled
                  map 16 bytes past a boundary without complaint (measured, see
                  chapters/ch02_tma/topics_h200.json): the course follows the guide)
    contiguous    the innermost dimension is contiguous (its stride is one element)
    dims          every global dim in 1..2^32
    strides       every byte stride of dims 1.. a multiple of 16 (32 with interleave
                  "32B") and below 2^40
    box           every box dim in 1..256
    box_inner     (no interleave) box[0] * element size a multiple of 16 bytes
    swizzle_span  (no interleave, a swizzle) box[0] * element size <= the span 32/64/128
    elem_strides  every element stride in 1..8 (the first is ignored without interleave)
    oob_fill      NaN fill only for floating-point types
    interleave    "32B" interleave needs swizzle "32B"
    extent        dims/strides given by hand must stay inside the array
Encoding calls cuda.bindings.driver.cuTensorMapEncodeTiled (arguments wrapped in
cuuint32_t / cuuint64_t, as the binding requires). That needs the CUDA driver (libcuda):
on a machine without one, validation and the models below work and encoding raises
TensorMapEncodeError saying so.

Why not cuda.core's TensorMapDescriptor (cuda.core 1.2: StridedMemoryView.as_tensor_map)?
It is NVIDIA's own wrapper of the same driver call and checks rank, alignment and box
ranges. The course keeps the raw call because (1) every kernel here launches through
CuPy, which needs the 128 bytes themselves (a NumPy scalar or a __constant__ copy), and
cuda.core's descriptor is made to be passed to cuda.core.launch; (2) cuda.core takes
the box in NumPy (outer-first) order and reverses it, while the kernel's coordinates
are innermost-first: one order, the hardware's, is easier to teach than two; (3) its
checks need a device-accessible view, ours run in CI and on a laptop without a GPU and
say which rule broke and how to fix it.

Models (pure Python, no GPU): swizzle_offset() is the 16-byte-chunk XOR of the
32/64/128-byte swizzles; bank_conflicts() counts the wavefronts of one warp's
shared-memory load. chapters/ch02_tma/swizzle_probe.cu reads the real placement off an
H200, chapters/ch01_cp_async/wavefronts_h200.json holds ncu's wavefront counts for the
access patterns the course uses, and tests/hw/test_tma.py compares both with the models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------------------- tables
#: NumPy/torch dtype name -> (CUtensorMapDataType value, bytes per element, floating point)
DTYPES: dict[str, tuple[int, int, bool]] = {
    "uint8": (0, 1, False), "uint16": (1, 2, False), "uint32": (2, 4, False),
    "int32": (3, 4, False), "uint64": (4, 8, False), "int64": (5, 8, False),
    "float16": (6, 2, True), "float32": (7, 4, True), "float64": (8, 8, True),
    "bfloat16": (9, 2, True),
}
SWIZZLES = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
SWIZZLE_SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
#: bytes after which a swizzle pattern repeats: align a shared buffer to this
SWIZZLE_REPEAT = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}
INTERLEAVES = {"none": 0, "16B": 1, "32B": 2}
L2_PROMOTIONS = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
OOB_FILLS = {"zero": 0, "nan": 1}

KERNEL_ARG_DTYPE = np.dtype({"names": ["opaque"], "formats": [(np.uint64, 16)], "align": True})

#: every rule validate() checks, with the fix it suggests
RULES = {
    "dtype": "use one of " + ", ".join(DTYPES) + " (TMA moves bits: view int8/int16 data as uint8/uint16)",
    "rank": "describe the tensor with 1 to 5 dimensions (3 to 5 with an interleaved layout): "
            "merge contiguous dimensions or split the copy",
    "alignment": "start the tensor at a 16-byte aligned address (32 with interleave '32B', 128 with a "
                 "swizzle): allocate it with CuPy/torch (256-byte aligned) and do not offset it by a "
                 "non-multiple of that",
    "contiguous": "make the innermost dimension contiguous (cupy.ascontiguousarray, or a "
                  "transposed tensor map)",
    "dims": "every dimension must hold 1 to 2^32 elements",
    "strides": "pad each row so that its byte stride is a multiple of 16 (allocate a wider "
               "array and describe a slice of it)",
    "box": "every box dimension must be 1 to 256 elements: issue several boxes for a bigger tile",
    "box_inner": "make box[0] * element size a multiple of 16 bytes (e.g. 4, 8, 32 floats, "
                 "8 or 16 halves)",
    "swizzle_span": "the innermost box row must fit the swizzle span: shrink box[0] or pick a "
                    "wider swizzle",
    "elem_strides": "element strides are 1 to 8, one per dimension",
    "oob_fill": "NaN fill exists only for floating-point types: use oob_fill='zero'",
    "interleave": "interleave '32B' needs swizzle '32B'",
    "extent": "the dims and strides given by hand reach past the end of the array",
    "memory": "TMA reads device memory: pass a CuPy or torch CUDA array, not a NumPy array",
}


class TensorMapError(ValueError):
    """A tensor map that breaks a hardware rule. .rule names it (a key of RULES)."""

    def __init__(self, rule: str, problem: str):
        self.rule = rule
        self.problem = problem
        super().__init__(f"tensor map rule '{rule}' broken: {problem}. Fix: {RULES[rule]}.")


class TensorMapEncodeError(RuntimeError):
    """The driver could not be reached (no GPU here) or refused a map that passed validation."""


# ----------------------------------------------------------------------------- arrays
@dataclass(frozen=True)
class _Layout:
    kind: str                      # "cupy", "torch", "cuda" (__cuda_array_interface__), "host"
    address: int
    shape: tuple[int, ...]         # NumPy order (outer first)
    strides: tuple[int, ...]       # bytes, NumPy order
    dtype: str
    nbytes_span: int               # bytes from address to one past the last element


def _span(shape, strides, itemsize) -> int:
    if any(s == 0 for s in shape):
        return 0
    return sum((n - 1) * st for n, st in zip(shape, strides)) + itemsize


def _layout(array) -> _Layout:
    mod = type(array).__module__.split(".")[0]
    if mod == "torch":
        item = array.element_size()
        shape = tuple(int(n) for n in array.shape)
        strides = tuple(int(s) * item for s in array.stride())
        kind = "torch" if array.is_cuda else "host"
        dt = str(array.dtype).removeprefix("torch.")
        return _Layout(kind, int(array.data_ptr()), shape, strides, dt, _span(shape, strides, item))
    if mod == "cupy":
        return _Layout("cupy", int(array.data.ptr), tuple(array.shape), tuple(array.strides),
                       array.dtype.name, _span(array.shape, array.strides, array.itemsize))
    if isinstance(array, np.ndarray):
        return _Layout("host", int(array.ctypes.data), tuple(array.shape), tuple(array.strides),
                       array.dtype.name, _span(array.shape, array.strides, array.itemsize))
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is not None:
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        if strides is None:
            strides, acc = [], dt.itemsize
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
        return _Layout("cuda", int(cai["data"][0]), shape, tuple(strides), dt.name,
                       _span(shape, strides, dt.itemsize))
    raise TypeError(f"tensor_map needs a CuPy or torch array (or a NumPy one for checks only), "
                    f"got {type(array).__name__}")


# ----------------------------------------------------------------------------- spec
def _choice(name: str, value: str, table: dict) -> str:
    if value not in table:
        raise ValueError(f"{name}={value!r}: choose one of {', '.join(map(repr, table))}")
    return value


@dataclass(frozen=True)
class TensorMapSpec:
    """Everything cuTensorMapEncodeTiled is told. All tuples are INNERMOST FIRST."""
    dtype: str
    address: int
    dims: tuple[int, ...]            # elements per dimension, inner first
    strides: tuple[int, ...]         # bytes, for dims 1..rank-1, inner first
    box: tuple[int, ...]             # elements per box dimension, inner first
    elem_strides: tuple[int, ...]
    swizzle: str = "none"
    interleave: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    kind: str = "cupy"
    extent_limit: int | None = field(default=None, compare=False)  # bytes the array spans

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype][1] if self.dtype in DTYPES else 0

    @property
    def box_elems(self) -> int:
        """Elements one box moves: ceil(box[i] / elem_strides[i]) per dimension."""
        return math.prod(-(-b // s) for b, s in zip(self.box, self.elem_strides))

    @property
    def box_bytes(self) -> int:
        """Bytes one box writes into shared memory: the count for mbarrier.arrive.expect_tx.
        Out-of-bounds elements are filled, so they count too: it is always the whole box."""
        return self.box_elems * self.elem_bytes

    def __str__(self):
        return (f"TensorMap {self.dtype} rank {self.rank}: dims (inner first) {self.dims}, "
                f"byte strides {self.strides}, box (inner first) {self.box} = {self.box_bytes} B, "
                f"swizzle {self.swizzle}, oob fill {self.oob_fill}")

    # ------------------------------------------------------------------ the rules
    def validate(self) -> "TensorMapSpec":
        """Raise TensorMapError for the first hardware rule this map breaks; else return self."""
        r = self.rank
        if self.dtype not in DTYPES:
            raise TensorMapError("dtype", f"dtype {self.dtype} has no TMA data type")
        if not 1 <= r <= 5:
            raise TensorMapError("rank", f"rank {r}")
        if self.interleave != "none" and r < 3:
            raise TensorMapError("rank", f"rank {r} with interleave {self.interleave!r} (needs >= 3)")
        align = 32 if self.interleave == "32B" else 16
        if self.swizzle != "none":
            align = 128         # CUDA Programming Guide, TMA swizzle: global memory 128-byte aligned
        if self.address % align:
            why = f" (swizzle {self.swizzle})" if self.swizzle != "none" else ""
            raise TensorMapError("alignment", f"address 0x{self.address:x} is {self.address % align} "
                                              f"bytes past a {align}-byte boundary{why}")
        for i, n in enumerate(self.dims):
            if not 1 <= n <= 2 ** 32:
                raise TensorMapError("dims", f"dims[{i}] (inner first) = {n}")
        if len(self.strides) != r - 1:
            raise TensorMapError("strides", f"{len(self.strides)} strides given for rank {r} "
                                            f"(one per dimension after the innermost)")
        smul = 32 if self.interleave == "32B" else 16
        for i, s in enumerate(self.strides, start=1):
            if s % smul or not 0 < s < 2 ** 40:
                raise TensorMapError("strides", f"the byte stride of dims[{i}] (inner first) is {s}, "
                                                f"not a positive multiple of {smul} below 2^40")
        if len(self.box) != r:
            raise TensorMapError("box", f"{len(self.box)} box dims for rank {r}")
        for i, b in enumerate(self.box):
            if not 1 <= b <= 256:
                raise TensorMapError("box", f"box[{i}] (inner first) = {b}")
        inner = self.box[0] * self.elem_bytes
        if self.interleave == "none" and inner % 16:
            raise TensorMapError("box_inner", f"box[0] = {self.box[0]} {self.dtype} = {inner} bytes")
        span = SWIZZLE_SPAN[self.swizzle]
        if self.interleave == "none" and span and inner > span:
            raise TensorMapError("swizzle_span", f"box[0] = {self.box[0]} {self.dtype} = {inner} bytes "
                                                 f"> the {self.swizzle} swizzle span")
        if len(self.elem_strides) != r or any(not 1 <= e <= 8 for e in self.elem_strides):
            raise TensorMapError("elem_strides", f"elem_strides {self.elem_strides} for rank {r}")
        if self.oob_fill == "nan" and not DTYPES[self.dtype][2]:
            raise TensorMapError("oob_fill", f"oob_fill='nan' with {self.dtype}")
        if self.interleave == "32B" and self.swizzle != "32B":
            raise TensorMapError("interleave", f"interleave '32B' with swizzle {self.swizzle!r}")
        if self.extent_limit is not None:
            reach = _span(tuple(reversed(self.dims)), tuple(reversed((self.elem_bytes,) + self.strides)),
                          self.elem_bytes)
            if reach > self.extent_limit:
                raise TensorMapError("extent", f"the map reaches {reach} bytes, the array spans "
                                               f"{self.extent_limit}")
        return self

    # ------------------------------------------------------------------ encoding
    def encode(self) -> "TensorMap":
        """Validate, then build the 128-byte descriptor with the driver (needs libcuda)."""
        self.validate()
        if self.kind == "host":
            raise TensorMapError("memory", "the array lives in host memory")
        try:
            from cuda.bindings import driver as drv
        except ImportError as e:
            raise TensorMapEncodeError(f"encoding a tensor map needs cuda-python "
                                       f"(pip install cuda-python): {e}") from None
        try:
            err, = drv.cuInit(0)
        except Exception as e:  # noqa: BLE001 - DynamicLibNotFoundError and friends: no driver
            raise TensorMapEncodeError(
                f"encoding a tensor map needs the NVIDIA driver (libcuda), and there is none here "
                f"({type(e).__name__}). The map passed every check above; the 128 bytes can only be "
                f"built on a machine with a GPU driver") from None
        if err != drv.CUresult.CUDA_SUCCESS:
            raise TensorMapEncodeError(f"cuInit failed ({err.name}): no usable GPU driver here")
        r = self.rank
        err, tmap = drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType(DTYPES[self.dtype][0]),
            drv.cuuint32_t(r),
            self.address,
            [drv.cuuint64_t(n) for n in self.dims],
            [drv.cuuint64_t(s) for s in self.strides],
            [drv.cuuint32_t(b) for b in self.box],
            [drv.cuuint32_t(e) for e in self.elem_strides],
            drv.CUtensorMapInterleave(INTERLEAVES[self.interleave]),
            drv.CUtensorMapSwizzle(SWIZZLES[self.swizzle]),
            drv.CUtensorMapL2promotion(L2_PROMOTIONS[self.l2_promotion]),
            drv.CUtensorMapFloatOOBfill(OOB_FILLS[self.oob_fill]),
        )
        if err != drv.CUresult.CUDA_SUCCESS:
            raise TensorMapEncodeError(f"cuTensorMapEncodeTiled returned {err.name} for a map that "
                                       f"passed the course's checks: {self}")
        opaque = np.array([int(x) for x in tmap.opaque], dtype=np.uint64)
        return TensorMap(self, opaque)


@dataclass
class TensorMap:
    """An encoded descriptor: 128 opaque bytes plus the spec that made them."""
    spec: TensorMapSpec
    opaque: np.ndarray | None        # 16 x uint64 (None: a map for the CPU model, never encoded)

    def as_kernel_arg(self):
        """A NumPy structured scalar of 128 bytes, for a `const __grid_constant__ TensorMap`
        kernel parameter (by value: the kernel takes its address, which stays valid because
        __grid_constant__ parameters live in constant parameter space)."""
        a = np.zeros(1, dtype=KERNEL_ARG_DTYPE)
        a["opaque"][0] = self.opaque
        return a[0]

    def to_constant(self, module, name: str = "g_map") -> None:
        """Copy the descriptor into `__constant__ TensorMap <name>` of a cupy.RawModule.
        Do it before the launch that uses it: a kernel in flight must not see it change."""
        ptr = module.get_global(name)
        buf = np.ascontiguousarray(self.opaque)
        ptr.copy_from_host(buf.ctypes.data, buf.nbytes)

    def __repr__(self):
        return str(self.spec)


def tensor_map_spec(array, box, *, swizzle: str = "none", elem_strides=None, oob_fill: str = "zero",
                    l2_promotion: str = "none", interleave: str = "none", dims=None,
                    strides=None) -> TensorMapSpec:
    """The validated spec of a tiled map over `array` (CuPy, torch; NumPy for checks only).

    box, elem_strides, dims, strides: INNERMOST FIRST. dims/strides default to the
    array's own (reversed NumPy shape; byte strides of dims 1..); give them to describe
    a different view of the same memory (e.g. fewer columns than allocated).
    """
    _choice("swizzle", swizzle, SWIZZLES)
    _choice("oob_fill", oob_fill, OOB_FILLS)
    _choice("l2_promotion", l2_promotion, L2_PROMOTIONS)
    _choice("interleave", interleave, INTERLEAVES)
    lay = _layout(array)
    item = DTYPES[lay.dtype][1] if lay.dtype in DTYPES else 0
    if dims is None:
        if lay.shape and lay.strides[-1] != item and item:
            raise TensorMapError("contiguous", f"the innermost stride is {lay.strides[-1]} bytes, "
                                               f"not one {lay.dtype} ({item} bytes)")
        d = tuple(reversed(lay.shape))
        s = tuple(reversed(lay.strides[:-1])) if strides is None else tuple(strides)
        limit = None if strides is None else lay.nbytes_span
    else:
        d = tuple(int(n) for n in dims)
        if strides is None:                         # dense, inner first
            s, acc = [], item
            for n in d[:-1]:
                acc *= n
                s.append(acc)
            s = tuple(s)
        else:
            s = tuple(int(x) for x in strides)
        limit = lay.nbytes_span
    box = tuple(int(b) for b in box)
    es = tuple(int(e) for e in elem_strides) if elem_strides is not None else (1,) * len(d)
    spec = TensorMapSpec(lay.dtype, lay.address, d, s, box, es, swizzle, interleave, l2_promotion,
                         oob_fill, lay.kind, limit)
    return spec.validate()


def tensor_map(array, box, *, swizzle: str = "none", elem_strides=None, oob_fill: str = "zero",
               l2_promotion: str = "none", interleave: str = "none", dims=None, strides=None) -> TensorMap:
    """Validate (TensorMapError on a broken rule), then encode (needs a GPU driver).
    Arguments as tensor_map_spec; box, dims, strides and coordinates are INNERMOST FIRST.
    Over a NumPy array nothing is encoded: the map (opaque None) is for the CPU model of the machine
    (judge.model), which reads the spec."""
    spec = tensor_map_spec(array, box, swizzle=swizzle, elem_strides=elem_strides, oob_fill=oob_fill,
                           l2_promotion=l2_promotion, interleave=interleave, dims=dims, strides=strides)
    if isinstance(array, np.ndarray):
        return TensorMap(spec, None)
    return spec.encode()


# ----------------------------------------------------------------------------- models
def empty_aligned(shape, dtype, align: int = 1024) -> np.ndarray:
    """An uninitialized NumPy array whose first byte sits on an `align`-byte boundary, as cudaMalloc's
    do (256 bytes at least). RULE (tensor map): the global address of a swizzled map is 128-byte aligned,
    and a 128B-swizzled box lands in shared memory as the 1024-byte atom it was in global memory;
    NumPy guarantees only 16 bytes, so arrays the CPU model reads as global memory are aligned here."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + n].view(dtype).reshape(shape)


def aligned(values: np.ndarray, align: int = 1024) -> np.ndarray:
    """A copy of `values` whose first byte sits on an `align`-byte boundary (see empty_aligned)."""
    out = empty_aligned(values.shape, values.dtype, align)
    out[...] = values
    return out


def swizzle_offset(byte_offset, swizzle: str):
    """Where byte `byte_offset` of a box (as laid out unswizzled) lands in shared memory.

    The swizzles move whole 16-byte chunks. Within each 128-byte line of shared memory
    the chunk index (address bits 4..) is XORed with the line index (address bits 7..),
    using 1, 2 or 3 bits for the 32B, 64B and 128B swizzles:

        chunk' = chunk XOR (line mod 2^k),   k = 1 (32B), 2 (64B), 3 (128B)

    so a 128B-swizzled 8 x 128-byte block stores row r's chunk c at chunk c ^ r, and the
    pattern repeats every 2^k lines: 256, 512, 1024 bytes (SWIZZLE_REPEAT). The offset
    is taken from a buffer aligned to that repeat; the hardware XORs the shared-memory
    address bits themselves. Works on ints and on NumPy integer arrays.
    """
    _choice("swizzle", swizzle, SWIZZLES)
    if swizzle == "none":
        return byte_offset
    k = SWIZZLES[swizzle]
    mask = (1 << k) - 1
    chunk = (byte_offset >> 4) & mask
    line = (byte_offset >> 7) & mask
    return (byte_offset & ~(mask << 4)) | ((chunk ^ line) << 4)


def box_layout(rows: int, row_bytes: int, swizzle: str, elem_bytes: int = 4) -> np.ndarray:
    """For a box of `rows` rows of `row_bytes` bytes: the shared-memory byte offset of
    each element, shape (rows, row_bytes // elem_bytes)."""
    r, c = np.meshgrid(np.arange(rows), np.arange(row_bytes // elem_bytes), indexing="ij")
    return swizzle_offset(r * row_bytes + c * elem_bytes, swizzle)


def bank_of(address: int) -> int:
    """Shared memory has 32 banks of 4 bytes: address -> bank."""
    return (address // 4) % 32


def bank_conflicts(addresses, width: int = 4) -> int:
    """Wavefronts one warp's shared-memory LOAD takes (1 = conflict-free; n-way = n).

    addresses: the byte address each active lane reads (None for an inactive lane), each
    access `width` bytes (4, 8 or 16). Shared memory has 32 banks of 4 bytes; a wavefront
    serves at most one 4-byte word per bank. The rules below reproduce every count that ncu
    measured on an H200 (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld, 2026-11-30,
    chapters/ch01_cp_async/wavefronts_h200.json; 22 patterns). NVIDIA documents the 4-byte
    rule (CUDA Programming Guide, "Shared Memory" of compute capability 5.x and later); the
    8- and 16-byte rules are what the counters showed, not a documented specification.

      4 bytes   the warp in one pass: the most distinct words any bank holds; lanes
                reading the same word share it (broadcast).
      8 bytes   two half-warps (lanes 0-15, 16-31), each as above; a warp whose lanes all
                read one address takes 1.
      16 bytes  two half-warps. In each, the most distinct (word, quarter-warp) pairs any
                bank holds: lanes share a word for free only inside their quarter-warp of
                8 lanes; a half-warp whose lanes all read one address takes 1. So 32
                distinct consecutive 16-byte reads take 4 (the minimum for 512 bytes), one
                address for the whole warp 2, and 8 rows 80 bytes apart (sgemm_tuned's A)
                2; 64 bytes apart, 4.
    """
    addrs = list(addresses)
    if len(addrs) > 32:
        raise ValueError("a warp has at most 32 lanes")
    if width not in (4, 8, 16):
        raise ValueError("a shared-memory load moves 4, 8 or 16 bytes per lane")
    active = [(lane, int(a)) for lane, a in enumerate(addrs) if a is not None]
    if not active:
        return 0

    def cost(lanes, share_within):
        banks: dict[int, set] = {}
        for lane, a in lanes:
            for k in range(width // 4):
                word = a // 4 + k
                banks.setdefault(word % 32, set()).add((word, lane // share_within))
        return max(len(s) for s in banks.values())

    if width == 4:
        return cost(active, 32)
    if width == 8 and len({a for _, a in active}) == 1:
        return 1
    total = 0
    for half in (0, 1):
        lanes = [(lane, a) for lane, a in active if lane // 16 == half]
        if not lanes:
            continue
        if width == 16 and len({a for _, a in lanes}) == 1:
            total += 1
        else:
            total += cost(lanes, 16 if width == 8 else 8)
    return total
