"""judge.model.ops.memory - ld, ldu, st, atom, red: global, shared (::cta and ::cluster), param, local, const;
ldmatrix and stmatrix (a warp's 8 x 8 b16 matrices between shared memory and registers).

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py. A shared-memory read
is checked against the word's state (judge.model.checks.check_read: unlanded or invisible bytes read
as poison and are a Violation); a store into bytes an asynchronous copy still writes or reads is
checked by check_overwrite; accesses across blocks of a cluster by check_cross.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks
from judge.model.checks import CPA_PENDING, GENERIC, POISON32, TMA_PENDING
from judge.model.errors import Unsupported
from judge.model.ops.common import wmma_fragment, half_format, rmw, types, vector_count
from judge.model.registry import op
from judge.model.state import DT, LOCAL_BASE, PARAM_BASE, STORE


@op("ld", "ldu", "st")
def load_store(m, ins):
    """ld / ldu / st in every state space (generic addresses resolved per access); shared accesses go through the race checks."""
    is_ld = ins.parts[0] in ("ld", "ldu")
    if {"bulk", "async", "mmio"} & set(ins.parts) or not types(ins.parts):
        raise Unsupported(ins.op)          # st.bulk (sm_100), an ld/st form this family does not read as one
    ty = types(ins.parts)[-1]
    if "b128" in ins.parts:
        raise Unsupported(ins.op, "128-bit scalar loads")
    vn = vector_count(ins.parts)
    esz = np.dtype(DT[ty]).itemsize if ty != "pred" else 1
    w = esz * vn
    space = m.space_of(ins)
    if is_ld:
        dst, src = ins.args[0], ins.args[1]
    else:
        src, val = ins.args[0], ins.args[1]

    def access(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        a = m.addr(src if is_ld else src, ins)
        sp = space
        if sp == "generic":
            sp, a = m.resolve_generic(a, lanes, ins)
        if not is_ld:
            vals = [np.broadcast_to(np.asarray(m.rd(it, ty, ins)).astype(DT[ty]), (m.n,))
                    for it in (val.items if val.kind == "vec" else [val])]
            data = np.ascontiguousarray(np.stack([v[lanes] for v in vals], axis=1)).view(np.uint8).reshape(len(lanes), w)
        if sp in ("shared", "shared::cluster"):
            cta, off = m.smem_split(a, lanes, ins, cluster_ok=True)
            checks.check_smem_range(m, off, w, lanes, ins)
            words = m.words_of(off, w)
            if m.ncta > 1:
                checks.check_cross(m, cta, words, lanes, ins, atomic=False)
            if is_ld:
                data = _read_shared(m, cta, off, words, w, lanes, ins, "ld.shared")
            else:
                _write_shared(m, cta, off, words, data, lanes, ins, "st.shared")
        elif sp == "global" or sp == "const":
            if is_ld:
                data = m.gload(a, w, lanes, ins)
                m.counts["ld.global"] += len(lanes)
            else:
                m.gstore(a, data, lanes, ins)
                m.counts["st.global"] += len(lanes)
        elif sp == "param":
            off = (a[lanes] - np.uint64(PARAM_BASE)).astype(np.int64) if (a[lanes] >= np.uint64(PARAM_BASE)).all() else a[lanes].astype(np.int64)
            if not is_ld:
                raise Unsupported(ins.op, "stores to parameter space")
            data = m.param[off[:, None] + np.arange(w)]
        elif sp == "local":
            off = a[lanes]
            off = np.where(off >= np.uint64(LOCAL_BASE), off - np.uint64(LOCAL_BASE), off).astype(np.int64)
            if (off + w > m.local.shape[1]).any():
                raise Unsupported(ins.op, "local memory beyond the declared frame")
            if is_ld:
                data = m.local[lanes[:, None], off[:, None] + np.arange(w)]
                m.taint_load("local", lanes, off, w, lanes)
            else:
                m.local[lanes[:, None], off[:, None] + np.arange(w)] = data
                m.taint_store("local", lanes, off, w, lanes)
        else:
            raise Unsupported(ins.op, f"state space {sp}")
        if is_ld:
            vals = np.ascontiguousarray(data).view(DT[ty]).reshape(len(lanes), vn)
            items = dst.items if dst.kind == "vec" else [dst]
            for i, it in enumerate(items):
                full_v = np.zeros(m.n, DT[ty])
                full_v[lanes] = vals[:, i]
                m.wr(it, full_v, mask, full)
    return access


def _write_shared(m, cta, off, words, data, lanes, ins, what):
    """The bytes `data` (lanes x w) into shared memory at (cta, off) per lane: a store into bytes an
    asynchronous copy still writes or reads is checked (check_overwrite); the words become generic writes
    of these lanes, now."""
    w = data.shape[1]
    st = m.w_state[cta[:, None], words]
    if ((st == CPA_PENDING) | (st == TMA_PENDING)).any() or (m.bulk_reading[cta[:, None], words] > 0).any():
        checks.check_overwrite(m, cta, words, lanes, ins, what)
    elif m.bulk_waited_any:
        checks.check_bulk_waited(m, cta, words, lanes, ins, what)
    m.sm[cta[:, None], off[:, None] + np.arange(w)] = data
    m.taint_store("shared", cta, off, w, lanes)
    m.w_state[cta[:, None], words] = GENERIC
    m.w_thread[cta[:, None], words] = lanes[:, None]
    m.w_time[cta[:, None], words] = m.gtime
    m.w_atomic[cta[:, None], words] = False
    m.counts[what] += len(lanes)
    m.counts[f"smem_fill.{what}.bytes"] += len(lanes) * w


def _read_shared(m, cta, off, words, w, lanes, ins, what):
    """w bytes per lane from shared memory at (cta, off): the words' state checked (check_read; what may not
    be seen reads as poison), the read noted for the race checks, counted under `what`."""
    bad = checks.check_read(m, cta, words, lanes, ins)
    data = m.sm[cta[:, None], off[:, None] + np.arange(w)]
    if bad is not None and bad.any():       # (strict=False) what may not be seen is poison
        nb = np.repeat(bad, 4, axis=1)[:, :w] if w >= 4 else np.broadcast_to(bad[:, :1], (len(lanes), w))
        poison = np.broadcast_to(np.frombuffer(np.uint32(POISON32).tobytes(), np.uint8),
                                 (len(lanes), max(w, 4) // 4, 4)).reshape(len(lanes), -1)[:, :w]
        data = np.where(nb, poison, data)
    checks.note_read(m, cta, words, lanes, m.cur_pc)
    m.taint_load("shared", cta, off, w, lanes)
    m.counts[what] += len(lanes)
    return data


@op("ldmatrix", "stmatrix")
def matrix_fragments(m, ins):
    """ldmatrix / stmatrix .sync.aligned.m8n8.x1/.x2/.x4{.trans}{.shared{::cta}}.b16 [p], {r0, ...}: the warp
    loads or stores 1, 2 or 4 matrices of 8 x 8 b16 between shared memory and registers.
    RULE (PTX ISA, ldmatrix / stmatrix): lane 8 i + r gives the address of row r of matrix i (16 contiguous
    bytes, 16-byte aligned). Register i of lane L holds, without .trans, row L / 4, columns 2 (L % 4) and
    2 (L % 4) + 1 of matrix i (one warp's m16n8 piece of a wgmma accumulator, or of an A fragment, is two such
    matrices); with .trans, column L / 4 of rows 2 (L % 4) and 2 (L % 4) + 1 (the matrix read or written
    column by column)."""
    is_ld = ins.parts[0] == "ldmatrix"
    if "m8n8" not in ins.parts or "b16" not in ins.parts:
        raise Unsupported(ins.op, f"{ins.parts[0]} shapes other than .m8n8 .b16")
    trans = "trans" in ins.parts
    count = 4 if "x4" in ins.parts else 2 if "x2" in ins.parts else 1
    if m.space_of(ins) not in ("shared", "generic"):
        raise Unsupported(ins.op, f"{ins.parts[0]} in state space {m.space_of(ins)}")
    regs, where = (ins.args[0], ins.args[1]) if is_ld else (ins.args[1], ins.args[0])
    items = regs.items if regs.kind == "vec" else [regs]
    if len(items) != count:
        raise Unsupported(ins.op, f"{len(items)} registers for .x{count}")
    what = ins.parts[0]

    def pieces(a, lanes, i):
        """(address per lane, bytes, byte offset in the register) of matrix i's parts in this lane's register."""
        base, lane = lanes - lanes % 32, lanes % 32
        out = []
        if not trans:
            t = np.zeros(m.n, np.uint64)
            t[lanes] = a[base + 8 * i + lane // 4] + np.uint64(4) * (lane % 4).astype(np.uint64)
            out.append((t, 4, 0))
        else:
            for half in (0, 1):
                t = np.zeros(m.n, np.uint64)
                t[lanes] = a[base + 8 * i + 2 * (lane % 4) + half] + np.uint64(2) * (lane // 4).astype(np.uint64)
                out.append((t, 2, 2 * half))
        return out

    def move_fragments(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        for w0 in np.unique(lanes // 32):
            k = int(np.count_nonzero(mask[32 * w0:32 * w0 + 32]))
            if k != 32:
                m.fail("warp-aligned", ins, f"{k} lanes of warp {int(w0)} executed {ins.op}; all 32 must execute it together")
        a = m.addr(where, ins)
        if m.space_of(ins) == "generic":
            sp, a = m.resolve_generic(a, lanes, ins)
            if sp != "shared":
                raise Unsupported(ins.op, f"{what} through a generic address of {sp} memory")
        rows = lanes[lanes % 32 < 8 * count]
        if (a[rows] % np.uint64(16)).any():
            m.fail("alignment", ins, f"{ins.op}: a row address is not 16-byte aligned (each row is 16 contiguous bytes)")
        for i, it in enumerate(items):
            reg = np.zeros((len(lanes), 4), np.uint8)
            if not is_ld:
                v = np.broadcast_to(np.asarray(m.rd(it, "b32", ins)).astype(np.uint32), (m.n,))
                reg = np.ascontiguousarray(v[lanes]).view(np.uint8).reshape(len(lanes), 4)
            for target, w, at in pieces(a, lanes, i):
                cta, off = m.smem_split(target, lanes, ins, cluster_ok=False)
                checks.check_smem_range(m, off, w, lanes, ins)
                words = m.words_of(off, w)
                if is_ld:
                    reg[:, at:at + w] = _read_shared(m, cta, off, words, w, lanes, ins, what)
                else:
                    _write_shared(m, cta, off, words, np.ascontiguousarray(reg[:, at:at + w]), lanes, ins, what)
            if is_ld:
                out = np.zeros(m.n, np.uint32)
                out[lanes] = np.ascontiguousarray(reg).view(np.uint32).ravel()
                m.wr(it, out, mask, full)
    return move_fragments


@op("wmma.load", "wmma.store")
def warp_matrix(m, ins):
    """wmma.load.{a,b,c} / wmma.store.d .sync.aligned.{row,col}.m16n16k16{.global,.shared}.{bf16,f16,f32}
    {regs}, [p]{, stride} (what nvcuda::wmma::load_matrix_sync / store_matrix_sync compile to): the warp moves
    one 16 x 16 matrix between memory and a fragment (common.wmma_fragment says which lane holds which
    element). stride counts elements between rows (.row) or columns (.col), 16 when absent.
    RULE (CUDA C++ Programming Guide, warp matrix functions): all 32 lanes execute it with the same pointer
    and stride; the pointer is 256-bit (32-byte) aligned and the stride a multiple of 16 bytes.
    16-bit A and B are m16n16k16's bf16 (4 registers) or f16 (8 registers: the last 4 repeat the first 4);
    C and D are f32 (8 registers). Other shapes and types (tf32, integer, f16 accumulators) are refused."""
    p = ins.parts
    is_ld = p[1] == "load"
    which = p[2] if len(p) > 2 else ""
    el = next((x for x in ("bf16", "f16", "f32") if x in p), None)
    layout = "row" if "row" in p else "col" if "col" in p else None
    ok = "m16n16k16" in p and layout and ((which in ("a", "b") and is_ld and el in ("bf16", "f16"))
                                          or (which == "c" and is_ld and el == "f32")
                                          or (which == "d" and not is_ld and el == "f32"))
    if not ok:
        raise Unsupported(ins.op, "wmma forms other than m16n16k16 with bf16 / f16 A and B and f32 C and D")
    regs, where = (ins.args[0], ins.args[1]) if is_ld else (ins.args[1], ins.args[0])
    stride_op = ins.args[2] if len(ins.args) > 2 else None
    items = regs.items if regs.kind == "vec" else [regs]
    want = 8 if el in ("f32", "f16") else 4
    if len(items) != want:
        raise Unsupported(ins.op, f"{len(items)} registers; this form has {want}")
    es = 4 if el == "f32" else 2
    kind = "c" if which in ("c", "d") else which
    what = f"wmma.{p[1]}"

    def move(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        a = m.addr(where, ins)
        stride = (np.broadcast_to(np.asarray(m.rd(stride_op, "u32", ins)), (m.n,)).astype(np.int64)
                  if stride_op is not None else np.full(m.n, 16, np.int64))
        for w0 in np.unique(lanes // 32):
            ln = np.arange(32 * w0, 32 * w0 + 32)
            if np.count_nonzero(mask[ln]) != 32:
                m.fail("warp-aligned", ins, f"{np.count_nonzero(mask[ln])} lanes of warp {int(w0)} executed {ins.op}; "
                                            "all 32 must execute it together")
            elif len(set(a[ln].tolist())) > 1 or len(set(stride[ln].tolist())) > 1:
                m.fail("warp-aligned", ins, f"the lanes of warp {int(w0)} gave {ins.op} different pointers or strides; "
                                            "the warp moves one matrix, named the same by every lane")
        if (a[lanes] % np.uint64(32)).any():
            m.fail("alignment", ins, f"{ins.op}: the matrix pointer is not 256-bit (32-byte) aligned")
        if ((stride[lanes] * es) % 16).any():
            m.fail("alignment", ins, f"{ins.op}: the stride ({int(stride[lanes][0])} elements) is not a multiple of "
                                     "16 bytes")
        sp = m.space_of(ins)
        if sp == "generic":
            sp, a = m.resolve_generic(a, lanes, ins)
        if sp not in ("global", "shared"):
            raise Unsupported(ins.op, f"wmma in state space {sp}")
        vals = [np.zeros((len(lanes), 4), np.uint8) for _ in range(min(len(items), 8 if es == 4 else 4))]
        if not is_ld:
            for j, it in enumerate(items):
                v = np.broadcast_to(np.asarray(m.rd(it, "b32", ins)).astype(np.uint32), (m.n,))
                vals[j] = np.ascontiguousarray(v[lanes]).view(np.uint8).reshape(len(lanes), 4)
        for reg, at, r, c in wmma_fragment(kind, lanes % 32):
            idx = r * stride[lanes] + c if layout == "row" else c * stride[lanes] + r
            t = np.zeros(m.n, np.uint64)
            t[lanes] = a[lanes] + (idx * es).astype(np.uint64)
            if sp == "global":
                if is_ld:
                    vals[reg][:, at:at + es] = m.gload(t, es, lanes, ins)
                else:
                    m.gstore(t, np.ascontiguousarray(vals[reg][:, at:at + es]), lanes, ins)
            else:
                cta, off = m.smem_split(t, lanes, ins, cluster_ok=False)
                checks.check_smem_range(m, off, es, lanes, ins)
                words = m.words_of(off, es)
                if is_ld:
                    vals[reg][:, at:at + es] = _read_shared(m, cta, off, words, es, lanes, ins, what)
                else:
                    _write_shared(m, cta, off, words, np.ascontiguousarray(vals[reg][:, at:at + es]), lanes, ins,
                                  what)
        if is_ld:
            for j, it in enumerate(items):
                out = np.zeros(m.n, np.uint32)
                out[lanes] = np.ascontiguousarray(vals[j % len(vals)]).view(np.uint32).ravel()
                m.wr(it, out if es == 2 else out.view(np.float32), mask, full)
        m.counts[what] += len(lanes) // 32
    return move


#: integer adds on shared memory run every lane at once (_shared_int_adds); False: one lane at a time (the
#: reference the test compares it with)
VECTOR_ADDS = True


def _atomic_addresses(m, addr_op, space, mask, ins):
    """The lanes of an atomic, its state space and each lane's address (a generic one resolved per lane)."""
    lanes = np.nonzero(mask)[0]
    a = m.addr(addr_op, ins)
    if space == "generic":
        space, a = m.resolve_generic(a, lanes, ins)
    return lanes, space, a


