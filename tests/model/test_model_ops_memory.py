"""tests/model/test_model_ops_memory.py - the memory, control, barriers, warp and cluster families of the CPU model
(judge/model/ops/memory.py, control.py, barriers.py, warp.py, cluster.py), fed hand-written PTX.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_ops_memory.py -q

Inputs are fresh random numbers each run; outputs start poisoned (NaN or a marker) so that an
element the kernel never writes fails the comparison.
"""
from __future__ import annotations

import numpy as np
import pytest

from judge import model
from judge.model import snippet

IO = (("x", "u64"), ("out", "u64"))
SHARED = "    .shared .align 16 .b8 buf[4096];\n"
# %r0 = tid, %rd1 = x, %rd2 = out, %rd3 = &x[tid] (4-byte elements), %rd4 = &out[tid], %r1 = buf
HEAD = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mul.wide.u32 %rd5, %r0, 4;
    add.s64 %rd3, %rd1, %rd5;
    add.s64 %rd4, %rd2, %rd5;
    mov.u32 %r1, buf;
"""


def _run(body, x, out, block=64, **kw):
    return snippet.run(HEAD + body, (x, out), params=IO, shared=SHARED, block=(block, 1, 1), **kw)


def _rand(n=64, dtype=np.float32):
    return np.random.default_rng().standard_normal(n).astype(dtype)


# ---------------------------------------------------------------------------- memory
def test_vector_loads_and_stores_move_four_floats_per_thread():
    x = _rand(256)
    out = np.full(256, np.nan, np.float32)
    _run("""
    mul.wide.u32 %rd6, %r0, 16;
    add.s64 %rd7, %rd1, %rd6;
    add.s64 %rd8, %rd2, %rd6;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd7];
    st.global.v4.f32 [%rd8], {%f4, %f3, %f2, %f1};
""", x, out)
    assert np.array_equal(out, x.reshape(64, 4)[:, ::-1].ravel())


def test_shared_memory_round_trip_through_a_barrier_reverses_the_block():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    rep = _run("""
    ld.global.f32 %f1, [%rd3];
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    st.shared.f32 [%r3], %f1;
    bar.sync 0;
    sub.u32 %r4, 63, %r0;
    shl.b32 %r5, %r4, 2;
    add.u32 %r6, %r1, %r5;
    ld.shared.f32 %f2, [%r6];
    st.global.f32 [%rd4], %f2;
""", x, out)
    assert np.array_equal(out, x[::-1])
    assert rep.counts["st.shared"] == 64 and rep.counts["ld.shared"] == 64 and rep.counts["bar.sync"] == 64


# One warp and 32 rows of 16 bytes: %rd6 = 16 tid; ROW_IN loads x's row tid into four registers, ROW_TO_BUF
# stores %r20-%r23 into buf's row tid (%r8), NAMED_ROW names buf's row slot(tid) in %r6 (a permutation),
# ROW_OUT stores four registers as out's row tid.
ROW_IN = """
    mul.wide.u32 %rd6, %r0, 16;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v4.u32 {{{0}}}, [%rd7];
"""
ROW_TO_BUF = """
    shl.b32 %r7, %r0, 4;
    add.u32 %r8, %r1, %r7;
    st.shared.v4.u32 [%r8], {%r20, %r21, %r22, %r23};
"""
NAMED_ROW = """
    mul.lo.u32 %r5, %r0, 7;
    and.b32 %r5, %r5, 31;
    shl.b32 %r5, %r5, 4;
    add.u32 %r6, %r1, %r5;
"""
ROW_OUT = """
    add.s64 %rd8, %rd2, %rd6;
    st.global.v4.u32 [%rd8], {{{0}}};
"""
R10, R20 = "%r10, %r11, %r12, %r13", "%r20, %r21, %r22, %r23"


def _slot(i: int, r: int) -> int:
    """The row of buf that lane 8 i + r names (NAMED_ROW): row r of matrix i."""
    return (7 * (8 * i + r)) % 32


def _words() -> np.ndarray:
    return np.random.default_rng().integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("count", [4, 2, 1])
def test_stmatrix_puts_each_lanes_registers_in_the_rows_other_lanes_name(count):
    # one warp: lane L holds 4 words x[4 L .. 4 L + 3]; lane 8 i + r names row r of matrix i at buf's row _slot(i, r)
    # (16 bytes a row); register i of lane L is word L % 4 of row L / 4 of matrix i
    x, out = _words(), np.zeros(128, np.uint32)
    regs = ", ".join(f"%r{10 + i}" for i in range(count))
    rep = _run(ROW_IN.format(R10) + NAMED_ROW + f"""
    stmatrix.sync.aligned.m8n8.x{count}.shared.b16 [%r6], {{{regs}}};
    bar.sync 0;
    shl.b32 %r7, %r0, 4;
    add.u32 %r8, %r1, %r7;
    ld.shared.v4.u32 {{{R20}}}, [%r8];
