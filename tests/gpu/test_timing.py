"""The one timing protocol: medians over events with L2 flushed, and the ceilings it measures (GPU only)."""
import pytest

from judge import gpu
from judge.gpu import timing


def test_timing_arithmetic_without_a_gpu():
    t = timing.Timing(median_ms=2.0, p10_ms=1.9, p90_ms=2.2, runs=30, flops=2e12, bytes=8e9)
    assert t.tflops == pytest.approx(1000.0)
    assert t.gbps == pytest.approx(4000.0)
    assert t.spread == pytest.approx(0.15)
    assert "TFLOPS" in str(t)


def test_copy_ceiling_is_a_plausible_hbm_bandwidth():
    gpu.need("sm_90")
    c = timing.copy_ceiling()
    assert 1500 < c.gbps < 6000, c          # H100 PCIe ~2 TB/s .. H200 4.8 TB/s datasheet
    assert c.spread < 0.2, c


def test_a_kernel_timed_twice_agrees_with_itself():
    gpu.need("sm_90")
    import cupy as cp
    x = cp.random.default_rng(3).standard_normal(1 << 26, dtype=cp.float32)
    y = cp.empty_like(x)
    a = timing.bench(lambda: cp.multiply(x, 2, out=y), reps=20, bytes=2 * x.nbytes)
    b = timing.bench(lambda: cp.multiply(x, 2, out=y), reps=20, bytes=2 * x.nbytes)
    assert abs(a.median_ms - b.median_ms) / a.median_ms < 0.1, (a, b)


def test_cublas_sgemm_ceiling_is_plausible():
    gpu.need("sm_90")
    g = timing.sgemm_ceiling(2048)
    assert 20 < g.tflops < 70, g            # FP32 (not TF32) on H100/H200: ~50 TFLOPS
