"""judge.model.ops - what each PTX instruction does in the model (handlers for judge.model.machine).

handler(machine, instr) returns fn(instr, mask, full) for the instruction's opcode; an opcode the
model does not know raises machine.Unsupported naming it, so an unknown kernel is never judged.
"""
from __future__ import annotations


import numpy as np

from judge.model import machine as M
from judge.model.machine import DT, STORE, Unsupported, _types

_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater,
        "hs": np.greater_equal}


def _f(x):
    return np.asarray(x, np.float64)


def _round_to(v, ty):
    if ty == "f32":
        return np.asarray(v, np.float64).astype(np.float32)
    if ty == "f64":
        return np.asarray(v, np.float64)
    if ty == "f16":
        return np.asarray(v, np.float64).astype(np.float16)
    raise Unsupported(f"arithmetic on .{ty}")


def _sat(v, ins):
    return np.clip(v, 0.0, 1.0) if "sat" in ins.parts else v


def _intwrap(v, ty):
    dt = np.dtype(DT[ty])
    v = np.asarray(v)
    if v.dtype.kind == "i":
        return v.astype(np.int64).astype(dt) if dt.kind == "i" else v.astype(np.int64).astype(np.uint64).astype(dt)
    return v.astype(np.uint64).astype(dt) if dt.kind == "u" else v.astype(np.uint64).astype(np.int64).astype(dt)


def handler(m, ins):
    from judge.model import registry
    p = ins.parts
    f = registry.lookup(p) or _TABLE.get(p[0])
    if f is None:
        raise Unsupported(ins.op, f"PTX line {ins.line}: {ins.text}")
    return f(m, ins)


# ---------------------------------------------------------------------------- ALU
def _binop(m, ins, fn_int, fn_float):
    ty = _types(ins.parts)[-1]
    d, a, b = ins.args[:3]
    flt = ty in ("f32", "f64", "f16")
    if ty in ("f16x2", "bf16x2", "bf16"):
        raise Unsupported(ins.op, "packed half/bf16 arithmetic")

    def run(ins, mask, full):
        x, y = m.rd(a, ty, ins), m.rd(b, ty, ins)
        if flt:
            r = _round_to(_sat(fn_float(_f(x), _f(y)), ins), ty)
        else:
            r = _intwrap(fn_int(x, y, ty), ty)
        m.wr(d, r, mask, full)
    return run


def _add(m, ins):
    if "cc" in ins.parts or ins.parts[0] in ("addc", "subc"):
        raise Unsupported(ins.op, "carry chains")
    if "sat" in ins.parts and "s32" in ins.parts:
        return _binop(m, ins, lambda x, y, t: np.clip(x.astype(np.int64) + y, -2**31, 2**31 - 1), None)
    return _binop(m, ins, lambda x, y, t: x.astype(np.int64) + y if np.dtype(DT[t]).itemsize < 8 else x + y,
                  lambda x, y: x + y)


def _sub(m, ins):
    return _binop(m, ins, lambda x, y, t: x.astype(np.int64) - y if np.dtype(DT[t]).itemsize < 8 else x - y,
                  lambda x, y: x - y)