""" + ROW_OUT.format(R20), x, out, block=32)
    want = np.zeros(128, np.uint32)
    for i in range(count):
        for r in range(8):
            for c in range(4):
                want[4 * _slot(i, r) + c] = x[4 * (4 * r + c) + i]
    written = np.zeros(32, bool)
    written[[_slot(i, r) for i in range(count) for r in range(8)]] = True
    assert np.array_equal(out.reshape(32, 4)[written], want.reshape(32, 4)[written])
    assert rep.counts["stmatrix"] == 32 * count


def _matrices(words: np.ndarray, count: int) -> np.ndarray:
    """The count 8 x 8 b16 matrices held in `words` (32 lanes x 4 registers of b32) by ldmatrix's layout,
    as (count, 8, 8) uint16: register i of lane L holds row L // 4, columns 2 (L % 4), + 1 of matrix i."""
    h = words.reshape(32, 4).view(np.uint16).reshape(32, 4, 2)
    out = np.zeros((count, 8, 8), np.uint16)
    for i in range(count):
        for lane in range(32):
            out[i, lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2] = h[lane, i]
    return out


@pytest.mark.parametrize("count", [4, 2, 1])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_reads_rows_other_lanes_name_and_trans_reads_them_by_column(count, trans):
    # buf holds 32 random rows of 16 bytes; lane 8 i + r names row _slot(i, r) as row r of matrix i
    x, out = _words(), np.zeros(128, np.uint32)
    regs = ", ".join(f"%r{10 + i}" for i in range(count))
    rep = _run(ROW_IN.format(R20) + ROW_TO_BUF + "    bar.sync 0;\n" + NAMED_ROW + f"""
    mov.u32 %r10, 0; mov.u32 %r11, 0; mov.u32 %r12, 0; mov.u32 %r13, 0;
    ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [%r6];
""" + ROW_OUT.format(R10), x, out, block=32)
    rows = x.reshape(32, 4).view(np.uint16).reshape(32, 8)           # row s of buf: 8 b16
    want = np.stack([rows[[_slot(i, r) for r in range(8)]] for i in range(count)])
    got = _matrices(out, count)
    assert np.array_equal(got, want.transpose(0, 2, 1) if trans else want)
    assert rep.counts["ldmatrix"] == 32 * count * (2 if trans else 1)


def test_stmatrix_trans_undoes_ldmatrix_trans():
    # ldmatrix.trans then stmatrix.trans to other rows: the rows arrive as they were
    x, out = _words(), np.zeros(128, np.uint32)
    _run(ROW_IN.format(R20) + ROW_TO_BUF + f"""
    bar.sync 0;
    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{R10}}}, [%r8];
    add.u32 %r9, %r8, 1024;
    stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%r9], {{{R10}}};
    bar.sync 0;
    ld.shared.v4.u32 {{{R20}}}, [%r9];
""" + ROW_OUT.format(R20), x, out, block=32)
    assert np.array_equal(out, x)


def test_ldmatrix_of_bytes_a_copy_has_not_landed_is_a_violation():
    # thread 0 copies 16 bytes into buf with cp.async; the warp reads them with ldmatrix before any wait
    with pytest.raises(model.Violation) as e:
        _run("""
    setp.eq.u32 %p1, %r0, 0;
    @%p1 cp.async.ca.shared.global [%r1], [%rd1], 16;
    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r10}, [%r1];
""", np.ones(64, np.float32), np.zeros(64, np.float32), block=32)
    assert e.value.rule in ("cp.async-wait", "cp.async-visibility"), e.value


