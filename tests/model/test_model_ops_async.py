"""tests/model/test_model_ops_async.py - the asynchronous families of the CPU model fed hand-written PTX: cp_async,
mbarrier, bulk (1-D bulk copies, TMA loads, stores and reductions), st_async (st.async, red.async into a
cluster block's shared memory) and wgmma (bf16 and e4m3); and the warp-level tensor core, mma.sync.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_ops_async.py -q

Inputs are fresh random numbers each run, outputs start as NaN; results are compared with NumPy
(data movement: bit for bit) or float64 (wgmma). The rules these instructions can break are in
tests/model/test_model_rules.py.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from judge import model
from judge.hw import tma
from judge.hw import wgmma as hw_wgmma
from judge.model import snippet

IO = (("x", "u64"), ("out", "u64"))
SHARED = "    .shared .align 1024 .b8 buf[8192];\n    .shared .align 8 .b64 bar[4];\n"
HEAD = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, buf;
    mov.u32 %r90, bar;
    setp.eq.u32 %p9, %r0, 0;
"""
# wait until the phase of parity %r91 of the mbarrier at %r92 completed
WAIT = """
WAIT{n}:
    mbarrier.try_wait.parity.shared::cta.b64 %p8, [{bar}], {parity};
    @!%p8 bra WAIT{n};
"""


def _run(body, args, params=IO, block=64, **kw):
    return snippet.run(HEAD + body, args, params=params, shared=SHARED, block=(block, 1, 1), **kw)


def _rand(n, rng=None):
    return (rng or np.random.default_rng()).standard_normal(n).astype(np.float32)


# ---------------------------------------------------------------------------- cp.async
def test_three_cp_async_groups_land_in_commit_order_as_the_waits_cover_them():
    x = _rand(3 * 64 * 4)
    out = np.full(x.size, np.nan, np.float32)
    body = "    mul.wide.u32 %rd3, %r0, 16;\n    shl.b32 %r2, %r0, 4;\n    add.u32 %r3, %r1, %r2;\n"
    for g in range(3):           # group g: thread t copies x[g*256 + 4t .. +4] into buf[g*1024 + 16t]
        body += (f"    add.s64 %rd4, %rd1, {g * 1024};\n    add.s64 %rd5, %rd4, %rd3;\n"
                 f"    cp.async.cg.shared.global [%r3+{g * 1024}], [%rd5], 16;\n    cp.async.commit_group;\n")
    for g, n in ((0, 2), (1, 1), (2, 0)):
        body += (f"    cp.async.wait_group {n};\n    ld.shared.v4.f32 {{%f1, %f2, %f3, %f4}}, [%r3+{g * 1024}];\n"
                 f"    add.s64 %rd6, %rd2, {g * 1024};\n    add.s64 %rd7, %rd6, %rd3;\n"
                 f"    st.global.v4.f32 [%rd7], {{%f1, %f2, %f3, %f4}};\n")
    rep = _run(body, (x, out))
    assert np.array_equal(out, x)
    assert rep.counts["cp.async"] == 192 and rep.counts["smem_fill.cp.async.bytes"] == 192 * 16
    lands = [e for e in rep.timeline if e["kind"] == "land"]
    assert len(lands) == 3 and lands[0]["t"] < lands[1]["t"] < lands[2]["t"]     # one landing per wait


def test_src_size_copies_that_many_bytes_and_fills_the_rest_with_zeros():
    x = np.random.default_rng().integers(1, 2**32, 64 * 4, dtype=np.uint64).astype(np.uint32)
    out = np.full(x.size, 0xFFFFFFFF, np.uint32)
    _run("""
    mul.wide.u32 %rd3, %r0, 16;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    shl.b32 %r2, %r0, 4;
    add.u32 %r3, %r1, %r2;
    and.b32 %r4, %r0, 3;
    shl.b32 %r5, %r4, 2;                      // thread t copies 4 * (t % 4) of its 16 bytes
    cp.async.ca.shared.global [%r3], [%rd4], 16, %r5;
    cp.async.wait_all;
    ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r3];
    st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
""", (x, out))
    keep = np.arange(4)[None, :] < (np.arange(64) % 4)[:, None]
    assert np.array_equal(out.reshape(64, 4), np.where(keep, x.reshape(64, 4), 0))


def test_cp_async_mbarrier_arrive_noinc_hands_every_threads_copy_to_whoever_waits():
    x = _rand(64)
    out = np.full(64, np.nan, np.float32)
    rep = _run("""
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 64;
    bar.sync 0;
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r90];
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    sub.u32 %r4, 63, %r0;                     // read another thread's copy: the wait made it visible
    shl.b32 %r5, %r4, 2;
    add.u32 %r6, %r1, %r5;
    ld.shared.f32 %f1, [%r6];
    add.s64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f1;
""", (x, out))
    assert np.array_equal(out, x[::-1]) and not rep.violations
    assert rep.counts["cp.async.mbarrier.arrive"] == 64


