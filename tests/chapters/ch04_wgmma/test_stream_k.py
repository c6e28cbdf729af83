"""Rung 10 of chapter 4's ladder, the stream-K tail (chapters/ch04_wgmma/gemm_10_stream_k.cu): its plan, its
SASS, and its partial sums on the CPU model of the machine, where a tile is split between two and three
clusters; a kernel that forgets its partners' partial sums, or one slice, is caught.

    .venv/bin/python -m pytest tests/chapters/ch04_wgmma/test_stream_k.py -q

The model runs the clusters one after another in rank order, so an owner always finds its lower-ranked
partners' partial sums written: a missing flag WAIT cannot show there (the H200 tests run the kernel
with every cluster at once, tests/chapters/ch04_wgmma/test_kernels.py).
"""

import pytest

from judge import config
from judge.gpu import build as _build
from judge.model import Hang, Unsupported

HERE = config.ROOT / "chapters" / "ch04_wgmma"
from chapters.ch04_wgmma import ladder  # noqa: E402

SK = "stream-K tail"
FILE = HERE / "gemm_10_stream_k.cu"

#: (M, N, K, clusters) -> how the split falls: every tile split, a data-parallel round then a split tile,
#: one tile over three clusters (the middle one's whole range inside it), and sizes off the tile and slice
#: edges (TMA fills the loads past them with zeros and clips the stores).
SPLITS = {"two tiles over three clusters": (256, 512, 384, 3),
          "one whole round, then one tile over two clusters": (768, 256, 320, 2),
          "one tile over three clusters": (256, 256, 384, 3),
          "ragged edges: a round of three, then one tile over three clusters": (320, 264, 200, 3)}


def test_the_plan_splits_the_last_round_only_where_it_leaves_enough_idle():
    at_8192 = ladder.stream_k_plan(8192, 8192, 8192, 66)
    # 1024 cluster tiles on 66 clusters: 15 whole rounds and 34 tiles left, dealt out as slices to all 66
    assert (at_8192["tiles"], at_8192["sk_tiles"], at_8192["sk_clusters"]) == (1024, 34, 66)
    assert at_8192["rounds"] == pytest.approx(15 + 34 / 66) and at_8192["rounds_whole_tiles"] == 16
    # 4096^3: the last round is 58 / 66 full; 0.12 of a tile idles, less than a split costs (SK_COST_TILES)
    at_4096 = ladder.stream_k_plan(4096, 4096, 4096, 66)
    assert at_4096["sk_tiles"] == 0 and at_4096["idle_last_round"] < ladder.SK_COST_TILES
    assert ladder.stream_k_plan(4096, 4096, 4096, 66, cost_tiles=0)["sk_tiles"] == 58
    # rounds that divide evenly: nothing to split
    assert ladder.stream_k_plan(256 * 66, 256, 4096, 66)["sk_tiles"] == 0
    # few tiles and a long K (split-K's shape): every tile is cut, over every cluster
    few = ladder.stream_k_plan(1024, 1024, 16384, 66)
    assert (few["sk_tiles"], few["sk_clusters"]) == (16, 66)
    # ranges shorter than SK_MIN_SLICES are not worth a partial sum
    assert ladder.stream_k_plan(1024, 1024, 256, 66)["sk_clusters"] <= 16 * 4 // ladder.SK_MIN_SLICES


def test_rung_10_builds_like_rung_8_with_flags_raised_by_release_and_read_by_acquire():
    r = ladder.rung(SK)
    b = ladder.build_rung(SK)
    sass = b.sass_of(r["kernel"])
    res = b.resources[r["kernel"]]
    assert res["spill_stores"] == 0 and res["registers"] <= 168
    # the flag is raised with a release store at GPU scope and polled with acquire loads
    text = FILE.read_text()
    assert "st.release.gpu.global.u32" in text and "ld.acquire.gpu.global.u32" in text
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMALDG.2D.MULTICAST" in sass and "UTMASTG" in sass
    assert "C7515" not in b.log and "C7508" not in b.log


@pytest.mark.parametrize("case", list(SPLITS), ids=list(SPLITS))
def test_split_tiles_sum_to_float64_on_the_cpu_model(case):
    M, N, K, clusters = SPLITS[case]
    plan = ladder.stream_k_plan(M, N, K, clusters, min_slices=1, cost_tiles=0)
    assert plan["sk_tiles"] > 0 and plan["sk_clusters"] > plan["sk_tiles"], plan
    c = ladder.model_check(SK, M, N, K, clusters=clusters)
    assert c.ok, c.message
    assert "stream-K ranges" in c.case


def _patched(old: str, new: str):
    text = FILE.read_text()
    assert text.count(old) == 1, old
    return _build.compile(_build.inline_headers(text.replace(old, new), FILE), target="sm_90a", name=FILE.name)


def test_an_owner_that_forgets_its_partners_partial_sums_is_wrong_on_the_model():
    b = _patched("acc[4 * q] += v.x; acc[4 * q + 1] += v.y; acc[4 * q + 2] += v.z; acc[4 * q + 3] += v.w;",
                 "(void)v;")
    c = ladder.model_check(SK, *SPLITS["one tile over three clusters"][:3], clusters=3, build=b)
    assert not c.ok


def test_a_piece_that_starts_one_slice_late_is_wrong_on_the_model():
    b = _patched("p.kt0 = (int)(first - (long long)tile * s.k_tiles);",
                 "p.kt0 = (int)(first - (long long)tile * s.k_tiles) + 1;")
    c = ladder.model_check(SK, *SPLITS["two tiles over three clusters"][:3], clusters=3, build=b)
    assert not c.ok


def test_a_partner_that_never_raises_its_flag_leaves_the_owner_waiting():
    # On an H200 the owner would spin forever; the model stops it and gives no PASS. (A smaller step
    # budget than the model's default: a correct run of this case takes about 2,700 instruction groups per cluster.)
    b = _patched("if (t128 == 0) flag_release(", "if (false) flag_release(").for_model(budget=6000)
    with pytest.raises((Hang, Unsupported)):
        ladder.model_check(SK, *SPLITS["one whole round, then one tile over two clusters"][:3], clusters=2,
                           build=b)
