"""Chapter 5's block-scaled tile (chapters/ch05_blackwell/gemm_mxfp8.cu: MXFP8, MXFP4, NVFP4) on the CPU model, and its mistakes.

Run: python -m pytest tests/chapters/ch05_blackwell/test_blockscaled.py -q

No GPU is used. The kernel is compiled for sm_100a; its SASS must show the block-scaled MMA and tcgen05.cp;
its own PTX runs on judge.model on fresh random inputs quantized with judge.hw.formats, C poisoned with
NaN, and C must match the float64 product of the decoded values within fp32 accumulation error. Each
mistake is the kernel plus one patch (blockscaled.build_patched); a correct variant written another way
(the scales copied by another thread, handed over through a commit) passes.
"""

import numpy as np
import pytest

from judge import model
from judge.hw import formats, sass

from chapters.ch05_blackwell import blockscaled  # noqa: E402


@pytest.mark.parametrize("fmt,mma", [("mxfp8", "tcgen05.f8f6f4"), ("mxfp4", "tcgen05.f4"), ("nvfp4", "tcgen05.f4")])
def test_sass_shows_the_block_scaled_mma_and_tcgen05_cp(fmt, mma):
    b = blockscaled.build_kernel(fmt)
    counts = sass.feature_counts(sass.kernel_section(b.sass, blockscaled.KERNEL))
    assert b.target == "sm_100a"
    for feature in (mma, "tmem.cp", "tcgen05.commit", "tmem.ld", "tmem.alloc", "tmem.dealloc"):
        assert counts.get(feature, 0) > 0, (feature, counts)


@pytest.mark.parametrize("fmt,M,N,K", [("mxfp8", 128, 128, 256), ("mxfp8", 256, 256, 128), ("mxfp8", 128, 64, 128),
                                       ("mxfp4", 128, 96, 256), ("nvfp4", 128, 128, 128), ("nvfp4", 128, 256, 64)])
