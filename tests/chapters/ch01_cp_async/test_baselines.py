"""Chapter 1's baselines and the tuned SGEMM: the register double-buffered kernel, the handbook's
design and sgemm_tuned2.cu build without spills, their SASS shows how each one moves tiles, the
host launches them with the right geometry, and on a Hopper GPU each computes A @ B.

    python -m pytest tests/chapters/ch01_cp_async/test_baselines.py -q        # GPU tests skip with the reason elsewhere
"""
import re

import pytest

from judge import config, gpu

CH = config.CHAPTERS_DIR / "ch01_cp_async"
from chapters.ch01_cp_async import sgemm  # noqa: E402

NEW = list(sgemm.MORE_KERNEL_FILES)


def kernel(f):
    return f.removesuffix(".cu")


@pytest.mark.parametrize("f", NEW)
def test_builds_without_spills_or_local_memory(f):
    b = sgemm.compiled(f)
    res = b.resources[kernel(f)]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, f"{f} spills: {res}"
    assert not b.uses("local.memory", kernel(f)), f"{f} touches local memory (LDL/STL)"


def test_register_double_buffering_stages_through_registers_once_per_tile():
    m = sgemm.sass_mix("sgemm_regbuf.cu")
    # one LDG.128 + one STS.128 of A and of B per tile, one barrier (the synchronous kernel has two)
    assert (m["LDG"], m["STS"], m["LDGSTS"], m["BAR"]) == (2, 2, 0, 1), m
    assert m["FFMA"] == 8 * 8 * 8                     # 8x8 outputs, BK = 8
    assert sgemm.sass_mix("sgemm_sync.cu")["BAR"] == 2


def test_handbook_design_is_a_three_stage_cp_async_pipeline():
    b = sgemm.compiled("handbook_gemm_cp_async.cu")
    k = b.sass_of("handbook_gemm_cp_async")
    assert len(re.findall(r"\bLDGSTS\.E\.BYPASS\.128\b", k)) >= 2, "one 16-byte copy of A and one of B per tile"
    assert re.search(r"\bDEPBAR\.LE\s+SB0,\s*0x1\b", k), "wait_prior(STAGES - 2) = 1 for 3 stages"
    s = sgemm.spec("handbook_gemm_cp_async.cu")
    assert (s.bm, s.bn, s.bk, s.threads, s.smem, s.static_smem) == (128, 128, 8, 256, 0, 3 * 8192)
    # beta == 0 must not read C: the epilogue's C loads sit behind a branch on beta
    assert re.search(r"\bLDG\.E\.128\b", k), "the beta != 0 path reads C as float4"


def test_tuned2_loads_a_k_major_and_reads_fragments_as_float4():
    f = "sgemm_tuned2.cu"
    s = sgemm.spec(f)
    p = s.params
    assert (s.bm, s.bn, s.threads) == (128, 64 * p["NQ"], 256)
    assert s.smem == p["STAGES"] * p["BK"] * (128 + 4 + s.bn) * 4
    m = sgemm.sass_mix(f)
    tn = 4 * p["NQ"]
    assert m["FFMA"] == 8 * tn * p["BK"], m                    # the whole k-tile unrolled in the loop
    k = sgemm.compiled(f).sass_of("sgemm_tuned2")
    loop_lds128 = (2 + p["NQ"]) * p["BK"]                      # per k: 2 float4 of A, NQ of B
    assert len(re.findall(r"\bLDS\.128\b", k)) >= loop_lds128
    # A travels in 4-byte copies (the transpose), B in 16-byte ones
    assert re.search(r"\bLDGSTS\.E\s", k) and re.search(r"\bLDGSTS\.E\.BYPASS\.128\b", k)
    assert m["BAR"] == 1, "one barrier per k-tile"
    assert m["FFMA share"] > 0.85 and m["shared bytes per FFMA"] < 1.0, m


@pytest.mark.parametrize("d", sgemm.TUNED2_CONFIGS)
def test_every_tuned2_configuration_builds_and_fits(d):
    b = sgemm.compiled("sgemm_tuned2.cu", d)
    assert b.resources["sgemm_tuned2"]["spill_stores"] == 0, f"{d} spills"
    assert sgemm.occupancy("sgemm_tuned2.cu", d)["fits"]


@pytest.mark.parametrize("f,shape", [("sgemm_regbuf.cu", (128, 128, 12)), ("handbook_gemm_cp_async.cu", (128, 100, 8)),
                                     ("sgemm_tuned2.cu", (128, 128, 16)), ("sgemm_tuned2.cu", (128, 256, 24))])
def test_host_refuses_partial_tiles(f, shape):
    with pytest.raises(ValueError, match="multiple of"):
        sgemm.spec(f).refuse(*shape)


