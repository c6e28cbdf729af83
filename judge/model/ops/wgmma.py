"""judge.model.ops.wgmma - warpgroup MMA: wgmma.fence, mma_async (shared-memory descriptors), commit_group, wait_group.

Registered with judge.model.registry; tested by tests/model/test_model_ops_async.py and tests/chapters/ch04_wgmma/test_on_model.py. The operand addresses and the accumulator fragment come from
judge/hw/wgmma.py (descriptor decode, operand_address, fragment_coord), the course's own model of the
PTX ISA tables. Supported: .m64nNk16 (.bf16 / .f16) and .m64nNk32 (.e4m3 / .e5m2) with .f32 accumulators, both from
shared memory (descriptors), K-major (imm-trans 0) or, for .bf16 / .f16, MN-major (imm-trans 1: the
operand's addresses as judge.hw.mma_layout states the MN-major layouts), any base offset, scale-a/b
+-1, scale-d immediate or predicate; and the register form of .m64nNk16 .bf16 / .f16 (A's fragment in
four .b32 registers per thread, B by descriptor). Anything else raises Unsupported.

Rules (PTX ISA, wgmma): the four warps of a warpgroup execute each wgmma.* together (.sync.aligned);
wgmma.fence comes before the first mma_async and after any register write to its accumulators;
mma_async reads its shared-memory operands through the async proxy (generic stores need
fence.proxy.async) and writes its accumulators asynchronously: they may not be read or written
until wgmma.wait_group covers the group (commit_group closes a group); in the register form the same
holds for A's registers, and a write to them since the last wgmma.fence is "wgmma-fence". MODEL: the operands must be
visible at issue (same checks as a TMA store); the shared bytes count as being read until the wait
(an overwrite before it is a race); reading an accumulator early is "wgmma-accumulator".
The accumulators a wgmma completes are marked (judge.model.state's taint, source "wgmma"), and global stores
of values that came from them count as "gstore.from.wgmma.bytes" (exercise.toml [carries]).
"""
from __future__ import annotations

import functools

import numpy as np

from judge.hw import wgmma as _wg
from judge.model import checks
from judge.model.errors import Unsupported
from judge.model.registry import op


def _span(lanes):
    """lanes as a slice when they are consecutive threads (a warpgroup's are): indexing a register with it
    is several times faster than with the list, and wgmma's bookkeeping indexes one per accumulator."""
    if len(lanes) and lanes[-1] - lanes[0] + 1 == len(lanes):
        return slice(int(lanes[0]), int(lanes[-1]) + 1)
    return lanes


def _warpgroups(m, ins, mask):
    """The lanes of mask by (block, warpgroup), in the order of each group's first lane."""
    lanes = np.nonzero(mask)[0]
    cta, g = m.cta[lanes].astype(np.int64), m.lt[lanes].astype(np.int64) // 128
    keys = cta * (int(g.max(initial=0)) + 1) + g
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    out = []
    for k in np.argsort(first, kind="stable"):
        ts = lanes[which.reshape(-1) == k]
        if len(ts) != 128:
            m.fail("wgmma-aligned", ins, f"{len(ts)} threads of warpgroup {int(g[first[k]])} executed {ins.op} "
                   f"together; .sync.aligned needs all 128 threads of the warpgroup at the same instruction")
        out.append(ts)
    return out


def _operand_types(parts):
    """(A element type, B element type, K) of an mma_async, or None for forms the model lacks:
    .bf16.bf16 / .f16.f16 with K = 16, .e4m3 / .e5m2 (any pair) with K = 32 (PTX: wgmma .kind of the
    dense f16 and f8 forms)."""
    import ml_dtypes
    fp8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    tys = [x for x in parts if x in ("bf16", "f16", "e4m3", "e5m2")]
    if len(tys) != 2:
        return None
    if tys == ["bf16", "bf16"]:
        return ml_dtypes.bfloat16, ml_dtypes.bfloat16, 16
    if tys == ["f16", "f16"]:
        return np.float16, np.float16, 16
    if tys[0] in fp8 and tys[1] in fp8:
        return fp8[tys[0]], fp8[tys[1]], 32
    return None