def _wide_t(ty):
    return {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[ty]


def _mul(m, ins):
    ty = _types(ins.parts)[-1]
    d, a, b = ins.args[:3]
    if ty in ("f32", "f64", "f16"):
        return _binop(m, ins, None, lambda x, y: x * y)
    mode = "lo" if "lo" in ins.parts else "hi" if "hi" in ins.parts else "wide" if "wide" in ins.parts else "lo"
    signed = ty.startswith("s")
    bits = 8 * np.dtype(DT[ty]).itemsize

    def run(ins, mask, full):
        x, y = m.rd(a, ty, ins), m.rd(b, ty, ins)
        if mode == "wide":
            r = _intwrap(x.astype(np.int64 if signed else np.uint64) * y.astype(np.int64 if signed else np.uint64), _wide_t(ty))
        elif mode == "lo":
            r = _intwrap(x.astype(np.int64 if signed else np.uint64) * y.astype(np.int64 if signed else np.uint64), ty)
        else:
            if bits == 64:
                xs = np.broadcast_to(x, (m.n,))
                ys = np.broadcast_to(y, (m.n,))
                r = np.array([(int(u) * int(v)) >> 64 for u, v in zip(xs, ys)], dtype=object)
                r = np.array([int(v) & (2**64 - 1) for v in r], np.uint64).view(DT[ty])
            else:
                r = _intwrap((x.astype(np.int64) * y.astype(np.int64)) >> bits, ty)
        m.wr(d, r, mask, full)
    return run


def _mad(m, ins):
    ty = _types(ins.parts)[-1]
    d, a, b, c = ins.args[:4]
    if ty in ("f32", "f64"):
        def runf(ins, mask, full):
            r = _f(m.rd(a, ty, ins)) * _f(m.rd(b, ty, ins)) + _f(m.rd(c, ty, ins))
            m.wr(d, _round_to(_sat(r, ins), ty), mask, full)
        return runf
    if "hi" in ins.parts or "cc" in ins.parts:
        raise Unsupported(ins.op)
    wide = "wide" in ins.parts
    signed = ty.startswith("s")
    big = np.int64 if signed else np.uint64

    def run(ins, mask, full):
        x, y = m.rd(a, ty, ins).astype(big), m.rd(b, ty, ins).astype(big)
        z = m.rd(c, _wide_t(ty) if wide else ty, ins).astype(big)
        m.wr(d, _intwrap(x * y + z, _wide_t(ty) if wide else ty), mask, full)
    return run


def _div(m, ins):
    ty = _types(ins.parts)[-1]
    if ty in ("f32", "f64"):
        return _binop(m, ins, None, lambda x, y: x / y)
    signed = ty.startswith("s")

    def q(x, y, t):
        x, y = x.astype(np.int64) if signed else x.astype(np.uint64), y.astype(np.int64) if signed else y.astype(np.uint64)
        y0 = np.where(y == 0, 1, y)
        if signed:
            r = np.abs(x) // np.abs(y0) * np.sign(x) * np.sign(y0)
        else:
            r = x // y0
        return np.where(y == 0, -1 if signed else np.iinfo(DT[t]).max, r)
    return _binop(m, ins, q, None)


def _rem(m, ins):
    ty = _types(ins.parts)[-1]
    signed = ty.startswith("s")

    def r(x, y, t):
        x, y = x.astype(np.int64) if signed else x.astype(np.uint64), y.astype(np.int64) if signed else y.astype(np.uint64)
        y0 = np.where(y == 0, 1, y)
        if signed:
            return np.sign(x) * (np.abs(x) % np.abs(y0))
        return x % y0
    return _binop(m, ins, r, None)


def _minmax(m, ins):
    fn = np.minimum if ins.parts[0] == "min" else np.maximum
    ffn = np.fmin if ins.parts[0] == "min" else np.fmax
    if "relu" in ins.parts or "xorsign" in ins.parts:
        raise Unsupported(ins.op)
    return _binop(m, ins, lambda x, y, t: fn(x, y), lambda x, y: ffn(x, y))


def _logic(fn):
    def make(m, ins):
        ty = _types(ins.parts)[-1]
        d, a, b = ins.args[:3]

        def run(ins, mask, full):
            m.wr(d, fn(m.rd(a, ty, ins), m.rd(b, ty, ins)), mask, full)
        return run
    return make


def _unary(m, ins):
    op = ins.parts[0]
    ty = _types(ins.parts)[-1]
    d, a = ins.args[:2]
    flt = ty in ("f32", "f64", "f16")

    def run(ins, mask, full):
        x = m.rd(a, ty, ins)
        if op == "not":
            r = ~x if ty != "pred" else ~x
        elif op == "neg":
            r = -_f(x) if flt else _intwrap(-x.astype(np.int64), ty)
        elif op == "abs":
            r = np.abs(_f(x)) if flt else _intwrap(np.abs(x.astype(np.int64)), ty)
        elif op == "cnot":
            r = (x == 0).astype(DT[ty])
        elif op in ("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"):
            xf = _f(x)
            with np.errstate(all="ignore"):
                r = {"rcp": lambda v: 1.0 / v, "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v),
                     "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}[op](xf)
        elif op == "popc":
            xb = np.asarray(x).astype(np.uint64)
            r = np.array([bin(int(v)).count("1") for v in np.broadcast_to(xb, (m.n,))], np.uint32)
        elif op == "clz":
            bits = 8 * np.dtype(DT[ty]).itemsize
            xb = np.broadcast_to(np.asarray(x).astype(np.uint64), (m.n,))
            r = np.array([bits - int(v).bit_length() for v in xb], np.uint32)
        elif op == "brev":
            bits = 8 * np.dtype(DT[ty]).itemsize
            xb = np.broadcast_to(np.asarray(x).astype(np.uint64), (m.n,))
            r = np.array([int(format(int(v), f"0{bits}b")[::-1], 2) for v in xb], np.uint64).astype(DT[ty])
        else:
            raise Unsupported(ins.op)
        if flt and op not in ("popc", "clz", "brev", "not", "cnot"):
            r = _round_to(_sat(r, ins), ty)
        m.wr(d, r, mask, full)
    return run


def _fma(m, ins):
    ty = _types(ins.parts)[-1]
    if ty not in ("f32", "f64"):
        raise Unsupported(ins.op, "fma on packed types")
    d, a, b, c = ins.args[:4]

    def run(ins, mask, full):
        r = _f(m.rd(a, ty, ins)) * _f(m.rd(b, ty, ins)) + _f(m.rd(c, ty, ins))
        m.wr(d, _round_to(_sat(r, ins), ty), mask, full)
    if ty != "f32" or "sat" in ins.parts or not all(o.kind == "reg" and not o.neg for o in (d, a, b, c)):
        return run
    R = m.regs
    f32, f64, u32 = np.float32, np.float64, np.uint32

    def fast(ins, mask, full):
        # the hot path of every GEMM: three float32 registers, product exact in float64, one rounding
        x, y, z, o = R.get(a.name), R.get(b.name), R.get(c.name), R.get(d.name)
        if x is None or y is None or z is None or o is None or not full or \
                not (x.dtype == y.dtype == z.dtype == o.dtype == u32):
            return run(ins, mask, full)
        o[:] = (x.view(f32).astype(f64) * y.view(f32) + z.view(f32)).astype(f32).view(u32)
    return fast


def _shift(m, ins):
    op = ins.parts[0]
    ty = _types(ins.parts)[-1]
    d, a, b = ins.args[:3]
    bits = 8 * np.dtype(DT[ty]).itemsize
    signed = ty.startswith("s")

    def run(ins, mask, full):
        x = m.rd(a, ty, ins)
        s = np.asarray(m.rd(b, "u32", ins)).astype(np.int64)
        big = np.where(s >= bits, 1, 0)
        sc = np.minimum(s, bits - 1).astype(np.uint64 if not signed else np.int64)
        if op == "shl":
            xu = np.asarray(x).astype(np.uint64) if bits == 64 else np.asarray(x).astype(np.int64).astype(np.uint64)
            r = np.where(big, 0, xu << sc.astype(np.uint64))
            r = _intwrap(r, ty)
        elif signed:
            r = np.asarray(x).astype(np.int64) >> sc.astype(np.int64)
            r = _intwrap(r, ty)
        else:
            xu = np.asarray(x).astype(np.uint64)
            r = np.where(big, 0, xu >> sc.astype(np.uint64))
            r = _intwrap(r, ty)
        m.wr(d, r, mask, full)
    return run


def _setp(m, ins):
    parts = ins.parts
    cmp = next((c for c in parts[1:] if c in _CMP or c.rstrip("u") in _CMP or c in ("num", "nan")), None)
    ty = _types(parts)[-1]
    comb = next((c for c in ("and", "or", "xor") if c in parts[1:]), None)
    dst = ins.args[0]
    a, b = ins.args[1:3]
    c = ins.args[3] if comb and len(ins.args) > 3 else None
    flt = ty in ("f32", "f64", "f16")

    def run(ins, mask, full):
        x, y = m.rd(a, ty, ins), m.rd(b, ty, ins)
        if flt:
            x, y = _f(x), _f(y)
            unordered = np.isnan(x) | np.isnan(y)
            if cmp == "num":
                r = ~unordered
            elif cmp == "nan":
                r = unordered
            elif cmp.endswith("u") and cmp[:-1] in _CMP:
                r = _CMP[cmp[:-1]](x, y) | unordered
            else:
                r = _CMP[cmp](x, y) & ~unordered if cmp != "ne" else (x != y) & ~unordered
        else:
            r = _CMP[cmp](x, y)
        r = np.broadcast_to(r, (m.n,))
        if c is not None:
            cv = m.rd(c, "pred", ins)
            r = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[comb](r, cv)
        if dst.kind == "vec":
            m.wr(dst.items[0], r, mask, full)
            m.wr(dst.items[1], ~r, mask, full)
        else:
            m.wr(dst, r, mask, full)
    return run


def _selp(m, ins):
    ty = _types(ins.parts)[-1]
    d, a, b, c = ins.args

    def run(ins, mask, full):
        m.wr(d, np.where(m.rd(c, "pred", ins), m.rd(a, ty, ins), m.rd(b, ty, ins)).astype(DT[ty]), mask, full)
    return run


def _mov(m, ins):
    ty = _types(ins.parts)[-1]
    d, a = ins.args[:2]
    if d.kind == "vec":                  # mov.b64 {lo, hi}, x  (unpack)
        n = len(d.items)
        sub = {2: {"b64": "b32", "b32": "b16"}, 4: {"b64": "b16", "b32": "b8"}}[n][ty]

        def unpack(ins, mask, full):
            x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)), (m.n,)).copy()
            parts = x.view(DT[sub]).reshape(m.n, n)
            for i, it in enumerate(d.items):
                m.wr(it, parts[:, i].copy(), mask, full)
        return unpack
    if a.kind == "vec":                  # mov.b64 d, {lo, hi}  (pack)
        n = len(a.items)
        sub = {2: {"b64": "b32", "b32": "b16"}, 4: {"b64": "b16", "b32": "b8"}}[n][ty]

        def pack(ins, mask, full):
            cols = [np.broadcast_to(np.asarray(m.rd(it, sub, ins)), (m.n,)) for it in a.items]
            x = np.ascontiguousarray(np.stack(cols, axis=1)).view(DT[ty]).reshape(m.n)
            m.wr(d, x, mask, full)
        return pack

    def run(ins, mask, full):
        m.wr(d, m.rd(a, ty, ins), mask, full)
    return run


