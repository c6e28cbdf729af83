"""tests/model/test_model_clc.py - cluster launch control on the CPU model: try_cancel takes clusters that have not
started out of the launch, its response arrives through the mbarrier as late as allowed, and query_cancel
decodes it (judge/model/ops/clc.py).

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_clc.py -q      (no GPU)

Each snippet asks, waits and writes what it decoded to a poisoned output; the expected values follow
from the launch (which clusters exist, which ran: report.ctaids, report.cancelled).
"""
from __future__ import annotations

import numpy as np
import pytest

from judge import model
from judge.grading import compare
from judge.model import snippet

SHARED = "    .shared .align 16 .b8 resp[16];\n    .shared .align 8 .b64 bar;\n"

# thread 0 of each block: ask (multicast from rank 0 of the cluster when MCAST), wait, decode, write
# out[4 * block + (cancelled, x, y, z)]
BODY = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, resp;
    mov.u32 %r3, bar;
    mov.u32 %r9, %cluster_ctarank;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 16;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    setp.eq.u32 %p2, %r9, 0;
    and.pred %p3, %p1, %p2;
    ASK
    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;
    @%p1 ld.shared.v2.u64 {%rd20, %rd21}, [%r1];
    @%p1 mov.b128 %q1, {%rd20, %rd21};
    @%p1 clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p5, %q1;
    @%p1 clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r10, %r11, %r12, %r13}, %q1;
    selp.u32 %r14, 1, 0, %p5;
    mov.u32 %r15, %ctaid.x;
    mul.wide.u32 %rd3, %r15, 16;
    add.u64 %rd4, %rd1, %rd3;
    @%p1 st.global.v4.u32 [%rd4], {%r14, %r10, %r11, %r12};
    barrier.cluster.arrive;
    barrier.cluster.wait;
"""
ASK = "@%p3 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes{mc}.b128 [%r1], [%r3];"


def _run(grid, cluster, mcast, seed=None):
    body = BODY.replace("ASK", ASK.format(mc=".multicast::cluster::all" if mcast else ""))
    if not mcast:          # every block asks for itself
        body = body.replace("@%p3 cluster", "@%p1 cluster")
    out = compare.poison(np.empty(4 * grid, np.uint32))
    ptx = snippet.kernel(body, shared=SHARED, cluster=cluster, target="sm_100a")
    rep = model.run(ptx, "k", grid=(grid, 1, 1), block=(32, 1, 1), args=(out,), seed=seed)
    return rep, out.reshape(grid, 4)


def test_each_block_that_asks_cancels_one_block_that_has_not_started():
    rng = np.random.default_rng()
    grid = int(rng.integers(3, 9))
    rep, out = _run(grid, (1, 1, 1), mcast=False)
    ran = sorted(c[0] for c in rep.ctaids)
    cancelled = sorted(c[0] for c in rep.cancelled)
    assert sorted(ran + cancelled) == list(range(grid))        # every block either ran or was cancelled once
    assert len(ran) == -(-grid // 2) and len(cancelled) == grid // 2   # each block that runs cancels one
    assert sorted(int(out[b, 1]) for b in ran if out[b, 0] == 1) == cancelled   # each answer names one of them
    assert ((out[ran, 0] == 0) | (out[ran, 0] == 1)).all()
    poison = compare.poison(np.empty(4, np.uint32))
    for b in cancelled:                                          # a cancelled block never ran: nothing written
        assert (out[b] == poison).all(), b


def test_a_multicast_request_answers_every_block_of_the_cluster_with_the_first_ctaid_of_a_cluster():
    grid = 6
    rep, out = _run(grid, (2, 1, 1), mcast=True)
    ran = sorted(c[0] for c in rep.ctaids)
    cancelled = sorted(c[0] for c in rep.cancelled)
    assert all(x % 2 == 0 for x in cancelled), "a cancelled cluster is named by its first block"
    assert sorted(ran + [x + i for x in cancelled for i in range(2)]) == list(range(grid))
    for b in ran:
        peer = b ^ 1
        assert (out[b] == out[peer]).all(), "both blocks of the cluster got the same response"
    answered = [int(out[b, 1]) for b in ran if out[b, 0] and b % 2 == 0]
    assert sorted(answered) == cancelled


def test_reading_the_response_before_the_phase_completes_is_caught_and_with_the_wait_is_not():
    early = BODY.replace("ASK", ASK.format(mc="")).replace("@%p3 cluster", "@%p1 cluster").replace(
        "    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;\n", "")
    out = compare.poison(np.empty(8, np.uint32))
    with pytest.raises(model.Violation) as e:
        model.run(snippet.kernel(early, shared=SHARED, target="sm_100a"), "k", grid=(2, 1, 1), block=(32, 1, 1),
                  args=(out,))
    assert e.value.rule == "tma-read-before-complete"
    rep, out = _run(2, (1, 1, 1), mcast=False)
    assert rep.cancelled == [(1, 0, 0)] and out[0, 0] == 1 and out[0, 1] == 1


def test_a_failed_request_decodes_as_not_cancelled():
    rep, out = _run(1, (1, 1, 1), mcast=False)
    assert rep.cancelled == [] and out[0, 0] == 0
