"""The CPU model's wgmma groups: wgmma.wait_group N completes all but the N newest groups of its warpgroup, in
order, whichever op of the model's pending list that is: another warpgroup's older op may sit before it (the
model once compared the two ops' NumPy arrays there and raised ValueError). Run: PYTHONPATH=$PWD python -m pytest tests/model/test_model_wgmma_groups.py -q
"""
import numpy as np
import pytest

from judge.gpu import build, launch

ml_dtypes = pytest.importorskip("ml_dtypes")

# One warpgroup: A (64 x 16) and B (64 x 16) written into 128B-swizzled shared tiles by the threads, then two
# wgmma groups into two accumulators (D1 = A B^T, D2 = 2 A B^T through a second wgmma), wait_group 1, D1 read
# (its group is the older), wait_group 0, D2 read.
SRC = r"""
#include "wgmma.cuh"
extern "C" __global__ void two_groups(const unsigned short* A, const unsigned short* B, float* D1, float* D2) {
  __shared__ __align__(1024) unsigned char sA[64 * 128], sB[64 * 128];
  const int t = threadIdx.x;
  for (int i = t; i < 64 * 64; i += 128) {          // element (r, k) of a 64 x 64 bf16 tile, 128B-swizzled
    const int r = i / 64, k = i % 64, b = 2 * k;
    const int off = r * 128 + ((((b >> 4) ^ (r % 8))) << 4) + (b & 15);
    *(unsigned short*)(sA + off) = k < 16 ? A[r * 16 + k] : 0;
    *(unsigned short*)(sB + off) = k < 16 ? B[r * 16 + k] : 0;
  }
  tma::fence_proxy_async();                          // generic writes, then the async proxy (wgmma) reads
  __syncthreads();
  float d1[32], d2[32];
  wg::fence();
  wg::mma_k16(d1, wg::desc_sw128(sA), wg::desc_sw128(sB), 0);
  wg::commit();
  wg::mma_k16(d2, wg::desc_sw128(sA), wg::desc_sw128(sB), 0);
  wg::mma_k16(d2, wg::desc_sw128(sA), wg::desc_sw128(sB), 1);
  wg::commit();
  wg::wait<1>();
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d1[i]) :: "memory");
  const int w = t / 32, l = t % 32;
  for (int i = 0; i < 32; ++i) {
    const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    D1[row * 64 + col] = d1[i];
  }
  wg::wait<0>();
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d2[i]) :: "memory");
  for (int i = 0; i < 32; ++i) {
    const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    D2[row * 64 + col] = d2[i];
  }
}
"""


def _run():
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    d1 = np.full((64, 64), np.nan, np.float32)
    d2 = np.full((64, 64), np.nan, np.float32)
    k = build.compile(SRC, name="two_groups.cu")
    launch.launch(k, "two_groups", grid=(1,), block=(128,), args=(a.view(np.uint16), b.view(np.uint16), d1, d2))
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    return d1, d2, ref


def test_wait_group_1_completes_the_older_group_and_wait_group_0_the_newer():
    d1, d2, ref = _run()
    atol = 4 * 16 * 2.0 ** -24 * np.abs(ref).max() + 1e-6
    assert np.allclose(d1, ref, rtol=0, atol=atol)
    assert np.allclose(d2, 2 * ref, rtol=0, atol=2 * atol)


# Two warpgroups: warpgroup 0 issues a wgmma and keeps it pending (named barrier 1) until warpgroup 1 has issued
# its own and waited for it: warpgroup 1's op is then not the first pending op of the block.
SRC2 = r"""
#include "wgmma.cuh"
extern "C" __global__ void two_warpgroups(const unsigned short* A, const unsigned short* B, float* D) {
  __shared__ __align__(1024) unsigned char sA[64 * 128], sB[64 * 128];
  const int t = threadIdx.x % 128, g = threadIdx.x / 128;
  for (int i = threadIdx.x; i < 64 * 64; i += 256) {
    const int r = i / 64, k = i % 64, b = 2 * k;
    const int off = r * 128 + ((((b >> 4) ^ (r % 8))) << 4) + (b & 15);
    *(unsigned short*)(sA + off) = k < 16 ? A[r * 16 + k] : 0;
    *(unsigned short*)(sB + off) = k < 16 ? B[r * 16 + k] : 0;
  }
  tma::fence_proxy_async();
  __syncthreads();
  float d[32];
  if (g == 0) {
    wg::fence();
    wg::mma_k16(d, wg::desc_sw128(sA), wg::desc_sw128(sB), 0);
    wg::commit();
    asm volatile("bar.arrive 2, 256;" ::: "memory");     // issued: warpgroup 1 may go
    asm volatile("bar.sync 1, 256;" ::: "memory");       // until warpgroup 1 has waited for its own
    wg::wait<0>();
  } else {
    asm volatile("bar.sync 2, 256;" ::: "memory");
    wg::fence();
    wg::mma_k16(d, wg::desc_sw128(sA), wg::desc_sw128(sB), 0);
    wg::commit();
    wg::wait<0>();
    asm volatile("bar.arrive 1, 256;" ::: "memory");
  }
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
  const int w = t / 32, l = t % 32;
  for (int i = 0; i < 32; ++i) {
    const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    D[(g * 64 + row) * 64 + col] = d[i];
  }
}
"""


def test_a_wait_completes_its_own_group_behind_another_warpgroups_pending_op():
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    d = np.full((128, 64), np.nan, np.float32)
    k = build.compile(SRC2, name="two_warpgroups.cu")
    launch.launch(k, "two_warpgroups", grid=(1,), block=(256,), args=(a.view(np.uint16), b.view(np.uint16), d))
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    atol = 4 * 16 * 2.0 ** -24 * np.abs(ref).max() + 1e-6
    assert np.allclose(d[:64], ref, rtol=0, atol=atol) and np.allclose(d[64:], ref, rtol=0, atol=atol)
