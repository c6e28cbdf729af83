"""judge.model.tensormaps - tensor maps as objects in the model's memory, and the tensormap proxy's fences.

    from judge.model import tensormaps
    raw = tensormaps.encode(m, spec)             # the 128 bytes that stand for a judge.hw.tma spec
    spec, loc = tensormaps.at(m, ins, addr, t)   # the map a TMA of thread t names at addr (checked)

Used by judge.model.state (a tensor-map kernel parameter), judge/model/ops/bulk.py (the map of a TMA)
and judge/model/ops/tensormap.py (tensormap.replace, tensormap.cp_fenceproxy, fence.proxy.tensormap).

The 128 bytes of a CUtensorMap are opaque: their layout is not documented, so the model never builds
them. A map is a judge.hw.tma.TensorMapSpec kept in m.tensormap_objs, and the 128 bytes that stand for
it in memory are its identity: sixteen 64-bit words "TMAP" | id | word index. Copying the bytes (ld/st,
tensormap.cp_fenceproxy) copies the map; tensormap.replace reads the identity at its address, makes
the spec with one field changed (a new object), and writes the new identity back. Bytes that are not
one whole identity (a partial copy, zeros) are no tensor map: a TMA through them is a Violation.

The tensormap proxy (PTX ISA, Memory Consistency Model: Proxies; membar/fence: fence.proxy.tensormap;
tensormap.cp_fenceproxy). A map written through the generic proxy (st, tensormap.replace,
cp_fenceproxy's copy) in global memory is seen by a TMA (the tensormap proxy) only after the writer
releases it (fence.proxy.tensormap::generic.release, or cp_fenceproxy's own .release) and the thread
that issues the TMA acquires it (fence.proxy.tensormap::generic.acquire [addr], 128) after that
release in happens-before order. MODEL: each global 128-byte location written by the device keeps
its last writer and time; a release records (location, identity); an acquire by thread t succeeds when
a release of the location's current identity happens-before it; a TMA through a device-written
location needs t's acquire of the identity it reads. Maps passed as kernel parameters need nothing.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from judge.model import checks
from judge.model.errors import Unsupported

SHARED_BASE = 0x9000_0000_0000_0000     # judge.model.state's SHARED_BASE and PARAM_BASE (state imports this
PARAM_BASE = 0xB000_0000_0000_0000      # module, so it cannot import them; a test holds the two equal)

MAGIC = 0x544D4150                  # "TMAP" in the high half of every 64-bit word of an identity
SIZE = 128                          # bytes of a tensor-map object (.b1024)

# tensormap.replace values of the enumerated fields, as far as the PTX ISA's table and the driver's
# CUtensorMap* enums agree (elemtype codes above 7 differ between the two: not modelled)
ELEMTYPES = {0: "uint8", 1: "uint16", 2: "uint32", 3: "int32", 4: "uint64", 5: "int64", 6: "float16",
             7: "float32"}
SWIZZLES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
INTERLEAVES = {0: "none", 1: "16B", 2: "32B"}
FILLS = {0: "zero", 1: "nan"}


class HostMaps:
    """Tensor maps the host encoded and copied into global memory (cuTensorMapEncodeTiled into a host
    CUtensorMap, then cudaMemcpy to a cudaMalloc'd buffer), passed to a kernel as a pointer: give one to
    judge.model.run in the place of a `const CUtensorMap*` argument.

        run(b, "k", args=(..., HostMaps(tma.tensor_map_spec(A, box=(64, 64))), ...))

    The host's copy went through the generic proxy and the launch orders it before the kernel, so no release
    is needed, but the thread that issues the TMA must acquire each map before its first use:
    fence.proxy.tensormap::generic.acquire [map], 128 (CUDA Programming Guide, TMA: a tensor map in global
    memory; PTX ISA, Memory Consistency Model: Proxies). Without it the TMA is "tensormap-proxy-fence"."""

    def __init__(self, *maps):
        from judge.hw import tma as _tma
        flat = [x for a in maps for x in (a if isinstance(a, (list, tuple)) else (a,))]
        self.specs = [a.spec if isinstance(a, _tma.TensorMap) else a for a in flat]
        if not self.specs or not all(isinstance(s, _tma.TensorMapSpec) for s in self.specs):
            raise TypeError("HostMaps: pass judge.hw.tma TensorMap / TensorMapSpec objects")
        self.buf = None                     # the global memory the maps' bytes lie in, during a run

    def place(self, m) -> int:
        """Write the maps' identities into a new global buffer of m, marked as written by the host; its address."""
        self.buf = np.concatenate([encode(m, s) for s in self.specs])
        base = int(self.buf.ctypes.data)
        for i in range(len(self.specs)):
            m.tensormap_writes[("global", base + SIZE * i)] = HOST_WRITE
        return base


HOST_WRITE = (-1, -1, 0)            # tensormap_writes' (cluster, thread, time) of a map the host wrote before the launch


def encode(m, spec) -> np.ndarray:
    """The 128 identity bytes of a new map object holding spec (registered in m.tensormap_objs)."""
    i = len(m.tensormap_objs)
    if i >= 1 << 24:
        raise Unsupported("tensormap", "more than 2^24 tensor-map objects in one launch")
    m.tensormap_objs.append(spec)
    words = (np.uint64(MAGIC) << np.uint64(32)) | (np.uint64(i) << np.uint64(8)) | np.arange(16, dtype=np.uint64)
    return words.view(np.uint8)


def decode(raw) -> int | None:
    """The object id the 128 bytes stand for, or None when they are not one whole identity."""
    w = np.ascontiguousarray(raw, np.uint8).view(np.uint64)
    if len(w) != 16 or ((w >> np.uint64(32)) != MAGIC).any():
        return None
    ids = (w >> np.uint64(8)) & np.uint64(0xFFFFFF)
    if (ids != ids[0]).any() or ((w & np.uint64(0xFF)) != np.arange(16, dtype=np.uint64)).any():
        return None
    return int(ids[0])


def _peek(m, addr):
    """The 4 bytes of global memory at addr as a uint32, or None outside every array (no Violation)."""
    i = int(np.searchsorted(m.rbase, np.uint64(addr), side="right")) - 1
    if i < 0:
        return None
    base, size, u8 = m.regions[i]
    off = addr - base
    return int(u8[off:off + 4].view(np.uint32)[0]) if 0 <= off and off + 4 <= size else None


def read(m, ins, a, t, space=None):
    """(space, location key, the 128 bytes) of the map at address a of thread t. space: the instruction's
    state space ("shared", "global", "generic"), or None for a TMA's map operand (param, or global)."""
    a = int(a)
    if space == "generic":
        one = np.zeros(m.n, np.uint64)
        one[t] = a
        space, r = m.resolve_generic(one, np.array([t]), ins)
        a = int(r[t])
    if space is None and PARAM_BASE <= a < PARAM_BASE + len(m.param):
        return "param", ("param", a), m.param[a - PARAM_BASE:a - PARAM_BASE + SIZE]
    if space == "param":
        return "param", ("param", a + PARAM_BASE), m.param[a:a + SIZE]
    if space == "shared":
        c = int(m.cta[t])
        checks.check_smem_range(m, np.array([a]), SIZE, np.array([t]), ins)
        return "shared", ("shared", c, a), m.sm[c, a:a + SIZE]
    arr = np.zeros(m.n, np.uint64)
    arr[t] = a
    return "global", ("global", a), m.gload(arr, SIZE, np.array([t]), ins)[0]


def spec_of(m, ins, raw, where) -> int:
    """The object id of raw bytes, or a Violation: they are no tensor map."""
    i = decode(raw)
    if i is None:
        m.fail("tensormap-object", ins, f"the 128 bytes at {where} are not a tensor map: a map is created on "
               f"the host (cuTensorMapEncodeTiled) and moved as a whole (all 128 bytes copied, "
               f"tensormap.cp_fenceproxy); a partial copy or an unwritten buffer is no map")
        raise checks.abort(m, "tensormap-object", ins, "no tensor map at the operand's address")
    return i


def note_write(m, loc, t):
    """The generic proxy wrote the map at loc (thread t, now): the tensormap proxy needs a release."""
    m.tensormap_writes[loc] = (m.cluster_serial, int(t), m.gtime)


def note_global_store(m, a, data, lanes):
    """A global store (already written) of 4-byte units: a unit that is the high half of a map identity's
    64-bit word, over a low half in memory (written before it or with it), marks the 128-byte location of
    that map as written through the generic proxy (called from judge.model.state.Machine.gstore while the
    launch has tensor-map objects). A copy that writes a word's high half before its low half is not
    seen: a TMA through it then reads no map the kernel wrote (Unsupported, never a verdict)."""
    w = data.shape[1]
    if w < 4 or w % 4:
        return
    units = np.ascontiguousarray(data).view(np.uint32)              # (lanes, w / 4)
    high = units == MAGIC
    if not high.any():
        return
    addr = a[lanes].astype(np.int64)[:, None] + 4 * np.arange(w // 4)
    for i, j in zip(*np.nonzero(high)):
        lo = int(addr[i, j]) - 4
        lv = _peek(m, lo)
        if lo % 8 == 0 and lv is not None and (lv & 0xFF) < 16:
            note_write(m, ("global", lo - 8 * (lv & 0xFF)), lanes[i])


def release(m, t, loc=None):
    """fence.proxy.tensormap::generic.release by thread t (or by the threads t of one warp-collective
    instruction, together): for loc, or (loc None) every map location t wrote in this cluster."""
    who = tuple(int(x) for x in np.atleast_1d(t))
    locs = [loc] if loc is not None else [k for k, w in m.tensormap_writes.items()
                                          if w[0] == m.cluster_serial and w[1] in who]
    for k in locs:
        m.tensormap_released[k] = (m.cluster_serial, who, m.gtime, _current_id(m, k))


def _current_id(m, loc):
    if loc[0] == "global":
        arr = np.zeros(m.n, np.uint64)
        arr[0] = loc[1]
        return decode(m.gload(arr, SIZE, np.array([0]), None)[0])
    if loc[0] == "shared":
        return decode(m.sm[loc[1], loc[2]:loc[2] + SIZE])
    return None


def acquire(m, ins, t, loc, ident):
    """fence.proxy.tensormap::generic.acquire [loc] by thread t: it sees the map released there, if a
    release of this very map happens-before the acquire."""
    w = m.tensormap_writes.get(loc)
    if w is None or w == HOST_WRITE:       # the launch orders the host's write before every acquire
        m.tensormap_acquired[(int(t), loc)] = (ident, None)
        return
    r = m.tensormap_released.get(loc)
    if r is None or r[3] != ident or (r[0], r[2]) < (w[0], w[2]):
        why = "no fence.proxy.tensormap::generic.release (nor tensormap.cp_fenceproxy ... .release) published " \
              "the map's last write before this acquire"
    elif r[0] == m.cluster_serial and not checks.know(m, np.full(len(r[1]), int(t)), np.array(r[1]),
                                                       np.full(len(r[1]), r[2])).any():
        why = f"{m.tdesc(r[1][0])} released it, but nothing orders that release before this acquire (a barrier)"
    else:
        why = None
    m.tensormap_acquired[(int(t), loc)] = (ident, why)


def at(m, ins, a, t):
    """The judge.hw.tma spec a TMA of thread t reads at map address a, after the proxy rules."""
    spec = m.tmaps.get(int(a))                  # a kernel parameter given as a judge.hw.tma object
    if spec is not None:
        return spec, ("param", int(a))
    space, loc, raw = read(m, ins, a, t, "generic" if int(a) >= SHARED_BASE else None)
    where = f"{space} 0x{int(a):x}" if space != "param" else "the kernel parameter"
    if decode(raw) is None and (space == "param" or loc not in m.tensormap_writes):
        raise Unsupported(ins.text, "the tensor map is neither a kernel parameter given as a judge.hw.tma object "
                          "(pass judge.hw.tma.TensorMap / TensorMapSpec objects to judge.model.run) nor a copy "
                          "of one that the kernel wrote (a map the host put in __constant__ or global memory)")
    if space == "shared":
        m.fail("tensormap-space", ins, f"the TMA's tensor map is in shared memory ({where}): copy it to global "
               f"memory (tensormap.cp_fenceproxy) and give that address")
    i = spec_of(m, ins, raw, where)
    if space == "global" and loc in m.tensormap_writes:
        got = m.tensormap_acquired.get((int(t), loc))
        w = m.tensormap_writes[loc]
        if got is None or got[0] != i or got[1] is not None:
            why = ("this thread executed no fence.proxy.tensormap::generic.acquire on it" if got is None else
                   got[1] or "its acquire saw an earlier version of the map")
            if w == HOST_WRITE:
                m.fail("tensormap-proxy-fence", ins,
                       f"{m.tdesc(t)}'s TMA reads the tensor map at global 0x{int(a):x}, which the host copied "
                       f"into global memory (a write through the generic proxy), but {why}. The TMA may read a "
                       f"stale map: acquire it in the issuing thread before its first use "
                       f"(fence.proxy.tensormap::generic.acquire.gpu [map], 128), or pass the map as a "
                       f"const __grid_constant__ parameter, which needs no fence")
            else:
                m.fail("tensormap-proxy-fence", ins,
                       f"{m.tdesc(t)}'s TMA reads the tensor map at global 0x{int(a):x}, which "
                       f"{m.tdesc(w[1]) if w[0] == m.cluster_serial else 'another block'} wrote through the "
                       f"generic proxy, but {why}. The TMA may read a stale map: release it after writing "
                       f"(tensormap.cp_fenceproxy ... .release, or fence.proxy.tensormap::generic.release) and "
                       f"acquire it in the issuing thread (fence.proxy.tensormap::generic.acquire [map], 128)")
    return m.tensormap_objs[i], loc


def replace(spec, field: str, ordinal: int | None, value: int, ins):
    """spec with one field changed, as tensormap.replace.tile.<field> does (ordinal: inner first)."""
    def tup(t, k, v, what):
        t = list(t)
        if not 0 <= k < len(t):
            raise Unsupported(ins.text, f"{what} ordinal {k} for a rank-{spec.rank} map")
        t[k] = v
        return tuple(t)
    if field == "global_address":
        return dataclasses.replace(spec, address=int(value), extent_limit=None)
    if field == "rank":                                      # the field holds rank - 1
        r = int(value) + 1
        if not 1 <= r <= 5:
            raise Unsupported(ins.text, f"rank field {value} (rank {r})")
        pad = lambda t, fill, n: tuple(t[:n]) + (fill,) * max(0, n - len(t))  # noqa: E731
        return dataclasses.replace(spec, dims=pad(spec.dims, 1, r), box=pad(spec.box, 1, r),
                                   elem_strides=pad(spec.elem_strides, 1, r),
                                   strides=pad(spec.strides, spec.strides[-1] if spec.strides else 16, r - 1))
    if field == "box_dim":
        return dataclasses.replace(spec, box=tup(spec.box, ordinal, int(value), "box_dim"))
    if field == "global_dim":
        return dataclasses.replace(spec, dims=tup(spec.dims, ordinal, int(value), "global_dim"))
    if field == "global_stride":                             # ordinal 0: the stride of dimension 1, in bytes
        return dataclasses.replace(spec, strides=tup(spec.strides, ordinal, int(value), "global_stride"),
                                   extent_limit=None)
    if field == "element_stride":
        return dataclasses.replace(spec, elem_strides=tup(spec.elem_strides, ordinal, int(value), "element_stride"))
    table = {"elemtype": (ELEMTYPES, "dtype"), "swizzle_mode": (SWIZZLES, "swizzle"),
             "interleave_layout": (INTERLEAVES, "interleave"), "fill_mode": (FILLS, "oob_fill")}
    if field in table:
        codes, attr = table[field]
        if int(value) not in codes:
            raise Unsupported(ins.text, f"{field} value {int(value)}")
        return dataclasses.replace(spec, **{attr: codes[int(value)]})
    raise Unsupported(ins.text, f"tensormap.replace field .{field}")
