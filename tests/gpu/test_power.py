"""Clock, power and energy while a kernel runs (judge.gpu.power): the arithmetic anywhere, NVML on a GPU."""
import sys

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


class _FakeReader:
    """NVML as sustained() reads it: a clock of 1500 MHz under the power cap, 700 W into the energy counter."""

    def __init__(self):
        import time
        self.t0 = time.perf_counter()

    def sm_mhz(self):
        return 1500

    def reasons(self):
        return 0x4

    def energy_mj(self):
        import time
        return int((time.perf_counter() - self.t0) * 700 * 1e3)


@pytest.fixture
def fake_cupy(monkeypatch):
    """Just enough of CuPy for sustained(): a stream, events timed by the host clock (the launches are host sleeps)."""
    import time
    import types
    ev = types.SimpleNamespace
    cuda = types.SimpleNamespace(
        get_current_stream=lambda: ev(synchronize=lambda: None),
        Event=lambda: _HostEvent(),
        get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)

    class _HostEvent:
        t = 0.0

        def record(self):
            self.t = time.perf_counter()

        def synchronize(self):
            pass
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))


def test_sustained_runs_for_the_time_asked_and_counts_cycles_at_the_clock_read(fake_cupy):
    import time
    r = power.sustained(lambda: time.sleep(0.002), [()], seconds=0.3, settle=0.05, rd=_FakeReader(), work=1e9)
    assert r["SM MHz"] == 1500 and r["reasons"] == ["SW power cap"]
    assert 0.002 <= r["ms per run"] * 1e-3 < 0.01, r     # a loaded CI machine oversleeps
    assert r["cycles per run"] == pytest.approx(r["ms per run"] * 1e-3 * 1500e6)
    assert r["W"] == pytest.approx(700, rel=0.05)
    assert 20 <= r["runs"] <= 160, r              # 0.3 s of runs of 2 ms or a little more each


def test_a_window_much_shorter_than_asked_is_refused(fake_cupy):
    import time
    calls = [0]

    def launch():                                  # slow while sustained() estimates, instant afterwards
        calls[0] += 1
        if calls[0] <= 10:                         # 3 warm-ups and the 50 ms of estimate
            time.sleep(0.01)
    with pytest.raises(RuntimeError, match="estimate of one run"):
        power.sustained(launch, [()], seconds=0.3, settle=0.05, rd=_FakeReader())