def test_a_cp_async_arrival_pending_when_nothing_else_can_run_still_completes_the_phase():
    """The waiter sleeps before the producer's copy and cp.async.mbarrier.arrive are issued, and the
    producer exits at once: the hardware still lands the copy and arrives, so this is no hang."""
    x = _rand(4)
    out = np.full(4, np.nan, np.float32)
    _run("""
    setp.eq.u32 %p7, %r0, 32;
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 1;
    bar.sync 0;
    @%p7 bra.uni PRODUCER;
    @!%p9 bra.uni END;
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    ld.shared.f32 %f1, [%r1];
    st.global.f32 [%rd2], %f1;
    bra.uni END;
PRODUCER:
    nanosleep.u32 100;
    nanosleep.u32 100;
    nanosleep.u32 100;
    nanosleep.u32 100;
    cp.async.ca.shared.global [%r1], [%rd1], 4;
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r90];
END:
""", (x, out))
    assert out[0] == x[0] and np.isnan(out[1:]).all()


# ---------------------------------------------------------------------------- mbarrier
def test_an_mbarrier_hands_a_warps_writes_to_the_waiting_warp_over_three_phases():
    """Warp 0 fills a slot and arrives (count 32); warp 1 waits on the phase's parity, reads, and hands
    the slot back through a second barrier; three rounds reuse one slot and flip both parities."""
    x = _rand(96)
    out = np.full(96, np.nan, np.float32)
    body = """
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 32;
    @%p9 mbarrier.init.shared::cta.b64 [%r90+8], 32;
    bar.sync 0;
    and.b32 %r2, %r0, 31;
    shl.b32 %r3, %r2, 2;
    add.u32 %r4, %r1, %r3;
    mul.wide.u32 %rd3, %r2, 4;
    setp.lt.u32 %p1, %r0, 32;
"""
    for k in range(3):
        par = k % 2
        body += f"""
    @!%p1 bra CONS{k};
""" + (WAIT.format(n=f"E{k}", bar="%r90+8", parity=1 - par) if k else "") + f"""
    add.s64 %rd4, %rd1, {128 * k};
    add.s64 %rd5, %rd4, %rd3;
    ld.global.f32 %f1, [%rd5];
    st.shared.f32 [%r4], %f1;
    mbarrier.arrive.shared::cta.b64 %rd9, [%r90];
    bra.uni NEXT{k};
CONS{k}:
""" + WAIT.format(n=f"F{k}", bar="%r90", parity=par) + f"""
    ld.shared.f32 %f2, [%r4];
    add.s64 %rd6, %rd2, {128 * k};
    add.s64 %rd7, %rd6, %rd3;
    st.global.f32 [%rd7], %f2;
    mbarrier.arrive.shared::cta.b64 %rd9, [%r90+8];
NEXT{k}:
"""
    rep = _run(body, (x, out))
    assert np.array_equal(out, x) and not rep.violations
    assert [e["completed"] for e in rep.timeline if e["kind"] == "phase" and e["mbarrier"] == f"0x{0x2000:x}"] == [0, 1, 2]


def test_a_wait_for_a_phase_that_never_completes_hangs_with_the_missing_arrivals():
    with pytest.raises(model.Hang) as e:
        _run("""
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 2;
    bar.sync 0;
    @%p9 mbarrier.arrive.shared::cta.b64 %rd9, [%r90];
""" + WAIT.format(n=0, bar="%r90", parity=0), (np.zeros(64, np.uint32), np.zeros(64, np.uint32)))
    graph = e.value.graph[0]
    assert graph["pending_arrivals"] == 1 and graph["parity"] == 0 and len(graph["waiters"]) == 64
    assert "1 of 2 arrivals missing" in str(e.value)


def test_expect_tx_and_complete_tx_count_bytes_and_test_wait_takes_the_arrivals_state():
    body = """
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 1;
    bar.sync 0;
    setp.eq.u32 %p7, %r0, 32;
    @%p9 mbarrier.arrive.expect_tx.shared::cta.b64 %rd9, [%r90], 64;     // state: phase 0
    @%p9 mbarrier.complete_tx.shared::cta.b64 [%r90], 32;
    @%p7 mbarrier.complete_tx.shared::cta.b64 [%r90], SECOND;          // the other 32 bytes (or not)
    @%p9 mbarrier.test_wait.shared::cta.b64 %p1, [%r90], %rd9;          // phase 0 completed?
    @%p9 mbarrier.test_wait.parity.shared::cta.b64 %p3, [%r90], 0;      // parity 0 completed?
    selp.u32 %r5, 1, 0, %p1;
    selp.u32 %r7, 4, 0, %p3;
    add.u32 %r8, %r5, %r7;
    cvt.u32.u64 %r9, %rd9;
    shl.b32 %r9, %r9, 4;
    add.u32 %r8, %r8, %r9;
    @%p9 st.global.u32 [%rd2], %r8;
"""
    out = np.full(64, 7, np.uint32)
    _run(body.replace("SECOND", "32"), (np.zeros(64, np.uint32), out))
    assert out[0] == 5 and (out[1:] == 7).all()
    with pytest.raises(model.Hang) as e:        # 32 bytes never delivered: the phase never completes
        _run(body.replace("SECOND", "0"), (np.zeros(64, np.uint32), out))
    assert "tx-count 32 bytes outstanding (expected 64 bytes this phase, delivered 32)" in str(e.value)


# ---------------------------------------------------------------------------- bulk copies and TMA
def test_a_bulk_load_counted_on_an_mbarrier_then_a_bulk_store_copies_the_array():
    x = _rand(256)
    out = np.full(256, np.nan, np.float32)
    rep = _run("""
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 1;
    bar.sync 0;
    @%p9 mbarrier.arrive.expect_tx.shared::cta.b64 %rd9, [%r90], 1024;
    @%p9 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 1024, [%r90];
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    @%p9 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 1024;
    @%p9 cp.async.bulk.commit_group;
    @%p9 cp.async.bulk.wait_group.read 0;
""", (x, out))
    assert np.array_equal(out, x) and rep.counts["bulk.load"] == 1 and rep.counts["bulk.store"] == 1


