"""Chapter 5's warp-specialized tcgen05 GEMM (chapters/ch05_blackwell/gemm_ws.cu) on the CPU model, and its mistakes.

Run: python -m pytest tests/chapters/ch05_blackwell/test_gemm_ws.py -q

No GPU is used. The kernel is compiled for sm_100a; its SASS must show the Blackwell features; its own PTX
runs on judge.model with persistent CTAs (several tiles each, both accumulator buffers in use, the ring
wrapping), on fresh random bf16 inputs with C poisoned with NaN, and C must match the float64 product.
Each mistake is the kernel plus one patch (gemm_ws.build_patched), and the model must name the rule it breaks.
"""

import numpy as np
import pytest

from judge import model

from chapters.ch05_blackwell import gemm_ws  # noqa: E402


@pytest.fixture(scope="module")
def kernel():
    return gemm_ws.build_kernel()


def test_sass_shows_tcgen05_mma_tma_loads_commits_and_tensor_memory_loads(kernel):
    counts = gemm_ws.key_counts(kernel)
    assert kernel.target == "sm_100a"
    for feature in ("tcgen05", "tma.load", "tcgen05.commit", "tmem.ld", "tmem.alloc", "mbarrier.wait"):
        assert counts[feature] > 0, (feature, counts)
    assert counts["wgmma"] == 0          # no Hopper MMA in a Blackwell kernel


