"""judge.model.ops.calls - function calls a kernel makes: a failed device-side assert, and printf.

Registered with judge.model.registry for `call` and `st.param`; try it:
    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_verdicts_model.py -q -k assert

`assert(cond)` in device code compiles (NVRTC) to a branch around a call sequence
    { .param .b64 param0; st.param.b64 [param0+0], %rd_message; ... call.uni __assertfail, (param0, ...); }
with the message, the file, the line and the function as arguments. On a GPU the call prints the
message and traps: the launch fails (CUDA_ERROR_LAUNCH_FAILED, "device-side assert triggered") and the
process's context is lost. MODEL: the argument stores of a call sequence are recorded per thread;
`call __assertfail` is a trap (rule "trap", which judge.grading.cuda_flow reports as CRASH) whose
message quotes the failed condition and its line, read from the kernel's own strings.

`printf(fmt, ...)` compiles to `call.uni (retval0), vprintf, (param0, param1)`: param0 the format string,
param1 a local buffer holding the arguments, each aligned to its size (floats promoted to double). MODEL:
each calling thread's line is formatted as C's printf would (%d %i %u %o %x %X %c %s %p %e %f %g and
their flags, width, precision and length modifiers) and kept, in the order the threads called, in
report.printed (at most PRINTED_MAX lines; a GPU's printf buffer also has a limit). vprintf returns the
number of arguments it read, through ld.param of retval0. `call` to any other function raises
Unsupported (the model runs no device functions that were not inlined).
"""
from __future__ import annotations

import re

import numpy as np

from judge.model import checks, registry
from judge.model.errors import Unsupported
from judge.model.registry import op
from judge.model.state import LOCAL_BASE, types

PRINTED_MAX = 4096
_CONV = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?(?P<len>hh|h|ll|l|z|j|t|L)?"
                   r"(?P<conv>[diouxXeEfFgGaAcsp%])")


def _params(m) -> dict:
    d = getattr(m, "_call_params", None)
    if d is None or len(next(iter(d.values()), np.zeros(m.n))) != m.n:
        d = m._call_params = {}
    return d


@op("st.param")
def st_param(m, ins):
    """st.param into a parameter of a call sequence (a kernel's own parameters are read-only)."""
    ty = types(ins.parts)[-1] if types(ins.parts) else "b64"
    dst, src = ins.args[:2]
    name = dst.name
    if dst.kind != "addr" or dst.value != 0 or name in {prm[0] for prm in m.k.params}:
        raise Unsupported(ins.op, "a store into a kernel parameter")

    def record_argument(ins, mask, full):
        d = _params(m)
        v = np.broadcast_to(np.asarray(m.rd(src, ty, ins)), (m.n,)).astype(np.uint64, copy=True)
        old = d.get(name, np.zeros(m.n, np.uint64))
        d[name] = np.where(mask, v, old)
    return record_argument


def _cstring(m, addr: int, limit: int = 200) -> str:
    for base, size, u8 in m.regions:
        if base <= addr < base + size:
            raw = bytes(u8[addr - base: min(addr - base + limit, size)])
            return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return ""


@op("ld.param")
def ld_param(m, ins):
    """ld.param of a call's return value (retval0 after vprintf): what the call left there. Loads of the
    kernel's own parameters are the memory family's (found through the registry)."""
    dst, src = ins.args[:2]
    if src.kind != "addr" or not src.name or src.name.startswith("%") or src.value \
            or src.name in {prm[0] for prm in m.k.params}:        # a register holds a pointer into param space
        return registry.lookup(["ld"])(m, ins)
    ty = types(ins.parts)[-1] if types(ins.parts) else "b32"

    def read_return(ins, mask, full):
        v = _params(m).get(src.name)
        if v is None:
            raise Unsupported(ins.op, f"a load of {src.name}, which no call has returned")
        m.wr(dst, v.astype(np.uint64).astype(np.uint32 if ty.endswith("32") else np.uint64), mask, full)
    return read_return


def _local_bytes(m, t: int, addr: int, n: int) -> bytes:
    """n bytes of thread t's local memory at a local or generic-local address."""
    off = addr - LOCAL_BASE if addr >= LOCAL_BASE else addr
    if off < 0 or off + n > m.local.shape[1]:
        raise Unsupported("call vprintf", "printf's argument buffer lies outside the thread's local frame")
    return bytes(m.local[t, off:off + n])