TMA_PARAMS = (("src[128]", "align 64 .b8"), ("dst[128]", "align 64 .b8")) + IO


def _unused():
    return (np.zeros(4, np.float32), np.zeros(4, np.float32))


def _tma_body(x0, y0, store: str) -> str:
    return f"""
    mov.u64 %rd20, src;
    mov.u64 %rd21, dst;
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 1;
    bar.sync 0;
    @%p9 mbarrier.arrive.expect_tx.shared::cta.b64 %rd9, [%r90], 512;
    mov.u32 %r40, {x0};
    mov.u32 %r41, {y0};
    @%p9 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd20, {{%r40, %r41}}], [%r90];
""" + WAIT.format(n=0, bar="%r90", parity=0) + f"""
    @%p9 {store} [%rd21, {{%r40, %r41}}], [%r1];
    @%p9 cp.async.bulk.commit_group;
    @%p9 cp.async.bulk.wait_group.read 0;
"""


@pytest.mark.parametrize("x0,y0", [(16, 8), (56, 28)])
def test_a_tma_box_loads_and_stores_with_zero_fill_past_the_edges(x0, y0):
    rng = np.random.default_rng()
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = np.full((32, 64), np.nan, np.float32)
    maps = (tma.tensor_map_spec(a, box=(16, 8)), tma.tensor_map_spec(b, box=(16, 8)))
    rep = _run(_tma_body(x0, y0, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), maps + _unused(),
               params=TMA_PARAMS, block=32)
    want = np.full_like(b, np.nan)
    want[y0:y0 + 8, x0:x0 + 16] = a[y0:y0 + 8, x0:x0 + 16]          # rows / columns past the edge: not written
    assert np.array_equal(b, want, equal_nan=True)
    assert rep.counts["smem_fill.tma.bytes"] == 512                  # the box's bytes, zero fill included