def test_generic_addresses_reach_shared_memory_through_cvta():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    _run("""
    ld.global.f32 %f1, [%rd3];
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    cvt.u64.u32 %rd9, %r3;
    cvta.shared.u64 %rd10, %rd9;
    st.f32 [%rd10], %f1;
    bar.sync 0;
    ld.shared.f32 %f2, [%r3];
    add.f32 %f3, %f2, %f2;
    st.global.f32 [%rd4], %f3;
""", x, out)
    assert np.array_equal(out, x * 2)


def test_atomics_run_lane_by_lane_and_return_the_old_value():
    out = np.zeros(64, np.uint32)
    x = np.zeros(64, np.uint32)
    x[0] = 1000
    _run("""
    atom.global.add.u32 %r2, [%rd1], 1;      // every thread adds 1 to x[0]
    st.global.u32 [%rd4], %r2;
""", x, out)
    assert x[0] == 1064 and sorted(out.tolist()) == list(range(1000, 1064))


def test_shared_atomic_max_and_global_red_add_float_in_lane_order():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    out[1] = 0.0                              # the accumulator red.add adds into
    _run("""
    setp.eq.u32 %p1, %r0, 0;
    @%p1 st.shared.u32 [%r1+16], 0;
    bar.sync 0;
    ld.global.f32 %f1, [%rd3];
    atom.shared.max.s32 %r4, [%r1+16], %r0;  // the largest thread index
    red.global.add.f32 [%rd2+4], %f1;        // out[1] += x[tid]
    bar.sync 0;
    @%p1 ld.shared.u32 %r5, [%r1+16];
    @%p1 st.global.u32 [%rd2], %r5;
""", x, out)
    assert out.view(np.uint32)[0] == 63
    acc = np.float32(0)
    for v in x:                                # one lane at a time, each sum rounded to float32
        acc = np.float32(np.float64(acc) + np.float64(v))
    assert out[1] == acc and np.isnan(out[2:]).all()


def test_a_global_access_past_the_arrays_is_a_violation_naming_the_address():
    x = _rand()
    with pytest.raises(model.Violation) as e:
        _run("    ld.global.f32 %f1, [%rd3+256];\n", x, np.zeros(64, np.float32))
    assert e.value.rule == "global-bounds" and "outside every array" in e.value.message


# ---------------------------------------------------------------------------- control
def test_divergent_branches_take_each_threads_own_path():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    _run("""
    ld.global.f32 %f1, [%rd3];
    and.b32 %r2, %r0, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    neg.f32 %f2, %f1;
    bra.uni DONE;
EVEN:
    add.f32 %f2, %f1, %f1;
DONE:
    st.global.f32 [%rd4], %f2;
""", x, out)
    want = np.where(np.arange(64) % 2 == 0, 2 * x, -x)
    assert np.array_equal(out, want)


def test_threads_that_exit_early_write_nothing():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    _run("""
    setp.ge.u32 %p1, %r0, 40;
    @%p1 exit;
    ld.global.f32 %f1, [%rd3];
    st.global.f32 [%rd4], %f1;
""", x, out)
    assert np.array_equal(out[:40], x[:40]) and np.isnan(out[40:]).all()


def test_a_loop_counts_and_a_trap_is_a_violation():
    out = np.zeros(64, np.uint32)
    _run("""
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
LOOP:
    add.u32 %r3, %r3, %r0;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra LOOP;
    st.global.u32 [%rd4], %r3;
""", np.zeros(64, np.uint32), out)
    assert np.array_equal(out, 5 * np.arange(64))
    with pytest.raises(model.Violation) as e:
        _run("    setp.eq.u32 %p1, %r0, 7;\n    @%p1 trap;\n", np.zeros(64, np.uint32), out)
    assert e.value.rule == "trap" and "thread 7" in e.value.message


def test_a_loop_that_never_ends_is_a_hang():
    with pytest.raises(model.Hang) as e:
        _run("LOOP:\n    bra LOOP;\n", np.zeros(64, np.uint32), np.zeros(64, np.uint32), budget=500)
    assert "never" in str(e.value)


# ---------------------------------------------------------------------------- barriers
def test_bar_arrive_and_a_counted_bar_sync_hand_data_from_producers_to_consumers():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    _run("""
    setp.lt.u32 %p1, %r0, 32;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    @!%p1 bra CONSUMER;
    ld.global.f32 %f1, [%rd3];
    st.shared.f32 [%r3], %f1;
    bar.arrive 1, 64;                         // warp 0 produces ...
    bra.uni END;
CONSUMER:
    bar.sync 1, 64;                           // ... warp 1 waits for it
    ld.shared.f32 %f2, [%r3+-128];
    st.global.f32 [%rd4], %f2;
END:
""", x, out)
    assert np.isnan(out[:32]).all() and np.array_equal(out[32:], x[:32])


