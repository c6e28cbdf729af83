"""Chapter 5's GEMM over CTA pairs (chapters/ch05_blackwell/gemm_2cta.cu, tcgen05 cta_group::2) on the CPU model,
its SASS, what a pair saves, and its mistakes.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/chapters/ch05_blackwell/test_gemm_2cta.py -q

No GPU is used. The kernel is compiled for sm_100a; its SASS must show the 2-CTA MMA, the 2-CTA TMA loads and
the multicast commits; its own PTX runs on judge.model in clusters of 2 (several tiles per pair where the
shape allows, the ring wrapping), on fresh random bf16 inputs with C poisoned with NaN, and C must match the
float64 product. Each mistake is the kernel plus one patch (gemm_2cta.build_patched), and the model (or ptxas)
must give the verdict that names it; a correct kernel written another way must pass.
"""
import re

import pytest

from judge import model
from judge.gpu import build
from judge.hw import sass

from chapters.ch05_blackwell import gemm_2cta  # noqa: E402
from chapters.ch05_blackwell import gemm_ws  # noqa: E402


@pytest.fixture(scope="module")
def kernel():
    return gemm_2cta.build_kernel()


def test_sass_shows_the_pair_mma_the_pair_tma_loads_and_multicast_commits(kernel):
    counts = gemm_2cta.key_counts(kernel)
    assert kernel.target == "sm_100a"
    for feature in ("tcgen05.2cta", "tma.load", "tcgen05.commit", "tmem.ld", "tmem.alloc", "cluster.barrier"):
        assert counts[feature] > 0, (feature, counts)
    names = gemm_2cta.pair_mnemonics(kernel)
    assert "UTCHMMA.2CTA" in names and "UTMALDG.2D.2CTA" in names and "UTCBAR.2CTA.MULTICAST" in names, names
    assert any(n.startswith("UTCATOMSWS.2CTA") for n in names), names        # the paired allocation
    ws = gemm_ws.build_kernel()                                               # the 1-CTA kernel: no 2-CTA MMA
    ws_counts = sass.feature_counts(sass.kernel_section(ws.sass, "gemm_ws"))
    assert ws_counts["tcgen05"] > 0 and ws_counts.get("tcgen05.2cta", 0) == 0
    assert not any(".2CTA" in n for n in gemm_2cta.pair_mnemonics(ws, "gemm_ws"))


