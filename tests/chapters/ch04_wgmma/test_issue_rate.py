"""Chapter 4's issue-rate probe (chapters/ch04_wgmma/wgmma_issue_rate.cu, host code issue_rate.py): it computes
what it times, on the CPU model, and the chapter's sentence about rung 9 is printed only when the figures
support it. Run: pytest tests/chapters/ch04_wgmma/test_issue_rate.py (no GPU needed)."""

import pytest

from judge.model.errors import Violation

from chapters.ch04_wgmma import issue_rate  # noqa: E402

pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("config_", [(1, 128, 2, 1), (2, 64, 1, 0), (1, 256, 1, 1)],
                         ids=["one warpgroup, two m64n128 chains", "two warpgroups, wait 0", "m64n256"])
def test_the_probe_computes_a_times_b_from_the_bytes_it_copied(config_):
    r = issue_rate.model_check(*config_)
    assert r["ok"], r
    assert r["want"] != 0.0


def test_the_probe_without_its_proxy_fence_is_a_violation_on_the_model():
    # generic stores into shared memory, then wgmma reads it through the async proxy: fence.proxy.async needed
    with pytest.raises(Violation, match="proxy-fence"):
        issue_rate.model_check(1, 64, 1, 1, patch=("  tma::fence_proxy_async();\n", ""))


def test_a_probe_whose_b_descriptor_names_the_wrong_swizzle_sums_to_something_else():
    r = issue_rate.model_check(1, 64, 1, 1, patch=("wg::desc_kmajor<128>(sB + k * 32)", "wg::desc_kmajor<64>(sB + k * 32)"))
    assert not r["ok"], r


def _rows(one=0.999, zero=0.88):
    return [{"warpgroups": 1, "wgmma": "m64n256k16", "chains": 1, "wait_group": 1, "of peak": one},
            {"warpgroups": 1, "wgmma": "m64n128k16", "chains": 2, "wait_group": 1, "of peak": one},
            {"warpgroups": 1, "wgmma": "m64n256k16", "chains": 1, "wait_group": 0, "of peak": zero},
            {"warpgroups": 1, "wgmma": "m64n64k16", "chains": 4, "wait_group": 1, "of peak": 0.37}]


COUNTERS = {"ping-pong": {"TMA load bytes": 2.15e9, "tensor pipe %": 83.7, "L2 bytes": 1.84e9, "L2 hit %": 66.5,
                          "DRAM bytes": 3.32e8, "duration ns (profiled, not a timing)": 207392.0,
                          "SM clock Hz (while profiled)": 1.54e9},
            "TMA store + L2 order": {"TMA load bytes": 1.61e9, "tensor pipe %": 94.2, "L2 bytes": 1.19e9,
                                     "L2 hit %": 79.0, "DRAM bytes": 1.76e8}}


def _fed(of_peak=0.999, feed=58.3):
    return [{"warpgroups": 1, "wgmma": "m64n128k16", "chains": 2, "feed depth": d, "of peak": p, "feed bytes per cycle": f,
             "feed outlasted the loop": True} for d, p, f in ((0, 0.999, 0.0), (2, of_peak, feed - 7), (4, of_peak, feed))]


def test_rung_9_is_said_not_to_be_held_by_its_issue_when_one_warpgroup_reaches_the_peak():
    text = issue_rate.claim_text(_rows(), COUNTERS)
    assert "99.9%" in text and "1.34x" in text and "84 %" in text and "88.0%" in text
    assert "1.55x the bytes at a 66 % hit rate (rung 8: 79 %)" in text and "DRAM 1.89x" in text
    assert "shared memory's bandwidth" not in text          # no feed measured: nothing said of it


def test_a_feed_faster_than_rung_9s_ring_that_leaves_the_peak_clears_shared_memory():
    assert 50 < issue_rate.tma_bytes_per_cycle(COUNTERS["ping-pong"]) < 52          # 2.15 GB in 207 us at 1.54 GHz
    text = issue_rate.claim_text(_rows(), COUNTERS, _fed())
    assert "Nor is shared memory's bandwidth: with TMA writing 58 bytes per cycle" in text and "brought 51" in text
    # the tensor cores slowed by the feed, or a feed slower than the ring's: the sentence is not shown
    assert issue_rate.claim_text(_rows(), COUNTERS, _fed(of_peak=0.9)) is None
    assert issue_rate.claim_text(_rows(), COUNTERS, _fed(feed=40.0)) is None


def test_the_fed_probe_computes_a_times_b_while_its_bulk_copies_land_on_the_model():
    r = issue_rate.model_check_fed(1, 128, 2, 1)
    assert r["ok"] and r["want"] != 0.0, r


def test_a_feed_that_expects_half_its_bytes_hangs_on_the_model():
    # each copy brings FEED_CHUNK bytes; a barrier told to expect half sees its tx-count go negative and the
    # feeder's next wait for that slot never completes
    from judge.model.errors import Hang
    with pytest.raises(Hang, match="tx-count"):
        issue_rate.model_check_fed(1, 64, 1, 1, patch=("tma::arrive_expect_tx(&landed[s], FEED_CHUNK);",
                                                       "tma::arrive_expect_tx(&landed[s], FEED_CHUNK / 2);"))


def test_nothing_is_said_when_one_warpgroup_falls_short_of_the_peak():
    assert issue_rate.claim_text(_rows(one=0.8), COUNTERS) is None


def test_nothing_is_said_when_the_counters_contradict_the_cause():
    same_bytes = {**COUNTERS, "ping-pong": {"TMA load bytes": 1.61e9, "tensor pipe %": 83.7}}
    assert issue_rate.claim_text(_rows(), same_bytes) is None
    assert issue_rate.claim_text(None, COUNTERS) is None


def test_the_feed_picture_is_shown_once():
    # a pyplot figure shown with display() is shown again when the cell ends: chapter 4 stored it twice
    import matplotlib.pyplot as plt
    from judge import record
    rec = record.figures("ch04.issue_rate")
    if not rec or not rec.get("fed"):
        pytest.skip("ch04.issue_rate has no fed rows in the record yet")
    before = plt.get_fignums()
    fig = issue_rate.draw_fed(rec["fed"])
    assert len(fig.axes) == 2 and plt.get_fignums() == before
