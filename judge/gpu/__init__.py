"""What GPU is here, and a way for a cell or test to need a Hopper one.

    from judge import gpu
    print(gpu.summary())          # one line for the top of a notebook
    if gpu.require("sm_90", "the TMA copy"):   # prints SKIP with the reason when it cannot run
        ...run it...
    gpu.need("sm_90")             # in pytest: skips the test with the reason

A machine counts as having a GPU when CuPy can see a device. JUDGE_NO_GPU=1 makes
the judge act as if none were there (what a learner without a GPU sees).
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from functools import lru_cache

from judge import config


@dataclass(frozen=True)
class GPUInfo:
    name: str
    cc: tuple[int, int]
    sms: int
    l2_bytes: int
    smem_per_block_optin: int
    smem_per_sm: int
    memory_bytes: int
    driver: str       # CUDA version the driver supports, e.g. "13.0"
    clock_khz: int

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def line(self) -> str:
        return (f"{self.name} ({self.sm}, {self.sms} SMs, {self.l2_bytes >> 20} MiB L2, "
                f"{self.smem_per_block_optin >> 10} KiB shared memory per block), driver CUDA {self.driver}")


@lru_cache(None)
def _probe() -> tuple[GPUInfo | None, str]:
    if config.gpu_disabled():
        return None, "JUDGE_NO_GPU is set"
    if sys.platform == "linux" and not (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/dxg")):
        # no GPU device node (/dev/nvidiaN; /dev/dxg under WSL): no device, and no need to import CuPy
        # (over a second) to learn it
        return None, "no CUDA driver or device was found"
    try:
        from cupy.cuda import runtime
    except Exception as e:  # noqa: BLE001 - any import failure means no GPU for us
        return None, f"CuPy is not importable ({e})"
    try:
        n = runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver library, no device: the same for us
        return None, "no CUDA driver or device was found"
    if n == 0:
        return None, "no CUDA device was found"
    p = runtime.getDeviceProperties(0)
    v = runtime.driverGetVersion()
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    info = GPUInfo(
        name=name, cc=(p["major"], p["minor"]), sms=p["multiProcessorCount"],
        l2_bytes=p["l2CacheSize"], smem_per_block_optin=p["sharedMemPerBlockOptin"],
        smem_per_sm=p["sharedMemPerMultiprocessor"], memory_bytes=p["totalGlobalMem"],
        driver=f"{v // 1000}.{(v % 1000) // 10}", clock_khz=p.get("clockRate", 0))
    return info, ""


def info() -> GPUInfo | None:
    return _probe()[0]


def available() -> bool:
    return info() is not None


def no_gpu_reason() -> str:
    i, why = _probe()
    return "" if i else why


def _cc_of(sm: str) -> tuple[int, int]:
    digits = sm.lower().removeprefix("sm_").rstrip("a")
    return int(digits[:-1]), int(digits[-1])


def meets(sm: str = "sm_90") -> bool:
    """True if a GPU of at least this compute capability is here (sm_90a needs exactly 9.0)."""
    i = info()
    if i is None:
        return False
    want = _cc_of(sm)
    if sm.endswith("a"):          # arch-specific targets run only on that very architecture
        return i.cc == want
    return i.cc >= want


def why_not(sm: str = "sm_90") -> str:
    i = info()
    if i is None:
        return f"needs an {sm} GPU; {no_gpu_reason()}"
    return f"needs an {sm} GPU; this one is {i.name} ({i.sm})"


def summary() -> str:
    """One line for the top of a notebook: what runs here and where figures come from."""
    i = info()
    if i is not None:
        ok = "Hopper kernels run here" if i.cc == (9, 0) else "Hopper-only kernels will be SKIPPED"
        return f"GPU: {i.line()}. {ok}."
    # Where the shown figures come from is the record's to say (judge.record, under each figure):
    # this wing knows the GPU alone.
    return (f"No GPU here ({no_gpu_reason()}): kernels are compiled for their targets and their SASS "
            f"shown; nothing is run. Figures come from the H200 record, each with its note.")


def require(sm: str = "sm_90", what: str = "this cell", checked: str = "") -> bool:
    """For notebook cells: True if it can run; else print SKIP with the reason and return False."""
    if meets(sm):
        return True
    msg = f"SKIP {what}: {why_not(sm)}."
    if checked:
        msg += f" Checked here instead: {checked}."
    print(msg)
    return False


def need(sm: str = "sm_90") -> None:
    """For pytest: skip the calling test with the reason when no such GPU is here."""
    if not meets(sm):
        import pytest
        pytest.skip(why_not(sm))