@pytest.mark.parametrize("M,N,K,pairs,bn,stages", [
    (256, 256, 256, 1, 256, 4),        # one tile
    (512, 256, 128, 1, 256, 4),        # two tiles: both accumulator buffers
    (512, 256, 512, 1, 256, 2),        # the 2-slot ring wraps 7 times
    (1024, 256, 256, 2, 128, 3),       # two pairs, two tiles each, BN = 128
])
def test_the_pair_kernel_matches_float64(M, N, K, pairs, bn, stages):
    b = gemm_2cta.build_kernel(bn, stages)
    r = gemm_2cta.run_on_model(M, N, K, pairs=pairs, bn=bn, stages=stages, b=b)
    assert r["ok"], (r["max_abs_err"], r["tol"])
    counts = r["report"].counts
    assert counts["tcgen05.mma.cta_group::2"] == counts["tcgen05.mma"] == (M // 256) * (N // bn) * (K // 16)
    assert counts["tcgen05.alloc"] == counts["tcgen05.dealloc"] == 2 * pairs
    assert counts["gstore.from.tcgen05.ld.bytes"] == counts["gstore.bytes"] == 4 * M * N   # C came out of TMEM


def test_each_cta_loads_half_of_b_and_the_pair_moves_fewer_bytes():
    r = gemm_2cta.run_on_model(512, 256, 256, b=None)
    tiles, slices = 2, 256 // 64
    assert r["report"].counts["smem_fill.tma.bytes"] == tiles * slices * (256 + 256) * 64 * 2
    ws = gemm_ws.run_on_model(512, 256, 256, ctas=2, bn=256, stages=2)             # the same outputs, one CTA per tile
    assert ws["ok"]
    assert ws["report"].counts["smem_fill.tma.bytes"] == 4 * slices * (128 + 256) * 64 * 2
    single, paired = gemm_2cta.traffic_per_tile(256)
    assert paired["bytes L2 -> SM per K slice"] * tiles * slices == r["report"].counts["smem_fill.tma.bytes"]
    assert single["bytes L2 -> SM per K slice"] * tiles * slices == ws["report"].counts["smem_fill.tma.bytes"]
    assert paired["saved vs two CTAs"] == pytest.approx(1 - 512 / 768)
    assert gemm_2cta.traffic_gemm(8192, 8192, 8192, 256)["saved"] == pytest.approx(1 - 512 / 768)
    assert paired["shared bytes per CTA per slot"] == gemm_2cta.smem_bytes(256, 1) - 1024 - 256


def test_the_drawings_draw():
    import matplotlib
    matplotlib.use("Agg")
    assert len(gemm_2cta.draw_layout(256).axes) == 3
    assert len(gemm_2cta.draw_savings().axes) == 2


# The kernel plus one patch; the verdict: a rule id, "HANG" with a pattern the message must hold, or COMPILE ERROR.
PEER_WAITS = r"threads? \(thread \d+ \(warp \d\) of block rank 1(, \.\.\.)?\) waits? for phase parity \d of `\w+\[\d\]` \(shared 0x[0-9a-f]+\) of block rank 1"
MISTAKES = {
    "slot released by a commit without .multicast (the peer's stage never frees)": (
        "        pair::commit_both(&empty[s]);    // slot s is free in BOTH CTAs once these MMAs completed",
        "        pair::commit_one(&empty[s]);     // slot s is free in BOTH CTAs once these MMAs completed",
        ("HANG", PEER_WAITS)),
    "accumulator released by a commit without .multicast": (
        "      pair::commit_both(&acc_full[buf]);", "      pair::commit_one(&acc_full[buf]);",
        ("HANG", PEER_WAITS)),
    "the peer's loads arrive on its own barrier, not the leader's": (
        "        const unsigned bar = cluster::map(&full[s], lead);",
        "        const unsigned bar = cluster::map(&full[s], rank);",
        ("HANG", r"thread 32 \(warp 1\) of block rank 0(, \.\.\.)?\) waits? for .* tx-count 32768 bytes outstanding "
                 r"\(expected 65536")),                           # the issuer: the peer's half never counted
    "the loads signal the leader's barrier without .cta_group::2": (
        'mbarrier::complete_tx::bytes.cta_group::2"', 'mbarrier::complete_tx::bytes"', "tma-barrier-cta"),
    "the pair's alloc done by one side only": (
        "  if (warp == 1) {                       // RULE: one whole warp in EACH CTA",
        "  if (warp == 1 && leader) {             // RULE: one whole warp in EACH CTA",
        ("HANG", r"wait in tcgen05\.alloc\.cta_group::2 of block rank 0 for a warp of the peer")),
    "the MMA issued from the non-leader": (
        "  } else if (warp == 1 && lane == 0 && leader) {", "  } else if (warp == 1 && lane == 0 && !leader) {",
        ("HANG", r"thread 32 \(warp 1\) of block rank 1(, \.\.\.)?\) waits? for phase parity 0 of `\w+\[\d\]`")),
    "the leader announces only its own bytes": (
        "tma::arrive_expect_tx(&full[s], 2 * (A_BYTES + B_BYTES));", "tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);",
        "async-overwrite-race"),
    "a CTA barrier at the end instead of the cluster barrier": (
        "  tc::fence_before();\n  cluster::sync();\n  if (warp == 1) {",
        "  tc::fence_before();\n  __syncthreads();\n  if (warp == 1) {", "dsmem-after-exit"),
    "dealloc with .cta_group::1 in a pair kernel": (
        'asm volatile("tcgen05.dealloc.cta_group::2.sync', 'asm volatile("tcgen05.dealloc.cta_group::1.sync',
        ("COMPILE ERROR", "single CTA(.cta_group::1) and CTA pair granularity(.cta_group::2)")),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_gets_the_verdict_naming_it(name):
    old, new, verdict = MISTAKES[name]
    # one pair, 2 tiles (both accumulator buffers), a 2-slot ring that wraps
    if isinstance(verdict, tuple) and verdict[0] == "COMPILE ERROR":
        with pytest.raises(build.CompileError, match=verdict[1].replace("(", r"\(").replace(")", r"\)")):
            gemm_2cta.build_patched(old, new, stages=2)
        return
    b = gemm_2cta.build_patched(old, new, stages=2)
    if isinstance(verdict, tuple):
        with pytest.raises(model.Hang) as e:
            gemm_2cta.run_on_model(512, 256, 512, stages=2, b=b)
        assert re.search(verdict[1], str(e.value)), str(e.value)
    else:
        with pytest.raises(model.Violation) as e:
            gemm_2cta.run_on_model(512, 256, 512, stages=2, b=b)
        assert e.value.rule == verdict, str(e.value)
        assert "gemm_2cta.cu:" in str(e.value)


def test_the_peer_epilogue_without_its_fence_lets_the_leaders_mma_overwrite_the_peers_tensor_memory():
    """Three tiles for one pair: buffer 0 is reused, so the leader's MMA overwrites columns the PEER's epilogue
    read; without that epilogue's tcgen05.fence::before_thread_sync the reads are not ordered before it."""
    b = gemm_2cta.build_patched(
        "      tc::fence_before();                // our reads of buf, ordered before the issuer's next MMAs\n",
        "      if (leader) tc::fence_before();    // our reads of buf, ordered before the issuer's next MMAs\n",
        stages=2)
    with pytest.raises(model.Violation, match="overwrites columns 0..255 of block rank 1") as e:
        gemm_2cta.run_on_model(768, 256, 128, stages=2, b=b)
    assert e.value.rule == "tcgen05-mma-overwrite"
    assert gemm_2cta.run_on_model(768, 256, 128, stages=2, b=gemm_2cta.build_kernel(stages=2))["ok"]


def test_the_correct_kernel_passes_at_the_shape_the_mistakes_run():
    r = gemm_2cta.run_on_model(512, 256, 512, stages=2, b=gemm_2cta.build_kernel(stages=2))
    assert r["ok"]


def test_written_another_way_each_producer_announces_its_own_bytes_on_the_leaders_barrier():
    """full[s] counts 2 arrivals, and each CTA's producer arrives with expect_tx of ITS bytes on the leader's
    barrier (a remote arrive.expect_tx) instead of the leader announcing both: also correct."""
    b = gemm_2cta.build_patched(
        "        if (leader) tma::arrive_expect_tx(&full[s], 2 * (A_BYTES + B_BYTES));\n"
        "        const unsigned bar = cluster::map(&full[s], lead);\n",
        "        const unsigned bar = cluster::map(&full[s], lead);\n"
        '        asm volatile("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%0], %1;" :: "r"(bar), "r"(A_BYTES + B_BYTES) : "memory");\n',
        ("      tc::mbar_init(&full[s], 1);        // the leader's arrive.expect_tx (+ both CTAs' bytes)",
         "      tc::mbar_init(&full[s], 2);        // each producer's arrive.expect_tx (+ its bytes)"),
        stages=2)
    r = gemm_2cta.run_on_model(512, 256, 512, stages=2, b=b)
    assert r["ok"]


def test_a_patch_that_does_not_match_is_refused():
    with pytest.raises(ValueError, match="exactly once"):
        gemm_2cta.build_patched("no such text in the kernel", "")


def test_sizes_the_kernel_cannot_tile_are_refused():
    with pytest.raises(ValueError, match="multiples"):
        gemm_2cta.run_on_model(128, 256, 256)