def _atomic_shared_words(m, a, lanes, w, ins):
    """The shared (or cluster-shared) words an atomic of w bytes at a touches for `lanes`: checked as a read
    and, across blocks, as an atomic access. Returns (block, byte offset, words)."""
    cta, off = m.smem_split(a, lanes, ins, cluster_ok=True)
    checks.check_smem_range(m, off, w, lanes, ins)
    words = m.words_of(off, w)
    checks.check_read(m, cta, words, lanes, ins)
    if m.ncta > 1:
        checks.check_cross(m, cta, words, lanes, ins, atomic=True)
    return cta, off, words


def _atomic_bytes(m, sp, a, t, w, ins):
    """An atomic's w bytes at address a of lane t (shared: checked as a read and, across blocks, as an atomic
    access): (the bytes, a function writing the new bytes back as lane t's atomic write)."""
    one = np.array([t])
    if sp in ("shared", "shared::cluster"):
        cta, off, words = _atomic_shared_words(m, a, one, w, ins)
        c, o, wd = int(cta[0]), int(off[0]), words[0]

        def put(nb):
            m.sm[c, o:o + w] = nb
            m.w_state[c, wd] = GENERIC
            m.w_thread[c, wd] = t
            m.w_time[c, wd] = m.gtime
            m.w_atomic[c, wd] = True
        return m.sm[c, o:o + w].copy(), put
    return m.gload(a, w, one, ins)[0].copy(), lambda nb: m.gstore(a, nb.reshape(1, w), one, ins)


