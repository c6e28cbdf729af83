"""Clock, power and energy while a kernel runs: what a time alone cannot say.

    from judge.gpu import power
    r = power.sustained(launch, [(a, b, c), (a2, b2, c)], seconds=1.5, work=2 * n**3)
    r["SM MHz"], r["W"], r["J per run"], r["cycles per run"], r["pJ per unit"]

A Hopper GPU runs its SMs at the clock its power budget allows. At full tensor-core load an H200
reaches its power cap (NVML's "SW power cap" clock reason) and lowers the SM clock below boost, so
the time of a kernel is (cycles it needs) / (the clock it is given), and two kernels that need the
same cycles can differ in time because one burns more energy per cycle than the other. sustained()
separates the two: it runs a launch back to back for `seconds` (long enough for the power limiter
to settle: NVML's power reading is an average over a window of about a second) while a thread reads
the SM clock every few milliseconds, and reads the board's energy counter before and after.

Returns {"runs", "ms per run", "SM MHz" (mean of the samples taken while the runs ran), "SM MHz min",
"SM MHz max", "W" (energy / wall time), "J per run", "cycles per run" (ms per run x SM MHz),
"pJ per unit" (J per run / work, when work is given: per MAC, per byte ...), "reasons" (the clock
event reasons NVML reported during the runs, by name), "samples"}.

NVML is read through ctypes from the driver's libnvidia-ml.so.1 (it comes with every NVIDIA driver;
no Python package needed). Without a GPU or a driver, reader() raises Unavailable, saying why.
"""
from __future__ import annotations

import ctypes
import threading
import time