def test_original_kernels_keep_their_launch_geometry():
    s = sgemm.spec("sgemm_tuned.cu", {"BK": 32, "STAGES": 3})
    assert (s.bm, s.bn, s.bk, s.smem) == (128, 128, 32, 3 * (128 * 36 + 32 * 128) * 4)
    assert sgemm.spec("sgemm_cp_async.cu").smem == 3 * 8192


def test_explain_reads_its_figures_from_the_rows_it_is_given():
    assert sgemm.explain([]).startswith("(no measurement")
    rows = [{"file": f, "n": 4096, "kernel": k, "TFLOPS": t, "of cuBLAS": t / 50.0, "registers": r}
            for f, k, t, r in [("sgemm_sync.cu", "s", 20.0, 150), ("sgemm_regbuf.cu", "r", 25.0, 160),
                               ("sgemm_cp_async.cu", "c", 30.0, 140), ("handbook_gemm_cp_async.cu", "h", 30.5, 140),
                               ("sgemm_tuned2.cu", "t", 45.0, 250), ("", "cuBLAS FP32", 50.0, None)]]
    text = sgemm.explain(rows)
    assert "25.0" in text and "1.20x the strong baseline" in text and "0.90 of cuBLAS" in text


# ----------------------------------------------------------------------------- on a Hopper GPU
@pytest.mark.parametrize("f", NEW)
def test_kernel_computes_a_times_b(f):
    gpu.need("sm_90")
    results = sgemm.check(f, sgemm.CHECK_SHAPES, seeds=(0, 1))
    bad = [c.message for c in results if not c.ok]
    assert not bad, "\n".join(bad)
    assert all(c.n_unwritten == 0 for c in results)


@pytest.mark.parametrize("d", sgemm.TUNED2_CONFIGS[1:])
def test_tuned2_configurations_compute_a_times_b(d):
    gpu.need("sm_90")
    bad = [c.message for c in sgemm.check("sgemm_tuned2.cu", sgemm.CHECK_SHAPES, seeds=(3,), defines=d) if not c.ok]
    assert not bad, "\n".join(bad)


def test_handbook_epilogue_is_alpha_ab_plus_beta_c_and_never_reads_c_when_beta_is_zero():
    gpu.need("sm_90")
    bad = [c.message for c in sgemm.check_epilogue() if not c.ok]
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- on the CPU model
# judge.model runs the kernel's own PTX with cp.async landing at the last legal moment and every
# shared-memory race reported: a protocol slip fails here without a GPU.
def _model_gemm(f, defines, M, N, K, seed, alpha=None, beta=None):
    import numpy as np

    from judge import model
    s = sgemm.spec(f, defines)
    rng = np.random.default_rng(seed)
    A = (rng.random((M, K)) * 2 - 1).astype(np.float32)
    B = (rng.random((K, N)) * 2 - 1).astype(np.float32)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    C = np.full((M, N), np.nan, dtype=np.float32)                 # poisoned: every element must be written
    args = (np.int32(M), np.int32(N), np.int32(K), A, B, C)
    if alpha is not None:
        C0 = (rng.random((M, N)) * 2 - 1).astype(np.float32)
        if beta:
            C[:] = C0
            ref = alpha * ref + beta * C0.astype(np.float64)
        else:
            ref = alpha * ref
        args = (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), A, B, np.float32(beta), C)
    model.run(sgemm.compiled(f, defines), s.name, grid=(N // s.bn, M // s.bm, 1), block=(s.threads, 1, 1),
              args=args, shared_bytes=s.smem)
    assert not np.isnan(C).any(), f"{f}: {int(np.isnan(C).sum())} outputs never written"
    err = float(np.abs(C - ref).max())
    assert err < 1e-4 * K ** 0.5, f"{f} {defines} {M}x{N}x{K}: max error {err:.2e}"


@pytest.mark.parametrize("f,defines,shape", [
    ("sgemm_regbuf.cu", None, (256, 256, 64)),
    ("sgemm_tuned2.cu", None, (256, 512, 96)),          # 6 tiles, 2 x 2 blocks in the grouped order
    ("sgemm_tuned2.cu", None, (128, 256, 16)),          # one tile: fewer than the pipeline's stages
    ("sgemm_tuned2.cu", {"NQ": 2, "MIN_BLOCKS": 2, "STAGES": 2}, (128, 256, 48)),
])
def test_kernel_is_right_on_the_cpu_model(f, defines, shape):
    _model_gemm(f, defines, *shape, seed=11)


@pytest.mark.parametrize("alpha,beta", [(2.0, 0.0), (-1.5, 0.75)])
def test_handbook_epilogue_on_the_cpu_model(alpha, beta):
    _model_gemm("handbook_gemm_cp_async.cu", None, 128, 256, 40, seed=12, alpha=alpha, beta=beta)
