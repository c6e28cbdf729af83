"""Clock, power and energy while a kernel runs (judge.gpu.power): the arithmetic anywhere, NVML on a GPU."""
import pytest

from judge import gpu
from judge.gpu import power


def test_cycles_are_time_times_the_clock_the_sm_was_given():
    # 100 runs in 0.25 s of host time, 200 ms between the events, 150 J; two clock samples
    r = power.summarize(100, 0.25, 200.0, 150.0, [(0.0, 1500, 0x4), (0.1, 1700, 0x0)], work=1e9)
    assert r["ms per run"] == pytest.approx(2.0)
    assert r["SM MHz"] == pytest.approx(1600.0)
    assert r["cycles per run"] == pytest.approx(2.0e-3 * 1600e6)
    assert r["W"] == pytest.approx(600.0)
    assert r["J per run"] == pytest.approx(1.5)
    assert r["pJ per unit"] == pytest.approx(1.5 / 1e9 * 1e12)
    assert r["reasons"] == ["SW power cap"]
    assert (r["SM MHz min"], r["SM MHz max"]) == (1500, 1700)


def test_a_run_with_nothing_measured_is_refused():
    with pytest.raises(ValueError):
        power.summarize(0, 1.0, 1.0, 1.0, [(0.0, 1500, 0)])
    with pytest.raises(ValueError):
        power.summarize(10, 1.0, 1.0, 1.0, [])


def test_clock_reasons_are_named_bit_by_bit():
    assert power.reason_names(0x4 | 0x40) == ["SW power cap", "HW thermal slowdown"]
    assert power.reason_names("0x0000000000000004") == ["SW power cap"]      # as nvidia-smi prints it
    assert power.reason_names(0) == []
    assert power.reason_names(0x1000) == ["unknown bits 0x1000"]


def test_without_a_driver_nvml_says_why():
    if gpu.info() is not None:
        pytest.skip("a GPU is here: the test below reads NVML instead")
    with pytest.raises(power.Unavailable, match="NVML|driver"):
        power.reader(pci_bus_id="0000:00:00.0")


def test_a_sustained_copy_reads_a_plausible_clock_and_power():
    gpu.need("sm_90")
    import cupy as cp
    x = cp.random.default_rng(5).standard_normal(1 << 26, dtype=cp.float32)
    y = cp.empty_like(x)
    r = power.sustained(lambda: cp.multiply(x, 2, out=y), [()], seconds=0.5, settle=0.2)
    assert 300 < r["SM MHz"] <= 2100, r          # H100/H200 boost: 1980 MHz
    assert 50 < r["W"] < 1000, r                 # an H200 SXM board: up to 700 W
    assert r["cycles per run"] == pytest.approx(r["ms per run"] * 1e-3 * r["SM MHz"] * 1e6)
    assert float(cp.abs(y - 2 * x).max()) == 0.0