def _sreg_extra(m):
    return None


def _cvt(m, ins):
    tys = _types(ins.parts)
    if len(tys) < 2:
        raise Unsupported(ins.op)
    dt, st = tys[0], tys[1]
    rnd = next((r for r in ("rni", "rzi", "rmi", "rpi", "rn", "rz", "rm", "rp", "rna", "rs") if r in ins.parts), None)
    d = ins.args[0]
    if dt in ("f16x2", "bf16x2"):
        a, b = ins.args[1:3]

        def pack(ins, mask, full):
            def h(v):
                v = _f(m.rd(v, st, ins))
                if dt == "f16x2":
                    return v.astype(np.float16).view(np.uint16)
                import ml_dtypes
                return v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            hi, lo = np.broadcast_to(h(a), (m.n,)), np.broadcast_to(h(b), (m.n,))
            m.wr(d, (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32), mask, full)
        return pack
    a = ins.args[1]
    fl = {"f16", "bf16", "f32", "f64"}

    def to_float(x, t):
        if t == "bf16":
            import ml_dtypes
            return np.asarray(x).view(ml_dtypes.bfloat16).astype(np.float64)
        return _f(x)

    def run(ins, mask, full):
        x = m.rd(a, st, ins)
        if st in fl and dt in fl:
            v = to_float(x, st)
            if rnd in ("rni", "rzi", "rmi", "rpi"):
                v = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](v)
            if dt == "bf16":
                import ml_dtypes
                r = v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            else:
                r = v.astype(DT[dt])
            r = _sat(r, ins) if dt != "bf16" else r
        elif st in fl:
            v = to_float(x, st)
            v = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil, None: np.trunc}[rnd](v)
            info = np.iinfo(DT[dt])
            v = np.where(np.isnan(v), 0, np.clip(v, info.min, info.max))
            r = v.astype(np.float64).astype(DT[dt]) if np.dtype(DT[dt]).itemsize < 8 else np.array(
                [int(q) for q in np.broadcast_to(v, (m.n,))], dtype=object).astype(DT[dt])
        elif dt in fl:
            v = np.asarray(x).astype(np.float64)
            if dt == "bf16":
                import ml_dtypes
                r = v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            else:
                r = v.astype(DT[dt])
        else:
            if "sat" in ins.parts:
                info = np.iinfo(DT[dt])
                v = np.asarray(x).astype(np.int64) if st.startswith("s") or np.dtype(DT[st]).itemsize < 8 else np.asarray(x)
                r = np.clip(v, info.min, info.max).astype(DT[dt])
            else:
                r = _intwrap(np.asarray(x).astype(np.int64) if st[0] == "s" else np.asarray(x).astype(np.uint64), dt)
        m.wr(d, r, mask, full)
    return run


