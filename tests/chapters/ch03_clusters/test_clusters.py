"""Chapter 3 (clusters, DSMEM, multicast): what the SASS proves about each kernel, the GPC and
occupancy arithmetic, and on an H200 the kernels themselves against float64 / exact references.

Run: python -m pytest tests/chapters/ch03_clusters/test_clusters.py -q   (GPU tests SKIP with the reason without sm_90)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from judge.grading import exercise
from judge import gpu
from judge.gpu import launch
from judge.hw import sass

ROOT = Path(__file__).resolve().parents[3]
from chapters.ch03_clusters import run as ch03  # noqa: E402


# ------------------------------------------------------------------ what the SASS shows (any machine)
def test_cluster_sync_is_the_hardware_cluster_barrier():
    s = ch03.build("cluster_sum").sass_of("cluster_sum")
    assert sass.FEATURES["cluster.barrier"].count(s) == 4      # two syncs: ARV + WAIT each
    assert "UCGABAR_ARV" in s and "UCGABAR_WAIT" in s


def test_the_early_exit_kernel_has_one_cluster_barrier_fewer():
    b = ch03.build("cluster_sum")
    assert sass.FEATURES["cluster.barrier"].count(b.sass_of("cluster_sum_early_exit")) == 2


def test_a_dsmem_load_is_a_generic_load_on_an_address_with_the_rank_in_its_top_byte():
    s = ch03.build("dsmem_probe").sass_of("dsmem_latency_peer")
    assert re.search(r"\bLD\.E\b", s), "ld.shared::cluster should become a generic LD"
    assert "SR_CgaCtaId" in s
    assert "MAPA" not in s
    local = ch03.build("dsmem_probe").sass_of("dsmem_latency_local")
    assert re.search(r"\bLDS\b", local) and not re.search(r"\bLD\.E\b", local)


def test_mapa_replaces_the_top_byte_of_the_address():
    s = ch03.build("cluster_where").sass_of("mapa_probe")
    assert re.search(r"PRMT \S+, \S+, 0x654, \S+", s), "mapa: byte permute putting the rank in bits 24-31"


def test_multicast_shows_in_the_sass_only_when_asked_for():
    mc = ch03.build("multicast_reuse", MULTICAST=1, CLUSTER=4)
    plain = ch03.build("multicast_reuse", MULTICAST=0, CLUSTER=1)
    assert mc.uses("tma.multicast") and mc.uses("cluster.barrier")
    assert plain.uses("tma.load") and not plain.uses("tma.multicast") and not plain.uses("cluster.barrier")


def test_histogram_solution_uses_remote_atomics_and_two_cluster_barriers():
    b = ch03.build(ch03.HISTOGRAM_SOLUTION)
    s = b.sass_of("cluster_histogram")
    assert sass.FEATURES["cluster.barrier"].count(s) == 4
    assert re.search(r"\bATOM\.E\.ADD\b", s), "red.shared::cluster becomes a generic atomic"
    assert re.search(r"\bATOMS\b", s), "the own slice uses shared-memory atomics"


# ------------------------------------------------------------------ arithmetic (any machine)
def test_clusters_never_span_gpcs_in_the_prediction():
    assert ch03.predicted_clusters([18, 18, 16], 16, 1) == 3
    assert ch03.predicted_clusters([18, 18, 16], 8, 1) == 6
    assert ch03.predicted_clusters([18, 18, 16], 4, 2) == 9 + 9 + 8
    assert ch03.predicted_clusters([18, 2], 4, 8) == 36          # the 2-SM group holds no cluster of 4


def test_the_prediction_matches_every_max_active_clusters_measured_on_the_h200():
    data = json.loads(ch03.LAYOUT_FILE.read_text())
    for m in data["max_active_clusters"]:
        assert ch03.predicted_clusters(data["gpc_sizes"], m["cluster"], m["blocks_per_sm"]) == m["clusters"], m


def test_gpc_groups_are_connected_components_of_clusters():
    assert ch03._components(6, [[0, 1], [2, 3], [1, 2]]) == [[0, 1, 2, 3], [4], [5]]


def test_check_where_finds_a_wrong_rank():
    rows = [{"block": b, "rank": b % 2, "cluster": b // 2, "clusters": 2, "size": 2, "sm": b} for b in range(4)]
    assert ch03.check_where(rows, 2) == []
    rows[3]["rank"] = 0
    assert ch03.check_where(rows, 2)


def test_the_grid_must_be_whole_clusters():
    with pytest.raises(launch.LaunchError, match="not a multiple of 4"):
        launch.check_shape((130, 1, 1), (256, 1, 1), (4, 1, 1))


def test_the_committed_gpc_layout_matches_the_sm_count():
    data = json.loads(ch03.LAYOUT_FILE.read_text())
    assert sum(data["gpc_sizes"]) == data["sms"]
    assert data["device"] and data["date"]


def test_the_chase_is_one_cycle():
    p = ch03._cycle(1000, np.random.default_rng(1))
    seen, i = set(), 0
    for _ in range(1000):
        seen.add(i)
        i = int(p[i])
    assert len(seen) == 1000 and i == 0


# ------------------------------------------------------------------ on an H200
def test_cluster_sum_every_size_against_float64():
    gpu.need("sm_90")
    rows = ch03.cluster_sum(sizes=(1, 2, 4, 8), clusters=16, per_block=3000)
    assert all(r["ok"] for r in rows), rows


def test_ranks_and_cluster_ids_as_launched():
    gpu.need("sm_90")
    assert ch03.check_where(ch03.where(4, clusters=8), 4) == []
    assert ch03.check_where(ch03.where(4, clusters=8, compile_time=True), 4) == []


def test_mapa_on_the_gpu_is_rank_in_the_top_byte():
    gpu.need("sm_90")
    for r in ch03.mapa_probe(4):
        assert r["mapa"] == (r["rank"] << 24) | (r["own address"] & 0xFFFFFF)


def test_dsmem_is_slower_than_own_shared_memory_and_faster_than_l2():
    gpu.need("sm_90")
    lat = {r["target"]: r["ns/load"] for r in ch03.dsmem_latency(steps=4000)}
    assert lat["own shared memory"] < lat["peer's shared memory (DSMEM)"] < lat["L2 (ld.global.cg)"]


def test_histograms_are_exact():
    gpu.need("sm_90")
    rows = ch03.histogram(n=1 << 20, bins_list=(65536,), dists=("uniform",), clusters=(4,), reps=3)
    assert len(rows) == 3


def test_multicast_is_right():
    gpu.need("sm_90")
    rows = ch03.multicast(K=1024, m_tiles=2, n_tiles=4, clusters=(2, 4), reps=3)
    assert len(rows) == 3


def test_the_cluster_geometry_grader_counts_as_the_chapter_predicts():
    """exercises/cluster_geometry grades with its own copy of the rule: it must be the chapter's."""
    import random
    chk = exercise.import_file(ROOT / "exercises" / "cluster_geometry" / "check.py", "cluster_geometry_check")
    rng = random.Random()
    for _ in range(300):
        sizes = [rng.randrange(1, 21) for _ in range(rng.randrange(1, 13))]
        c, b = rng.randrange(1, 17), rng.randrange(1, 9)
        assert chk.clusters_that_fit(sizes, c, b) == ch03.predicted_clusters(sizes, c, b), (sizes, c, b)
