"""What cuBLAS runs (chapters/ch04_wgmma/cublas_kernels.py): its kernels' names read into tile, K step, stages and
cluster, and its counters put beside the course's kernels. Run: pytest tests/chapters/ch04_wgmma/test_cublas_kernels.py."""

from judge import record

from chapters.ch04_wgmma import cublas_kernels  # noqa: E402


def test_a_cublas_name_reads_as_tile_k_step_stages_and_cluster():
    p = cublas_kernels.parse("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")
    assert p == {"tile": "256x128", "k step": 64, "stages": 4, "cluster": "1x2", "rest": "h_bz_coopA_TNT"}
    p = cublas_kernels.parse("nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_ovscale_TNT")
    assert (p["tile"], p["k step"], p["stages"], p["cluster"]) == ("128x128", 128, 6, "2x1")


def test_a_name_of_another_shape_is_kept_whole_and_claims_no_tile():
    p = cublas_kernels.parse("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel")
    assert p["tile"] is None and p["stages"] is None and p["rest"].startswith("sm90_xmma")


def _row(kid, label, size, tensor, name=None):
    return {"id": kid, "label": label, "kernel": "gemm_x", "size": size,
            "launch": {"Kernel Name": name or "gemm_x", "Block Size": "(384, 1, 1)"},
            "summary": {"tensor pipe %": tensor, "issue slots busy %": 20.0, "FMA pipe %": 2.0, "L2 bytes": 1.2e9,
                        "TMA load bytes": 1.6e9, "DRAM bytes": 1.8e8, "SM clock Hz (while profiled)": 1.57e9}}


COUNTERS = {"rows": [
    _row("ch04.tma_store_l2_order", "TMA store + L2 order", "4096^3", 94.35),
    _row("ch04.ping_pong", "ping-pong", "4096^3", 84.07),
    _row("ch04.cublas_bf16", "cuBLAS bf16", "4096^3", 95.05, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"),
    _row("ch04.cublas_bf16_8192", "cuBLAS bf16", "8192^3", 96.95, "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT"),
]}


def test_rows_put_the_named_kernels_first_then_cublas_at_that_size():
    rows = cublas_kernels.rows(COUNTERS, ("ping-pong", "TMA store + L2 order"), 4096)
    assert [r["kernel"] for r in rows] == ["ping-pong", "TMA store + L2 order", "cuBLAS bf16"]
    lib = rows[-1]
    assert (lib["tile (name)"], lib["stages (name)"], lib["cluster (name)"]) == ("256x128", 4, "1x2")
    assert rows[0]["tile (name)"] == "" and lib["L2 GB"] == 1.2 and lib["SM GHz (profiled)"] == 1.57
    assert [r["kernel"] for r in cublas_kernels.rows(COUNTERS, ("ping-pong",), 8192)] == ["cuBLAS bf16"]


def test_the_tensor_gap_is_cublas_minus_the_course_and_none_without_both():
    gap = cublas_kernels.tensor_gap(COUNTERS, "TMA store + L2 order", 4096, "cuBLAS bf16")
    assert abs(gap - 0.70) < 1e-9
    assert cublas_kernels.tensor_gap(COUNTERS, "TMA store + L2 order", 8192, "cuBLAS bf16") is None
    assert cublas_kernels.tensor_gap(None, "ping-pong", 4096, "cuBLAS bf16") is None


def test_the_record_holds_cublas_kernels_whose_names_read_as_tiles():
    # the record run profiles them (judge.record.counters CUBLAS_PROFILED) and checks each output against float64
    for section, want in (("ch04.counters", {"cuBLAS bf16"}),
                          ("ch05.counters", {"cuBLAS FP8, use_fast_accum=True", "cuBLAS FP8, default (promoting)"})):
        lib = cublas_kernels.cublas_rows(record.figures(section))
        assert {r["label"] for r in lib} == want and {r["size"] for r in lib} == {"4096^3", "8192^3"}, section
        for r in lib:
            assert r["ok"] and cublas_kernels.parse(r["launch"]["Kernel Name"])["tile"], r["launch"]
