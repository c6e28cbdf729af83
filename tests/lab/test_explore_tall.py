"""The lab's exploration of cuBLAS's 8192^3 tile (lab/patches/explore_tall.patch on chapter 4's rung 8): 320 x 128
blocks, both consumers on all 320 rows (five m64n64k16 each per k-step), A multicast between the two blocks of
a cluster, one 64 x 64 TMA store per fragment through two alternating staging boxes. It must match float64 on
the CPU model over several tiles and ragged edges, and the model must catch the staging-box race.

Run: python -m pytest tests/lab/test_explore_tall.py -q       (no GPU)
"""
from __future__ import annotations

import re

import pytest

from judge import config
from judge.model.errors import Violation

from chapters.ch04_wgmma import ladder
from lab import explore_h200


@pytest.fixture
def tall(monkeypatch):
    """The variant in ladder for this test only (add_tall extends VARIANTS and wraps build_rung)."""
    monkeypatch.setattr(ladder, "VARIANTS", list(ladder.VARIANTS))
    monkeypatch.setattr(ladder, "build_rung", ladder.build_rung)
    return explore_h200.add_tall(ladder)


def test_the_tall_tile_compiles_to_m64n64_wgmma_without_spills():
    b = explore_h200.tall_build()
    assert set(re.findall(r"HGMMA\.\S+", b.sass_of("gemm_tma_store"))) == {"HGMMA.64x64x16.F32.BF16"}
    res = b.resources["gemm_tma_store"]
    assert res["spill_stores"] == 0 and res["local"] == 0, res
    assert not [line for line in b.log.splitlines() if "C75" in line], b.log


@pytest.mark.parametrize("shape", [(640, 512, 128), (400, 264, 192)])
def test_the_tall_tile_matches_float64_on_the_model(tall, shape):
    # 640 x 512: four cluster tiles over two clusters, so each consumer stores ten boxes across two tiles;
    # 400 x 264: the second tile-row stops at row 400 (boxes below it skipped) and rank 1's columns of the
    # second tile-column lie wholly past N (its loads zero-filled, its stores clipped)
    r = ladder.model_check(tall, *shape, clusters=2)
    assert r.ok, r.message


def test_staging_boxes_alternated_per_tile_race_on_the_model(tall, monkeypatch):
    # FRAGS = 5 is odd: choosing the box by the fragment's index makes a tile's first box the one the previous
    # tile's last store may still be reading
    wrong = explore_h200.tall_build(edits=[("myC + (boxes & 1) * 8192", "myC + (f & 1) * 8192")])
    with pytest.raises(Violation, match="async-read-overwritten"):
        ladder.model_check(tall, 640, 512, 128, clusters=2, build=wrong)


def test_the_tall_tile_asks_for_fewer_bytes_per_multiply_add_than_rung_8():
    per_mac = {tile: (1 / tile[0] + 1 / tile[1]) for tile in ((320, 128), (128, 256))}
    assert per_mac[(320, 128)] / per_mac[(128, 256)] == pytest.approx(1 - 0.067, abs=0.001)   # as the patch says
    assert "6.7 % fewer bytes" in (config.ROOT / "lab" / "patches" / "explore_tall.patch").read_text()
