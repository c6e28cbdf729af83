"""Chapter 4 at the power cap (chapters/04_wgmma/clocks.py): speed is cycles times clock, each claim is stated
only when its own test holds on the figures, and the record's figures (ch04.clocks, ch05.fp8_clocks) support
what the notebooks print.

Run: python -m pytest tests/chapters/test_ch04_clocks.py -q       (no GPU)
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import matplotlib
import pytest

from judge import record

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "chapters" / "04_wgmma"))
import clocks  # noqa: E402
import ladder  # noqa: E402

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