def _cvta(m, ins):
    d, a = ins.args[:2]
    to = "to" in ins.parts
    space = next((s for s in ("shared", "global", "local", "param", "const") if s in ins.parts), None)
    ty = _types(ins.parts)[-1]
    if space is None:
        raise Unsupported(ins.op)
    base = M.SHARED_BASE if space == "shared" else 0

    def run(ins, mask, full):
        x = np.asarray(m.rd(a, "u64" if ty == "u64" else "u32", ins)).astype(np.uint64)
        if space == "shared":
            if to:
                r = np.where(x >= np.uint64(M.SHARED_BASE), x - np.uint64(base), x)
            else:
                r = x + np.uint64(base)
        else:
            r = x
        m.wr(d, r.astype(DT[ty]), mask, full)
    return run


def _bfe(m, ins):
    ty = _types(ins.parts)[-1]
    d, a, b, c = ins.args
    bits = 8 * np.dtype(DT[ty]).itemsize
    signed = ty.startswith("s")

    def run(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)).astype(np.uint64 if not signed else np.int64), (m.n,))
        pos = np.broadcast_to(np.asarray(m.rd(b, "u32", ins)).astype(np.int64) & 0xFF, (m.n,))
        ln = np.broadcast_to(np.asarray(m.rd(c, "u32", ins)).astype(np.int64) & 0xFF, (m.n,))
        out = []
        for xv, p, l in zip(x.tolist(), pos.tolist(), ln.tolist()):
            xv &= (1 << bits) - 1
            if l == 0:
                out.append(0)
                continue
            p = min(p, bits - 1)
            v = (xv >> p) & ((1 << l) - 1)
            if signed:
                sb = ((xv >> min(p + l - 1, bits - 1)) & 1)
                if sb and l < bits:
                    v |= ((1 << bits) - 1) ^ ((1 << l) - 1)
            out.append(v)
        m.wr(d, np.array(out, np.uint64).astype(STORE[bits // 8]).view(DT[ty]), mask, full)
    return run


def _lop3(m, ins):
    d, a, b, c, lut = ins.args

    def run(ins, mask, full):
        x, y, z = (np.asarray(m.rd(o, "b32", ins)).astype(np.uint32) for o in (a, b, c))
        t = int(m.rd(lut, "b32", ins)) if lut.kind != "reg" else None
        if t is None:
            raise Unsupported(ins.op, "lop3 with a register LUT")
        r = np.zeros(np.broadcast(x, y, z).shape, np.uint32)
        for i in range(8):
            if (t >> i) & 1:
                tx = x if (i >> 2) & 1 else ~x
                ty_ = y if (i >> 1) & 1 else ~y
                tz = z if i & 1 else ~z
                r |= tx & ty_ & tz
        m.wr(d, r, mask, full)
    return run


def _prmt(m, ins):
    if len(ins.parts) > 2:
        raise Unsupported(ins.op, "prmt modes")
    d, a, b, c = ins.args

    def run(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, "b32", ins)).astype(np.uint64), (m.n,))
        y = np.broadcast_to(np.asarray(m.rd(b, "b32", ins)).astype(np.uint64), (m.n,))
        s = np.broadcast_to(np.asarray(m.rd(c, "b32", ins)).astype(np.uint64), (m.n,))
        by = np.stack([(x >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)] +
                      [(y >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)], axis=1)
        r = np.zeros(m.n, np.uint64)
        for i in range(4):
            sel = (s >> np.uint64(4 * i)) & np.uint64(0xF)
            v = by[np.arange(m.n), (sel & np.uint64(7)).astype(np.int64)]
            sign = (sel & np.uint64(8)) != 0
            v = np.where(sign, np.where(v & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)), v)
            r |= v << np.uint64(8 * i)
        m.wr(d, r.astype(np.uint32), mask, full)
    return run


def _shf(m, ins):
    d, a, b, c = ins.args
    left = "l" in ins.parts
    clamp = "clamp" in ins.parts

    def run(ins, mask, full):
        lo = np.asarray(m.rd(a, "b32", ins)).astype(np.uint64)
        hi = np.asarray(m.rd(b, "b32", ins)).astype(np.uint64)
        n = np.asarray(m.rd(c, "u32", ins)).astype(np.uint64)
        n = np.minimum(n, 32) if clamp else n & np.uint64(31)
        v = (hi << np.uint64(32)) | lo
        r = (v << n) >> np.uint64(32) if left else (v >> n)
        m.wr(d, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), mask, full)
    return run


# ---------------------------------------------------------------------------- memory
def _vec_n(parts):
    for q in parts:
        if q in ("v2", "v4", "v8"):
            return int(q[1])
    return 1


