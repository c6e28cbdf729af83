"""judge.model.ops.tcgen05_cp - tcgen05.cp in the CPU model: an asynchronous copy from shared memory into tensor memory.

Registered with judge.model.registry as "tcgen05.cp"; the state is judge.model.tensor_memory, the helpers
(descriptor decoding, warps, allocations, ordering) those of judge.model.ops.tcgen05.
Try it: python -m pytest tests/model/test_model_blockscaled.py -q

PTX ISA 9.7.16.9.2 (tcgen05.cp), as the model runs it:
  - a single-thread instruction ("Issue granularity"): each thread that executes it issues one copy;
  - .cta_group::1 only (.cta_group::2: Unsupported); the decompressing forms (.b8x16.b6x16_p32,
    .b8x16.b4x16_p64): Unsupported;
  - the source is a K-major matrix described by a shared-memory matrix descriptor (rows of 16 bytes in
    8-row core matrices, 32-byte rows as two 16-byte halves LBO apart, or a swizzled layout), read
    through the async proxy: a generic store to it needs fence.proxy.async and a barrier ("proxy-fence"),
    and the words count as being read until the commit arrives;
  - the shapes and where row r of the source lands (lane; every row fills 4 or 8 consecutive columns):
        .128x256b                 lane r, 8 columns            .128x128b   lane r, 4 columns
        .4x256b                   lane base + 32 r, 8 columns
        .64x128b.warpx2::02_13    lanes r and 64 + r  (warps 0 and 2 get rows 0..31, 1 and 3 rows 32..63)
        .64x128b.warpx2::01_23    lanes 64 (r // 32) + r % 32 and that + 32 (warps 0, 1: rows 0..31; 2, 3: 32..63)
        .32x128b.warpx4           lanes r, 32 + r, 64 + r, 96 + r (a copy in every warp's quarter)
  - asynchronous: the cells hold the data when a tcgen05.commit of the issuing thread arrives; until then
    a tcgen05.ld of them is "tcgen05-ld-in-flight". A tcgen05.mma issued later by the same thread sees
    the data (the tensor core runs one thread's tcgen05.cp and tcgen05.mma in order); an MMA of another
    thread needs the commit's mbarrier phase observed and tcgen05.fence::after_thread_sync
    ("tcgen05-scale-visibility", in judge.model.ops.tcgen05).
Rules checked here: "tcgen05-cp-shape" (a shape with the multicast it requires, the lane field),
"tcgen05-unallocated", "tcgen05-descriptor", "shared-bounds", and "tcgen05-mma-overwrite" for a copy
over columns another warp read with tcgen05.ld without the fence / barrier / fence ordering.
"""
from __future__ import annotations

import numpy as np

from judge.model import checks
from judge.model import tensor_memory as TM
from judge.model.errors import Unsupported
from judge.model.ops import tcgen05 as T
from judge.model.registry import op

#: shape -> (rows, bytes per row, the multicast it requires or None)
SHAPES = {"128x256b": (128, 32, None), "4x256b": (4, 32, None), "128x128b": (128, 16, None),
          "64x128b": (64, 16, ("warpx2::02_13", "warpx2::01_23")), "32x128b": (32, 16, ("warpx4",))}


