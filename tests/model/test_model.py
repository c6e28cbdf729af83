"""tests/model/test_model.py - the CPU model of the async machine (judge.model) on the course's kernels.

Run: .venv/bin/python -m pytest tests/model/test_model.py -q      (no GPU: the model runs each kernel's PTX)

Every kernel is compiled by judge.gpu.build exactly as it is graded; the model runs every thread of each
block with fresh random inputs and NaN-poisoned outputs, and the result is compared with a float64
reference. Races must be caught even though an H200 usually gives the right numbers: the model
delivers every asynchronous copy at the last moment the rules allow.
"""
from __future__ import annotations

import numpy as np
import pytest

from judge.gpu import build
from judge.grading import compare, fixtures
from judge import model
from judge.hw import tma
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SGEMM = REPO / "exercises" / "cp_async_sgemm"
TILES = REPO / "exercises" / "tma_tiles"
U32 = 2.0 ** -24


def sgemm(path, M=128, N=128, K=72, seed=None, **kw):
    """Run sgemm_pipelined on the model; returns (C, float64 reference, report)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C = compare.poison(np.empty((M, N), np.float32))
    rep = model.run(build.compile(fixtures.resolve(path)), "sgemm_pipelined", grid=(N // 128, M // 128, 1), block=(256, 1, 1),
                    args=(np.int32(M), np.int32(N), np.int32(K), A, B, C), shared_bytes=3 * 8192, **kw)
    return C, A.astype(np.float64) @ B.astype(np.float64), rep


def sgemm_ok(C, ref, K):
    return compare.compare(C, ref, rtol=0.0, atol=4 * U32 * K, norm_tol=U32 * K ** 0.5).ok


def tiles(path, rows=33, cols=68, seed=None, **kw):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = compare.poison(np.empty_like(x))
    maps = (tma.tensor_map_spec(x, box=(64, 32)), tma.tensor_map_spec(y, box=(64, 32)))
    rep = model.run(build.compile(fixtures.resolve(path)), "tma_affine", grid=((cols + 63) // 64, (rows + 31) // 32, 1),
                    block=(128, 1, 1), args=maps, **kw)
    return y, 2.0 * x.astype(np.float64) + 1.0, rep


# ------------------------------------------------------------------------------------------- cp.async
@pytest.mark.parametrize("name", ["solution.cu", "fixtures/correct_rolling.cu", "fixtures/correct_inline_ptx.cu",
                                  "fixtures/correct_cg_sync.cu"])
def test_a_correct_pipeline_gives_the_gpu_result_with_every_copy_delivered_late(name):
    C, ref, rep = sgemm(SGEMM / name)
    assert sgemm_ok(C, ref, 72)
    # the work is done by cp.async: 9 k-tiles x 8 KB, 16 bytes per copy, none through st.shared
    assert rep.counts["smem_fill.cp.async.bytes"] == 9 * 8192
    assert rep.counts["cp.async"] == 9 * 8192 // 16
    assert rep.counts["smem_fill.st.shared.bytes"] == 0
    assert rep.counts["bar.sync"] == 9 * 256


def test_two_blocks_each_compute_their_own_tile():
    C, ref, rep = sgemm(SGEMM / "solution.cu", M=256, N=128, K=24)
    assert sgemm_ok(C, ref, 24)


def test_fewer_tiles_than_stages_still_works():
    C, ref, _ = sgemm(SGEMM / "solution.cu", K=8)
    assert sgemm_ok(C, ref, 8)


def test_copies_through_registers_do_the_same_work_without_cp_async():
    C, ref, rep = sgemm(SGEMM / "fixtures/sync_loads.cu")
    assert sgemm_ok(C, ref, 72)
    assert rep.counts["cp.async"] == 0 and rep.counts["smem_fill.st.shared.bytes"] == 9 * 8192


@pytest.mark.parametrize("name,rule,words", [
    ("wrong_wait_loose.cu", "cp.async-wait", "covered groups <= -1 only"),
    ("wrong_no_empty_commit.cu", "cp.async-wait", "into group 8, and its last cp.async.wait_group 1 covered groups <= 7"),
    ("wrong_buffer.cu", "cp.async-wait", "before the cp.async group that writes it completed"),
    ("wrong_no_barrier.cu", "cp.async-visibility", "no barrier between that wait and this read"),
    ("wrong_only_warp0_waits.cu", "cp.async-wait", "(warp 1)"),
    ("wrong_trace_ifdef.cu", "cp.async-visibility", "add __syncthreads() after it"),
])
def test_a_race_the_gpu_usually_hides_is_named_with_the_learners_line(name, rule, words):
    with pytest.raises(model.Violation) as e:
        sgemm(SGEMM / "fixtures" / name)
    assert e.value.rule == rule
    assert words in e.value.message, e.value.message
    assert f"{name}:" in e.value.where                # the learner's file and line, from .loc


def test_a_kernel_that_waits_on_only_warp_0_is_caught():
    with pytest.raises(model.Violation) as e:
        sgemm(SGEMM / "fixtures/wrong_only_warp0_waits.cu")
    assert "this thread has executed no cp.async.wait_group yet" in e.value.message


def test_an_ifdef_judge_trace_cannot_hide_the_race_from_the_graded_build():
    with pytest.raises(model.Violation):
        sgemm(SGEMM / "fixtures/wrong_trace_ifdef.cu")
    # the build with the define is the textbook loop and passes: the model runs the graded build
    b = build.compile(fixtures.resolve(SGEMM / "fixtures/wrong_trace_ifdef.cu"), defines={"JUDGE_TRACE": None})
    rng = np.random.default_rng()
    A = rng.uniform(-1, 1, (128, 72)).astype(np.float32)
    B = rng.uniform(-1, 1, (72, 128)).astype(np.float32)
    C = compare.poison(np.empty((128, 128), np.float32))
    model.run(b, "sgemm_pipelined", grid=(1, 1, 1), block=(256, 1, 1),
              args=(np.int32(128), np.int32(128), np.int32(72), A, B, C), shared_bytes=3 * 8192)
    assert sgemm_ok(C, A.astype(np.float64) @ B, 72)


def test_refilling_a_buffer_before_the_barrier_is_a_write_after_read_race():
    # wait, refill the buffer tile kt-1 used, and only then the barrier: a slow warp may still be
    # computing on tile kt-1 when the new copy overwrites it
    src = (SGEMM / "solution.cu").read_text()
    moved = src.replace("    __syncthreads();\n    const int next", "    const int next")
    moved = moved.replace("    __pipeline_commit();\n    compute_tile", "    __pipeline_commit();\n    __syncthreads();\n    compute_tile")
    assert moved.count("__syncthreads();") == src.count("__syncthreads();")
    with pytest.raises(model.Violation) as e:
        sgemm(moved)
    assert e.value.rule == "async-overwrite-race" and "may still be reading the old data" in e.value.message


def test_without_strict_the_race_poisons_the_output():
    C, ref, rep = sgemm(SGEMM / "fixtures/wrong_wait_loose.cu", strict=False)
    assert rep.violations and not sgemm_ok(C, ref, 72)
    assert np.isnan(C).any()


def test_an_early_return_leaves_the_output_unwritten():
    C, ref, rep = sgemm(SGEMM / "fixtures/wrong_early_return.cu")
    assert np.isnan(C).all() and rep.counts["st.global"] == 0


def test_a_loop_that_never_ends_is_a_hang():
    with pytest.raises(model.Hang) as e:
        sgemm(SGEMM / "fixtures/wrong_hang.cu", budget=20_000)
    assert "a loop that never ends" in str(e.value)


# ------------------------------------------------------------------------------------------- TMA
@pytest.mark.parametrize("name", ["solution.cu", "fixtures/correct_float4.cu"])
@pytest.mark.parametrize("rows,cols", [(33, 68), (7, 4), (64, 128)])
def test_tma_tiles_round_trip_with_out_of_bounds_boxes(name, rows, cols):
    y, ref, rep = tiles(TILES / name, rows, cols)
    assert compare.compare(y, ref, rtol=2.0 ** -23, atol=2.0 ** -24).ok
    blocks = -(-rows // 32) * -(-cols // 64)
    assert rep.counts["tma.load"] == blocks and rep.counts["tma.store"] == blocks
    assert rep.counts["smem_fill.tma.bytes"] == blocks * 8192           # whole boxes, filled parts too
    assert rep.counts["tma.store.bytes"] == rows * cols * 4               # what is outside is dropped


def test_expecting_more_bytes_than_the_load_delivers_hangs_with_the_wait_for_graph():
    with pytest.raises(model.Hang) as e:
        tiles(TILES / "fixtures/wrong_expect_tx.cu")
    msg = str(e.value)
    # the learner's line first, the mbarrier by its name in the source (`__shared__ ... bar;`)
    assert msg.split("\n")[1].lstrip().startswith("wrong_expect_tx.cu:"), msg
    assert "wait for phase parity 0 of `bar` (shared 0x" in msg, msg
    assert "tx-count 8192 bytes outstanding (expected 16384 bytes this phase, delivered 8192)" in msg
    assert e.value.graph[0]["tx_missing"] == 8192 and len(e.value.graph[0]["waiters"]) == 128


def test_coordinates_outermost_first_give_a_wrong_output():
    y, ref, _ = tiles(TILES / "fixtures/wrong_coord_order.cu")
    assert not compare.compare(y, ref, rtol=2.0 ** -23, atol=2.0 ** -24).ok


def test_a_tma_store_without_a_proxy_fence_is_caught():
    with pytest.raises(model.Violation) as e:
        tiles(TILES / "fixtures/wrong_no_proxy_fence.cu")
    assert e.value.rule == "proxy-fence" and "fence.proxy.async" in e.value.message


def test_exiting_before_the_store_has_read_shared_memory_is_caught():
    with pytest.raises(model.Violation) as e:
        tiles(TILES / "fixtures/wrong_exit_before_store_read.cu")
    assert e.value.rule == "exit-before-bulk-read"
    assert "cp.async.bulk.wait_group.read" in e.value.message


# ------------------------------------------------------------------------------------------- small kernels
HEAD = '#include "tma.cuh"\n'


def aligned(a, align=256):
    """A copy of `a` at an `align`-byte aligned address, as a GPU allocator gives (TMA swizzle wants 128)."""
    raw = np.empty(a.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def run_src(src, kernel, block=(64, 1, 1), args=(), **kw):
    return model.run(build.compile(src), kernel, block=block, args=args, **kw)


def test_every_spelling_of_the_block_barrier_is_a_barrier():
    src = r'''
extern "C" __global__ void k(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  asm volatile("bar.sync 0;" ::: "memory");
  float a = s[63 - threadIdx.x];
  asm volatile("barrier.sync 0;" ::: "memory");
  s[threadIdx.x] = a + 1.0f;
  asm volatile("barrier.sync.aligned 0;" ::: "memory");
  float b = s[(threadIdx.x + 1) % 64];
  asm volatile("bar.sync 1, 64;" ::: "memory");
  out[threadIdx.x] = b;
}'''
    out = compare.poison(np.empty(64, np.float32))
    rep = run_src(src, "k", args=(out,))
    t = np.arange(64)
    assert np.array_equal(out, (63 - (t + 1) % 64) + 1.0)
    assert rep.counts["bar.sync"] == 4 * 64


def test_a_barrier_that_waits_for_more_threads_than_arrive_is_a_hang_naming_it():
    src = r'''
extern "C" __global__ void k(float* out) {
  asm volatile("bar.sync 1, 128;" ::: "memory");    // 128 threads expected, the block has 64
  out[threadIdx.x] = 1.0f;
}'''
    with pytest.raises(model.Hang) as e:
        run_src(src, "k", args=(np.zeros(64, np.float32),))
    assert "64 threads wait at barrier 1" in str(e.value) and "(64 of 128 arrived)" in str(e.value)


def test_cp_async_src_size_zero_fills_the_rest():
    src = r'''
extern "C" __global__ void k(const float* in, float* out) {
  __shared__ __align__(16) float s[4 * 32];
  unsigned dst = (unsigned)__cvta_generic_to_shared(&s[4 * threadIdx.x]);
  int bytes = 4 * (threadIdx.x % 5);                        // 0..16 bytes really read
  if (bytes > 16) bytes = 16;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(in + 4 * threadIdx.x), "r"(bytes));
  asm volatile("cp.async.wait_all;" ::: "memory");
  for (int i = 0; i < 4; ++i) out[4 * threadIdx.x + i] = s[4 * threadIdx.x + i];
}'''
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    out = compare.poison(np.empty(128, np.float32))
    run_src(src, "k", block=(32, 1, 1), args=(x, out))
    keep = (np.arange(128) % 4) < (np.arange(128) // 4 % 5)
    assert np.array_equal(out, np.where(keep, x, 0.0).astype(np.float32))


def test_an_unknown_instruction_is_unsupported_never_a_verdict():
    src = r'''
extern "C" __global__ void k(unsigned* out) {
  unsigned r;
  asm volatile("bmsk.clamp.b32 %0, %1, %1;" : "=r"(r) : "r"(threadIdx.x + 1));
  out[threadIdx.x] = r;
}'''
    with pytest.raises(model.Unsupported) as e:
        run_src(src, "k", block=(32, 1, 1), args=(np.zeros(32, np.uint32),))
    assert "bmsk" in str(e.value)


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_a_swizzled_tma_box_lands_where_judge_tma_says(swizzle):
    span = {"none": 128, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    cols = span // 4
    src = HEAD + r'''
extern "C" __global__ void k(const __grid_constant__ TensorMap m, float* out) {
  __shared__ alignas(1024) float box[8 * 32];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) { tma::mbar_init(&bar, 1); tma::fence_proxy_async(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, COLS * 8 * 4);
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" :: "r"(tma::smem(box)), "l"(tma::gmap(&m)), "r"(0), "r"(0),
                 "r"(tma::smem(&bar)) : "memory");
  }
  while (!tma::try_wait(&bar, 0)) {}
  for (int i = threadIdx.x; i < COLS * 8; i += blockDim.x) out[i] = box[i];
}'''
    x = aligned(np.arange(8 * cols, dtype=np.float32).reshape(8, cols) + 0.5)
    out = compare.poison(np.empty(8 * cols, np.float32))
    b = build.compile(src, defines={"COLS": cols})
    model.run(b, "k", block=(32, 1, 1), args=(tma.tensor_map_spec(x, box=(cols, 8), swizzle=swizzle), out))
    where = tma.box_layout(8, span, swizzle) // 4            # element (r, c) lands at this float index
    expect = np.empty(8 * cols, np.float32)
    expect[where.ravel()] = x.ravel()
    assert np.array_equal(out, expect)


def test_reading_a_tma_tile_without_waiting_on_the_mbarrier_is_caught():
    src = HEAD + r'''
extern "C" __global__ void k(const __grid_constant__ TensorMap m, float* out) {
  __shared__ alignas(128) float box[8 * 32];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) { tma::mbar_init(&bar, 1); tma::fence_proxy_async(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, 32 * 8 * 4);
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" :: "r"(tma::smem(box)), "l"(tma::gmap(&m)), "r"(0), "r"(0),
                 "r"(tma::smem(&bar)) : "memory");
  }
  if (threadIdx.x == 0) while (!tma::try_wait(&bar, 0)) {}   // only thread 0 waits...
  for (int i = threadIdx.x; i < 256; i += blockDim.x) out[i] = box[i];   // ...everyone reads
}'''
    x = np.random.default_rng().standard_normal((8, 32)).astype(np.float32)
    with pytest.raises(model.Violation) as e:
        run_src(src, "k", block=(32, 1, 1), args=(tma.tensor_map_spec(x, box=(32, 8)), np.zeros(256, np.float32)))
    assert e.value.rule in ("tma-read-before-complete", "tma-visibility")


# ------------------------------------------------------------------------------------------- clusters
def test_a_cluster_reads_its_neighbours_shared_memory_through_mapa():
    src = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* out, const float* in) {
  __shared__ float s[64];
  cg::cluster_group cl = cg::this_cluster();
  s[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  cl.sync();                                                  // barrier.cluster.arrive + wait
  const float* other = cl.map_shared_rank(s, cl.block_rank() ^ 1);   // mapa
  out[blockIdx.x * 64 + threadIdx.x] = other[63 - threadIdx.x];      // ld.shared::cluster
  cl.sync();                                                  // keep s alive until the neighbour read it
}'''
    x = np.random.default_rng().standard_normal(256).astype(np.float32)
    out = compare.poison(np.empty(256, np.float32))
    rep = model.run(build.compile(src), "k", grid=(4, 1, 1), block=(64, 1, 1), args=(out, x))
    assert np.array_equal(out, x.reshape(4, 64)[[1, 0, 3, 2]][:, ::-1].ravel())
    assert rep.counts["barrier.cluster.wait"] == 2 * 256


MCAST = HEAD + r'''
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(const __grid_constant__ TensorMap m, float* out) {
  __shared__ alignas(128) float box[8 * 32];
  __shared__ alignas(8) unsigned long long bar;
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) { tma::mbar_init(&bar, 1); tma::fence_proxy_async(); }
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (threadIdx.x == 0) tma::arrive_expect_tx(&bar, EXPECT);       // each block expects the whole box
  if (threadIdx.x == 0 && rank == 0) {                             // one block loads it into both
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(tma::smem(box)), "l"(tma::gmap(&m)), "r"(0), "r"(0), "r"(tma::smem(&bar)),
                    "h"((unsigned short)3) : "memory");
  }
  while (!tma::try_wait(&bar, 0)) {}
  for (int i = threadIdx.x; i < 256; i += blockDim.x) out[rank * 256 + i] = box[i];
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}'''


def test_a_multicast_tma_load_fills_every_block_of_the_mask():
    x = aligned(np.random.default_rng().standard_normal((8, 32)).astype(np.float32))
    out = compare.poison(np.empty(512, np.float32))
    rep = model.run(build.compile(MCAST, defines={"EXPECT": 1024}), "k", grid=(2, 1, 1), block=(32, 1, 1),
                    args=(tma.tensor_map_spec(x, box=(32, 8)), out))
    assert np.array_equal(out, np.concatenate([x.ravel(), x.ravel()]))
    assert rep.counts["tma.load"] == 1 and rep.counts["smem_fill.tma.bytes"] == 2 * 1024


def test_a_multicast_block_that_expects_too_many_bytes_hangs():
    x = aligned(np.random.default_rng().standard_normal((8, 32)).astype(np.float32))
    with pytest.raises(model.Hang) as e:
        model.run(build.compile(MCAST, defines={"EXPECT": 2048}), "k", grid=(2, 1, 1), block=(32, 1, 1),
                  args=(tma.tensor_map_spec(x, box=(32, 8)), np.zeros(512, np.float32)))
    assert "tx-count 1024 bytes outstanding" in str(e.value)


DSMEM_ADD = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned* out) {
  __shared__ unsigned bins[64];
  cg::cluster_group cl = cg::this_cluster();
  bins[threadIdx.x] = 0;
  cl.sync();                                                  // zeroed everywhere before any peer adds
  unsigned* peer = cl.map_shared_rank(bins, cl.block_rank() ^ 1);
  atomicAdd(&peer[threadIdx.x], threadIdx.x + 1);            // a DSMEM add into the other block
#ifndef SKIP_FINAL_SYNC
  cl.sync();                                                  // every peer is done with my bins
#endif
  out[blockIdx.x * 64 + threadIdx.x] = bins[threadIdx.x];
}'''


def test_dsmem_adds_between_two_cluster_barriers_are_correct():
    out = compare.poison(np.empty(128, np.uint32))
    run_src(DSMEM_ADD, "k", args=(out,), grid=(2, 1, 1))
    assert np.array_equal(out, np.tile(np.arange(1, 65, dtype=np.uint32), 2))


def test_reading_a_slice_before_the_peers_finished_adding_is_caught():
    b = build.compile(DSMEM_ADD, defines={"SKIP_FINAL_SYNC": None})
    with pytest.raises(model.Violation) as e:
        model.run(b, "k", grid=(2, 1, 1), block=(64, 1, 1), args=(np.zeros(128, np.uint32),))
    assert e.value.rule == "dsmem-unordered" and "cluster.sync()" in e.value.message


def test_a_block_that_exits_while_a_peer_writes_its_shared_memory_is_caught():
    src = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned* out) {
  __shared__ unsigned box[64];
  cg::cluster_group cl = cg::this_cluster();
  cl.sync();
  if (cl.block_rank() == 1) cl.map_shared_rank(box, 0)[threadIdx.x] = threadIdx.x;   // into block 0
  // no cluster.sync() here: block 0 may already be gone
  out[blockIdx.x * 64 + threadIdx.x] = 1;
}'''
    with pytest.raises(model.Violation) as e:
        run_src(src, "k", args=(np.zeros(128, np.uint32),), grid=(2, 1, 1))
    assert e.value.rule == "dsmem-after-exit"


def test_a_cluster_barrier_one_block_skips_hangs_naming_the_missing_threads():
    src = r'''
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned* out) {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (rank == 0) {
    asm volatile("barrier.cluster.arrive.aligned; barrier.cluster.wait.aligned;" ::: "memory");
  } else {
    __syncthreads();
    asm volatile("bar.sync 1, 128;" ::: "memory");   // never completes: 64 threads in the block
  }
  out[blockIdx.x * 64 + threadIdx.x] = rank;
}'''
    with pytest.raises(model.Hang) as e:
        run_src(src, "k", args=(np.zeros(128, np.uint32),), grid=(2, 1, 1))
    assert "wait at barrier.cluster.wait" in str(e.value) and "64 live threads of the cluster never arrive" in str(e.value)


# ------------------------------------------------------------------------------------------- spellings
def test_cuda_pipeline_spelling_runs_as_the_same_cp_async_instructions():
    src = (SGEMM / "solution.cu").read_text()
    src = src.replace("#include <cuda_pipeline.h>\n", "#include <cuda_pipeline.h>\n#include <cuda/pipeline>\n")
    src = src.replace("""  __pipeline_memcpy_async(&As[a_row * BK + a_col], &A[(size_t)a_row * K + k0 + a_col], 16);
  __pipeline_memcpy_async(&Bs[b_row * BN + b_col], &B[(size_t)(k0 + b_row) * N + b_col], 16);""",
                      """  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  cuda::memcpy_async(&As[a_row * BK + a_col], &A[(size_t)a_row * K + k0 + a_col], cuda::aligned_size_t<16>(16), pipe);
  cuda::memcpy_async(&Bs[b_row * BN + b_col], &B[(size_t)(k0 + b_row) * N + b_col], cuda::aligned_size_t<16>(16), pipe);""")
    src = src.replace("__pipeline_commit();", "cuda::make_pipeline().producer_commit();")
    src = src.replace("__pipeline_wait_prior(STAGES - 2);",
                      "{ auto p = cuda::make_pipeline(); cuda::pipeline_consumer_wait_prior<STAGES - 2>(p); }")
    assert "__pipeline" not in src.split("// ----------------------------------------------------------------- the kernel")[1]
    C, ref, rep = sgemm(src)
    assert sgemm_ok(C, ref, 72) and rep.counts["cp.async"] == 9 * 8192 // 16
    # and the same mistake in this spelling is the same race
    with pytest.raises(model.Violation):
        sgemm(src.replace("cuda::pipeline_consumer_wait_prior<STAGES - 2>", "cuda::pipeline_consumer_wait_prior<STAGES - 1>"))


CUDA_PTX_TILES = r'''#include <cuda/ptx>
struct alignas(128) TensorMap { unsigned long long opaque[16]; };
namespace ptx = cuda::ptx;
extern "C" __global__ void tma_affine(const __grid_constant__ TensorMap in_map, const __grid_constant__ TensorMap out_map) {
  __shared__ alignas(128) float tile[32 * 64];
  __shared__ alignas(8) unsigned long long bar;
  const int coords[2] = {int(blockIdx.x) * 64, int(blockIdx.y) * 32};
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar, sizeof(tile));
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, &in_map, coords, &bar);
  }
  while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {}
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) tile[i] = 2.0f * tile[i] + 1.0f;
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &out_map, coords, tile);
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>());
  }
}
'''


def test_cuda_ptx_spelling_of_the_tma_tile_kernel_is_the_same_machine():
    y, ref, rep = tiles(CUDA_PTX_TILES)
    assert compare.compare(y, ref, rtol=2.0 ** -23, atol=2.0 ** -24).ok
    assert rep.counts["tma.load"] == 4 and rep.counts["tma.store"] == 4
    with pytest.raises(model.Violation) as e:             # without the second fence: caught again
        tiles(CUDA_PTX_TILES.replace("  ptx::fence_proxy_async(ptx::space_shared);\n  __syncthreads();\n  if",
                                     "  __syncthreads();\n  if"))
    assert e.value.rule == "proxy-fence"


def test_a_cp_async_in_a_branch_no_launch_takes_fills_nothing():
    # the SASS shows LDGSTS, but the counts say who filled shared memory: st.shared, every byte
    # (the compiler addresses these stores as [%r + 16384] with %r = x - 16384: 32-bit wrap-around)
    C, ref, rep = sgemm(SGEMM / "fixtures/wrong_dead_ldgsts.cu")
    assert sgemm_ok(C, ref, 72)
    assert rep.counts["cp.async"] == 0 and rep.counts["smem_fill.st.shared.bytes"] == 9 * 8192


def test_without_strict_a_read_with_no_barrier_after_the_wait_sees_poison():
    # every copy has landed (each thread waited for its own), but a thread reading another thread's
    # bytes with no barrier since that thread's wait reads poison: the output is wrong
    C, ref, rep = sgemm(SGEMM / "fixtures/wrong_no_barrier.cu", strict=False)
    assert {v.rule for v in rep.violations} >= {"cp.async-visibility"}
    assert not sgemm_ok(C, ref, 72) and np.isnan(C).any()


def test_local_arrays_and_clock_spin_loops_run():
    # a locally indexed array lives in local memory (.local, ld.local); clock64/globaltimer advance
    # with the model's steps, so a spin-wait ends
    src = r'''
extern "C" __global__ void k(const int* idx, float* out) {
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = i * 1.5f + threadIdx.x;
  long long t0 = clock64();
  while (clock64() - t0 < 1000) {}
  unsigned long long g0, g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1)); } while (g1 - g0 < 2000);
  out[threadIdx.x] = v[idx[threadIdx.x] & 15];
}'''
    idx = np.random.default_rng().integers(0, 16, 64).astype(np.int32)
    out = compare.poison(np.empty(64, np.float32))
    run_src(src, "k", args=(idx, out))
    assert np.array_equal(out, (idx & 15) * 1.5 + np.arange(64))


CPASYNC_MBAR = r'''
#include "tma.cuh"
extern "C" __global__ void k(const float* in, float* out) {
  __shared__ __align__(16) float s[4 * 64];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) tma::mbar_init(&bar, NOINC ? 64 : 64);
  __syncthreads();
  unsigned dst = tma::smem(&s[4 * threadIdx.x]);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(in + 4 * threadIdx.x) : "memory");
#if NOINC
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(tma::smem(&bar)) : "memory");
#else
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" :: "r"(tma::smem(&bar)) : "memory");
  tma::arrive(&bar);
#endif
#if WAIT
  while (!tma::try_wait(&bar, 0)) {}
#endif
  for (int i = 0; i < 4; ++i) out[4 * threadIdx.x + i] = s[(4 * threadIdx.x + 4 * 17 + i) % 256];
}'''


@pytest.mark.parametrize("noinc", [1, 0])
def test_cp_async_mbarrier_arrive_lands_the_copies_for_whoever_waits(noinc):
    # each thread copies 16 bytes and hands completion to an mbarrier; after the wait every thread
    # may read every other thread's bytes (the cuda::barrier + memcpy_async pattern)
    x = np.random.default_rng().standard_normal(256).astype(np.float32)
    out = compare.poison(np.empty(256, np.float32))
    model.run(build.compile(CPASYNC_MBAR, defines={"NOINC": noinc, "WAIT": 1}), "k", block=(64,), args=(x, out))
    assert np.array_equal(out, np.roll(x, -68))
    with pytest.raises(model.Violation) as e:             # without the wait: another thread's copy may be in flight
        model.run(build.compile(CPASYNC_MBAR, defines={"NOINC": noinc, "WAIT": 0}), "k", block=(64,),
                  args=(x, np.zeros(256, np.float32)))
    assert e.value.rule == "cp.async-wait"


def test_a_block_waiting_for_another_block_through_global_memory_gets_no_verdict():
    # blocks run one cluster at a time in the model: block 0 spinning on a flag block 1 sets would
    # never end here, although it ends on a GPU - the model says it cannot judge, never HANG
    src = r'''
extern "C" __global__ void k(volatile int* flag, int* out) {
  if (blockIdx.x == 1) { flag[0] = 1; return; }
  while (flag[0] == 0) {}
  out[threadIdx.x] = 1;
}'''
    with pytest.raises(model.Unsupported):
        run_src(src, "k", block=(32,), grid=(2, 1, 1), args=(np.zeros(1, np.int32), np.zeros(32, np.int32)),
                budget=2000)


def test_available_says_whether_the_model_can_grade(monkeypatch):
    """judge.model.available(): the one question judge.grading.cuda_flow and the exercise tests ask."""
    from judge import model as m
    assert m.available()
    monkeypatch.setattr(m, "Hang", None)                  # a fork that stubbed the model out
    assert not m.available()
