"""judge.model.ops.tensormap - tensormap.replace, tensormap.cp_fenceproxy and fence.proxy.tensormap::generic.

Registered with judge.model.registry; tested by tests/model/test_model_tensormap.py. A tensor map in memory
is the identity of a map object (judge.model.tensormaps: the 128 bytes stand for a judge.hw.tma spec,
never the undocumented CUtensorMap layout). tensormap.replace.tile.<field> reads the object at its
address and writes a new one with the field changed; cp_fenceproxy copies the 128 bytes from shared to
global memory and releases them to the tensormap proxy; fence.proxy.tensormap::generic.release /
.acquire [addr], 128 are the two halves of the proxy fence a TMA through a device-written map needs
(PTX ISA: tensormap.replace; tensormap.cp_fenceproxy; membar/fence; Memory Consistency Model: Proxies).
"""
from __future__ import annotations

import numpy as np

from judge.model import checks, tensormaps
from judge.model.checks import GENERIC
from judge.model.errors import Unsupported
from judge.model.registry import op

FIELDS = ("global_address", "rank", "box_dim", "global_dim", "global_stride", "element_stride", "elemtype",
          "interleave_layout", "swizzle_mode", "swizzle_atomicity", "fill_mode")
ORDINAL = ("box_dim", "global_dim", "global_stride", "element_stride")


def _space(m, ins):
    sp = m.space_of(ins)
    return {"shared": "shared", "global": "global", "generic": "generic"}.get(sp) or _unsupported(ins, sp)


def _unsupported(ins, sp):
    raise Unsupported(ins.op, f"a tensor map in .{sp} memory")


def _write(m, ins, space, loc, raw, t):
    """Write a map's 128 identity bytes at loc by thread t (a generic-proxy write)."""
    if space == "shared":
        _, c, off = loc
        m.sm[c, off:off + tensormaps.SIZE] = raw
        words = off // 4 + np.arange(tensormaps.SIZE // 4)
        m.w_state[c, words] = GENERIC
        m.w_thread[c, words] = t
        m.w_time[c, words] = m.gtime
    else:
        a = np.zeros(m.n, np.uint64)
        a[t] = loc[1]
        m.gstore(a, raw.reshape(1, -1), np.array([t]), ins)
    tensormaps.note_write(m, loc, t)


@op("tensormap.replace")
def replace(m, ins):
    """tensormap.replace.tile.<field>{.space}.b1024.<type> [map], {ord,} value: one field of the map object changed in place."""
    p = ins.parts
    if "tile" not in p:
        raise Unsupported(ins.op, "tensormap.replace modes other than .tile")
    field = next((f for f in FIELDS if f in p), None)
    if field is None or field == "swizzle_atomicity":
        raise Unsupported(ins.op, f"tensormap.replace field {field or p[3]}")
    space = _space(m, ins)
    ty = "b64" if "b64" in p else "b32"
    addr_op = ins.args[0]
    ord_op = ins.args[1] if field in ORDINAL else None
    val_op = ins.args[-1]

    def replace_field(ins, mask, full):
        a = m.addr(addr_op, ins)
        val = np.broadcast_to(np.asarray(m.rd(val_op, ty, ins)), (m.n,))
        ordv = np.broadcast_to(np.asarray(m.rd(ord_op, "u32", ins)), (m.n,)) if ord_op is not None else None
        for t in np.nonzero(mask)[0]:
            sp, loc, raw = tensormaps.read(m, ins, a[t], t, space)
            if sp == "shared":
                checks.check_read(m, np.array([loc[1]]), (loc[2] // 4 + np.arange(32))[None, :], np.array([t]), ins)
            i = tensormaps.spec_of(m, ins, raw, f"{sp} 0x{int(a[t]):x}")
            spec = tensormaps.replace(m.tensormap_objs[i], field, None if ordv is None else int(ordv[t]),
                                      int(val[t]), ins)
            _write(m, ins, sp, loc, tensormaps.encode(m, spec), t)
        m.counts["tensormap.replace"] += int(np.count_nonzero(mask))
    return replace_field


@op("tensormap.cp_fenceproxy")
def cp_fenceproxy(m, ins):
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned [dst], [src], 128:
    the map copied from shared to global memory, then released to the tensormap proxy."""
    p = ins.parts
    if "global" not in p or "shared::cta" not in p or "release" not in p:
        raise Unsupported(ins.op, "tensormap.cp_fenceproxy other than .global.shared::cta ... .release")
    dst, src, size = ins.args[:3]

    def copy_and_release(ins, mask, full):
        if int(m.rd(size, "u32", ins)) != tensormaps.SIZE:
            raise Unsupported(ins.text, "a copy of other than 128 bytes")
        da, sa = m.addr(dst, ins), m.addr(src, ins)
        lanes = np.nonzero(mask)[0]
        for t in lanes:
            _, sloc, raw = tensormaps.read(m, ins, sa[t], t, "shared")
            checks.check_read(m, np.array([sloc[1]]), (sloc[2] // 4 + np.arange(32))[None, :], np.array([t]), ins)
            _write(m, ins, "global", ("global", int(da[t])), np.array(raw), t)
        # .sync.aligned: the warp copies and releases together, so each of its threads released each copy
        for d in np.unique(da[lanes]):
            tensormaps.release(m, lanes[da[lanes] == d], ("global", int(d)))
        m.counts["tensormap.cp_fenceproxy"] += int(np.count_nonzero(mask))
    return copy_and_release


@op("fence.proxy.tensormap::generic")
def tensormap_fence(m, ins):
    """fence.proxy.tensormap::generic.release.<scope> (what this thread wrote to maps) and
    .acquire.<scope> [addr], 128 (the map at addr, for this thread's TMAs)."""
    p = ins.parts
    if "release" in p:
        def release(ins, mask, full):
            for t in np.nonzero(mask)[0]:
                tensormaps.release(m, t)
            m.counts["fence.proxy.tensormap.release"] += int(np.count_nonzero(mask))
        return release
    if "acquire" not in p or not ins.args:
        raise Unsupported(ins.op)
    addr_op, size = ins.args[0], ins.args[1] if len(ins.args) > 1 else None

    def acquire(ins, mask, full):
        if size is not None and int(m.rd(size, "u32", ins)) != tensormaps.SIZE:
            raise Unsupported(ins.text, "an acquire of other than 128 bytes")
        a = m.addr(addr_op, ins)
        for t in np.nonzero(mask)[0]:
            sp, loc, raw = tensormaps.read(m, ins, a[t], t, "generic")
            tensormaps.acquire(m, ins, t, loc, tensormaps.decode(raw))
        m.counts["fence.proxy.tensormap.acquire"] += int(np.count_nonzero(mask))
    return acquire