@pytest.mark.parametrize("M,N,K,ctas,stages,bn", [
    (256, 256, 256, 2, 4, 128),          # 4 tiles over 2 CTAs: 2 tiles each, both accumulator buffers
    (256, 256, 256, 1, 2, 128),          # 4 tiles on 1 CTA: each buffer used twice; the 2-slot ring wraps 8 times
    (256, 384, 128, 4, 3, 128),          # 6 tiles over 4 CTAs: uneven (2, 2, 1, 1)
    (128, 256, 192, 1, 2, 64),           # BN = 64: 2 x 64 = 128 TMEM columns; K = 3 slots
])
def test_runs_on_the_model_and_matches_float64(M, N, K, ctas, stages, bn):
    b = gemm_ws.build_kernel(bn=bn, stages=stages)
    r = gemm_ws.run_on_model(M, N, K, ctas=ctas, stages=stages, bn=bn, b=b)
    assert not np.isnan(r["c"]).any()
    assert r["max_abs_err"] <= r["tol"], (r["max_abs_err"], r["tol"])
    rep = r["report"]
    tiles = (M // 128) * (N // bn)
    assert rep.counts["tcgen05.mma"] == tiles * (K // 64) * 4            # 4 MMAs (K = 16 each) per 64-wide slot
    assert rep.counts["tma.load"] == 2 * tiles * (K // 64)
    assert rep.counts["tcgen05.commit"] == tiles * (K // 64) + tiles     # one per slot, one per tile
    # every byte of C came out of tensor memory through tcgen05.ld
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"] == M * N * 4
    assert rep.counts["tcgen05.alloc"] == rep.counts["tcgen05.dealloc"] == ctas
    assert rep.seconds < 5.0


def test_the_default_run_is_checked_on_fresh_inputs_each_time(kernel):
    r1 = gemm_ws.run_on_model(256, 256, 256, ctas=2, b=kernel)
    r2 = gemm_ws.run_on_model(256, 256, 256, ctas=2, b=kernel)
    assert r1["ok"] and r2["ok"]
    assert not np.array_equal(r1["ref"], r2["ref"])


def test_the_mmas_of_the_next_tile_are_issued_before_the_epilogue_of_this_one_ends(kernel):
    """The double buffer at work, in the model's timeline (issue order, not hardware time): tile i + 1's first
    tcgen05.mma (into the other buffer) comes before tile i's last tcgen05.ld, for every tile of a 4-tile CTA."""
    rep = gemm_ws.run_on_model(256, 256, 256, ctas=1, b=kernel)["report"]
    order = [(n, e["kind"], e["col"]) for n, e in enumerate(rep.timeline) if e["kind"] in ("tcgen05.mma", "tcgen05.ld")]
    mmas = [(n, col) for n, kind, col in order if kind == "tcgen05.mma"]
    lds = [(n, col) for n, kind, col in order if kind == "tcgen05.ld"]
    per_tile_mma, per_tile_ld = 256 // 64 * 4, 128 // 8 * 4           # 4 slots x 4 MMAs; 16 loads x 4 warps
    assert len(mmas) == 4 * per_tile_mma and len(lds) == 4 * per_tile_ld
    base = min(col for _, col in mmas)
    for tile in range(4):                                              # tile t uses buffer t % 2
        assert {col - base for _, col in mmas[tile * per_tile_mma:(tile + 1) * per_tile_mma]} == {128 * (tile % 2)}
        assert {(col - base) // 128 for _, col in lds[tile * per_tile_ld:(tile + 1) * per_tile_ld]} == {tile % 2}
    for tile in range(1, 4):
        first_mma_next = mmas[tile * per_tile_mma][0]
        last_ld_prev = lds[tile * per_tile_ld - 1][0]
        assert first_mma_next < last_ld_prev, f"tile {tile}'s MMAs waited for tile {tile - 1}'s epilogue"


def test_a_later_commit_covers_mmas_an_earlier_commit_tracked(kernel):
    """PTX ISA 9.7.16.12.1: tcgen05.commit tracks ALL prior tcgen05 operations of the thread. The issuer
    commits each slot to its empty barrier, then the tile to acc_full; the epilogue observes only acc_full,
    and must be allowed to read every MMA of the tile (the model once demanded the per-slot barrier)."""
    r = gemm_ws.run_on_model(128, 128, 256, ctas=1, b=kernel)    # 4 slots, 4 per-slot commits, then acc_full
    assert r["ok"]
    assert r["report"].counts["tcgen05.commit"] == 5


def test_the_first_fence_after_a_read_is_what_orders_it_not_the_last(kernel):
    """The issuer overwrites buffer 0 (tile 2) after observing acc_empty[0], while the epilogue has since read
    buffer 1 and fenced again (its later fence::before_thread_sync is not yet known to the issuer). The read of
    buffer 0 is ordered by the fence that followed it: the model must accept this (it once looked only at the
    reader's latest fence), and still reject an epilogue with no fence at all (MISTAKES below)."""
    b = gemm_ws.build_kernel(stages=2)           # a 2-slot ring lets the epilogue run a whole tile ahead
    r = gemm_ws.run_on_model(256, 256, 256, ctas=1, stages=2, b=b)
    assert r["ok"]


# The kernel plus one patch; the verdict the model must give (rule id, or "HANG").
MISTAKES = {
    "epilogue reads before acc_full": (
        "      tma::wait(&acc_full[acc], acc_phase);\n", "\n", "tcgen05-ld-in-flight"),
    "epilogue waits a fixed parity": (
        "tma::wait(&acc_full[acc], acc_phase);", "tma::wait(&acc_full[acc], 0);", "tcgen05-ld-in-flight"),
    "no fence::after_thread_sync after acc_full": (
        "      tc::fence_after();                 // RULE: after the wait, before the first tcgen05.ld\n", "\n",
        "tcgen05-fence-after"),
    "issuer overwrites a buffer still being read": (
        "      tma::wait(&acc_empty[acc], acc_phase ^ 1);\n", "\n", "tcgen05-mma-overwrite"),
    "no fence::before_thread_sync before acc_empty": (
        "      tc::fence_before();                // our reads of acc, ordered before the issuer's next MMAs\n", "\n",
        "tcgen05-mma-overwrite"),
    "one accumulator for both buffers": (
        "const unsigned d = tmem + acc * BN;", "const unsigned d = tmem;", "tcgen05-ld-in-flight"),
    "slot released by a plain arrive, not by commit": (
        "        tc::commit(&empty[s]);\n", "        tma::arrive(&empty[s]);\n", "async-read-overwritten"),
    "expect_tx announces A only": (
        "tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);", "tma::arrive_expect_tx(&full[s], A_BYTES);",
        "async-overwrite-race"),
    "epilogue warp reads another warp's lane quarter": (
        "const int quarter = warp % 4;", "const int quarter = warp - 2;", "tcgen05-lane-quarter"),
    "producer refills a slot without waiting for empty": (
        "        tma::wait(&empty[s], ((it / STAGES) & 1) ^ 1);\n", "\n", "HANG"),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_gets_the_verdict_naming_its_rule(name):
    old, new, verdict = MISTAKES[name]
    b = gemm_ws.build_patched(old, new)
    # one CTA, 4 tiles: each accumulator buffer is reused, the 4-slot ring wraps
    if verdict == "HANG":
        with pytest.raises(model.Hang):
            gemm_ws.run_on_model(256, 256, 256, ctas=1, b=b)
    else:
        with pytest.raises(model.Violation) as e:
            gemm_ws.run_on_model(256, 256, 256, ctas=1, b=b)
        assert e.value.rule == verdict, str(e.value)
        assert "gemm_ws.cu:" in str(e.value) or verdict == "async-overwrite-race"   # that one names the bytes


def test_a_patch_that_does_not_match_is_refused():
    with pytest.raises(ValueError, match="exactly once"):
        gemm_ws.build_patched("no such text in the kernel", "")


def test_sizes_the_kernel_cannot_tile_are_refused():
    with pytest.raises(ValueError, match="multiples"):
        gemm_ws.run_on_model(200, 256, 256)