def test_a_barrier_that_waits_for_more_threads_than_arrive_hangs_with_its_count():
    with pytest.raises(model.Hang) as e:
        _run("    bar.sync 2, 96;\n", np.zeros(64, np.uint32), np.zeros(64, np.uint32))
    assert "barrier 2" in str(e.value) and "64 of 96" in str(e.value)


@pytest.mark.parametrize("form,want", [("popc.u32", lambda p: np.count_nonzero(p)), ("and.pred", lambda p: p.all()),
                                        ("or.pred", lambda p: p.any())])
def test_bar_red_gives_every_thread_the_reduction_over_the_whole_block(form, want):
    # each thread's predicate: x[tid] > 0; warps arrive one by one, and only the last arrival can know the result
    x = _rand()
    if form == "and.pred":
        x = np.abs(x) + 0.5 if np.random.default_rng().integers(2) else x    # sometimes every predicate holds
    out = np.full(64, 0xDEAD, np.uint32)
    dst, store = ("%r5", "mov.u32 %r6, %r5;") if form == "popc.u32" else ("%p2", "selp.u32 %r6, 1, 0, %p2;")
    _run(f"""
    ld.global.f32 %f1, [%rd3];
    setp.gt.f32 %p1, %f1, 0f00000000;
    bar.red.{form} {dst}, 0, %p1;
    {store}
    st.global.u32 [%rd4], %r6;
""", x, out)
    assert (out == int(want(x > 0))).all(), out


def test_bar_red_reads_a_negated_predicate_and_counts_only_the_threads_named():
    # 64 threads meet at barrier 3 counted as 64 of a 96-thread block: the last warp never arrives there
    x = _rand(96)
    out = np.full(96, 0xDEAD, np.uint32)
    _run("""
    setp.ge.u32 %p3, %r0, 64;
    @%p3 bra END;
    ld.global.f32 %f1, [%rd3];
    setp.gt.f32 %p1, %f1, 0f00000000;
    bar.red.popc.u32 %r5, 3, 64, !%p1;
    st.global.u32 [%rd4], %r5;
END:
""", x, out, block=96)
    assert (out[:64] == np.count_nonzero(x[:64] <= 0)).all() and (out[64:] == 0xDEAD).all()


def test_threads_meeting_at_one_barrier_with_different_reductions_are_refused():
    from judge.model.errors import Unsupported
    with pytest.raises(Unsupported, match="different reductions"):
        _run("""
    setp.lt.u32 %p1, %r0, 32;
    @%p1 bra LOW;
    bar.red.or.pred %p2, 0, %p1;
    bra.uni END;
LOW:
    bar.red.and.pred %p2, 0, %p1;
END:
""", np.zeros(64, np.uint32), np.zeros(64, np.uint32))


def test_syncthreads_count_and_or_from_cuda_compute_on_the_model(tmp_path):
    from judge.gpu import build
    (tmp_path / "votes.cu").write_text(r"""
extern "C" __global__ void votes(const float* x, int* out) {
  const int i = threadIdx.x;
  const bool p = x[i] > 0.f;
  out[3 * i] = __syncthreads_count(p);
  out[3 * i + 1] = __syncthreads_and(p);
  out[3 * i + 2] = __syncthreads_or(x[i] > 1.f);
}
""")
    b = build.compile(tmp_path / "votes.cu")
    x = _rand(128)
    out = np.full(3 * 128, -1, np.int32)
    model.run(b, "votes", grid=(1,), block=(128,), args=(x, out))
    got = out.reshape(128, 3)
    assert (got[:, 0] == np.count_nonzero(x > 0)).all()
    assert (got[:, 1] == int((x > 0).all())).all() and (got[:, 2] == int((x > 1).any())).all()


def test_bar_warp_sync_orders_a_warps_shared_writes():
    x = _rand()
    out = np.full(64, np.nan, np.float32)
    rep = _run("""
    ld.global.f32 %f1, [%rd3];
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    st.shared.f32 [%r3], %f1;
    bar.warp.sync -1;
    xor.b32 %r4, %r0, 1;
    shl.b32 %r5, %r4, 2;
    add.u32 %r6, %r1, %r5;
    ld.shared.f32 %f2, [%r6];
    st.global.f32 [%rd4], %f2;
""", x, out)
    assert np.array_equal(out, x.reshape(32, 2)[:, ::-1].ravel())
    assert not rep.violations


