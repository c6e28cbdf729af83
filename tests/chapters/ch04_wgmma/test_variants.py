"""Chapter 4's operand variants (chapters/ch04_wgmma/variants.py): an N-major B, A from registers, split-K.

Run: python -m pytest tests/chapters/ch04_wgmma/test_variants.py -q

Without a GPU: each kernel compiles for sm_90a and its SASS shows what it teaches; its own PTX runs on
the CPU model (judge.model) at two shapes on fresh random inputs (outputs poisoned with NaN; split-K's
C zeroed, as the host must) against float64; each mistake is the file plus one change, and the model
must catch it (a wrong C, or the rule it breaks), while a correct kernel written another way passes.
On an H200 the measurement runs too.
"""

import numpy as np
import pytest

from judge import gpu, model
from judge.hw import sass

from chapters.ch04_wgmma import variants  # noqa: E402

DEFINES = {"BN": 128, "BM": 128, "BK": 64, "STAGES": 4}     # the files' #ifndef blocks, to override one


def kernel_sass(name, kb=None):
    kb = kb or variants.build(name)
    return sass.kernel_section(kb.sass, variants.KERNELS[name]["kernel"])


def outcome(name, M, N, K, kb, **kw):
    """'ok', 'wrong C: ...' or 'violation <rule>: ...' of one model run."""
    try:
        c = variants.model_check(name, M, N, K, kbuild=kb, **kw)
    except model.Violation as e:
        return f"violation {e.rule}: {e.message}"
    return "ok" if c.ok else f"wrong C: {c.message}"


# ----------------------------------------------------------------------------- SASS
def test_each_file_says_what_it_is_and_carries_its_judge_line():
    for k in variants.KERNELS.values():
        text = (variants.HERE / k["file"]).read_text()
        assert text.startswith(f"// {k['file']} - ")
        assert "// judge: target=sm_90a features=" in text and 'extern "C" __global__' in text


@pytest.mark.parametrize("name", list(variants.KERNELS))
def test_no_kernel_has_setmaxnreg_ignored_or_wgmma_serialized_in_its_compile_log(name):
    log = variants.build(name).log
    assert "C7508" not in log and "C7515" not in log and "spill" not in log.replace("0 bytes spill", ""), log


def test_mn_major_reads_b_transposed_from_shared_memory():
    s = kernel_sass("mn_major")
    gmma = [ln for ln in s.splitlines() if "HGMMA" in ln]
    assert gmma and all(".tnspB" in ln for ln in gmma), gmma[:2]
    assert not sass.uses(s, "wgmma.rs") and sass.uses(s, "tma.load")


def test_rs_feeds_a_from_registers_and_b_by_descriptor():
    s = kernel_sass("rs")
    gmma = [ln for ln in s.splitlines() if "HGMMA" in ln]
    assert len(gmma) == 4 and sass.uses(s, "wgmma.rs")
    assert all("gdesc" in ln and ln.count("gdesc") == 1 for ln in gmma), gmma     # only B is a descriptor
    assert not sass.uses(kernel_sass("splitk"), "wgmma.rs")                       # the feature tells them apart


def test_splitk_adds_its_tile_with_a_tma_reduction():
    s = kernel_sass("splitk")
    assert sass.uses(s, "tma.reduce") and sass.uses(s, "proxy.fence") and sass.uses(s, "wgmma")
    assert not sass.uses(s, "tma.store")


# ----------------------------------------------------------------------------- the CPU model
CASES = {
    "mn_major": [dict(M=128, N=128, K=192), dict(M=200, N=264, K=320)],
    "rs": [dict(M=128, N=128, K=128), dict(M=200, N=264, K=320)],
    # 3 ranges of 5 slices (2 + 2 + 1); 4 ranges of 3 slices: the last block has nothing and returns
    "splitk": [dict(M=128, N=128, K=320, splits=3), dict(M=200, N=264, K=192, splits=4)],
}


@pytest.mark.parametrize("name,case", [(n, c) for n, cs in CASES.items() for c in cs],
                         ids=[f"{n}-{i}" for n, cs in CASES.items() for i in range(len(cs))])
def test_each_variant_matches_float64_on_the_cpu_model(name, case):
    c = variants.model_check(name, **case)
    assert c.ok, c.message
    assert c.n_unwritten == 0


def test_the_split_k_sum_needs_every_range():
    # one range of three left out: the tolerance is tight enough to see a third of the sum missing
    kb = variants.build_patched("splitk", "const int kt0 = blockIdx.z * per,",
                                "const int kt0 = blockIdx.z * per + (blockIdx.z == 1 ? per : 0),")
    assert outcome("splitk", 128, 128, 192, kb, splits=3).startswith("wrong C")