def format_c(fmt: str, arg) -> tuple[str, int]:
    """fmt formatted as C's printf does, taking each argument from arg(size, signed, kind) -> value, in
    order; (the text, the number of arguments read)."""
    out, pos, used = [], 0, 0
    for mt in _CONV.finditer(fmt):
        out.append(fmt[pos:mt.start()])
        pos = mt.end()
        conv, ln = mt["conv"], mt["len"] or ""
        if conv == "%":
            out.append("%")
            continue
        spec = "%" + mt["flags"]
        for part, prefix in ((mt["width"], ""), (mt["prec"], ".")):
            if part == "*":
                spec += prefix + str(arg(4, True, "int"))
                used += 1
            elif part is not None:
                spec += prefix + part
        wide = 8 if ln in ("l", "ll", "z", "j", "t") else 4
        if conv in "di":
            v, spec = arg(wide, True, "int"), spec + "d"
        elif conv in "uoxX":
            v, spec = arg(wide, False, "int"), spec + ("d" if conv == "u" else conv)
        elif conv == "c":
            v, spec = arg(4, True, "int") & 0xFF, spec + "c"
        elif conv in "eEfFgGaA":
            v, spec = arg(8, True, "float"), spec + (conv if conv not in "aA" else "e")
        elif conv == "s":
            v, spec = arg(8, False, "str"), spec + "s"
        else:                                               # %p
            v, spec = arg(8, False, "int"), spec.replace("#", "") + "#x"
        used += 1
        if ln in ("h", "hh") and conv in "diouxX":
            bits = 16 if ln == "h" else 8
            v &= (1 << bits) - 1
            if conv in "di" and v >= 1 << (bits - 1):
                v -= 1 << bits
        out.append(spec % v)
    out.append(fmt[pos:])
    return "".join(out), used


def _vprintf(m, ins):
    ret = next((a.items[0].name for a in ins.args[:1] if a.kind == "vec" and a.items), None)

    def printf(ins, mask, full):
        d = _params(m)
        fmts, bufs = d.get("param0", np.zeros(m.n, np.uint64)), d.get("param1", np.zeros(m.n, np.uint64))
        printed = m.__dict__.setdefault("printed", [])
        counts = np.zeros(m.n, np.uint64)
        for t in np.nonzero(mask)[0]:
            fmt, at = _cstring(m, int(fmts[t]), limit=4096), [int(bufs[t])]

            def arg(size, signed, kind, t=int(t), at=at):
                at[0] += (-at[0]) % size                        # each argument aligned to its size
                raw = _local_bytes(m, t, at[0], size)
                at[0] += size
                if kind == "float":
                    return float(np.frombuffer(raw, np.float64)[0])
                v = int.from_bytes(raw, "little", signed=signed and kind == "int")
                return _cstring(m, v, limit=4096) if kind == "str" else v
            text, used = format_c(fmt, arg)
            counts[t] = used
            if len(printed) < PRINTED_MAX:
                printed.append(text)
            else:
                m.counts["printf.dropped"] += 1
        m.counts["printf"] += int(np.count_nonzero(mask))
        if ret:
            old = d.get(ret, np.zeros(m.n, np.uint64))
            d[ret] = np.where(mask, counts, old)
    return printf


@op("call")
def call(m, ins):
    """call: __assertfail (a failed device-side assert) traps; vprintf (printf) prints; any other callee is
    Unsupported."""
    callee = next((a.name for a in ins.args if a.kind in ("label", "sym")), "?")
    if callee == "vprintf":
        return _vprintf(m, ins)
    if callee != "__assertfail":
        raise Unsupported(ins.op, f"a call to {callee} (PTX line {ins.line}): the model runs only inlined code")

    def assert_failed(ins, mask, full):
        t = int(np.nonzero(mask)[0][0])
        d = _params(m)
        cond = _cstring(m, int(d.get("param0", np.zeros(m.n, np.uint64))[t]))
        line = int(d.get("param2", np.zeros(m.n, np.uint64))[t]) & 0xFFFFFFFF
        what = f"assert({cond})" if cond else "a device-side assert"
        where = f" (line {line} of the source)" if line else ""
        m.counts["trap"] += int(np.count_nonzero(mask))
        m.fail("trap", ins, f"{m.tdesc(t)} failed {what}{where}: on a GPU the kernel traps and the launch "
                            f"fails with 'device-side assert triggered'")
        raise checks.abort(m, "trap", ins, f"{what} failed{where}")
    return assert_failed
