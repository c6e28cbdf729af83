"""tests/chapters/ch04_wgmma/test_on_model.py - the CPU model (judge.model) runs Chapter 4's wgmma kernels and GEMM ladder.

Run: .venv/bin/python -m pytest tests/chapters/ch04_wgmma/test_on_model.py -q      (no GPU)

wgmma_tile.cu (one warpgroup, descriptors built by hand, three swizzles) and the ladder's rungs
(TMA rings, warp specialization, persistent blocks, 2-block clusters with multicast, TMA-store
epilogue) run on small shapes with fresh random bf16 inputs against a float64 reference; the
mistakes the chapter warns about are caught by name.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from judge.gpu import build
from judge.grading import compare
from judge import model
from judge.hw import tma

REPO = Path(__file__).resolve().parents[3]
CH4 = REPO / "chapters" / "ch04_wgmma"
BF16 = ml_dtypes.bfloat16


def aligned(a, align=1024):
    """A copy of `a` at an `align`-byte aligned address (as a GPU allocator gives)."""
    raw = np.empty(a.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def tile(src_or_path, swizzle=128):
    rng = np.random.default_rng()
    A = rng.standard_normal((64, 64)).astype(BF16)
    B = rng.standard_normal((64, 64)).astype(BF16)
    C = compare.poison(np.empty((64, 64), np.float32))
    b = build.compile(src_or_path, defines={"SWIZZLE": swizzle})
    rep = model.run(b, "wgmma_tile", block=(128, 1, 1), args=(A.view(np.uint16), B.view(np.uint16), C,
                                                             np.zeros(1, np.uint32)))
    return C, A.astype(np.float64) @ B.astype(np.float64).T, rep


@pytest.mark.parametrize("swizzle", [128, 64, 32])
def test_one_warpgroup_wgmma_tile_matches_float64(swizzle):
    C, ref, rep = tile(CH4 / "wgmma_tile.cu", swizzle)
    # bf16 products are exact in fp32; 64 of them summed: a few fp32 roundings
    assert compare.compare(C, ref, rtol=0.0, atol=1e-4, norm_tol=1e-6).ok
    assert rep.counts["wgmma"] == 4 and rep.counts["wgmma.flops"] == 2 * 64 * 64 * 64


def test_reading_the_accumulators_before_wgmma_wait_is_caught():
    src = (CH4 / "wgmma_tile.cu").read_text()
    bad = src.replace('  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");\n', "")
    assert bad != src
    with pytest.raises(model.Violation) as e:
        tile(bad)
    assert e.value.rule == "wgmma-accumulator" and "wgmma.wait_group" in e.value.message


def test_wgmma_on_tiles_written_without_a_proxy_fence_is_caught():
    src = (CH4 / "wgmma_tile.cu").read_text()
    bad = src.replace("  tma::fence_proxy_async();\n  __syncthreads();", "  __syncthreads();")
    assert bad != src
    with pytest.raises(model.Violation) as e:
        tile(bad)
    assert e.value.rule == "proxy-fence"


def test_a_wgmma_without_wgmma_fence_first_is_caught():
    src = (CH4 / "wgmma_tile.cu").read_text()
    bad = src.replace('  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");\n', "")
    assert bad != src
    with pytest.raises(model.Violation) as e:
        tile(bad)
    assert e.value.rule == "wgmma-fence"


# ------------------------------------------------------------------------------------------- the ladder
def _ladder():
    spec = importlib.util.spec_from_file_location("ch4_ladder", CH4 / "ladder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


L = _ladder()


def run_rung(name, M=256, N=256, K=192, b=None):
    r = L.rung(name)
    b = b or L.build_rung(name)
    rng = np.random.default_rng()
    A = aligned(rng.standard_normal((M, K)).astype(BF16))
    B = aligned(rng.standard_normal((N, K)).astype(BF16))
    C = aligned(compare.poison(np.empty((M, N), BF16)))
    bm, bn = r["tile"]
    bk = r.get("bk", L.BK)                        # K elements per slice (a box's inner dimension)
    sw = "128B" if bk * 2 == 128 else f"{bk * 2}B"   # the swizzle whose span is one slice row
    ma = tma.tensor_map_spec(A, box=(bk, bm), swizzle=sw)
    mb = tma.tensor_map_spec(B, box=(bk, r["box_b"]), swizzle=sw)
    cl = r["cluster"]
    # persistent rungs: one cluster walks every tile, so the ring crosses tile boundaries
    grid = (cl, 1, 1) if r["persistent"] else (-(-N // bn), -(-M // bm), 1)
    if r.get("stream_k"):        # one cluster: nothing is left for a stream-K tail (tests/chapters/ch04_wgmma/test_stream_k.py)
        slots = L.stream_k_slots(1, r)
        args = (ma, mb, tma.tensor_map_spec(C, box=(64, 64), swizzle="128B"), np.int32(M), np.int32(N),
                np.int32(K), *L.stream_k_args(None, np.zeros(slots * 64 * bn, np.float32), np.zeros(slots, np.uint32), 1))
    elif r["tma_store"]:
        args = (ma, mb, tma.tensor_map_spec(C, box=(64, 64), swizzle="128B"), np.int32(M), np.int32(N),
                np.int32(K), np.uint64(0))
    else:
        args = (ma, mb, C.view(np.uint16), np.int32(M), np.int32(N), np.int32(K))
    rep = model.run(b, r["kernel"], grid=grid, block=(r["threads"], 1, 1), cluster=(cl, 1, 1), args=args,
                    shared_bytes=L.shared_bytes(r))
    return C, A.astype(np.float64) @ B.astype(np.float64).T, rep


def bf16_ok(C, ref):
    # one bf16 rounding of the fp32 result (half an ulp: 2^-9 relative) plus fp32 accumulation
    return compare.compare(C.astype(np.float32), ref, rtol=2.0 ** -8, atol=1e-3).ok


@pytest.mark.parametrize("name", [r["name"] for r in L.RUNGS] + [v["name"] for v in L.VARIANTS])
def test_every_rung_of_the_ladder_is_correct_with_every_copy_delivered_late(name):
    C, ref, rep = run_rung(name)
    assert bf16_ok(C, ref)
    assert rep.counts["wgmma.flops"] == 2 * 256 * 256 * 192          # the tensor cores did all the math
    assert rep.counts["tma.load"] > 0                                    # and TMA fed them
    if L.rung(name)["tma_store"]:
        assert rep.counts["tma.store.bytes"] == 256 * 256 * 2


def test_a_consumer_that_releases_a_slot_before_its_wgmma_finished_is_caught():
    src = (CH4 / "gemm_03_warp_specialized.cu").read_text()
    old = ("      wg::wait<0>();                 // this warpgroup's reads of slot s are done ...\n"
           "      tma::arrive(&empty[s]);        // ... so it may be refilled\n")
    assert old in src
    bad = src.replace(old, "      tma::arrive(&empty[s]);\n      wg::wait<0>();\n")
    b = build.compile(bad, name="gemm_03_release_early.cu")
    with pytest.raises(model.Violation) as e:
        run_rung("warp specialized", K=384, b=b)     # 6 k-slices through a 4-slot ring: slots are refilled
    assert e.value.rule in ("async-overwrite-race", "async-read-overwritten")
    assert "wgmma.mma_async" in e.value.message          # names the read that was still running


def test_a_ping_pong_consumer_that_gives_the_turn_to_itself_hangs_and_one_that_gives_it_later_passes():
    # Rung 9's consumers take turns through named barriers 3 and 4: consumer c waits on 3 + c and, its
    # mainloop issued, arrives on the OTHER one. Arriving on its own barrier leaves both waiting.
    src = (CH4 / "gemm_09_pingpong.cu").read_text()
    old = "if (q + 1 < my_tiles) turn_give(BAR_MAIN + 1 - c);\n"
    assert old in src
    bad = src.replace(old, "if (q + 1 < my_tiles) turn_give(BAR_MAIN + c);   // own barrier\n")
    with pytest.raises(model.Hang) as e:
        run_rung("ping-pong", M=512, b=build.compile(bad, name="gemm_09_own_turn.cu"))
    assert "blocked" in str(e.value)
    # Written another way and correct: the turn is given only after the tile's wgmma have all finished
    # (later than needed, so the tensor cores idle between tiles, but every arrival still meets its wait).
    late = src.replace(old, "").replace(
        "      wg::wait<0>();                                 // the tile's last groups\n",
        "      wg::wait<0>();                                 // the tile's last groups\n"
        "      if (q + 1 < my_tiles) turn_give(BAR_MAIN + 1 - c);\n")
    assert late.count("turn_give(BAR_MAIN + 1 - c)") == 1 and late != src
    for M in (640, 1152):                       # 3 and 5 tiles: the first consumer has the last tile
        C, ref, rep = run_rung("ping-pong", M=M, N=128, b=build.compile(late, name="gemm_09_late_turn.cu"))
        assert bf16_ok(C, ref)
        assert rep.counts["bar.arrive"] > 0


def test_a_ping_pong_without_the_mainloop_turn_is_caught():
    # Without its turn, consumer 1 waits for ring position k_tiles at launch: with k_tiles >= STAGES that
    # slot is still a phase behind, the parity wait passes at once, and it works on a slot that is not its
    # own (PTX ISA, mbarrier.try_wait.parity). On the H200 this build faulted; the model must not pass it.
    src = (CH4 / "gemm_09_pingpong.cu").read_text()
    old = "      if (q > 0) turn_wait(BAR_MAIN + c);            // tile q - 1's wgmma are all issued\n"
    assert old in src
    bad = src.replace(old, "").replace("if (q + 1 < my_tiles) turn_give(BAR_MAIN + 1 - c);", "")
    b = build.compile(bad, name="gemm_09_no_turns.cu")
    with pytest.raises((model.Hang, model.Violation)):
        C, ref, rep = run_rung("ping-pong", M=512, N=256, K=768, b=b)     # 12 slices per tile, 6 stages
        assert bf16_ok(C, ref)                   # (a silent wrong result would fail here instead)
    # the kernel as it is, on the same shape, passes
    C, ref, rep = run_rung("ping-pong", M=512, N=256, K=768)
    assert bf16_ok(C, ref)


def test_ping_pong_steps_its_descriptors_and_a_step_of_one_16_byte_unit_is_wrong():
    # rung 9 builds each operand's descriptor once per slice (the mask & 0x3FFFF) and moves it 32 bytes per
    # k16 step with one add of 2 units; a step of 1 unit (16 bytes) reads half a k16 step off: wrong on the model
    src = (CH4 / "gemm_09_pingpong.cu").read_text()
    sass = L.build_rung("ping-pong").sass_of("gemm_pingpong")
    assert sass.count("0x3fff0") <= 4 and len(re.findall(r"\bHGMMA\b", sass)) == 8, sass.count("0x3fff0")
    half = src.replace("f * 64 * BK * 2), 2 * k)", "f * 64 * BK * 2), 1 * k)")
    assert half != src
    C, ref, rep = run_rung("ping-pong", b=build.compile(half, name="gemm_09_half_step.cu"))
    assert not bf16_ok(C, ref)