def destination_lanes(shape: str, multicast: str, lane0: int = 0) -> list[np.ndarray]:
    """For each copy of the source, the tensor-memory lane of every source row (PTX ISA 9.7.16.9.2)."""
    rows = SHAPES[shape][0]
    r = np.arange(rows)
    if shape == "4x256b":
        return [lane0 + 32 * r]
    if multicast == "warpx4":
        return [r + 32 * q for q in range(4)]
    if multicast == "warpx2::02_13":
        return [r, r + 64]
    if multicast == "warpx2::01_23":
        first = 64 * (r // 32) + r % 32
        return [first, first + 32]
    return [r]


@op("tcgen05.cp")
def cp(m, ins):
    """tcgen05.cp.cta_group::1.shape{.multicast} [taddr], s-desc: one thread copies a shared-memory matrix into tensor memory."""
    p = ins.parts
    if "cta_group::2" in p:
        raise Unsupported(ins.op, "tcgen05.cp.cta_group::2 (into a pair of CTAs) is not modelled")
    if any(x.startswith("b8x16") or x.startswith("b6x16") or x.startswith("b4x16") for x in p):
        raise Unsupported(ins.op, "tcgen05.cp with decompression (.b8x16.b6x16_p32 / .b8x16.b4x16_p64)")
    shape = next((x for x in p if x in SHAPES), None)
    if shape is None:
        raise Unsupported(ins.op, "a tcgen05.cp shape the model does not know")
    multicast = next((x for x in p if x.startswith("warpx")), "")
    nrows, rbytes, need = SHAPES[shape]
    aop, dop = ins.args[:2]
    aop_r = T._reg(aop) if aop.kind == "addr" else aop

    def copy(ins, mask, full):
        tc = T.state(m)
        lanes = np.nonzero(mask)[0]
        if (need is None and multicast) or (need is not None and multicast not in need):
            t = int(lanes[0])
            m.fail("tcgen05-cp-shape", ins,
                   f"{m.tdesc(t)}'s tcgen05.cp.{shape}{'.' + multicast if multicast else ''} at {m.where(ins)}: "
                   + (f".{shape} requires ." + " or .".join(need) if need else f".{shape} takes no multicast"))
            raise checks.abort(m, "tcgen05-cp-shape", ins, "shape and multicast")
        taddr = T._u32(m, aop_r, ins) + (aop.value if aop.kind == "addr" else 0)
        descs = np.broadcast_to(np.asarray(m.rd(dop, "b64", ins)), (m.n,)).astype(np.uint64)
        ncols = rbytes // 4
        for t in lanes:                                  # one copy per executing thread
            t = int(t)
            c = int(m.cta[t])
            cm = tc.cta[c]
            a = int(taddr[t])
            col, lane0 = a & 0xFFFF, a >> 16
            top = lane0 + 96 if shape == "4x256b" else lane0
            if (shape != "4x256b" and lane0 != 0) or top >= TM.LANES:
                m.fail("tcgen05-cp-shape", ins,
                       f"{m.tdesc(t)}'s tcgen05.cp.{shape} at {m.where(ins)} writes tensor memory at 0x{a:08x} (lane "
                       f"{lane0}): " + ("its four rows land 32 lanes apart, so the lane field is at most 31"
                                         if shape == "4x256b" else "it fills lanes 0..127, so the lane field is 0"))
                raise checks.abort(m, "tcgen05-cp-shape", ins, "lane field")
            if cm.allocation_of(col, col + ncols) is None:
                T._unallocated(m, ins, t, c, col, col + ncols, "tcgen05.cp writes")
            first = c * m.nthr_cta + 32 * (int(m.lt[t]) // 32)
            why = T._unordered_read(m, tc, ins, c, np.array([t]), np.arange(first, first + 32),
                                    np.arange(col, col + ncols),
                                    f"the tcgen05.cp issued by {m.tdesc(t)} overwrites columns {col}..{col + ncols - 1}",
                                    "overwritten while that read still runs", "the tcgen05.cp")
            if why:
                m.fail("tcgen05-mma-overwrite", ins, why)
            words_u32, words = _source(m, ins, t, c, int(descs[t]), nrows, rbytes)
            cols = np.arange(col, col + ncols)
            recs = []
            for dst in destination_lanes(shape, multicast, lane0):
                cm.future[dst[:, None], cols[None, :]] = words_u32
                # one record per run of consecutive lanes (4x256b: four single lanes), each landing at the commit
                cuts = np.nonzero(np.diff(dst) != 1)[0] + 1
                for rows_of_run in np.split(np.arange(len(dst)), cuts):
                    run = dst[rows_of_run]
                    rec = TM.Mma(thread=t, pc=m.cur_pc, cta=c, cols=range(col, col + ncols),
                                 lanes=range(int(run[0]), int(run[-1]) + 1), values=words_u32[rows_of_run].copy(),
                                 words=(words,) if not recs else (), index=len(tc.ops), copy=True)
                    tc.ops.append(rec)
                    recs.append(rec)
            cm.col_op[cols] = recs[-1].index
            m.bulk_reading[c, words] += 1
            tc.uncommitted.setdefault(t, []).extend(recs)
            m.counts["tcgen05.cp"] += 1
            m.counts["tcgen05.cp.bytes"] += nrows * rbytes * len(destination_lanes(shape, multicast, lane0))
            m.event("tcgen05.cp", thread=t, warp=int(m.lt[t]) // 32, block=c, col=col, shape=shape,
                    multicast=multicast)
    return copy


def _source(m, ins, t, c, desc, rows, rbytes):
    """The source matrix as uint32 words (rows, rbytes / 4) and the shared words it reads: a K-major
    layout of `rows` rows of `rbytes` bytes, read through the async proxy."""
    d = T.decode_sdesc(desc)
    if d["fixed"] != 1:
        m.fail("tcgen05-descriptor", ins, f"{m.tdesc(t)}'s shared-memory descriptor of tcgen05.cp ({desc:#018x}) "
               f"has {d['fixed']:#05b} in bits 46-48, which must hold the fixed value 0b001")
    if d["base_offset"] or d["lbo_mode"]:
        raise Unsupported(ins.op, "descriptor base offset / LBO mode other than 0")
    if d["swizzle"] not in T._SWZ:
        raise Unsupported(ins.op, f"swizzle mode {d['swizzle']} of the shared-memory descriptor")
    addr = T.operand_addresses(desc, rows, rbytes).astype(np.int64)
    if (addr < 0).any() or (addr + 1 > m.smem_size - 16).any():
        m.fail("shared-bounds", ins, f"tcgen05.cp source (descriptor {desc:#018x}) reaches past the "
               f"{m.smem_size - 16} bytes of shared memory")
        raise checks.abort(m, "shared-bounds", ins, "tcgen05.cp source out of shared memory")
    words = checks.words_in(addr)
    checks.check_store_source(m, ins, t, c, words, "tcgen05.cp source read (async proxy)")
    raw = np.ascontiguousarray(m.sm[c, addr])                      # (rows, rbytes)
    return raw.view(np.uint32).reshape(rows, rbytes // 4), words
