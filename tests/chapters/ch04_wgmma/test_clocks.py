"""Chapter 4 at the power cap (chapters/ch04_wgmma/clocks.py): speed is cycles times clock, each claim is stated
only when its own test holds on the figures, and the record's figures (ch04.clocks, ch05.fp8_clocks) support
what the notebooks print.

Run: python -m pytest tests/chapters/ch04_wgmma/test_clocks.py -q       (no GPU)
"""
from __future__ import annotations

import copy
from pathlib import Path

import matplotlib
import pytest

from judge import record

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[3]
from chapters.ch04_wgmma import clocks  # noqa: E402
from chapters.ch04_wgmma import ladder  # noqa: E402

R8, PP, NC = ladder.BEST, "ping-pong", ladder.BEST_WITHOUT_CLUSTER


def run(n, kernel, ms, mhz, reasons=("SW power cap",), ok=True):
    """One run row as judge.gpu.power.sustained returns it (cycles = ms x MHz), for a kernel at n^3."""
    return {"n": n, "kernel": kernel, "ok": ok, "rel_err": 1e-3, "runs": 500, "ms per run": ms, "SM MHz": mhz,
            "SM MHz min": mhz - 30, "SM MHz max": mhz + 30, "W": 700.0, "J per run": 0.7 * ms,
            "cycles per run": ms * 1e-3 * mhz * 1e6, "reasons": list(reasons), "samples": 200,
            "pJ per unit": 0.7 * ms / n ** 3 * 1e12}


def figs_like_the_h200():
    """Made-up figures shaped as the H200 behaves: rung 8 fewer cycles than cuBLAS but less clock; no cluster
    the same cycles at less clock; ping-pong more cycles and less clock."""
    runs = []
    for n, base_ms in ((4096, 0.21), (8192, 1.66)):
        for _ in range(2):
            runs += [run(n, clocks.CUBLAS, base_ms, 1450), run(n, R8, base_ms * 0.98 / 0.985 * 1.0, 1450 * 0.985),
                     run(n, PP, base_ms * 1.06 / 0.93, 1450 * 0.93), run(n, NC, base_ms * 0.98 / 0.95, 1450 * 0.95)]
    return {"runs": runs, "boost MHz": 1980, "seconds": 1.5}


COUNTERS = {"rows": [{"id": "ch04.tma_store_l2_order", "summary": {"L2 bytes": 1.17e9}},
                     {"id": "ch04.tma_store_l2_order_no_cluster", "summary": {"L2 bytes": 1.65e9}}]}


def test_speed_is_cycles_times_clock():
    for r in clocks.rows(figs_like_the_h200()):
        assert r["speed"] == pytest.approx(r["cycles"] * r["clock"], rel=1e-9)
        assert r["runs"] == 2 and r["ok"] and r["power cap"]
    base = [r for r in clocks.rows(figs_like_the_h200()) if r["kernel"] == clocks.CUBLAS]
    assert all((r["speed"], r["cycles"], r["clock"]) == (1.0, 1.0, 1.0) for r in base)


def test_every_claim_is_stated_on_figures_that_support_it():
    said = dict(clocks.claims(figs_like_the_h200(), COUNTERS))
    assert all(said.values()), said
    assert "2.0 % fewer cycles" in said["cycles, not clock"] and "1.5 % lower clock" in said["cycles, not clock"]
    assert "1.41x the L2 bytes" in said["L2 bytes cost clock"]


def test_a_claim_the_figures_contradict_is_not_stated():
    f = figs_like_the_h200()
    for r in f["runs"]:
        if r["kernel"] == R8:                  # rung 8 now given cuBLAS's clock: the clock is not the cause
            r["SM MHz"] = 1450
            r["cycles per run"] = r["ms per run"] * 1e-3 * 1450e6
    said = dict(clocks.claims(f, COUNTERS))
    assert said["cycles, not clock"] is None and said["power cap"]
    g = figs_like_the_h200()
    g["runs"][0]["reasons"] = []               # one run not at the cap
    assert dict(clocks.claims(g, COUNTERS))["power cap"] is None
    assert dict(clocks.claims(figs_like_the_h200(), None))["L2 bytes cost clock"] is None   # no counters, no L2 claim
    assert "does not support" in clocks.claims_markdown(f, COUNTERS)


def test_fp8_rows_are_judged_against_their_own_path():
    runs = []
    for k, ms, mhz in (("gemm_fp8.cu", 0.867, 1393), ("_scaled_mm, use_fast_accum=True", 0.866, 1336),
                       ("gemm_fp8.cu, PROMOTE=2", 0.951, 1379), ("_scaled_mm, default", 0.930, 1340)):
        runs.append(run(8192, k, ms, mhz))
    f = {"runs": runs, "boost MHz": 1980, "base": clocks.FP8_BASE}
    by = {r["kernel"]: r for r in clocks.rows(f)}
    assert by["gemm_fp8.cu"]["speed"] == pytest.approx(0.866 / 0.867)
    assert by["gemm_fp8.cu, PROMOTE=2"]["clock"] == pytest.approx(1379 / 1340)
    said = dict(clocks.claims(f))
    assert said["FP8: cycles, not clock"] and "higher clock" in said["FP8: cycles, not clock"]
    slower = copy.deepcopy(f)
    slower["runs"][0]["SM MHz"] = 1300         # the plain kernel now given less clock than the fast path
    assert dict(clocks.claims(slower))["FP8: cycles, not clock"] is None


