"""judge.model.ops.cluster - mapa and getctarank: addresses in the shared memory of other blocks of the cluster.

Registered with judge.model.registry; tested by tests/model/test_model_ops_memory.py. A shared::cluster
address in the model is ((rank + 1) << CLUSTER_SHIFT) | offset (judge.model.state); a generic one adds
SHARED_BASE. The accesses themselves are ld/st/atom (judge.model.ops.memory), the barrier
barrier.cluster (judge.model.ops.barriers).
"""
from __future__ import annotations

import numpy as np

from judge.model import checks
from judge.model.ops.common import types
from judge.model.registry import op
from judge.model.state import CLUSTER_SHIFT, DT, SHARED_BASE


@op("mapa")
def mapa(m, ins):
    """mapa(.shared::cluster): the address of the same shared variable in the block of the given rank."""
    d, a, r = ins.args[:3]
    ty = types(ins.parts)[-1]

    generic = "shared" not in "".join(ins.parts)      # mapa.u64 on generic addresses (what NVRTC 13.0 emits)

    def map_address(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, ty, ins)).astype(np.uint64), (m.n,))
        rank = np.asarray(m.rd(r, "u32", ins)).astype(np.uint64)
        low = np.uint64((1 << CLUSTER_SHIFT) - 1)
        if generic:
            # PTX: mapa maps a generic address of a shared variable to the generic address of the same
            # variable in the shared memory of the block with the given rank.
            lanes = np.nonzero(mask)[0]
            if lanes.size and np.any((x[lanes] >> np.uint64(60)) != np.uint64(SHARED_BASE >> 60)):
                bad = lanes[np.argmax((x[lanes] >> np.uint64(60)) != np.uint64(SHARED_BASE >> 60))]
                m.fail("mapa-address", ins, f"{m.tdesc(bad)} gave mapa the generic address 0x{int(x[bad]):x}, "
                                            f"which is not in shared memory")
                raise checks.abort(m, "mapa-address", ins, "mapa of an address outside shared memory")
            off = (x - np.uint64(SHARED_BASE)) & low
            out = np.uint64(SHARED_BASE) + (((rank + np.uint64(1)) << np.uint64(CLUSTER_SHIFT)) | off)
        else:
            out = ((rank + np.uint64(1)) << np.uint64(CLUSTER_SHIFT)) | (x & low)
        m.wr(d, out.astype(DT[ty]), mask, full)
    return map_address


@op("getctarank")
def getctarank(m, ins):
    """getctarank: the cluster rank of the block that owns a shared::cluster address."""
    d, a = ins.args[:2]

    def rank_of(ins, mask, full):
        x = np.broadcast_to(np.asarray(m.rd(a, "u32", ins)).astype(np.int64), (m.n,))
        rank = (x >> CLUSTER_SHIFT) - 1
        m.wr(d, np.where(rank < 0, m.cta, rank).astype(np.uint32), mask, full)
    return rank_of