def test_runs_on_the_model_and_matches_float64_of_the_decoded_values(fmt, M, N, K):
    r = blockscaled.run_on_model(M, N, K, fmt=fmt)
    assert r["ok"], (r["max_abs_err"], r["max_rel_err"])
    rep = r["report"]
    steps = K // blockscaled.FORMATS[fmt]["kw"]
    mmas = {"mxfp8": 4, "mxfp4": 2, "nvfp4": 1}[fmt]
    assert rep.counts["tcgen05.mma"] == rep.counts["tcgen05.mma.block_scaled"] == (M // 128) * steps * mmas
    assert rep.counts["tcgen05.cp"] == (M // 128) * steps * (1 + (N + 127) // 128)
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"] == M * N * 4
    assert rep.seconds < 5.0


def test_the_check_is_not_loose_the_scales_change_c():
    """The same codes with every scale of A one binade up (one E8M0 code more) give 2 C, far outside the tolerance."""
    r = blockscaled.run_on_model(fmt="mxfp8", K=128, seed=7)
    assert r["ok"]
    tol = blockscaled.tolerance(r["A_hat"], r["B_hat"])
    assert (np.abs(2 * r["ref"] - r["ref"]) > tol).mean() > 0.99


@pytest.mark.parametrize("fmt,elem", [("mxfp8", "e4m3"), ("mxfp4", "e2m1")])
def test_decoded_operand_times_scale_matches_judge_hw_formats_bit_for_bit(fmt, elem):
    """B = the identity (code 1.0, scale 2^0): C = A's decoded values, which must equal formats' decoding exactly."""
    rng = np.random.default_rng()
    a = rng.standard_normal((128, 128)) * np.exp2(rng.integers(-20, 21, (128, 4))).repeat(32, axis=1)
    r = blockscaled.run_on_model(128, 128, 128, fmt=fmt, a=a, bt=np.eye(128))
    q = formats.mx_quantize(a, elem, block=32)
    assert np.array_equal(r["c"], q.dequantize().astype(np.float32))
    assert np.array_equal(r["c"].astype(np.float64), q.dequantize())        # exact in fp32 too


def test_nvfp4_decoded_operand_times_ue4m3_scale_matches_bit_for_bit():
    rng = np.random.default_rng()
    a = rng.standard_normal((128, 64)) * rng.uniform(0.1, 10, (128, 1))
    r = blockscaled.run_on_model(128, 64, 64, fmt="nvfp4", a=a, bt=np.eye(64))
    n = formats.nvfp4_quantize(a)
    per_block = formats.decode(n.codes, "e2m1").reshape(128, 4, 16) * formats.decode(n.scales, "e4m3")[..., None]
    # the identity's NVFP4: tensor scale 1 / 2688 (FP32), block scales E4M3 448, elements E2M1 6: 2688 at k = n
    bd = r["B_hat"]
    assert np.array_equal(r["c"].astype(np.float64), per_block.reshape(128, 64) * np.diag(bd)[None, :])


def test_the_default_run_is_checked_on_fresh_inputs_each_time():
    r1, r2 = blockscaled.run_on_model(), blockscaled.run_on_model()
    assert r1["ok"] and r2["ok"] and not np.array_equal(r1["ref"], r2["ref"])


# ------------------------------------------------------------------------------------------ mistakes
def _fails(b, fmt="mxfp8", rule=None):
    """The mistake is caught: a Violation naming `rule`, or (rule None) a C the float64 check rejects."""
    if rule:
        with pytest.raises(model.Violation) as e:
            blockscaled.run_on_model(fmt=fmt, b=b)
        assert e.value.rule == rule, e.value
        return e.value
    r = blockscaled.run_on_model(fmt=fmt, b=b)
    assert not r["ok"]
    return r


def test_scale_b_read_from_unallocated_columns_is_a_violation():
    b = blockscaled.build_patched("4 / MMAS * j), sfa_tmem, sfb_tmem,", "4 / MMAS * j), sfa_tmem, tmem_base + cols,")
    v = _fails(b, rule="tcgen05-unallocated")
    assert "scale-B" in str(v) and "tcgen05.mma" in str(v)


def test_scales_copied_past_the_allocation_is_a_violation():
    b = blockscaled.build_patched("sfb_tmem = tmem_base + N + 4;", "sfb_tmem = tmem_base + cols;")
    v = _fails(b, rule="tcgen05-unallocated")
    assert "tcgen05.cp writes" in str(v)


def test_scale_b_read_from_scale_a_columns_gives_a_wrong_c():
    b = blockscaled.build_patched("4 / MMAS * j), sfa_tmem, sfb_tmem,", "4 / MMAS * j), sfa_tmem, sfa_tmem,")
    _fails(b)


def test_scales_never_copied_into_tensor_memory_give_a_wrong_c():
    b = blockscaled.build_patched("      copy_scales(sfa_tmem, ssfa);\n", "")
    r = _fails(b)
    assert r["report"].counts["tcgen05.cp"] == 2          # only scale_B's copies ran


def test_the_same_scale_factor_id_for_every_mma_gives_a_wrong_c():
    b = blockscaled.build_patched("idesc_scaled(N, 4 / MMAS * j)", "idesc_scaled(N, 0)")
    _fails(b)


def test_nvfp4_with_block32_is_a_wrong_scale_vector_size():
    b = blockscaled.build_patched("kind::mxf4nvf4.block_scale.block16", "kind::mxf4nvf4.block_scale.block32",
                                  fmt="nvfp4")
    v = _fails(b, fmt="nvfp4", rule="tcgen05-scale-vec")
    assert "UE4M3" in str(v) and "9.7.16.10.7.1" in str(v)


def test_scales_copied_by_another_thread_and_read_without_waiting_for_its_commit_is_a_violation():
    b = blockscaled.build_patched("      tc::mbar_wait(&scales_in, s & 1);\n", "", defines={"CP_THREAD": 32})
    v = _fails(b, rule="tcgen05-scale-visibility")
    assert "tcgen05.cp" in str(v)


def test_scale_bytes_stored_without_fence_proxy_async_is_a_violation():
    b = blockscaled.build_patched("    tc::fence_proxy_async();\n    __syncthreads();\n    // 3.",
                                  "    __syncthreads();\n    // 3.")
    _fails(b, rule="proxy-fence")


def test_correct_variant_scales_copied_by_another_thread_handed_over_through_a_commit_passes():
    b = blockscaled.build_kernel("mxfp8", defines={"CP_THREAD": 32})
    r = blockscaled.run_on_model(fmt="mxfp8", b=b, N=256)
    assert r["ok"] and r["report"].counts["tcgen05.commit"] == 2 * 2     # the scales' commit and the MMAs', per step
    b = blockscaled.build_kernel("nvfp4", defines={"CP_THREAD": 32})
    assert blockscaled.run_on_model(fmt="nvfp4", b=b)["ok"]