def test_a_tma_reduce_add_combines_the_box_with_global_memory():
    rng = np.random.default_rng()
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)
    before = b.copy()
    maps = (tma.tensor_map_spec(a, box=(16, 8)), tma.tensor_map_spec(b, box=(16, 8)))
    _run(_tma_body(32, 16, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"), maps + _unused(),
         params=TMA_PARAMS, block=32)
    want = before.copy()
    want[16:24, 32:48] = (before[16:24, 32:48].astype(np.float64) + a[16:24, 32:48]).astype(np.float32)
    assert np.array_equal(b, want)


# ---------------------------------------------------------------------------- wgmma
WG_PARAMS = (("img", "u64"), ("out", "u64"), ("da", "u64"), ("db", "u64"))


def _wgmma_run(atype: str, K: int, el, n: int = 8):
    """A (64 x K) and B (n x K), K-major in the no-swizzle core-matrix layout, copied to shared memory
    as one image; D = A B^T by one mma_async with scale-d 0 and a second accumulating one: 2 A B^T."""
    rng = np.random.default_rng()
    eb = np.dtype(el).itemsize
    A = rng.standard_normal((64, K)).astype(el)
    B = rng.standard_normal((n, K)).astype(el)
    img = np.zeros(4096, np.uint8)
    kbytes = K * eb
    for mat, base in ((A, 0), (B, 2048)):
        raw = mat.view(np.uint8).reshape(mat.shape[0], K, eb)
        for r in range(mat.shape[0]):
            for k in range(K):
                img[base + hw_wgmma.kmajor_offset(r, k, "none", elem_bytes=eb, rows=mat.shape[0], k_elems=K):][:eb] = \
                    raw[r, k]
    lbo, sbo = hw_wgmma.kmajor_strides("none", rows=64, k_bytes=kbytes)
    da, db = hw_wgmma.encode(0, lbo, sbo, "none"), hw_wgmma.encode(2048, lbo, sbo, "none")
    out = np.full((128, n // 2), np.nan, np.float32)
    regs = ", ".join(f"%f{i}" for i in range(1, n // 2 + 1))
    shape = f"m64n{n}k{K}.f32.{atype}.{atype}"
    trans = ", 0, 0" if atype in ("bf16", "f16") else ""
    stores = "".join(f"    st.global.f32 [%rd8+{4 * i}], %f{i + 1};\n" for i in range(n // 2))
    rep = snippet.run(f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [img];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [da];
    ld.param.u64 %rd4, [db];
    mov.u32 %r1, buf;
    mul.wide.u32 %rd5, %r0, 32;
    add.s64 %rd6, %rd1, %rd5;
    shl.b32 %r2, %r0, 5;
    add.u32 %r3, %r1, %r2;
    ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd6];
    ld.global.v4.u32 {{%r14, %r15, %r16, %r17}}, [%rd6+16];
    st.shared.v4.u32 [%r3], {{%r10, %r11, %r12, %r13}};
    st.shared.v4.u32 [%r3+16], {{%r14, %r15, %r16, %r17}};
    fence.proxy.async.shared::cta;            // ordinary stores -> the async proxy wgmma reads with
    bar.sync 0;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.{shape} {{{regs}}}, %rd3, %rd4, 0, 1, 1{trans};
    wgmma.mma_async.sync.aligned.{shape} {{{regs}}}, %rd3, %rd4, 1, 1, 1{trans};
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    mul.wide.u32 %rd7, %r0, {2 * n};
    add.s64 %rd8, %rd2, %rd7;
{stores}""", (img, out, np.uint64(da), np.uint64(db)), params=WG_PARAMS,
                      shared="    .shared .align 1024 .b8 buf[4096];\n", block=(128, 1, 1))
    C = np.full((64, n), np.nan)
    for t in range(128):
        for i in range(n // 2):
            r, c = hw_wgmma.fragment_coord(t, i, n)
            C[r, c] = out[t, i]
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    return C, 2 * A64 @ B64.T, np.abs(A64) @ np.abs(B64).T, rep


# ---------------------------------------------------------------------------- st.async, red.async
# Two blocks of a cluster; each counts the bytes its peer sends on its own mbarrier (bar[0]), so it arrives once
# with expect_tx and waits; %r10 = rank, %r14 = the peer's rank, %r16 = the peer's bar[0], %r17 = &x[ctaid * 64 + tid]
PAIR = """
    mov.u32 %r10, %cluster_ctarank;
    mov.u32 %r11, %ctaid.x;
    mad.lo.u32 %r12, %r11, 64, %r0;
    mul.wide.u32 %rd9, %r12, 4;
    add.s64 %rd10, %rd1, %rd9;
    add.s64 %rd11, %rd2, %rd9;
    @%p9 mbarrier.init.shared::cta.b64 [%r90], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
{arrive}    xor.b32 %r14, %r10, 1;
    mapa.shared::cluster.u32 %r16, %r90, %r14;
"""
END = """
    barrier.cluster.arrive.release.aligned;            // neither block exits while its peer may still write
    barrier.cluster.wait.acquire.aligned;
"""


ARRIVE = "    @%p9 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd20, [%r90], {tx};\n"


def _pair(body, x, out, tx, arrive_first=True):
    """Both blocks run PAIR then body; each one's thread 0 arrives expecting tx bytes on its mbarrier before the
    body (or, arrive_first=False, where the body puts {arrive})."""
    arrive = ARRIVE.format(tx=tx)
    ptx = PAIR.format(arrive=arrive if arrive_first else "") + (body if arrive_first else body.replace("{arrive}", arrive))
    return snippet.run(HEAD + ptx + END, (x, out), params=IO, shared=SHARED, block=(64, 1, 1),
                       grid=(2, 1, 1), cluster=(2, 1, 1))


def test_st_async_sends_each_thread_s_word_to_the_peer_block_counted_on_the_peer_s_mbarrier():
    x = np.random.default_rng().integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    out = np.full(128, 0xDEADBEEF, np.uint32)
    rep = _pair("""
    ld.global.b32 %r20, [%rd10];
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r1, %r3;
    mapa.shared::cluster.u32 %r15, %r4, %r14;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r15], %r20, [%r16];
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    ld.shared.b32 %r21, [%r4];
    st.global.b32 [%rd11], %r21;
""", x, out, tx=256)
    assert np.array_equal(out, np.concatenate([x[64:], x[:64]]))
    assert rep.counts["st.async"] == 128 and rep.counts["dsmem.peer"] == 128 and not rep.violations


def test_st_async_v4_moves_sixteen_bytes_per_thread():
    x = np.random.default_rng().integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    out = np.full(512, 0xDEADBEEF, np.uint32)
    _pair("""
    mul.wide.u32 %rd12, %r12, 16;
    add.s64 %rd13, %rd1, %rd12;
    add.s64 %rd14, %rd2, %rd12;
    ld.global.v4.b32 {%r20, %r21, %r22, %r23}, [%rd13];
    shl.b32 %r3, %r0, 4;
    add.u32 %r4, %r1, %r3;
    mapa.shared::cluster.u32 %r15, %r4, %r14;
    st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%r15], {%r20, %r21, %r22, %r23}, [%r16];
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    ld.shared.v4.b32 {%r24, %r25, %r26, %r27}, [%r4];
    st.global.v4.b32 [%rd14], {%r24, %r25, %r26, %r27};
""", x, out, tx=1024)
    assert np.array_equal(out, np.concatenate([x[256:], x[:256]]))


def test_reading_st_async_bytes_before_their_phase_completes_is_a_violation():
    x = np.arange(128, dtype=np.uint32)
    with pytest.raises(model.Violation) as e:
        _pair("""
    ld.global.b32 %r20, [%rd10];
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r1, %r3;
    mapa.shared::cluster.u32 %r15, %r4, %r14;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r15], %r20, [%r16];
    ld.shared.b32 %r21, [%r4];                         // no wait on the mbarrier first
    st.global.b32 [%rd11], %r21;
""", x, np.zeros(128, np.uint32), tx=256)
    # in flight, or landed but not observed through the mbarrier: either way the read broke the same rule
    assert e.value.rule in ("tma-read-before-complete", "tma-visibility"), e.value



def test_a_plain_store_into_a_bin_a_red_async_still_reduces_into_is_a_race():
    x = np.ones(128, np.uint32)
    with pytest.raises(model.Violation) as e:
        _pair("""
    ld.global.b32 %r20, [%rd10];
    mapa.shared::cluster.u32 %r15, %r1, %r14;
    red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r15], %r20, [%r16];
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @%p9 st.shared.b32 [%r1], 0;                       // the owner zeroes the bin while the peer's adds fly
{arrive}""" + WAIT.format(n=0, bar="%r90", parity=0), x, np.zeros(128, np.uint32), tx=256, arrive_first=False)
    assert e.value.rule == "async-overwrite-race", e.value


# The same two instructions from CUDA C++ (libcu++'s cuda::ptx wrappers), as NVRTC writes them: each thread of a
# 2-block cluster st.async's its x into the peer's got[] and red.async-adds it into the peer's bins[t % 8], all of it
# counted on the peer's one mbarrier (64 x 4 + 64 x 4 bytes expected).
SWAP_AND_COUNT = r"""
#include <cuda/ptx>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(2, 1, 1) swap_and_count(const unsigned* x, unsigned* out) {
  __shared__ unsigned got[64];
  __shared__ unsigned bins[8];
  __shared__ alignas(8) unsigned long long bar;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned t = threadIdx.x, me = cluster.block_rank(), peer = me ^ 1;
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  if (t < 8) bins[t] = 0;
  cluster.sync();
  if (t == 0)
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &bar,
                                         64 * 4 + 64 * 4);
  const unsigned v = x[blockIdx.x * 64 + t];
  unsigned* their_got = cluster.map_shared_rank(&got[t], peer);
  unsigned* their_bin = cluster.map_shared_rank(&bins[t % 8], peer);
  unsigned long long* their_bar = cluster.map_shared_rank(&bar, peer);
  cuda::ptx::st_async(their_got, v, their_bar);
  cuda::ptx::red_async(cuda::ptx::op_add, their_bin, v, their_bar);
  while (!cuda::ptx::mbarrier_try_wait_parity(&bar, 0)) {}
  out[blockIdx.x * 72 + t] = got[t];
  if (t < 8) out[blockIdx.x * 72 + 64 + t] = bins[t];
  cluster.sync();
}
"""


def test_st_async_and_red_async_from_cuda_cpp_land_where_the_peer_waits(tmp_path):
    from judge.gpu import build
    (tmp_path / "swap_and_count.cu").write_text(SWAP_AND_COUNT)
    b = build.compile(tmp_path / "swap_and_count.cu")
    x = np.random.default_rng().integers(0, 2**20, 128).astype(np.uint32)
    out = np.full(144, 0xDEADBEEF, np.uint32)
    rep = model.run(b, "swap_and_count", grid=(2,), block=(64,), args=(x, out))
    for blk in (0, 1):
        peer = x[(1 - blk) * 64:(2 - blk) * 64]
        assert np.array_equal(out[blk * 72:blk * 72 + 64], peer)
        assert np.array_equal(out[blk * 72 + 64:blk * 72 + 72], peer.reshape(8, 8).sum(0).astype(np.uint32))
    assert rep.counts["st.async"] == 128 and rep.counts["red.async"] == 128 and not rep.violations


# A bulk copy of this block's 256 bytes (64 words written by its threads, then fenced for the async proxy) into the
# peer's buffer at byte 256, counted on the peer's mbarrier; %r4 = &buf[tid], %r5 = buf + 256 (the peer's copy lands there)
BULK_TO_PEER = """
    ld.global.b32 %r20, [%rd10];
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r1, %r3;
    st.shared.b32 [%r4], %r20;
    {fence}
    bar.sync 0;
    add.u32 %r5, %r1, 256;
    mapa.shared::cluster.u32 %r15, %r5, %r14;
    @%p9 cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r15], [%r1], 256, [%r16];
