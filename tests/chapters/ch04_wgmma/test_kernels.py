"""Chapter 4's GEMM ladder: what each rung must show in its SASS and compile log, the host rules,
the tolerance, and (on an H200) every rung against float64.

    .venv/bin/python -m pytest tests/chapters/ch04_wgmma/test_kernels.py -q

On a machine without a Hopper GPU the kernels are compiled (NVRTC, sm_90a) and their SASS read;
the GPU tests SKIP saying why.
"""
import re

import numpy as np
import pytest

from judge.grading import compare
from judge import config, gpu

HERE = config.ROOT / "chapters" / "ch04_wgmma"
from chapters.ch04_wgmma import ladder  # noqa: E402

NAMES = [r["name"] for r in ladder.RUNGS]
ALL = ladder.RUNGS + ladder.VARIANTS


def test_the_ladder_has_ten_rungs_in_order_each_a_file_that_says_what_it_is():
    assert len(ladder.RUNGS) == 10
    for r in ladder.RUNGS:
        path = HERE / r["file"]
        assert path.exists(), r
        assert r["what"] and r["kernel"] in path.read_text()
        first = path.read_text().splitlines()[0]
        assert first.startswith(f"// {r['file']} - "), first


@pytest.mark.parametrize("r", ALL, ids=lambda r: r["name"])
def test_each_rung_builds_with_its_wgmma_shape_and_no_compiler_complaint(r):
    b = ladder.build_rung(r["name"])
    sass = b.sass_of(r["kernel"])
    bn = r["tile"][1]
    shapes = set(re.findall(r"\bHGMMA\.(\d+x\d+x\d+)\.F32\.BF16\b", sass))
    assert shapes == {f"64x{bn}x16"}, f"{r['name']}: HGMMA shapes {shapes}"
    assert "WARPGROUP.ARRIVE" in sass and "WARPGROUP.DEPBAR" in sass
    assert "UTMALDG" in sass
    # C7508: setmaxnreg ignored; C7515: wgmma serialized. Neither may appear in any rung's log.
    assert "C7508" not in b.log and "C7515" not in b.log, b.log
    res = b.resources[r["kernel"]]
    assert res["spill_stores"] == 0 and res["local"] == 0, res
    assert ladder.shared_bytes(r) <= 227 * 1024


@pytest.mark.parametrize("r", ALL, ids=lambda r: r["name"])
def test_the_sass_shows_what_each_rung_adds(r):
    b = ladder.build_rung(r["name"])
    sass = b.sass_of(r["kernel"])
    specialized = r["threads"] > 128
    # setmaxnreg: the producer gives registers back (DEALLOC), the consumers take them (ALLOC)
    assert ("USETMAXREG" in sass) == specialized
    if specialized:
        assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
        assert b.resources[r["kernel"]]["registers"] <= 168      # 65536 / 384, rounded down to 8
    assert ("UTMALDG.2D.MULTICAST" in sass) == (r["cluster"] > 1)
    if r["cluster"] > 1:
        assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass     # barrier.cluster arrive / wait
    assert ("UTMASTG" in sass) == r["tma_store"]
    if r["tma_store"]:
        # the staged tile is written with shared stores, fenced for the async proxy, then stored
        assert "STS" in sass and "FENCE.VIEW.ASYNC" in sass
    if r["cluster"] > 1:
        # consumers free a slot in both blocks; a release.cluster arrive would cost a MEMBAR.ALL.GPU each
        # (rung 10 adds one: the st.release.gpu that raises a stream-K flag, once per split tile, not per slice)
        allowed = 2 + (1 if r.get("stream_k") else 0)
        assert len(re.findall(r"MEMBAR\.ALL\.GPU", sass)) <= allowed, "MEMBAR.ALL.GPU outside the cluster syncs"


def test_token_rungs_arrive_from_every_consumer_thread_and_parity_rungs_do_not():
    token = (HERE / "gemm_05_persistent.cu").read_text()
    parity = (HERE / "gemm_06_mbarrier_parity.cu").read_text()
    assert "1 + 128 * CONSUMERS" in token and "wait_token" in token
    assert "wait_token" not in parity and "mbar_init(&full[s], 1)" in parity


def test_the_best_kernel_is_one_readable_file_under_650_lines():
    best = ladder.rung(ladder.BEST)
    lines = (HERE / best["file"]).read_text().splitlines()
    assert len(lines) < 650
    assert best["cluster"] == 2 and best["tma_store"] and best["persistent"]


def test_the_timeline_build_records_globaltimer():
    b = ladder.build_rung(ladder.BEST, TIMELINE=None)
    assert "globaltimer" in b.ptx
    assert "globaltimer" not in ladder.build_rung(ladder.BEST).ptx


@pytest.mark.parametrize("mnk", [(100, 100, 30), (128, 130, 64), (0, 8, 8)])
def test_sizes_the_hardware_cannot_take_are_refused_saying_why(mnk):
    with pytest.raises(ValueError, match="multiple of 8|at least 1"):
        ladder.check_size(*mnk)
    ladder.check_size(1000, 1032, 520)     # not multiples of the tile: handled


def test_the_tolerance_accepts_fp32_accumulation_and_rejects_a_swapped_half_tile():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(4)
    M, N, K = 192, 256, 1024
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, generator=g).to(torch.bfloat16)
    ref, atol = ladder.reference(a, b)
    good = (a.float() @ b.float().T).to(torch.bfloat16).float().numpy()   # fp32 sums, bf16 out

    def cmp(x):
        return compare.compare(x, ref.numpy(), rtol=ladder.RTOL, atol=atol.numpy(), norm_tol=ladder.NORM_TOL)
    assert cmp(good).ok
    swapped = good.copy()
    swapped[:64], swapped[64:128] = good[64:128], good[:64]
    assert not cmp(swapped).ok
    tail_dropped = (a[:, :K - 8].float() @ b[:, :K - 8].float().T).to(torch.bfloat16).float().numpy()
    assert not cmp(tail_dropped).ok
    unwritten = good.copy()
    unwritten[5, 7] = np.nan
    c = cmp(unwritten)
    assert not c.ok and c.n_unwritten == 1


@pytest.mark.parametrize("name", [r["name"] for r in ALL])
def test_each_rung_is_correct_on_the_cpu_model_of_the_machine(name):
    # judge.model runs the PTX with every asynchronous rule enforced as late as it allows: a stage
    # released before its wgmma finished, a TMA store without the proxy fence, a wrong parity fail here
    # not multiples of the tile, a K tail; persistent rungs run two tiles per block, so their ring wraps
    c = ladder.model_check(name, 136, 264, 200)
    assert c.ok, c.message


# ----------------------------------------------------------------------------- on an H200
@pytest.mark.parametrize("name", [r["name"] for r in ALL])
def test_each_rung_matches_float64_on_a_size_that_is_not_a_multiple_of_the_tile(name):
    gpu.need("sm_90a")
    for M, N, K in [(1000, 1032, 520), (136, 264, 8), (512, 768, 4096)]:
        c = ladder.check_rung(name, M, N, K)
        assert c.ok, c.message


def test_the_ladder_is_timed_against_cublas_in_the_same_run():
    gpu.need("sm_90a")
    rows = ladder.measure_ladder(sizes=(2048,), rungs=[ladder.BEST], reps=5)
    assert rows[0]["rung"].startswith("cuBLAS") and rows[0]["of cuBLAS"] == 1.0
    assert all(r["ok"] for r in rows), rows
    assert 0 < rows[1]["TFLOPS"] < 1000     # an H200's dense bf16 peak is about 990