@op("wgmma.fence")
def fence(m, ins):
    """wgmma.fence.sync.aligned: register accesses before it are ordered before the next mma_async."""
    def fence_registers(ins, mask, full):
        m.wg_fence[mask] = m.gtime
    return fence_registers


@op("wgmma.commit_group")
def commit_group(m, ins):
    """wgmma.commit_group.sync.aligned: the warpgroup's uncommitted mma_async form its next group."""
    def commit(ins, mask, full):
        m.wg_ncommit[mask] += 1
    return commit


@op("wgmma.wait_group")
def wait_group(m, ins):
    """wgmma.wait_group.sync.aligned N: all but the N most recent groups completed (accumulators written)."""
    nop = ins.args[0]

    def wait(ins, mask, full):
        n = int(m.rd(nop, "u32", ins))
        for op_ in list(m.wg_ops):
            t0 = op_["lanes"][0]
            if mask[t0] and op_["group"] < m.wg_ncommit[t0] - n:
                complete(m, op_, ins)
        m.counts["wgmma.wait_group"] += int(np.count_nonzero(mask))
    return wait



@functools.lru_cache(maxsize=None)
def _fragments(n: int) -> np.ndarray:
    """(row, col) of every accumulator register of m64nN, per thread (judge.hw.wgmma.fragment_coord); made once
    per N, not once per block (65,536 calls of it were most of a many-block GEMM's time on the model)."""
    out = np.array([[_wg.fragment_coord(t, i, n) for i in range(n // 2)] for t in range(128)])
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=None)
def _a_fragments(k: int) -> np.ndarray:
    """(row, k) of every A-fragment register of m64k16 / m64k32, per thread (judge.hw.wgmma.a_fragment_coord)."""
    out = np.array([[_wg.a_fragment_coord(t, j, k) for j in range(4)] for t in range(128)])
    out.setflags(write=False)
    return out

@op("wgmma.mma_async")
def mma_async(m, ins):
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} and .m64nNk32.f32.{e4m3,e5m2}: D = A B^T (+ D),
    operands by descriptor, products exact and the sum rounded to f32 once at completion."""
    p = ins.parts
    shape = next((x for x in p if x.startswith("m64n")), None)
    kinds = _operand_types(p)
    if shape is None or kinds is None or not shape.endswith(f"k{kinds[2]}") or p[p.index(shape) + 1] != "f32" \
            or "sp" in p:
        raise Unsupported(ins.op, "wgmma forms other than .m64nNk16.f32.bf16.bf16 / .f16.f16 and "
                                  ".m64nNk32.f32 with e4m3 / e5m2 operands")
    el_a, el_b, K = kinds
    n = int(shape[4:shape.index("k")])
    dvec, da, db = ins.args[0], ins.args[1], ins.args[2]
    if dvec.kind != "vec" or len(dvec.items) != n // 2:
        raise Unsupported(ins.op, f"expected {n // 2} accumulator registers")
    a_regs = da.kind == "vec"             # the RS form: A's fragment in four .b32 registers per thread
    if a_regs and len(da.items) != 4:
        raise Unsupported(ins.op, "wgmma with A in registers needs four .b32 registers per thread")
    rest = ins.args[3:]
    scale_d_op = rest[0]
    imms = [int(o.value) for o in rest[1:]]
    sa, sb = (imms + [1, 1])[:2]
    if a_regs:                            # no imm-trans-a: a register fragment has no major
        ta, tb = 0, (imms[2:] + [0])[0]
    else:
        ta, tb = (imms[2:] + [0, 0])[:2]
    if (ta or tb) and K != 16:
        raise Unsupported(ins.op, "imm-trans with 8-bit operands (the PTX ISA allows it for .f16 / .bf16 only)")
    major_a, major_b = ("MN" if ta else "K"), ("MN" if tb else "K")   # imm-trans 1: M (N) contiguous
    names = [o.name for o in dvec.items]
    a_names = [o.name for o in da.items] if a_regs else []
    # A's register fragment of m64k16 (judge.hw.wgmma.a_fragment_coord): register j of thread t holds
    # the pair at (row, k) and (row, k + 1)
    a_rc = _a_fragments(K)                                                                         # (128, 4, 2)
    per_reg = 4 // np.dtype(el_a).itemsize                           # elements in one .b32: 2 (16-bit) or 4 (8-bit)
    a_row, a_col = a_rc[..., 0], a_rc[..., 1]
    rows = np.arange(64)[:, None]
    ks = np.arange(K)[None, :]
    nrows = np.arange(n)[:, None]
    frag = _fragments(n)                                                                           # (128, n/2, 2)

    def operand(desc, R, lanes, c, what, el, major):
        eb = np.dtype(el).itemsize
        addr = np.asarray(_wg.operand_address(desc, R, ks, elem_bytes=eb, major=major), np.int64)   # [row][k]
        if (addr + eb > m.smem_size - 16).any():
            m.fail("shared-bounds", ins, f"wgmma operand {what} (descriptor {desc:#018x}) reaches past shared memory")
            raise checks.abort(m, "shared-bounds", ins, "wgmma operand out of shared memory")
        words = checks.words_in(addr)
        checks.check_store_source(m, ins, int(lanes[0]), c, words, f"wgmma operand {what} read (async proxy)")
        raw = m.sm[c, addr[..., None] + np.arange(eb)].copy()
        return raw.view(el)[..., 0].astype(np.float64), words

    def multiply_accumulate(ins, mask, full):
        for lanes in _warpgroups(m, ins, mask):
            t0 = int(lanes[0])
            c = int(m.cta[t0])
            m.cur_mask = np.zeros(m.n, bool)                 # register checks: this warpgroup only
            m.cur_mask[lanes] = True
            if (m.wg_fence[lanes] < 0).any():
                m.fail("wgmma-fence", ins, f"warpgroup of {m.tdesc(t0)} issued wgmma.mma_async without a "
                       f"wgmma.fence.sync.aligned before it: the first wgmma (and the first after its "
                       f"accumulators were written) must follow a wgmma.fence")
            try:
                dA = None if a_regs else int(np.broadcast_to(np.asarray(m.rd(da, "b64", ins)), (m.n,))[t0])
                dB = int(np.broadcast_to(np.asarray(m.rd(db, "b64", ins)), (m.n,))[t0])
                _wg.decode(dB)
                if dA is not None:
                    _wg.decode(dA)
            except ValueError as e:
                m.fail("wgmma-descriptor", ins, f"a malformed wgmma descriptor: {e}")
                raise checks.abort(m, "wgmma-descriptor", ins, str(e)) from None
            if a_regs:
                m.acc_names.update(a_names)   # their writes are tracked from the first issue on (wgmma.fence rule)
                for nm in a_names:
                    w = m.wg_written.get(nm)
                    if w is not None and (w[lanes] > m.wg_fence[lanes]).any():
                        m.fail("wgmma-fence", ins, f"A-fragment register {nm} was written after the last "
                               f"wgmma.fence of this warpgroup: wgmma.fence between writing A's registers and "
                               f"the wgmma that reads them")
                        break
                words32 = np.stack([np.broadcast_to(np.asarray(m.rd(it, "b32", ins)), (m.n,))[lanes]
                                    for it in da.items], axis=1).astype(np.uint32)        # (128, 4)
                # the register's bytes, lowest first = lowest column (little-endian, as ld.shared.b32 made them)
                raw = words32[..., None].view(np.uint8).reshape(128, 4, 4)
                vals = raw.view(el_a).astype(np.float64)                                # (128, 4, per_reg)
                A = np.zeros((64, K))
                A[a_row[..., None], a_col[..., None] + np.arange(per_reg)] = vals
                wa = np.zeros(0, np.int64)
            else:
                A, wa = operand(dA, rows, lanes, c, "A", el_a, major_a)
            B, wb = operand(dB, nrows, lanes, c, "B", el_b, major_b)
            prod = (sa * A) @ (sb * B).T                                       # (64, n)
            sd = scale_d_op
            if sd.kind in ("imm",):
                accumulate = bool(sd.value)
            else:
                accumulate = bool(np.broadcast_to(m.rd(sd, "pred", ins), (m.n,))[t0])
            # the accumulator this op starts from: the registers, or a still-pending op on them
            prev = next((w for w in reversed(m.wg_ops) if w["names"] == names and w["lanes"][0] == t0), None)
            if accumulate:
                if prev is not None:
                    cur = prev["result"].copy()
                else:
                    at, fenced = _span(lanes), m.wg_fence[lanes]
                    for nm in names:
                        w = m.wg_written.get(nm)
                        if w is not None and (w[at] > fenced).any():
                            m.fail("wgmma-fence", ins, f"accumulator {nm} was written after the last "
                                   f"wgmma.fence of this warpgroup: fence between register writes and wgmma")
                            break
                    cur = np.stack([np.broadcast_to(np.asarray(m.rd(it, "f32", ins)), (m.n,))[lanes]
                                    for it in dvec.items], axis=1).astype(np.float64)
                C = np.zeros((64, n))
                C[frag[:, :, 0], frag[:, :, 1]] = cur
                C = C + prod
            else:
                C = prod
            res = C[frag[:, :, 0], frag[:, :, 1]].astype(np.float32)              # (128, n/2)
            for words in (wa, wb):
                m.bulk_reading[c, words] += 1
            mma = {"lanes": lanes, "names": names, "items": dvec.items, "result": res, "cta": c, "a_names": a_names,
                  "group": int(m.wg_ncommit[t0]), "words": (wa, wb), "pc": m.cur_pc}
            m.wg_ops.append(mma)
            m.acc_names.update(names)
            at = _span(lanes)
            for nm in names + a_names:      # accumulators and A's registers: no access until the wait
                pm = m.acc_pending.get(nm)
                if pm is None:
                    pm = m.acc_pending[nm] = np.zeros(m.n, bool)
                pm[at] = True
            m.counts["wgmma"] += 1
            m.counts["wgmma.flops"] += 2 * 64 * n * K
            m.event("wgmma", thread=t0, n=n)
    return multiply_accumulate


def complete(m, mma, ins):
    """The wgmma `mma` completes: its accumulators are written and its operand reads end."""
    lanes = mma["lanes"]
    at = _span(lanes)
    for nm in mma["names"] + mma.get("a_names", []):
        pm = m.acc_pending.get(nm)
        if pm is not None:
            pm[at] = False
            if not pm.any():
                del m.acc_pending[nm]
    full = np.zeros(m.n, bool)
    full[lanes] = True
    m.taint_source = "wgmma"             # "the feature carries the data": the accumulators are wgmma's results
    res = mma["result"]                  # (lanes, registers) float32
    for i, it in enumerate(mma["items"]):
        reg = m.regs.get(it.name) if it.kind == "reg" else None
        if reg is not None and reg.dtype.itemsize == 4 and reg.dtype != np.bool_:
            reg[at] = res[:, i].view(reg.dtype)        # what m.wr(internal=True) stores, without a full-width copy
        else:
            v = np.zeros(m.n, np.float32)
            v[lanes] = res[:, i]
            m.wr(it, v, full, False, internal=True)
        if it.kind == "reg":
            t = m.taint.get(it.name)
            if t is None:
                t = m.taint[it.name] = np.zeros(m.n, bool)
            t[at] = True
    c = mma["cta"]
    for words in mma["words"]:
        m.bulk_reading[c, words] -= 1
        Wp = np.broadcast_to((lanes[::32] // 32)[None, :], (len(words), len(lanes[::32])))
        m.r_wt[c, words[:, None], Wp] = m.gtime
        m.r_solo[c, words[:, None], Wp] = checks.WARP_READ
        m.r_pc[c, words] = mma["pc"]
    # the wait that completes a wgmma is one warpgroup-wide event (.sync.aligned): every thread of the
    # warpgroup observes that the operands were read, so any of them may hand the buffers back
    checks.join(m, full, full)
    # by identity: list.remove compares with ==, which on two pending ops' dicts compares NumPy arrays and
    # raises as soon as the op completed is not the first in the list (another warpgroup's op pending before it:
    # tests/model/test_model_wgmma_groups.py)
    m.wg_ops[:] = [o for o in m.wg_ops if o is not mma]