#: NVML's clock event reasons (nvml.h, nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*; nvidia-smi's
#: clocks_event_reasons.active, formerly clocks_throttle_reasons.active, prints the same mask): bit -> name
REASONS = {0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap",
           0x8: "HW slowdown", 0x10: "sync boost", 0x20: "SW thermal slowdown",
           0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown", 0x100: "display clock setting"}
_NVML_CLOCK_SM = 1


class Unavailable(RuntimeError):
    """NVML cannot be read here (no driver, no GPU, or a call failed): the message says which."""


def reason_names(mask) -> list[str]:
    """NVML's clock event reason mask ('0x0000000000000004' as nvidia-smi prints it, or an int) -> its names,
    e.g. ['SW power cap']; [] when nothing slows the clock."""
    m = int(mask, 16) if isinstance(mask, str) else int(mask)
    rest = m & ~sum(REASONS)
    return [name for bit, name in REASONS.items() if m & bit] + ([f"unknown bits {rest:#x}"] if rest else [])


class Reader:
    """One GPU's NVML handle: sm_mhz(), energy_mj(), reasons()."""

    def __init__(self, lib, handle):
        self._lib, self._h = lib, handle

    def _call(self, fn: str, *args) -> None:
        rc = getattr(self._lib, fn)(self._h, *args)
        if rc != 0:
            raise Unavailable(f"NVML {fn} returned {rc}")

    def sm_mhz(self) -> int:
        v = ctypes.c_uint()
        self._call("nvmlDeviceGetClockInfo", _NVML_CLOCK_SM, ctypes.byref(v))
        return int(v.value)

    def energy_mj(self) -> int:
        """The board's energy counter since the driver loaded, in millijoules."""
        v = ctypes.c_ulonglong()
        self._call("nvmlDeviceGetTotalEnergyConsumption", ctypes.byref(v))
        return int(v.value)

    def reasons(self) -> int:
        v = ctypes.c_ulonglong()
        fn = ("nvmlDeviceGetCurrentClocksEventReasons" if hasattr(self._lib, "nvmlDeviceGetCurrentClocksEventReasons")
              else "nvmlDeviceGetCurrentClocksThrottleReasons")
        self._call(fn, ctypes.byref(v))
        return int(v.value)


def reader(pci_bus_id: str | None = None) -> Reader:
    """The NVML reader of the GPU CuPy uses now (found by its PCI bus id), or of pci_bus_id."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        raise Unavailable(f"the NVIDIA driver's NVML library is not here ({e})") from None
    if lib.nvmlInit_v2() != 0:
        raise Unavailable("nvmlInit failed: no NVIDIA GPU or driver")
    if pci_bus_id is None:
        import cupy
        pci_bus_id = cupy.cuda.Device().pci_bus_id
    h = ctypes.c_void_p()
    rc = lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(h))
    if rc != 0:
        raise Unavailable(f"NVML has no GPU at PCI bus id {pci_bus_id} (code {rc})")
    return Reader(lib, h)


class Sampler:
    """A thread reading the SM clock and the clock event reasons every `period` seconds between
    start() and stop(); samples: [(time, MHz, reasons mask)]."""

    def __init__(self, rd: Reader, period: float = 0.005):
        self.rd, self.period, self.samples = rd, period, []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self.rd.sm_mhz(), self.rd.reasons()))
            self._stop.wait(self.period)

    def start(self) -> "Sampler":
        self._t.start()
        return self

    def stop(self) -> list:
        self._stop.set()
        self._t.join()
        return self.samples


def summarize(runs: int, wall_s: float, gpu_ms: float, energy_j: float, samples: list,
              work: float = 0.0) -> dict:
    """The figures of one sustained run from what was read: `runs` launches over `wall_s` seconds of
    host time, `gpu_ms` between the first and last event, `energy_j` from the counter, the clock
    samples [(t, MHz, mask)] taken meanwhile."""
    if runs <= 0 or not samples:
        raise ValueError("a sustained run needs at least one launch and one clock sample")
    mhz = [s[1] for s in samples]
    mask = 0
    for s in samples:
        mask |= s[2]
    ms = gpu_ms / runs
    mean = sum(mhz) / len(mhz)
    out = {"runs": runs, "ms per run": ms, "SM MHz": mean, "SM MHz min": min(mhz), "SM MHz max": max(mhz),
           "W": energy_j / wall_s, "J per run": energy_j / runs, "cycles per run": ms * 1e-3 * mean * 1e6,
           "reasons": reason_names(mask), "samples": len(samples)}
    if work:
        out["pJ per unit"] = energy_j / runs / work * 1e12
    return out


def sustained(launch, inputs, *, seconds: float = 1.5, work: float = 0.0, rd: Reader | None = None,
              settle: float = 0.5) -> dict:
    """Run launch(*inputs[i % len(inputs)]) back to back for about `seconds` after `settle` seconds of
    the same (power and clocks settle); the figures of summarize(). No L2 flush between runs: this is
    the steady state a long training or inference loop sees, not judge.gpu.timing's protocol."""
    import cupy
    rd = rd or reader()
    sets = list(inputs)
    stream = cupy.cuda.get_current_stream()
    for i in range(3):                 # warm-up: a first launch may compile or load a module, which must not
        launch(*sets[i % len(sets)])   # count in the estimate of one run's time below
    stream.synchronize()
    # how long is one run? (the power limiter settles meanwhile)
    t = time.perf_counter()
    n = 0
    while time.perf_counter() - t < settle or n < 3:
        launch(*sets[n % len(sets)])
        n += 1
        if n % 8 == 0:
            stream.synchronize()
    stream.synchronize()
    per = (time.perf_counter() - t) / n
    runs = max(3, int(seconds / per))
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    sampler = Sampler(rd)
    e0 = rd.energy_mj()
    t0 = time.perf_counter()
    sampler.start()
    start.record()
    for i in range(runs):
        launch(*sets[i % len(sets)])
    stop.record()
    stop.synchronize()
    t1 = time.perf_counter()
    samples = sampler.stop()
    e1 = rd.energy_mj()
    inside = [s for s in samples if t0 <= s[0] <= t1] or samples
    if t1 - t0 < seconds / 2:
        raise RuntimeError(f"the runs took {t1 - t0:.3f} s of the {seconds} s asked: the estimate of one run "
                           f"({per * 1e3:.3f} ms) was wrong, and so would be the clock and power of so short a window")
    return summarize(runs, t1 - t0, cupy.cuda.get_elapsed_time(start, stop), (e1 - e0) / 1e3, inside, work)