# ----------------------------------------------------------------------------- mistakes
def test_mn_major_descriptor_mistakes_give_a_wrong_c_and_a_64b_swizzle_written_another_way_passes():
    # correct another way: boxes of 32 columns (64 bytes) with the 64B swizzle, LBO = BK x 64, SBO = 512
    other = variants.build("mn_major", **DEFINES, B_SPAN=64, TRANS_B=1)
    assert outcome("mn_major", 128, 256, 192, other, b_span=64) == "ok"
    # imm-trans-b 0 on N-major bytes: B read as if K-major (it runs past its slot into the next one,
    # which the model names as a race, or reads the wrong elements)
    no_trans = variants.build("mn_major", **DEFINES, B_SPAN=128, TRANS_B=0)
    got = outcome("mn_major", 128, 128, 192, no_trans)
    assert got.startswith("wrong C") or got.startswith("violation async-overwrite-race"), got
    # LBO and SBO in their K-major roles: the second 64 columns of N are read from the wrong bytes
    swapped = variants.build_patched(
        "mn_major", "((BK * B_SPAN) >> 4) << 16) |\n         ((unsigned long long)((8 * B_SPAN) >> 4) << 32)",
        "((8 * B_SPAN) >> 4) << 16) |\n         ((unsigned long long)((BK * B_SPAN) >> 4) << 32)")
    assert outcome("mn_major", 128, 128, 192, swapped).startswith("wrong C")


def _fence_before_the_fragment():
    """gemm_rs.cu with wgmma.fence moved from after the A-fragment writes to before them."""
    text = (variants.HERE / "gemm_rs.cu").read_text()
    i = text.index("      unsigned a[BK / 16][4];")
    fence = "      wg::fence();\n"
    j = text.index(fence, i) + len(fence)
    block = text[i:j]
    return block, fence + block[:-len(fence)]


def test_rs_register_rules_are_caught_and_interleaved_fences_pass():
    # correct another way: every fragment written first, then a wgmma.fence before each wgmma
    interleaved = variants.build_patched(
        "rs", "      wg::fence();\n#pragma unroll\n      for (int k = 0; k < BK / 16; ++k)\n        mma_rs_n128(",
        "#pragma unroll\n      for (int k = 0; k < BK / 16; ++k)\n        wg::fence(), mma_rs_n128(")
    assert outcome("rs", 128, 128, 192, interleaved) == "ok"
    # the fence before the registers are written: the wgmma reads registers no fence ordered
    old, new = _fence_before_the_fragment()
    got = outcome("rs", 128, 128, 192, variants.build_patched("rs", old, new))
    assert got.startswith("violation wgmma-fence") and "A-fragment register" in got, got
    # one wgmma group kept in flight (KEEP 1): the next slice writes A's registers while it reads them
    got = outcome("rs", 128, 128, 192, variants.build("rs", **DEFINES, KEEP=1))
    assert got.startswith("violation wgmma-accumulator") and "A-fragment register" in got, got


def test_splitk_reduction_mistakes_are_caught_and_wait_all_passes():
    # correct another way: wait for the whole bulk group (its global writes too), not only its reads
    other = variants.build_patched("splitk", "tma::wait_read<0>();", "tma::wait_all<0>();")
    assert outcome("splitk", 128, 128, 192, other, splits=2) == "ok"
    no_fence = variants.build_patched("splitk", "    tma::fence_proxy_async();\n    wg::named_sync(1 + c, 128);",
                                      "    wg::named_sync(1 + c, 128);")
    assert outcome("splitk", 128, 128, 192, no_fence, splits=2).startswith("violation proxy-fence")
    no_wait = variants.build_patched("splitk", "      tma::wait_read<0>();\n", "")
    assert outcome("splitk", 128, 128, 192, no_wait, splits=2).startswith("violation exit-before-bulk-read")


def test_sizes_the_hardware_cannot_take_are_refused_saying_why():
    with pytest.raises(ValueError, match="16-byte boundary"):
        variants.check_size("rs", 128, 100, 128)


def test_the_rs_reference_rounds_the_scaled_a_once_as_the_kernel_does():
    import ml_dtypes
    a = np.array([[1.0, 3.0]], np.float32)
    s = np.array([1.0 + 2.0 ** -8], np.float32)        # 3 (1 + 2^-8) lies between two bf16: rounds to even
    got = variants.scaled_a(a.astype(ml_dtypes.bfloat16), s)
    assert got[0, 0] == 1.0 and got[0, 1] == float(np.float32(3 * (1 + 2.0 ** -8)).astype(ml_dtypes.bfloat16))


# ----------------------------------------------------------------------------- on an H200
def test_every_variant_is_measured_against_cublas_with_its_output_checked():
    gpu.need("sm_90a")
    figs = variants.measure(reps=3, shapes={"mn_major": [(1024, 1024, 1024)], "rs": [(1024, 1024, 1024)],
                                            "splitk": [((512, 512, 4096), (1, 2))]})
    assert not figs["errors"], figs["errors"]
    assert all(r["ok"] for r in figs["rows"]), [r for r in figs["rows"] if not r["ok"]]
    assert {r["kernel"] for r in figs["rows"] if r["label"].startswith("gemm_")} == set(variants.KERNELS)
