"""Chapter 2's TMA kernels on the CPU model (judge.model): each compiled exactly as the chapter builds it, run with
fresh random inputs and poisoned outputs against an exact reference, and the mistakes the chapter shows (a wrong
expect_tx) ending as the model says.

Run: python -m pytest tests/chapters/ch02_tma/test_on_model.py -q      (no GPU)
"""
from __future__ import annotations


import numpy as np
import pytest

from judge.gpu import build
from judge.grading import compare
from judge import model
from judge.hw import tma

from judge import config

CH2 = config.CHAPTERS_DIR / "ch02_tma"


def ch2(name):
    return build.compile(CH2 / f"{name}.cu")


def test_add_one_in_place_through_one_tensor_map():
    rng = np.random.default_rng()
    host = rng.integers(-2 ** 30, 2 ** 30, size=(64, 128), dtype=np.int32)
    a = host.copy()
    model.run(ch2("add_one_tma"), "add_one_tma", grid=(128 // 32, 64 // 16), block=(128,),
              args=(tma.tensor_map_spec(a, box=(32, 16)),))
    assert np.array_equal(a, host + 1)


def test_a_wrong_expect_tx_hangs_with_the_missing_bytes():
    a = np.random.default_rng().standard_normal((8, 32)).astype(np.float32)
    with pytest.raises(model.Hang) as e:
        model.run(ch2("expect_tx_wrong"), "expect_tx_wrong", block=(32,),
                  args=(tma.tensor_map_spec(a, box=(32, 8)), np.zeros(32, np.float32)))
    assert "bytes outstanding" in str(e.value)


@pytest.mark.parametrize("fill", ["zero", "nan"])
def test_boxes_past_the_edge_are_filled_and_stores_past_it_are_dropped(fill):
    rows, pitch, bw, bh, cols = 37, 72, 32, 16, 70
    host = np.random.default_rng().standard_normal((rows, pitch)).astype(np.float32)
    src = host[:, :cols]                                  # a strided view: rows of 288 bytes
    dst_alloc = compare.poison(np.empty((rows + 4, pitch), np.float32))
    dst = dst_alloc[:rows, :cols]
    gx, gy = -(-cols // bw), -(-rows // bh)
    tiles = compare.poison(np.empty((gy * bh, gx * bw), np.float32))
    model.run(ch2("oob"), "oob_tiles", grid=(gx, gy), block=(128,),
              args=(tma.tensor_map_spec(src, box=(bw, bh), oob_fill=fill), tma.tensor_map_spec(dst, box=(bw, bh)),
                    tiles, np.int32(gx * bw)))
    want = np.full(tiles.shape, 0.0 if fill == "zero" else np.nan, np.float32)
    want[:rows, :cols] = host[:, :cols]
    assert np.array_equal(tiles, want, equal_nan=True)
    assert np.array_equal(dst_alloc[:rows, :cols], host[:, :cols] + 1)
    assert compare.is_poison(dst_alloc[:rows, cols:]).all() and compare.is_poison(dst_alloc[rows:]).all()


def test_tma_store_and_reduce_add_from_several_blocks():
    rows, cols, repeat = 32, 64, 3
    rng = np.random.default_rng()
    x = rng.integers(-8, 9, size=(rows, cols)).astype(np.float32)
    acc0 = rng.integers(-100, 101, size=(rows, cols)).astype(np.float32)
    acc, y = acc0.copy(), compare.poison(np.empty_like(x))
    rep = model.run(ch2("store_reduce"), "store_reduce", grid=(cols // 32, rows // 16, repeat), block=(128,),
                    args=tuple(tma.tensor_map_spec(a, box=(32, 16)) for a in (x, y, acc)))
    assert np.array_equal(y, 2 * x) and np.array_equal(acc, acc0 + repeat * x)
    assert rep.counts["tma.reduce"] == (cols // 32) * (rows // 16) * repeat


@pytest.mark.parametrize("defines", [{"PREFETCH": 0}, {"PREFETCH": 1, "EVICT_FIRST": 1}])
def test_one_dimensional_bulk_copies_add_one_chunk_by_chunk(defines):
    n = 5 * 4096                                            # five 16 KB chunks over two blocks
    x = np.random.default_rng().random(n).astype(np.float32)
    y = compare.poison(np.empty(n, np.float32))
    rep = model.run(build.compile(CH2 / "bulk_add_one.cu", defines=defines), "bulk_add_one", grid=(2,),
                    block=(256,), args=(x, y, np.int32(n // 4096)))
    assert np.array_equal(y, x + 1)
    assert rep.counts["bulk.load"] == 5 and rep.counts["bulk.store"] == 5


def test_cp_async_zero_fill_pads_a_tile_outside_the_matrix():
    rows, cols, ld = 37, 70, 72
    x = np.random.default_rng().random((rows, ld)).astype(np.float32) + 1.0      # never 0 inside
    gx, gy = -(-cols // 32), -(-rows // 32)
    tiles = compare.poison(np.empty((gy * 32, gx * 32), np.float32))
    model.run(ch2("zfill_tile"), "zfill_tile", grid=(gx, gy), block=(256,),
              args=(x, np.int32(rows), np.int32(cols), np.int32(ld), tiles))
    want = np.zeros_like(tiles)
    want[:rows, :cols] = x[:, :cols]
    assert np.array_equal(tiles, want)


def test_a_load_issued_before_its_expect_tx_still_completes_the_phase():
    host = np.random.default_rng().integers(-2 ** 30, 2 ** 30, size=(32, 64), dtype=np.int32)
    out = compare.poison(np.empty_like(host))
    model.run(ch2("tx_late"), "tx_late", grid=(2, 2), block=(128,), args=(tma.tensor_map_spec(host, box=(32, 16)), out))
    assert np.array_equal(out, host + 1)


def test_a_pipelined_tma_copy_ring_copies_every_tile():
    src = np.random.default_rng().random((64, 256)).astype(np.float32)
    dst = compare.poison(np.empty_like(src))
    model.run(build.compile(CH2 / "tma_copy_pipelined.cu"), "tma_copy_pipelined", grid=(3,), block=(64,),
              args=(tma.tensor_map_spec(src, box=(64, 32)), tma.tensor_map_spec(dst, box=(64, 32)), np.int32(4),
                    np.int32(8)))
    assert np.array_equal(dst, src)


@pytest.mark.parametrize("how", [0, 1, 2])
def test_every_way_of_waiting_on_an_mbarrier_finishes(how):
    res = np.zeros(6, np.int64)
    model.run(build.compile(CH2 / "wait_kinds.cu", defines={"HOW": how, "WORK": 200, "HINT_NS": 1000}),
              "wait_kinds", grid=(2,), block=(160,), args=(np.float32(0.5), res, np.zeros(2, np.float32)))
    assert (res.reshape(2, 3)[:, 1] >= 1).all()          # the waiter polled at least once