# ---------------------------------------------------------------------------- warp
def test_a_butterfly_shuffle_reduction_sums_each_warp():
    x = np.random.default_rng().integers(0, 1000, 64).astype(np.uint32)
    out = np.zeros(64, np.uint32)
    body = "    ld.global.u32 %r2, [%rd3];\n"
    for s in (16, 8, 4, 2, 1):
        body += f"    shfl.sync.bfly.b32 %r3, %r2, {s}, 31, -1;\n    add.u32 %r2, %r2, %r3;\n"
    body += "    st.global.u32 [%rd4], %r2;\n"
    _run(body, x, out)
    assert np.array_equal(out, np.repeat(x.reshape(2, 32).sum(axis=1), 32))


def test_shuffle_up_keeps_the_value_below_the_segment_and_idx_broadcasts():
    x = np.random.default_rng().integers(0, 2**31, 64).astype(np.uint32)
    out = np.zeros(64, np.uint32)
    _run("""
    ld.global.u32 %r2, [%rd3];
    shfl.sync.up.b32 %r3|%p1, %r2, 3, 0, -1;
    shfl.sync.idx.b32 %r4, %r2, 5, 31, -1;
    xor.b32 %r5, %r3, %r4;
    st.global.u32 [%rd4], %r5;
""", x, out)
    lane = np.arange(64) % 32
    up = np.where(lane >= 3, x[np.arange(64) - 3], x)
    idx = x[(np.arange(64) // 32) * 32 + 5]
    assert np.array_equal(out, up ^ idx)


def test_vote_ballot_activemask_and_elect():
    x = np.random.default_rng().integers(0, 2, 64).astype(np.uint32)
    out = np.zeros(64, np.uint32)
    _run("""
    ld.global.u32 %r2, [%rd3];
    setp.ne.u32 %p1, %r2, 0;
    vote.sync.ballot.b32 %r3, %p1, -1;
    vote.sync.any.pred %p2, %p1, -1;
    selp.u32 %r4, 1, 0, %p2;
    setp.lt.u32 %p3, %r0, 40;
    @!%p3 bra SKIP;
    activemask.b32 %r5;
    elect.sync %r6|%p4, -1;
    selp.u32 %r7, 1, 0, %p4;
    bra.uni STORE;
SKIP:
    mov.u32 %r5, 0;
    mov.u32 %r7, 0;
STORE:
    xor.b32 %r8, %r3, %r5;
    add.u32 %r8, %r8, %r4;
    add.u32 %r8, %r8, %r7;
    st.global.u32 [%rd4], %r8;
""", x, out)
    ballot = np.array([sum(int(x[w * 32 + i]) << i for i in range(32)) for w in (0, 1)], np.uint64)
    active = np.array([0xFFFFFFFF, 0xFF], np.uint64)
    t = np.arange(64)
    want = ((ballot[t // 32] ^ np.where(t < 40, active[t // 32], 0)) + (ballot[t // 32] != 0)
            + np.isin(t, (0, 32))) % 2**32
    assert np.array_equal(out, want.astype(np.uint32))


# ---------------------------------------------------------------------------- cluster
def test_each_block_of_a_cluster_reads_its_neighbours_shared_memory_through_mapa():
    x = _rand(128)
    out = np.full(128, np.nan, np.float32)
    rep = snippet.run(HEAD + """
    mov.u32 %r10, %cluster_ctarank;
    mov.u32 %r11, %ctaid.x;
    mul.lo.u32 %r12, %r11, 64;
    add.u32 %r13, %r12, %r0;
    mul.wide.u32 %rd9, %r13, 4;
    add.s64 %rd10, %rd1, %rd9;
    add.s64 %rd11, %rd2, %rd9;
    ld.global.f32 %f1, [%rd10];
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    st.shared.f32 [%r3], %f1;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    xor.b32 %r14, %r10, 1;
    mapa.shared::cluster.u32 %r15, %r3, %r14;
    ld.shared::cluster.f32 %f2, [%r15];
    getctarank.shared::cluster.u32 %r16, %r15;
    cvt.rn.f32.u32 %f3, %r16;
    add.f32 %f4, %f2, %f3;
    st.global.f32 [%rd11], %f4;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
""", (x, out), params=IO, shared=SHARED, block=(64, 1, 1), grid=(2, 1, 1), cluster=(2, 1, 1))
    want = np.concatenate([x[64:] + 1, x[:64] + 0])
    assert np.array_equal(out, want.astype(np.float32))
    assert rep.counts["barrier.cluster.arrive"] == 256 and not rep.violations


def test_a_block_that_skips_the_cluster_barrier_hangs_its_peer():
    with pytest.raises(model.Hang) as e:
        snippet.run(HEAD + """
    mov.u32 %r10, %cluster_ctarank;
    setp.eq.u32 %p1, %r10, 1;
    @%p1 bra.uni SKIP;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    bra.uni END;
SKIP:
    bar.sync 1, 128;                          // block 1 waits for threads that never come
END:
""", (np.zeros(64, np.uint32), np.zeros(64, np.uint32)), params=IO, shared=SHARED, block=(64, 1, 1),
                    grid=(2, 1, 1), cluster=(2, 1, 1))
    msg = str(e.value)
    assert "barrier.cluster.wait" in msg and "64 live threads of the cluster never arrive" in msg
    assert "barrier 1 of block rank 1 (64 of 128 arrived)" in msg


def test_an_ld_st_form_the_model_does_not_read_is_refused_not_misread():
    # st.bulk (sm_100) zeroes a range: read as a plain st it would store the size as data
    with pytest.raises(model.Unsupported):
        _run("""
    st.bulk.weak.shared::cta [%r1], 64, 0;
""", np.zeros(64, np.uint32), np.zeros(64, np.uint32))


# ---------------------------------------------------------------------------- redux.sync, match.sync
@pytest.mark.parametrize("op,ty", [("add", "u32"), ("min", "s32"), ("max", "s32"), ("xor", "b32")])
def test_redux_sync_gives_every_member_lane_the_reduction_of_the_members(op, ty):
    x = np.random.default_rng().integers(-2**30, 2**30, 64).astype(np.int32)
    out = np.full(64, 0x7FC0DEAD, np.uint32)
    _run(f"""
    ld.global.{ty} %r5, [%rd3];
    redux.sync.{op}.{ty} %r6, %r5, 0x0000FFFF;             // lanes 0-15 of each warp are the members
    setp.lt.u32 %p1, %r0, 64;
    and.b32 %r7, %r0, 31;
    setp.lt.u32 %p2, %r7, 16;
    @%p2 st.global.b32 [%rd4], %r6;
""", x.view(np.uint32), out)
    v = x.astype(np.int64)
    for w in (0, 1):
        mem = v[32 * w:32 * w + 16]
        want = {"add": mem.sum(), "min": mem.min(), "max": mem.max(), "xor": np.bitwise_xor.reduce(mem)}[op]
        assert (out[32 * w:32 * w + 16] == np.uint32(int(want) & 0xFFFFFFFF)).all(), (op, w)
        assert (out[32 * w + 16:32 * w + 32] == 0x7FC0DEAD).all()


def test_match_any_names_the_lanes_holding_the_same_value_and_match_all_says_whether_all_do():
    x = np.random.default_rng().integers(0, 4, 64).astype(np.uint32)      # four values: many lanes share one
    x[32:] = 7                                                              # warp 1: every lane the same
    out = np.full(64, 0xFFFFFFFF, np.uint32)
    _run("""
    ld.global.u32 %r5, [%rd3];
    match.any.sync.b32 %r6, %r5, 0xFFFFFFFF;
    match.all.sync.b32 %r7|%p3, %r5, 0xFFFFFFFF;
    selp.u32 %r8, 1, 0, %p3;
    xor.b32 %r9, %r6, %r7;
    add.u32 %r9, %r9, %r8;
    st.global.b32 [%rd4], %r9;
""", x, out)
    for t in range(64):
        w = t // 32
        same = sum(1 << (u % 32) for u in range(32 * w, 32 * w + 32) if x[u] == x[t])
        allv = (0xFFFFFFFF if (x[32 * w:32 * w + 32] == x[32 * w]).all() else 0)
        assert out[t] == ((same ^ allv) + (allv != 0)) % 2**32, t



# A warp-aggregated histogram as a learner writes it in CUDA C++: __match_any_sync groups the lanes of a bin, the
# lowest of them (__ffs: brev + bfind) adds their count with one atomic; __reduce_add_sync counts the warp's elements.
WARP_AGGREGATED = r"""
extern "C" __global__ void warp_aggregated_histogram(const int* x, int n, unsigned* hist, unsigned* total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned active = __ballot_sync(0xffffffffu, i < n);
  if (i < n) {
    const int b = x[i];
    const unsigned same = __match_any_sync(active, b);       // the lanes holding this bin
    if ((__ffs(same) - 1) == static_cast<int>(threadIdx.x % 32))
      atomicAdd(&hist[b], __popc(same));                      // one atomic per bin and warp
    const unsigned warp_sum = __reduce_add_sync(active, 1u);
    if ((__ffs(active) - 1) == static_cast<int>(threadIdx.x % 32)) atomicAdd(total, warp_sum);
  }
}
"""


def test_a_warp_aggregated_histogram_from_cuda_cpp_counts_every_element_on_the_model(tmp_path):
    from judge.gpu import build
    (tmp_path / "warp_aggregated.cu").write_text(WARP_AGGREGATED)
    b = build.compile(tmp_path / "warp_aggregated.cu")
    n = 1000                                             # the last warp is partly past n
    x = np.random.default_rng().integers(0, 16, n).astype(np.int32)
    hist, total = np.zeros(16, np.uint32), np.zeros(1, np.uint32)
    model.run(b, "warp_aggregated_histogram", grid=(8,), block=(128,), args=(x, np.int32(n), hist, total))
    assert np.array_equal(hist, np.bincount(x, minlength=16)) and total[0] == n



# Float atomics that come several to an access, from CUDA C++ as sm_90 compiles them: atomicAdd on float4 and float2
# (atom.global.add.v4.f32 / .v2.f32) and on __nv_bfloat162 / __half2 (atom.add.noftz.bf16x2 / .f16x2, generic).
VEC_ADDS = r"""
#include <cuda_bf16.h>
extern "C" __global__ void vec_adds(float4* f4, float2* f2, __nv_bfloat162* b2, __half2* h2, const float* x) {
  const int i = threadIdx.x;
  atomicAdd(&f4[i % 4], make_float4(x[i], 2 * x[i], 3 * x[i], 4 * x[i]));
  atomicAdd(&f2[i % 4], make_float2(x[i], -x[i]));
  atomicAdd(&b2[i % 4], __floats2bfloat162_rn(x[i], 1.0f));
  atomicAdd(&h2[i % 4], __floats2half2_rn(x[i], 1.0f));
}
"""


def test_vector_and_packed_half_atomic_adds_add_every_element(tmp_path):
    import ml_dtypes
    from judge.gpu import build
    (tmp_path / "vec_adds.cu").write_text(VEC_ADDS)
    b = build.compile(tmp_path / "vec_adds.cu")
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    f4, f2 = np.zeros(16, np.float32), np.zeros(8, np.float32)
    b2, h2 = np.zeros(8, np.uint16), np.zeros(8, np.uint16)
    rep = model.run(b, "vec_adds", grid=(1,), block=(64,), args=(f4, f2, b2, h2, x))
    s = np.array([x[i::4].astype(np.float64).sum() for i in range(4)])     # thread i adds into slot i % 4
    assert np.allclose(f4.reshape(4, 4), np.stack([s, 2 * s, 3 * s, 4 * s], 1), rtol=1e-5, atol=1e-5)
    assert np.allclose(f2.reshape(4, 2), np.stack([s, -s], 1), rtol=1e-5, atol=1e-5)
    for got, el, eps in ((b2, ml_dtypes.bfloat16, 2.0 ** -8), (h2, np.float16, 2.0 ** -11)):
        v = got.view(el).astype(np.float64).reshape(4, 2)
        assert (v[:, 1] == 16).all()                                     # 16 ones per slot: exact in both
        assert np.allclose(v[:, 0], s, atol=16 * eps * np.abs(x).max() * 4)  # 16 roundings of a small sum
    assert rep.counts["atom"] == 4 * 64


def test_the_h200_computes_syncthreads_count_and_or_as_the_model_does(tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    import cupy
    from judge.gpu import build
    (tmp_path / "votes.cu").write_text(r"""
extern "C" __global__ void votes(const float* x, int* out) {
  const int i = threadIdx.x;
  out[3 * i] = __syncthreads_count(x[i] > 0.f);
  out[3 * i + 1] = __syncthreads_and(x[i] > -1.5f);
  out[3 * i + 2] = __syncthreads_or(x[i] > 1.5f);
}
""")
    b = build.compile(tmp_path / "votes.cu")
    x = _rand(128)
    on_model = np.full(3 * 128, -1, np.int32)
    model.run(b, "votes", grid=(1,), block=(128,), args=(x, on_model))
    on_gpu = cupy.full(3 * 128, -1, cupy.int32)
    b.kernel("votes")((1, 1, 1), (128, 1, 1), (cupy.asarray(x), on_gpu))
    assert np.array_equal(cupy.asnumpy(on_gpu), on_model)


# ---------------------------------------------------------------------------- printf (vprintf)
PRINTF = r"""
extern "C" __global__ void say(const float* x, int n, int* got) {
  const int i = threadIdx.x;
  if (i < 3)
    got[i] = printf("x[%d] = %f n=%d %s %5.2f|%-4d|%x %lld %c %%\n", i, x[i], n, "ok", x[i], i, n,
                    (long long)n * 3000000000LL, 65 + i);
}
"""


def test_printf_on_the_model_prints_what_c_would_and_returns_the_arguments_read(tmp_path):
    from judge.gpu import build
    (tmp_path / "say.cu").write_text(PRINTF)
    b = build.compile(tmp_path / "say.cu")
    x = _rand(32)
    n = int(np.random.default_rng().integers(-50, 50))
    got = np.full(32, -7, np.int32)
    rep = model.run(b, "say", grid=(1,), block=(32,), args=(x, np.int32(n), got))
    want = [f"x[{i}] = {float(x[i]):f} n={n} ok {float(x[i]):5.2f}|{i:<4d}|{n & 0xFFFFFFFF:x} {n * 3000000000} "
            f"{chr(65 + i)} %\n" for i in range(3)]
    assert rep.printed == want
    assert (got[:3] == 9).all() and (got[3:] == -7).all()       # printf returns the arguments it read
    assert rep.counts["printf"] == 3


def test_format_c_reads_widths_lengths_and_star_arguments_as_c_does():
    from judge.model.ops.calls import format_c
    args = iter([7, 3, 2.5, 0xFFFF_FFFF_FFFF_FFFF, 0x1_8000, 200, "str"])

    def arg(size, signed, kind):
        v = next(args)
        if kind == "int" and isinstance(v, int) and signed and size == 8 and v >= 1 << 63:
            v -= 1 << 64
        return v
    text, used = format_c("[%*.*f] [%ld] [%hd] [%hhu] [%-5s]", arg)
    assert text == "[  2.500] [-1] [-32768] [200] [str  ]" and used == 7      # width 7, precision 3


def test_more_printf_lines_than_the_buffer_holds_are_counted_not_kept(tmp_path, monkeypatch):
    from judge.gpu import build
    from judge.model.ops import calls
    monkeypatch.setattr(calls, "PRINTED_MAX", 40)
    (tmp_path / "say.cu").write_text(PRINTF.replace("if (i < 3)", "if (true)"))
    b = build.compile(tmp_path / "say.cu")
    rep = model.run(b, "say", grid=(2,), block=(32,), args=(_rand(64), np.int32(1), np.zeros(64, np.int32)))
    assert len(rep.printed) == 40 and rep.counts["printf.dropped"] == 24


def test_the_h200_prints_what_the_model_prints(tmp_path, capfd):
    from judge import gpu
    gpu.need("sm_90")
    import cupy
    from judge.gpu import build
    (tmp_path / "say.cu").write_text(PRINTF)
    b = build.compile(tmp_path / "say.cu")
    x = _rand(32)
    rep = model.run(b, "say", grid=(1,), block=(32,), args=(x, np.int32(-5), np.zeros(32, np.int32)))
    got = cupy.zeros(32, cupy.int32)
    capfd.readouterr()
    b.kernel("say")((1, 1, 1), (32, 1, 1), (cupy.asarray(x), np.int32(-5), got))
    cupy.cuda.runtime.deviceSynchronize()                 # the device's printf buffer is flushed here
    printed = capfd.readouterr().out
    assert sorted(printed.splitlines(keepends=True)) == sorted(rep.printed)
    assert (cupy.asnumpy(got)[:3] == 9).all()