@op("atom", "red")
def atomic(m, ins):
    """atom / red: read-modify-write, one lane at a time in lane order (atomics never race)."""
    is_red = ins.parts[0] == "red"
    ty = types(ins.parts)[-1]
    opn = next((o for o in ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec") if o in ins.parts), None)
    if opn == "add" and (vector_count(ins.parts) > 1 or ty in ("f16", "bf16", "f16x2", "bf16x2")):
        return _float_adds(m, ins, is_red, ty)
    if opn is None or vector_count(ins.parts) > 1 or ty in ("f16", "bf16", "f16x2", "bf16x2"):
        raise Unsupported(ins.op)
    space = m.space_of(ins)
    w = np.dtype(DT[ty]).itemsize
    if is_red:
        addr_op, b_op, c_op, d = ins.args[0], ins.args[1], None, None
    else:
        d, addr_op, b_op = ins.args[:3]
        c_op = ins.args[3] if opn == "cas" else None

    def atomic_lane_by_lane(ins, mask, full):
        lanes, sp, a = _atomic_addresses(m, addr_op, space, mask, ins)
        b = np.broadcast_to(np.asarray(m.rd(b_op, ty, ins)), (m.n,))
        if VECTOR_ADDS and opn == "add" and sp in ("shared", "shared::cluster", "global") and ty[0] in "usb" \
                and len(lanes):
            old = _int_adds(m, sp, a, lanes, b, ty, w, ins)     # the same result, every lane at once
            m.counts["atom"] += len(lanes)
            if d is not None:
                m.wr(d, old, mask, full)
            return
        c = np.broadcast_to(np.asarray(m.rd(c_op, ty, ins)), (m.n,)) if c_op is not None else None
        old = np.zeros(m.n, DT[ty])
        for t in lanes:                      # one lane at a time, in lane order
            raw, put = _atomic_bytes(m, sp, a, t, w, ins)
            cur = raw.view(DT[ty])[0]
            old[t] = cur
            new = rmw(opn, cur, b[t], c[t] if c is not None else None)
            if ty.startswith("f"):
                put(np.array([new], DT[ty]).view(np.uint8))
            else:
                put(np.array([int(new) & ((1 << (8 * w)) - 1)], np.uint64).astype(STORE[w]).view(np.uint8))
        m.counts["atom"] += len(lanes)
        if d is not None:
            m.wr(d, old, mask, full)
    return atomic_lane_by_lane


def _int_adds(m, sp, a, lanes, b, ty, w, ins):
    """Integer atom/red.add of lanes `lanes` on global or shared (or another cluster block's shared) memory, all
    at once, with the result of doing them one lane at a time in lane order: each lane's old value is the
    word's value plus the operands of the lanes before it at the same address, the word ends with every
    operand added (wrapping at the type's width), and the last lane in order is the word's last writer. The
    checks are the lane-by-lane ones over every lane (atomics never race with atomics). Returns the old
    values (m.n)."""
    u = STORE[w]
    if sp == "global":
        cur = np.ascontiguousarray(m.gload(a, w, lanes, ins)).view(u).reshape(-1)
        key = a[lanes].astype(np.int64)
    else:
        cta, off, words = _atomic_shared_words(m, a, lanes, w, ins)
        cur = np.ascontiguousarray(m.sm[cta[:, None], off[:, None] + np.arange(w)]).view(u).reshape(-1)
        key = cta.astype(np.int64) * (1 << 40) + off.astype(np.int64)
    x = np.asarray(b[lanes]).astype(DT[ty]).view(u) if np.dtype(DT[ty]).itemsize == w else \
        np.asarray(b[lanes]).astype(u)
    _, inv = np.unique(key, return_inverse=True)
    order = np.argsort(inv, kind="stable")             # lanes grouped by address, lane order kept
    xs = x[order]
    incl = np.cumsum(xs, dtype=u)                      # wraps at the type's width, as the hardware does
    excl = incl - xs
    g = inv[order]
    first = np.r_[True, g[1:] != g[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(g)), 0))
    olds = cur[order] + (excl - excl[start])
    last = np.r_[g[1:] != g[:-1], True]
    new = olds[last] + xs[last]
    tl = lanes[order][last]
    nb = new.astype(u).view(np.uint8).reshape(-1, w)
    if sp == "global":
        m.gstore(a, nb[np.argsort(tl)], np.sort(tl), ins)
    else:
        cl, ol, wd = cta[order][last], off[order][last], words[order][last]
        m.sm[cl[:, None], ol[:, None] + np.arange(w)] = nb
        m.w_state[cl[:, None], wd] = GENERIC
        m.w_thread[cl[:, None], wd] = tl[:, None]
        m.w_time[cl[:, None], wd] = m.gtime
        m.w_atomic[cl[:, None], wd] = True
    out = np.zeros(m.n, DT[ty])
    back = np.empty(len(lanes), u)
    back[order] = olds
    out[lanes] = back.view(DT[ty]) if np.dtype(DT[ty]).itemsize == w else back
    return out


def _float_adds(m, ins, is_red, ty):
    """atom / red .add on floats that come several to an access: .v2/.v4 .f32 (sm_90, global), .f16x2 / .bf16x2
    (two halves in one .b32) and .f16 / .bf16, each with .v2/.v4/.v8 where PTX allows it. RULE (PTX ISA, atom):
    each element is added atomically on its own and rounded to its type (round to nearest even; .noftz keeps
    subnormals); a vector atomic is not one atomic over the whole vector. atom returns the old values."""
    vn = vector_count(ins.parts)
    half = half_format(ty)
    esz = 4 if ty in ("f32", "f16x2", "bf16x2") else 2 if half is not None else None
    if esz is None:
        raise Unsupported(ins.op)
    w = esz * vn
    space = m.space_of(ins)
    if is_red:
        addr_op, b_op, d = ins.args[0], ins.args[1], None
    else:
        d, addr_op, b_op = ins.args[:3]
    reg_ty = "f32" if ty == "f32" else "b32" if esz == 4 else "b16"
    items = b_op.items if b_op.kind == "vec" else [b_op]

    def element_adds(ins, mask, full):
        lanes, sp, a = _atomic_addresses(m, addr_op, space, mask, ins)
        vals = [np.broadcast_to(np.asarray(m.rd(it, reg_ty, ins)), (m.n,)) for it in items]
        olds = [np.zeros(m.n, DT[reg_ty]) for _ in items]
        for t in lanes:
            cur, put = _atomic_bytes(m, sp, a, t, w, ins)
            x = np.concatenate([np.asarray([v[t]]).astype(DT[reg_ty]).view(np.uint8) for v in vals])
            for i in range(vn):
                olds[i][t] = cur[i * esz:(i + 1) * esz].view(DT[reg_ty])[0]
            if half is None:
                new = (cur.view(np.float32).astype(np.float64) + x.view(np.float32).astype(np.float64)).astype(np.float32)
            else:
                new = (cur.view(half).astype(np.float64) + x.view(half).astype(np.float64)).astype(np.float32).astype(half)
            put(new.view(np.uint8))
        m.counts["atom"] += len(lanes)
        if d is not None:
            for it, o in zip(d.items if d.kind == "vec" else [d], olds):
                m.wr(it, o, mask, full)
    return element_adds