"""
FENCE = "fence.proxy.async.shared::cta;"


def test_a_bulk_copy_into_the_peer_block_lands_where_the_peer_waits():
    x = np.random.default_rng().integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    out = np.full(128, 0xDEADBEEF, np.uint32)
    rep = _pair(BULK_TO_PEER.format(fence=FENCE) + WAIT.format(n=0, bar="%r90", parity=0) + """
    ld.shared.b32 %r21, [%r4+256];
    st.global.b32 [%rd11], %r21;
""", x, out, tx=256)
    assert np.array_equal(out, np.concatenate([x[64:], x[:64]]))
    assert rep.counts["bulk.peer"] == 2 and not rep.violations


def test_a_bulk_copy_of_generic_writes_needs_the_proxy_fence():
    with pytest.raises(model.Violation) as e:
        _pair(BULK_TO_PEER.format(fence="") + WAIT.format(n=0, bar="%r90", parity=0), np.arange(128, dtype=np.uint32),
              np.zeros(128, np.uint32), tx=256)
    assert e.value.rule == "proxy-fence"


def test_overwriting_a_bulk_copy_s_source_before_the_peer_s_phase_completes_is_a_violation():
    with pytest.raises(model.Violation) as e:
        _pair(BULK_TO_PEER.format(fence=FENCE) + """
    st.shared.b32 [%r4], 0;                            // the source again, before anyone knows the copy read it
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
{arrive}""" + WAIT.format(n=0, bar="%r90", parity=0), np.arange(128, dtype=np.uint32), np.zeros(128, np.uint32),
              tx=256, arrive_first=False)
    assert e.value.rule == "async-read-overwritten"

@pytest.mark.parametrize("op,ty", [("add", "u32"), ("max", "s32"), ("min", "s32"), ("xor", "b32")])
def test_red_async_reduces_every_thread_s_value_into_eight_bins_of_the_peer(op, ty):
    rng = np.random.default_rng()
    x = rng.integers(-2**20, 2**20, 128).astype(np.int32).view(np.uint32)
    init = {"add": 0, "max": -2**31, "min": 2**31 - 1, "xor": 0}[op]
    out = np.full(128, 0xDEADBEEF, np.uint32)
    _pair(f"""
    setp.lt.u32 %p3, %r0, 8;
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r1, %r3;
    @%p3 st.shared.b32 [%r4], {init};                  // the bins start at the operation's identity
    barrier.cluster.arrive.release.aligned;            // ... before any peer reduces into them
    barrier.cluster.wait.acquire.aligned;
    ld.global.b32 %r20, [%rd10];
    and.b32 %r5, %r0, 7;
    shl.b32 %r6, %r5, 2;
    add.u32 %r7, %r1, %r6;
    mapa.shared::cluster.u32 %r15, %r7, %r14;
    red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{op}.{ty} [%r15], %r20, [%r16];
