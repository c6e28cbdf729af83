"""judge.model.ops.calls - function calls a kernel makes: a failed device-side assert, nothing else yet.

Registered with judge.model.registry for `call` and `st.param`; try it:
    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_verdicts_model.py -q -k assert

`assert(cond)` in device code compiles (NVRTC) to a branch around a call sequence
    { .param .b64 param0; st.param.b64 [param0+0], %rd_message; ... call.uni __assertfail, (param0, ...); }
with the message, the file, the line and the function as arguments. On a GPU the call prints the
message and traps: the launch fails (CUDA_ERROR_LAUNCH_FAILED, "device-side assert triggered") and the
process's context is lost. MODEL: the argument stores of a call sequence are recorded per thread;
`call __assertfail` is a trap (rule "trap", which judge.grading.cuda_flow reports as CRASH) whose
message quotes the failed condition and its line, read from the kernel's own strings. `call` to any
other function raises Unsupported (the model runs no device functions that were not inlined).
"""
from __future__ import annotations

import numpy as np

from judge.model import checks
from judge.model.errors import Unsupported
from judge.model.registry import op
from judge.model.state import types


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


@op("call")
def call(m, ins):
    """call: __assertfail (a failed device-side assert) traps; any other callee is Unsupported."""
    callee = next((a.name for a in ins.args if a.kind in ("label", "sym")), "?")
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