def _ldst(m, ins):
    is_ld = ins.parts[0] in ("ld", "ldu")
    ty = _types(ins.parts)[-1]
    if "b128" in ins.parts:
        raise Unsupported(ins.op, "128-bit scalar loads")
    vn = _vec_n(ins.parts)
    esz = np.dtype(DT[ty]).itemsize if ty != "pred" else 1
    w = esz * vn
    space = m.space_of(ins)
    if is_ld:
        dst, src = ins.args[0], ins.args[1]
    else:
        src, val = ins.args[0], ins.args[1]

    def run(ins, mask, full):
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
            m.check_smem_range(off, w, lanes, ins)
            words = m.words_of(off, w)
            if m.ncta > 1:
                m.check_cross(cta, words, lanes, ins, atomic=False)
            if is_ld:
                bad = m.check_read(cta, words, lanes, ins)
                data = m.sm[cta[:, None], off[:, None] + np.arange(w)]
                if bad is not None and bad.any():       # (strict=False) what may not be seen is poison
                    nb = np.repeat(bad, 4, axis=1)[:, :w] if w >= 4 else np.broadcast_to(bad[:, :1], (len(lanes), w))
                    poison = np.broadcast_to(np.frombuffer(np.uint32(M.POISON32).tobytes(), np.uint8),
                                             (len(lanes), max(w, 4) // 4, 4)).reshape(len(lanes), -1)[:, :w]
                    data = np.where(nb, poison, data)
                m.note_read(cta, words, lanes, m.cur_pc)
                m.counts["ld.shared"] += len(lanes)
            else:
                st = m.w_state[cta[:, None], words]
                if ((st == M.CPA_PENDING) | (st == M.TMA_PENDING)).any() or (m.bulk_reading[cta[:, None], words] > 0).any():
                    m.check_overwrite(cta, words, lanes, ins, "st.shared")
                m.sm[cta[:, None], off[:, None] + np.arange(w)] = data
                m.w_state[cta[:, None], words] = M.GENERIC
                m.w_thread[cta[:, None], words] = lanes[:, None]
                m.w_time[cta[:, None], words] = m.gtime
                m.w_atomic[cta[:, None], words] = False
                m.counts["st.shared"] += len(lanes)
                m.counts["smem_fill.st.shared.bytes"] += len(lanes) * w
        elif sp == "global" or sp == "const":
            if is_ld:
                data = m.gload(a, w, lanes, ins)
                m.counts["ld.global"] += len(lanes)
            else:
                m.gstore(a, data, lanes, ins)
                m.counts["st.global"] += len(lanes)
        elif sp == "param":
            off = (a[lanes] - np.uint64(M.PARAM_BASE)).astype(np.int64) if (a[lanes] >= np.uint64(M.PARAM_BASE)).all() else a[lanes].astype(np.int64)
            if not is_ld:
                raise Unsupported(ins.op, "stores to parameter space")
            data = m.param[off[:, None] + np.arange(w)]
        elif sp == "local":
            off = a[lanes]
            off = np.where(off >= np.uint64(M.LOCAL_BASE), off - np.uint64(M.LOCAL_BASE), off).astype(np.int64)
            if (off + w > m.local.shape[1]).any():
                raise Unsupported(ins.op, "local memory beyond the declared frame")
            if is_ld:
                data = m.local[lanes[:, None], off[:, None] + np.arange(w)]
            else:
                m.local[lanes[:, None], off[:, None] + np.arange(w)] = data
        else:
            raise Unsupported(ins.op, f"state space {sp}")
        if is_ld:
            vals = np.ascontiguousarray(data).view(DT[ty]).reshape(len(lanes), vn)
            items = dst.items if dst.kind == "vec" else [dst]
            for i, it in enumerate(items):
                full_v = np.zeros(m.n, DT[ty])
                full_v[lanes] = vals[:, i]
                m.wr(it, full_v, mask, full)
    return run


def _atom(m, ins):
    is_red = ins.parts[0] == "red"
    ty = _types(ins.parts)[-1]
    opn = next((o for o in ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec") if o in ins.parts), None)
    if opn is None or _vec_n(ins.parts) > 1 or ty in ("f16", "bf16", "f16x2", "bf16x2"):
        raise Unsupported(ins.op)
    space = m.space_of(ins)
    w = np.dtype(DT[ty]).itemsize
    if is_red:
        addr_op, b_op, c_op, d = ins.args[0], ins.args[1], None, None
    else:
        d, addr_op, b_op = ins.args[:3]
        c_op = ins.args[3] if opn == "cas" else None

    def run(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        a = m.addr(addr_op, ins)
        sp = space
        if sp == "generic":
            sp, a = m.resolve_generic(a, lanes, ins)
        b = np.broadcast_to(np.asarray(m.rd(b_op, ty, ins)), (m.n,))
        c = np.broadcast_to(np.asarray(m.rd(c_op, ty, ins)), (m.n,)) if c_op is not None else None
        old = np.zeros(m.n, DT[ty])
        for t in lanes:                      # one lane at a time, in lane order
            one = np.array([t])
            if sp in ("shared", "shared::cluster"):
                cta, off = m.smem_split(a, one, ins, cluster_ok=True)
                m.check_smem_range(off, w, one, ins)
                words = m.words_of(off, w)
                m.check_read(cta, words, one, ins)
                if m.ncta > 1:
                    m.check_cross(cta, words, one, ins, atomic=True)
                cur = m.sm[cta[0], off[0]:off[0] + w].view(DT[ty])[0]
            else:
                cur = m.gload(a, w, one, ins)[0].view(DT[ty])[0]
            old[t] = cur
            x = b[t]
            if opn == "add":
                new = (np.float64(cur) + np.float64(x)) if ty.startswith("f") else int(cur) + int(x)
            elif opn == "min":
                new = min(cur, x)
            elif opn == "max":
                new = max(cur, x)
            elif opn == "exch":
                new = x
            elif opn == "cas":
                new = c[t] if cur == x else cur
            elif opn == "and":
                new = int(cur) & int(x)
            elif opn == "or":
                new = int(cur) | int(x)
            elif opn == "xor":
                new = int(cur) ^ int(x)
            elif opn == "inc":
                new = 0 if int(cur) >= int(x) else int(cur) + 1
            else:
                new = x if (int(cur) == 0 or int(cur) > int(x)) else int(cur) - 1
            if ty.startswith("f"):
                nb = np.array([new], DT[ty]).view(np.uint8)
            else:
                nb = np.array([int(new) & ((1 << (8 * w)) - 1)], np.uint64).astype(STORE[w]).view(np.uint8)
            if sp in ("shared", "shared::cluster"):
                m.sm[cta[0], off[0]:off[0] + w] = nb
                m.w_state[cta[0], words[0]] = M.GENERIC
                m.w_thread[cta[0], words[0]] = t
                m.w_time[cta[0], words[0]] = m.gtime
                m.w_atomic[cta[0], words[0]] = True
            else:
                m.gstore(a, nb.reshape(1, w), one, ins)
        m.counts["atom"] += len(lanes)
        if d is not None:
            m.wr(d, old, mask, full)
    return run


# ---------------------------------------------------------------------------- control
def _bra(m, ins):
    if "idx" in ins.parts:
        raise Unsupported(ins.op)
    target = m.k.labels.get(ins.args[-1].name)
    if target is None:
        raise Unsupported(ins.text, "branch to an unknown label")

    def run(ins, mask, full):
        m.pc[mask] = target
    return run


def _exit(m, ins):
    def run(ins, mask, full):
        m.alive[mask] = False
        m.event("exit", threads=int(np.count_nonzero(mask)))
        m._on_exit(mask, ins)
    return run


def _nop(m, ins):
    def run(ins, mask, full):
        pass
    return run


def _createpolicy(m, ins):
    d = ins.args[0]

    def run(ins, mask, full):            # an opaque L2 cache policy: only a hint, no effect on results
        m.wr(d, np.zeros(m.n, np.uint64), mask, full)
    return run


def _trap(m, ins):
    def run(ins, mask, full):
        t = int(np.nonzero(mask)[0][0])
        m.fail("trap", ins, f"{m.tdesc(t)} executed trap (an assertion failed or the kernel aborted)")
        raise M.Violation("trap", m.where(ins), "trap")
    return run


# ---------------------------------------------------------------------------- barriers
def _bar(m, ins):
    p = ins.parts
    if p[0] in ("bar", "barrier") and len(p) > 1 and p[1] == "warp":
        return _bar_warp(m, ins)
    if p[0] == "barrier" and "cluster" in p:
        return _bar_cluster(m, ins)
    if "red" in p:
        raise Unsupported(ins.op, "barrier reductions")
    arrive = "arrive" in p
    if not arrive and "sync" not in p and not (p[0] == "bar" and len(p) == 1):
        raise Unsupported(ins.op)
    id_op = ins.args[0] if ins.args else None
    cnt_op = ins.args[1] if len(ins.args) > 1 else None

    def run(ins, mask, full):
        ids = np.broadcast_to(np.asarray(m.rd(id_op, "u32", ins)) if id_op else np.uint32(0), (m.n,))
        cnts = np.broadcast_to(np.asarray(m.rd(cnt_op, "u32", ins)), (m.n,)) if cnt_op else None
        lanes = np.nonzero(mask)[0]
        m.counts["bar.sync" if not arrive else "bar.arrive"] += len(lanes)
        keys = {}
        for t in lanes:
            keys.setdefault((int(m.cta[t]), int(ids[t])), []).append(t)
        for key, ts in keys.items():
            ts = np.array(ts)
            b = m.bars.get(key)
            if b is None:
                b = m.bars[key] = {"mask": np.zeros(m.n, bool), "waiters": np.zeros(m.n, bool),
                                   "expected": None, "pc": m.cur_pc}
            if cnts is not None:
                b["expected"] = int(cnts[ts[0]])
            b["mask"][ts] = True
            m.VC[ts, ts] = m.gtime
            if not arrive:
                b["waiters"][ts] = True
                m.blocked[ts] = True
                for t in ts:
                    m.block_why[int(t)] = ("bar", key)
            m._try_release_bar(key, ins)
    return run


def _bar_warp(m, ins):
    mop = ins.args[0]

    def run(ins, mask, full):
        mm = np.broadcast_to(np.asarray(m.rd(mop, "b32", ins)).astype(np.uint64), (m.n,))
        lanes = np.nonzero(mask)[0]
        for t in lanes:
            key = ("warp", int(m.cta[t]), int(m.lt[t]) // 32)
            b = m.bars.get(key)
            if b is None:
                b = m.bars[key] = {"mask": np.zeros(m.n, bool), "waiters": np.zeros(m.n, bool),
                                   "expected": bin(int(mm[t]) & 0xFFFFFFFF).count("1"), "pc": m.cur_pc}
            b["mask"][t] = True
            b["waiters"][t] = True
            m.blocked[t] = True
            m.block_why[int(t)] = ("bar", key)
            m.VC[t, t] = m.gtime
        for key in {("warp", int(m.cta[t]), int(m.lt[t]) // 32) for t in lanes}:
            m._try_release_bar(key, ins)
    return run


def _bar_cluster(m, ins):
    arrive = "arrive" in ins.parts

    def run(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        if arrive:
            for t in lanes:
                k = int(m.cl_count[t])
                acc = m.cl_acc.setdefault(k, np.zeros(m.VC.shape[1], np.int64))
                row = m.VC[t].copy()
                row[t] = m.gtime
                np.maximum(acc, row, out=acc)
                m.cl_count[t] += 1
            m.counts["barrier.cluster.arrive"] += len(lanes)
        else:
            m.blocked[lanes] = True
            for t in lanes:
                m.block_why[int(t)] = ("cluster", int(m.cl_count[t]) - 1)
            m.counts["barrier.cluster.wait"] += len(lanes)
        m._try_release_cluster(ins)
    return run


def _fence(m, ins):
    if "proxy" in ins.parts and "async" in ins.parts:
        def run(ins, mask, full):
            lanes = np.nonzero(mask)[0]
            sel_thr = np.zeros(m.n + 1, bool)
            sel_thr[lanes] = True
            wt = m.w_thread
            hit = (m.w_state == M.GENERIC) & sel_thr[np.where(wt < 0, m.n, np.minimum(wt, m.n))]
            m.w_state[hit] = M.FENCED
            m.w_time[hit] = m.gtime
            m.counts["fence.proxy.async"] += len(lanes)
        return run
    return _nop(m, ins)


# ---------------------------------------------------------------------------- cp.async
def _cp(m, ins):
    p = ins.parts
    if p[1] == "reduce" and len(p) > 4 and p[2:5] == ["async", "bulk", "tensor"]:
        from judge.model import tma as T
        return T._tma_store(m, ins, reduce=True)
    if p[1] != "async":
        raise Unsupported(ins.op)
    if len(p) > 2 and p[2] == "bulk":
        from judge.model import tma as T
        return T.bulk_handler(m, ins)
    if "commit_group" in p:
        def commit(ins, mask, full):
            m.ncommit[mask] += 1
            m.counts["cp.async.commit_group"] += int(np.count_nonzero(mask))
            m.event("commit", threads=int(np.count_nonzero(mask)))
        return commit
    if "wait_group" in p or "wait_all" in p:
        nop = ins.args[0] if ins.args else None
        allw = "wait_all" in p

        def wait(ins, mask, full):
            if allw:
                m.ncommit[mask] += 1
                n = 0
            else:
                n = int(m.rd(nop, "u32", ins))
            limit = m.ncommit - n
            m.last_wait_n[mask] = n
            m.cover[mask] = limit[mask] - 1
            m.event("wait", what="cp.async.wait_group", n=n, threads=int(np.count_nonzero(mask)))
            m.cpa_land(mask, limit, ins)
            m.counts["cp.async.wait_group"] += int(np.count_nonzero(mask))
        return wait
    if "mbarrier" in p and "arrive" in p:
        from judge.model import tma as T
        return T.cpasync_mbar_arrive(m, ins)
    # the copy itself
    if "ca" not in p and "cg" not in p:
        raise Unsupported(ins.op)
    dst, src, size_op = ins.args[:3]
    extra = ins.args[3] if len(ins.args) > 3 else None
    size = int(size_op.value)
    if size not in (4, 8, 16):
        raise Unsupported(ins.op, f"cp-size {size}")

    def run(ins, mask, full):
        lanes = np.nonzero(mask)[0]
        d = m.addr(dst, ins)
        s = m.addr(src, ins)
        if extra is not None and extra.kind in ("reg", "imm") and not (extra.kind == "reg" and m._is_pred(extra.name)):
            ssz = np.broadcast_to(np.asarray(m.rd(extra, "u32", ins)).astype(np.int64), (m.n,))[lanes]
        elif extra is not None and extra.kind == "reg":
            ign = np.broadcast_to(m.rd(extra, "pred", ins), (m.n,))[lanes]
            ssz = np.where(ign, 0, size)
        else:
            ssz = np.full(len(lanes), size)
        cta, off = m.smem_split(d, lanes, ins, cluster_ok=False)
        m.check_smem_range(off, size, lanes, ins)
        if (off % size).any():
            m.fail("alignment", ins, f"a {size}-byte cp.async into shared offset {int(off[np.argmax(off % size != 0)])}, "
                   f"not {size}-byte aligned")
        data = np.zeros((len(lanes), size), np.uint8)
        for v in np.unique(ssz):
            if v <= 0:
                continue
            sel = np.nonzero(ssz == v)[0]
            data[sel, :min(v, size)] = m.gload(s, int(min(v, size)), lanes[sel], ins)
        words = m.words_of(off, size)
        m.check_overwrite(cta, words, lanes, ins, "cp.async")
        C = cta[:, None]
        m.w_state[C, words] = M.CPA_PENDING
        m.w_thread[C, words] = lanes[:, None]
        m.w_group[C, words] = m.ncommit[lanes][:, None]
        m.w_pc[C, words] = m.cur_pc
        m.smw[C, words] = M.POISON32
        m.cpa.append({"lanes": lanes, "cta": cta, "off": off, "words": words, "data": data,
                      "group": m.ncommit[lanes].copy(), "seq": m.cpa_seq[lanes].copy()})
        m.cpa_seq[lanes] += 1
        m.counts["cp.async"] += len(lanes)
        m.counts["smem_fill.cp.async.bytes"] += int(ssz.clip(0, size).sum()) + 0 * len(lanes)
        m.event("cp.async", threads=len(lanes), bytes=size)
    return run


def _mbarrier(m, ins):
    from judge.model import tma as T
    return T.mbarrier_handler(m, ins)


def _shfl(m, ins):
    mode = next(x for x in ("up", "down", "bfly", "idx") if x in ins.parts)
    dst, a, b, c = ins.args[:4]

    def run(ins, mask, full):
        lane = m.lt % 32
        x = np.broadcast_to(np.asarray(m.rd(a, "b32", ins)), (m.n,))
        bv = np.broadcast_to(np.asarray(m.rd(b, "u32", ins)).astype(np.int64), (m.n,)) & 0x1F
        cv = np.broadcast_to(np.asarray(m.rd(c, "u32", ins)).astype(np.int64), (m.n,))
        seg = (cv >> 8) & 0x1F
        cl = cv & 0x1F
        maxl = (lane & seg) | (cl & ~seg)
        minl = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= maxl
        elif mode == "down":
            j = lane + bv
            ok = j <= maxl
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= maxl
        else:
            j = minl | (bv & ~seg)
            ok = j <= maxl
        j = np.where(ok, j, lane)
        src = (np.arange(m.n) - lane) + j
        r = x[src]
        if dst.kind == "vec":
            m.wr(dst.items[0], r, mask, full)
            m.wr(dst.items[1], ok, mask, full)
        else:
            m.wr(dst, r, mask, full)
        m.counts["shfl"] += int(np.count_nonzero(mask))
    return run


def _vote(m, ins):
    mode = next(x for x in ("all", "any", "uni", "ballot") if x in ins.parts)
    d, a = ins.args[:2]

    def run(ins, mask, full):
        v = np.broadcast_to(m.rd(a, "pred", ins), (m.n,)) & mask
        warp = np.arange(m.n) // 32
        out = np.zeros(m.n, np.uint32 if mode == "ballot" else bool)
        for w in np.unique(warp[mask]):
            sl = slice(32 * w, 32 * w + 32)
            act = mask[sl]
            vv = v[sl]
            if mode == "ballot":
                out[sl] = int(sum(1 << i for i in range(32) if vv[i]))
            elif mode == "all":
                out[sl] = bool(np.all(vv[act]))
            elif mode == "any":
                out[sl] = bool(np.any(vv[act]))
            else:
                out[sl] = bool(np.all(vv[act]) or not np.any(vv[act]))
        m.wr(d, out, mask, full)
    return run


def _activemask(m, ins):
    d = ins.args[0]

    def run(ins, mask, full):
        out = np.zeros(m.n, np.uint32)
        for w in np.unique(np.nonzero(mask)[0] // 32):
            sl = slice(32 * w, 32 * w + 32)
            out[sl] = int(sum(1 << i for i in range(32) if mask[sl][i]))
        m.wr(d, out, mask, full)
    return run


def _elect(m, ins):
    d = ins.args[0]

    def run(ins, mask, full):
        lead = np.zeros(m.n, bool)
        leader_lane = np.zeros(m.n, np.uint32)
        for w in np.unique(np.nonzero(mask)[0] // 32):
            sl = np.arange(32 * w, 32 * w + 32)
            first = sl[mask[sl]][0]
            lead[first] = True
            leader_lane[sl] = first % 32
        if d.kind == "vec":
            m.wr(d.items[0], leader_lane, mask, full)
            m.wr(d.items[1], lead, mask, full)
        else:
            m.wr(d, lead, mask, full)
    return run


def _mapa(m, ins):
    d, a, r = ins.args[:3]
    ty = _types(ins.parts)[-1]

    generic = "shared" not in "".join(ins.parts)      # mapa.u64 on generic addresses (what NVRTC 13.0 emits)

    def run(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)).astype(np.uint64), (m.n,))
        rank = np.asarray(m.rd(r, "u32", ins)).astype(np.uint64)
        low = np.uint64((1 << M.CLUSTER_SHIFT) - 1)
        if generic:
            # PTX: mapa maps a generic address of a shared variable to the generic address of the same
            # variable in the shared memory of the block with the given rank.
            lanes = np.nonzero(mask)[0]
            if lanes.size and np.any((x[lanes] >> np.uint64(60)) != np.uint64(M.SHARED_BASE >> 60)):
                bad = lanes[np.argmax((x[lanes] >> np.uint64(60)) != np.uint64(M.SHARED_BASE >> 60))]
                m.fail("mapa-address", ins, f"{m.tdesc(bad)} gave mapa the generic address 0x{int(x[bad]):x}, "
                                            f"which is not in shared memory")
                raise M.Violation("mapa-address", m.where(ins), "mapa of an address outside shared memory")
            off = (x - np.uint64(M.SHARED_BASE)) & low
            out = np.uint64(M.SHARED_BASE) + (((rank + np.uint64(1)) << np.uint64(M.CLUSTER_SHIFT)) | off)
        else:
            out = ((rank + np.uint64(1)) << np.uint64(M.CLUSTER_SHIFT)) | (x & low)
        m.wr(d, out.astype(DT[ty]), mask, full)
    return run


def _getctarank(m, ins):
    d, a = ins.args[:2]

    def run(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, "u32", ins)).astype(np.int64), (m.n,))
        rank = (x >> M.CLUSTER_SHIFT) - 1
        m.wr(d, np.where(rank < 0, m.cta, rank).astype(np.uint32), mask, full)
    return run


def _wgmma(m, ins):
    from judge.model import wgmma as W
    return W.handler(m, ins)


_TABLE = {
    "add": _add, "sub": _sub, "mul": _mul, "mad": _mad, "fma": _fma, "div": _div, "rem": _rem,
    "min": _minmax, "max": _minmax,
    "and": _logic(lambda x, y: x & y), "or": _logic(lambda x, y: x | y), "xor": _logic(lambda x, y: x ^ y),
    "not": _unary, "neg": _unary, "abs": _unary, "cnot": _unary, "rcp": _unary, "sqrt": _unary,
    "rsqrt": _unary, "ex2": _unary, "lg2": _unary, "sin": _unary, "cos": _unary, "tanh": _unary,
    "popc": _unary, "clz": _unary, "brev": _unary,
    "shl": _shift, "shr": _shift, "setp": _setp, "selp": _selp, "mov": _mov, "cvt": _cvt, "cvta": _cvta,
    "bfe": _bfe, "lop3": _lop3, "prmt": _prmt, "shf": _shf,
    "ld": _ldst, "ldu": _ldst, "st": _ldst, "atom": _atom, "red": _atom,
    "bra": _bra, "ret": _exit, "exit": _exit, "trap": _trap,
    "bar": _bar, "barrier": _bar, "membar": _nop, "fence": _fence,
    "nanosleep": _nop, "prefetch": _nop, "prefetchu": _nop, "griddepcontrol": _nop, "setmaxnreg": _nop,
    "pmevent": _nop, "discard": _nop, "applypriority": _nop, "createpolicy": _createpolicy,
    "cp": _cp, "mbarrier": _mbarrier, "shfl": _shfl, "vote": _vote, "activemask": _activemask,
    "elect": _elect, "mapa": _mapa, "getctarank": _getctarank, "wgmma": _wgmma,
}
_TABLE = {k: v for k, v in _TABLE.items() if v is not None}