""" + WAIT.format(n=0, bar="%r90", parity=0) + """
    @%p3 ld.shared.b32 %r21, [%r4];
    @%p3 st.global.b32 [%rd11], %r21;
""", x, out, tx=256)
    v = x.view(np.int32).astype(np.int64)
    for blk in (0, 1):
        peer = v[(1 - blk) * 64:(2 - blk) * 64].reshape(8, 8, order="F")   # thread t goes to bin t % 8
        want = {"add": peer.sum(1) % 2**32, "max": peer.max(1) % 2**32, "min": peer.min(1) % 2**32,
                "xor": np.bitwise_xor.reduce(peer % 2**32, axis=1)}[op]
        assert np.array_equal(out[blk * 64:blk * 64 + 8], want.astype(np.uint32)), (op, blk)



@pytest.mark.parametrize("atype,K,el", [("bf16", 16, ml_dtypes.bfloat16), ("f16", 16, np.float16),
                                        ("e4m3", 32, ml_dtypes.float8_e4m3fn), ("e5m2", 32, ml_dtypes.float8_e5m2)])
def test_wgmma_computes_a_times_b_transposed_into_the_fragment_layout(atype, K, el):
    C, ref, mag, rep = _wgmma_run(atype, K, el)
    assert not np.isnan(C).any()
    assert np.all(np.abs(C - ref) <= 2 * mag * 2.0 ** -23 + 1e-30), np.max(np.abs(C - ref))
    assert rep.counts["wgmma"] == 2 and rep.counts["wgmma.flops"] == 2 * 2 * 64 * 8 * K



# ---------------------------------------------------------------------------- mma.sync
# An Ampere-style tensor-core tile: A (16 x 16) and Bt (8 x 16, B's columns with K contiguous) through shared memory
# and ldmatrix (x4 for A: lanes 0-15 name rows 0-15 at k 0, lanes 16-31 the same rows at k 8; x2 for B), one
# mma.sync.m16n8k16. The fragment layouts of judge.model.ops.mma must agree with ldmatrix's for C to be A B.
MMA_TILE = r"""
#define ELEM ELEM_TYPE
#include <cuda_bf16.h>
#include <cuda_fp16.h>
// One warp: C (16 x 8, f32) = A (16 x 16, row-major) x B, B given as Bt (8 x 16: B's columns, K contiguous), through
// shared memory and ldmatrix, as an Ampere-style tensor-core GEMM loads its fragments.
extern "C" __global__ void mma_tile(const ELEM* a, const ELEM* bt, float* c) {
  __shared__ alignas(16) ELEM sa[16 * 16];
  __shared__ alignas(16) ELEM sb[8 * 16];
  const unsigned lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sa[i] = a[i];
  for (int i = lane; i < 128; i += 32) sb[i] = bt[i];
  __syncwarp();
  unsigned ra[4], rb[2];
  const unsigned pa = static_cast<unsigned>(__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]));
  const unsigned pb = static_cast<unsigned>(__cvta_generic_to_shared(&sb[(lane % 8) * 16 + ((lane / 8) % 2) * 8]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(ra[0]), "=r"(ra[1]), "=r"(ra[2]), "=r"(ra[3]) : "r"(pa));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(rb[0]), "=r"(rb[1]) : "r"(pb));
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KIND "." KIND ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
  const unsigned g = lane / 4, t = lane % 4;
  for (int j = 0; j < 4; ++j) c[(g + 8 * (j / 2)) * 8 + 2 * t + j % 2] = d[j];
}
"""


def _mma_tile(tmp_path, kind):
    from judge.gpu import build
    (tmp_path / "mma_tile.cu").write_text(MMA_TILE)
    elem = {"bf16": "__nv_bfloat16", "f16": "__half"}[kind]
    return build.compile(tmp_path / "mma_tile.cu", defines={"ELEM_TYPE": elem, "KIND": f'"{kind}"'})


@pytest.mark.parametrize("kind,el", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_mma_sync_of_fragments_loaded_by_ldmatrix_is_a_times_b(tmp_path, kind, el):
    b = _mma_tile(tmp_path, kind)
    rng = np.random.default_rng()
    a, bt = rng.standard_normal((16, 16)).astype(el), rng.standard_normal((8, 16)).astype(el)
    c = np.full(128, np.nan, np.float32)
    rep = model.run(b, "mma_tile", grid=(1,), block=(32,), args=(a.view(np.uint16), bt.view(np.uint16), c))
    want = (a.astype(np.float64) @ bt.astype(np.float64).T).astype(np.float32)
    assert np.array_equal(c.reshape(16, 8), want)          # products exact, the sum rounded once
    assert rep.counts["mma.sync"] == 1 and rep.counts["ldmatrix"] == 32 * 6


def test_the_h200_computes_the_mma_sync_tile_as_the_model_does(tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    import cupy
    b = _mma_tile(tmp_path, "bf16")
    rng = np.random.default_rng()
    a, bt = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16), rng.standard_normal((8, 16)).astype(ml_dtypes.bfloat16)
    c = cupy.full(128, cupy.nan, cupy.float32)
    b.kernel("mma_tile")((1, 1, 1), (32, 1, 1), (cupy.asarray(a.view(np.uint16)), cupy.asarray(bt.view(np.uint16)), c))
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    assert np.abs(cupy.asnumpy(c).reshape(16, 8) - want).max() <= 1e-5 * np.abs(want).max()


def _pack(lo, hi, el):
    return (np.asarray(lo, el).view(np.uint16).astype(np.uint32) | (np.asarray(hi, el).view(np.uint16).astype(np.uint32) << 16))


@pytest.mark.parametrize("shape,kind", [("m16n8k8", "f16"), ("m16n8k8", "tf32"), ("m16n8k16", "bf16")])
def test_mma_sync_reads_each_lane_s_fragment_where_the_ptx_isa_puts_it(shape, kind):
    """Registers made per lane from the PTX ISA's fragment tables (g = lane / 4, t = lane % 4), C nonzero."""
    K = int(shape[6:])
    rng = np.random.default_rng()
    el = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32}[kind]
    A = rng.standard_normal((16, K)).astype(el)
    B = rng.standard_normal((K, 8)).astype(el)
    if kind == "tf32":                                   # tf32 keeps 10 mantissa bits: give it exact values
        A = (A.view(np.uint32) & 0xFFFFE000).view(np.float32)
        B = (B.view(np.uint32) & 0xFFFFE000).view(np.float32)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    if kind == "tf32":
        ra = [A[g + 8 * (i % 2), t + 4 * (i // 2)].view(np.uint32) for i in range(4)]
        rb = [B[t + 4 * i, g].view(np.uint32) for i in range(2)]
    else:
        ra = [_pack(A[g + 8 * (i % 2), 2 * t + 8 * (i // 2)], A[g + 8 * (i % 2), 2 * t + 8 * (i // 2) + 1], el)
              for i in range(K // 4)]
        rb = [_pack(B[2 * t + 8 * i, g], B[2 * t + 8 * i + 1, g], el) for i in range(K // 8)]
    rc = [C[g + 8 * (j // 2), 2 * t + j % 2] for j in range(4)]
    regs = np.stack(ra + rb + [x.view(np.uint32) for x in rc], axis=1).astype(np.uint32)      # lanes x registers
    na, nb = len(ra), len(rb)
    names = lambda p, n: ", ".join(f"%{p}{i}" for i in range(n))                              # noqa: E731
    loads = "\n".join(f"    ld.global.b32 %ra{i}, [%rd3+{4 * i}];" for i in range(na)) + "\n" + \
        "\n".join(f"    ld.global.b32 %rb{i}, [%rd3+{4 * (na + i)}];" for i in range(nb)) + "\n" + \
        "\n".join(f"    ld.global.f32 %fc{i}, [%rd3+{4 * (na + nb + i)}];" for i in range(4))
    body = f"""
    .reg .b32 %ra<4>, %rb<2>;
    .reg .f32 %fc<4>, %fd<4>;
    mul.wide.u32 %rd5, %r0, {4 * regs.shape[1]};
    add.s64 %rd3, %rd1, %rd5;
    mul.wide.u32 %rd6, %r0, 16;
    add.s64 %rd4, %rd2, %rd6;
{loads}
    mma.sync.aligned.{shape}.row.col.f32.{kind}.{kind}.f32 {{{names('fd', 4)}}}, {{{names('ra', na)}}}, {{{names('rb', nb)}}}, {{{names('fc', 4)}}};
    st.global.v4.f32 [%rd4], {{{names('fd', 4)}}};
"""
    out = np.full((32, 4), np.nan, np.float32)
    _run(body, (regs, out), block=32)
    D = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
    assert np.array_equal(out, np.stack([D[g + 8 * (j // 2), 2 * t + j % 2] for j in range(4)], axis=1))


def test_mma_sync_by_part_of_a_warp_is_a_violation():
    with pytest.raises(model.Violation) as e:
        _run("""
    .reg .b32 %ra<4>, %rb<2>;
    .reg .f32 %fd<4>;
    @%p9 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%fd0, %fd1, %fd2, %fd3}, {%ra0, %ra1, %ra2, %ra3}, {%rb0, %rb1}, {%fd0, %fd1, %fd2, %fd3};
""", (np.zeros(32, np.uint32), np.zeros(32, np.uint32)), block=32)
    assert e.value.rule == "warp-aligned"


# ---------------------------------------------------------------------------- wmma (nvcuda::wmma through <mma.h>)
WMMA = r"""
#include <mma.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using namespace nvcuda;
// C (16 x 16, f32, row-major with leading dimension ldc) = A (16 x K, row-major) x B (K x 16, LAYOUT) + C, one
// warp; A goes through shared memory on the way (with a padded leading dimension), B and C straight from global.
template <typename T, typename LAYOUT, bool B_ROW>
__device__ void tile(const T* a, const T* b, float* c, int K, int ldb, int ldc) {
  __shared__ alignas(32) T sa[16 * 40];
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LAYOUT> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fc, c, ldc, wmma::mem_row_major);
  for (int k = 0; k < K; k += 16) {
    for (int i = threadIdx.x; i < 256; i += 32) sa[(i / 16) * 40 + i % 16] = a[(i / 16) * K + k + i % 16];
    __syncwarp();
    wmma::load_matrix_sync(fa, sa, 40);
    wmma::load_matrix_sync(fb, b + (B_ROW ? k * ldb : k), ldb);
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = fa.x[i] * T(2.0f);   // element-wise: every element
    wmma::mma_sync(fc, fa, fb, fc);
    __syncwarp();
  }
  wmma::store_matrix_sync(c, fc, ldc, wmma::mem_row_major);
}
extern "C" __global__ void wmma_bf16_col(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int K, int ldb, int ldc) {
  tile<__nv_bfloat16, wmma::col_major, false>(a, b, c, K, ldb, ldc);
}
extern "C" __global__ void wmma_f16_row(const __half* a, const __half* b, float* c, int K, int ldb, int ldc) {
  tile<__half, wmma::row_major, true>(a, b, c, K, ldb, ldc);
}
"""


def _aligned(x, align=256):
    """A copy of x starting on an `align`-byte boundary, as cudaMalloc's allocations do (the model's global
    addresses are the host's)."""
    raw = np.empty(x.nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    out = raw[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def _wmma_case(kernel, K=48):
    """Inputs exact in the operand type, B stored col-major (N x K, ldb = K + 8) or row-major (K x N, ldb 24),
    C (16 x 16 within a 16 x 24 row-major array) random, with NaN in its padding columns."""
    rng = np.random.default_rng()
    el = ml_dtypes.bfloat16 if "bf16" in kernel else np.float16
    a = rng.standard_normal((16, K)).astype(el)
    bm = rng.standard_normal((K, 16)).astype(el)
    if "col" in kernel:
        ldb = K + 8
        b = np.zeros((16, ldb), el)
        b[:, :K] = bm.T
    else:
        ldb = 24
        b = np.zeros((K, ldb), el)
        b[:, :16] = bm
    c = np.full((16, 24), np.nan, np.float32)
    c0 = rng.standard_normal((16, 16)).astype(np.float32)
    c[:, :16] = c0
    want = 2 * a.astype(np.float64) @ bm.astype(np.float64) + c0
    return _aligned(a), _aligned(b), _aligned(c), ldb, want


@pytest.mark.parametrize("kernel", ["wmma_bf16_col", "wmma_f16_row"])
def test_wmma_gives_a_b_plus_c_from_global_and_shared_memory_in_either_b_layout(tmp_path, kernel):
    from judge import model
    from judge.gpu import build
    (tmp_path / "wmma.cu").write_text(WMMA)
    b = build.compile(tmp_path / "wmma.cu")
    a, bb, c, ldb, want = _wmma_case(kernel)
    rep = model.run(b, kernel, grid=(1,), block=(32,), args=(a.view(np.uint16), bb.view(np.uint16), c,
                                                               np.int32(a.shape[1]), np.int32(ldb), np.int32(24)))
    assert np.isnan(c[:, 16:]).all(), "store_matrix_sync wrote past the 16 columns"
    assert np.abs(c[:, :16] - want).max() <= 1e-5 * np.abs(want).max()
    assert rep.counts["wmma.mma"] == a.shape[1] // 16


def test_a_wmma_load_from_a_pointer_off_32_bytes_is_an_alignment_violation(tmp_path):
    from judge import model
    from judge.gpu import build
    (tmp_path / "wmma.cu").write_text(WMMA)
    b = build.compile(tmp_path / "wmma.cu")
    a, bb, c, ldb, _ = _wmma_case("wmma_bf16_col")
    flat = _aligned(np.zeros(bb.size + 8, np.uint16))
    flat[8:] = bb.view(np.uint16).ravel()                          # B now starts 16 bytes into its allocation
    with pytest.raises(model.Violation, match="alignment"):
        model.run(b, "wmma_bf16_col", grid=(1,), block=(32,), args=(a.view(np.uint16), flat[8:], c,
                                                                     np.int32(48), np.int32(ldb), np.int32(24)))


def test_the_h200_computes_wmma_as_the_model_does(tmp_path):
    from judge import gpu, model
    gpu.need("sm_90")
    import cupy
    from judge.gpu import build
    (tmp_path / "wmma.cu").write_text(WMMA)
    b = build.compile(tmp_path / "wmma.cu")
    for kernel in ("wmma_bf16_col", "wmma_f16_row"):
        a, bb, c, ldb, want = _wmma_case(kernel)
        args = (np.int32(a.shape[1]), np.int32(ldb), np.int32(24))
        on_gpu = cupy.asarray(c)
        b.kernel(kernel)((1, 1, 1), (32, 1, 1), (cupy.asarray(a.view(np.uint16)), cupy.asarray(bb.view(np.uint16)),
                                                 on_gpu, *args))
        model.run(b, kernel, grid=(1,), block=(32,), args=(a.view(np.uint16), bb.view(np.uint16), c, *args))
        g = cupy.asnumpy(on_gpu)
        assert np.isnan(g[:, 16:]).all() and np.abs(g[:, :16] - want).max() <= 1e-5 * np.abs(want).max()
        assert np.abs(g[:, :16] - c[:, :16]).max() <= 1e-5 * np.abs(want).max()