def test_the_picture_has_three_bars_per_kernel_and_no_baseline():
    fig = clocks.draw(figs_like_the_h200())
    axes = fig.get_axes()
    assert len(axes) == 2
    assert len(axes[0].patches) == 3 * 3      # rung 8, ping-pong, no cluster; speed, cycles, clock
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["rung 8", "ping-pong", "rung 8, no cluster"]


@pytest.mark.parametrize("section,counters", [("ch04.clocks", "ch04.counters"), ("ch05.fp8_clocks", None)])
def test_the_record_supports_what_the_notebooks_print(section, counters):
    figs = record.figures(section)
    if figs is None:
        pytest.skip(f"{section} not in record/hopper.json")
    assert all(r["ok"] for r in figs["runs"]), "a GEMM run back to back gave a wrong C"
    assert all(r["samples"] > 20 for r in figs["runs"]), "too few clock samples to call a mean"
    for r in clocks.rows(figs):
        assert r["speed"] == pytest.approx(r["cycles"] * r["clock"], rel=0.02)
    said = dict(clocks.claims(figs, record.figures(counters) if counters else None))
    assert said["power cap"], said


def profiled(kid, mhz, l2_tbs, tensor, dram_tbs=1.0, dur_ns=1e6):
    """A counters row as the record keeps it: a GEMM profiled for dur_ns at mhz, moving l2_tbs TB/s through L2."""
    return {"id": kid, "summary": {"duration ns (profiled, not a timing)": dur_ns, "SM clock Hz (while profiled)": mhz * 1e6,
                                   "L2 bytes": l2_tbs * dur_ns * 1e3, "DRAM bytes": dram_tbs * dur_ns * 1e3,
                                   "tensor pipe % of elapsed": tensor}}


def test_the_clock_fit_recovers_a_known_slope_and_says_so():
    rng = __import__("numpy").random.default_rng(7)
    rows = []
    for i in range(20):                           # clock = 2000 - 40 per TB/s - 5 per tensor point, plus noise
        l2, t, d = rng.uniform(5, 10), rng.uniform(50, 95), rng.uniform(0.5, 2)
        rows.append(profiled(f"k{i}", 2000 - 40 * l2 - 5 * t + rng.normal(0, 3), l2, t, d))
    fit = clocks.clock_fit([{"rows": rows}])
    assert fit["kernels"] == 20 and fit["r2"] > 0.9
    assert fit["coef"]["L2 TB/s"] == pytest.approx(-40, abs=3)
    assert fit["coef"]["tensor % of elapsed"] == pytest.approx(-5, abs=0.5)
    said = clocks.fit_claim(fit)
    assert "40 MHz less clock" in said or "39 MHz less clock" in said or "41 MHz less clock" in said
    assert "5.0 MHz less" in said or "4.9 MHz less" in said or "5.1 MHz less" in said


def test_the_clock_fit_says_nothing_where_traffic_does_not_cost_clock():
    rng = __import__("numpy").random.default_rng(8)
    rows = [profiled(f"k{i}", 1500 + 30 * l2 + rng.normal(0, 3), l2, 80) for i, l2 in enumerate(rng.uniform(5, 10, 12))]
    assert clocks.fit_claim(clocks.clock_fit([{"rows": rows}])) is None          # traffic with MORE clock
    noisy = [profiled(f"k{i}", 1500 - 40 * l2 + rng.normal(0, 200), l2, 80) for i, l2 in enumerate(rng.uniform(5, 10, 12))]
    assert clocks.fit_claim(clocks.clock_fit([{"rows": noisy}])) is None         # R² too low to say
    assert clocks.clock_fit([{"rows": rows[:5]}]) is None                         # too few GEMMs to fit
    fig = clocks.draw_fit(clocks.clock_fit([{"rows": rows}]))
    assert len(fig.get_axes()[0].collections[0].get_offsets()) == 12


def test_ping_pong_is_said_to_read_more_l2_only_where_the_counters_show_it():
    more = {"rows": COUNTERS["rows"] + [{"id": "ch04.ping_pong", "summary": {"L2 bytes": 1.8e9}}]}
    assert "1.54x rung 8's L2 bytes" in dict(clocks.claims(figs_like_the_h200(), more))["ping-pong pays twice"]
    same = {"rows": COUNTERS["rows"] + [{"id": "ch04.ping_pong", "summary": {"L2 bytes": 1.2e9}}]}
    said = dict(clocks.claims(figs_like_the_h200(), same))["ping-pong pays twice"]
    assert said and "L2 bytes" not in said


def test_the_record_fit_supports_what_chapter_4_prints():
    fit = clocks.clock_fit()
    if fit is None:
        pytest.skip("no counters in record/hopper.json")
    assert clocks.fit_claim(fit), fit["coef"]
