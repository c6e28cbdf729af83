"""tests/model/test_model_ops_async.py - the asynchronous families of the CPU model fed hand-written PTX: cp_async,
mbarrier, bulk (1-D bulk copies, TMA loads, stores and reductions) and wgmma (bf16 and e4m3).

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


@pytest.mark.parametrize("atype,K,el", [("bf16", 16, ml_dtypes.bfloat16), ("f16", 16, np.float16),
                                        ("e4m3", 32, ml_dtypes.float8_e4m3fn), ("e5m2", 32, ml_dtypes.float8_e5m2)])
def test_wgmma_computes_a_times_b_transposed_into_the_fragment_layout(atype, K, el):
    C, ref, mag, rep = _wgmma_run(atype, K, el)
    assert not np.isnan(C).any()
    assert np.all(np.abs(C - ref) <= 2 * mag * 2.0 ** -23 + 1e-30), np.max(np.abs(C - ref))
    assert rep.counts["wgmma"] == 2 and rep.counts["wgmma.flops"] == 2 * 2 * 64 * 8 * K
