"""The launch layer (judge.gpu.launch), the headers kernels include, and the bf16/FP8 ceilings.

Run: python -m pytest tests/gpu/test_launch.py -q      (GPU tests SKIP with the reason without an sm_90 GPU)

A cluster size is chosen at launch; the grid counts blocks; a shape the hardware would refuse is
refused here first, with what to change. Kernels that include <cooperative_groups.h> (cluster group,
map_shared_rank) or <cuda/ptx> build on every machine, wherever the CCCL headers are.
"""
import numpy as np
import pytest

from judge.gpu import build, launch
from judge.grading import compare
from judge import gpu

CLUSTER_SRC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// Each block writes its rank, and its right neighbour's shared word read through DSMEM.
extern "C" __global__ void ranks(int* out, int salt) {
  __shared__ int mine;
  cg::cluster_group cluster = cg::this_cluster();
  unsigned r = cluster.block_rank(), n = cluster.num_blocks();
  if (threadIdx.x == 0) mine = int(r) * 1000 + salt;
  cluster.sync();                                  // peers' shared memory is written before anyone reads it
  int* peer = cluster.map_shared_rank(&mine, (r + 1) % n);
  if (threadIdx.x == 0) { out[2 * blockIdx.x] = int(r); out[2 * blockIdx.x + 1] = *peer; }
  cluster.sync();                                  // nobody exits while a peer may still read its word
}
"""

PTX_SRC = r"""
#include <cuda/ptx>
// Dynamic shared memory above 48 KiB, touched at its last word, and an elect-one through cuda::ptx.
extern "C" __global__ void big_smem(float* out, int n_floats) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n_floats; i += blockDim.x) buf[i] = float(i);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[n_floats - 1];
  (void)cuda::ptx::get_sreg_smid();
}
"""

STRUCT_SRC = r"""
struct alignas(64) Blob { unsigned long long w[16]; };
// A 128-byte struct passed by value (what a tensor map is to a kernel).
extern "C" __global__ void sum_blob(const __grid_constant__ Blob b, unsigned long long* out) {
  unsigned long long s = 0;
  for (int i = 0; i < 16; ++i) s += b.w[i] * (i + 1);
  out[0] = s;
}
"""


def test_a_grid_that_is_not_a_whole_number_of_clusters_is_refused_with_what_to_change():
    with pytest.raises(launch.LaunchError, match=r"not a whole number of clusters.*multiple of 4"):
        launch.check_shape((10, 1, 1), (128,), (4,))
    assert launch.check_shape((12,), (128,), (4,)) == ((12, 1, 1), (128, 1, 1), (4, 1, 1))


def test_clusters_above_16_blocks_and_blocks_above_1024_threads_are_refused():
    with pytest.raises(launch.LaunchError, match="at most 16"):
        launch.check_shape((32,), (64,), (32,))
    with pytest.raises(launch.LaunchError, match="1024 threads"):
        launch.check_shape((1,), (32, 33))


def test_kernels_using_cooperative_groups_clusters_and_cuda_ptx_build_here():
    assert build.missing_headers() == []
    b = build.compile(CLUSTER_SRC, name="ranks.cu")
    assert b.uses("cluster.barrier"), "cluster.sync() should show UCGABAR_ARV / UCGABAR_WAIT"
    assert "ranks" in b.kernels
    assert "big_smem" in build.compile(PTX_SRC, name="big_smem.cu").kernels


@pytest.fixture
def cp():
    gpu.need("sm_90")
    import cupy
    return cupy


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16])
def test_a_cluster_size_chosen_at_launch_reaches_every_block(cp, size):
    b = build.compile(CLUSTER_SRC, name="ranks.cu")
    blocks = 2 * size * (1 if size == 16 else 4)
    out = compare.poison(cp.empty(2 * blocks, dtype=cp.int32))
    salt = int(np.random.default_rng().integers(1, 999))
    launch.launch(b, "ranks", grid=(blocks,), block=(64,), args=(out, np.int32(salt)), cluster=(size,))
    cp.cuda.get_current_stream().synchronize()
    got = out.get().reshape(blocks, 2)
    rank = np.arange(blocks) % size
    assert (got[:, 0] == rank).all(), got[:, 0]
    assert (got[:, 1] == ((rank + 1) % size) * 1000 + salt).all(), got[:, 1]
    assert launch.max_active_clusters(b, "ranks", block=(64,), cluster=(size,)) >= 1


def test_more_than_48_kib_of_dynamic_shared_memory_is_opted_in_for_you(cp):
    b = build.compile(PTX_SRC, name="big_smem.cu")
    n = (200 << 10) // 4
    out = compare.poison(cp.empty(3, dtype=cp.float32))
    launch.launch(b, "big_smem", grid=(3,), block=(256,), args=(out, np.int32(n)), shared_bytes=4 * n)
    cp.cuda.get_current_stream().synchronize()
    assert (out.get() == float(n - 1)).all()
    with pytest.raises(launch.LaunchError, match="at most"):
        launch.launch(b, "big_smem", grid=(1,), block=(32,), args=(out, np.int32(8)), shared_bytes=300 << 10)


def test_a_128_byte_struct_passes_by_value(cp):
    b = build.compile(STRUCT_SRC, name="blob.cu")
    w = np.random.default_rng().integers(0, 1 << 40, 16, dtype=np.uint64)
    blob = np.zeros((), dtype=np.dtype({"names": ["w"], "formats": [(np.uint64, 16)], "align": True}))
    blob["w"] = w
    out = compare.poison(cp.empty(1, dtype=cp.uint64))
    launch.launch(b, "sum_blob", grid=(1,), block=(1,), args=(blob[()], out))
    cp.cuda.get_current_stream().synchronize()
    assert int(out.get()[0]) == int(sum(int(x) * (i + 1) for i, x in enumerate(w)) % (1 << 64))


def test_the_bf16_and_fp8_ceilings_are_plausible(cp):
    from judge import config
    from judge.gpu import timing
    bf = timing.bf16_gemm_ceiling(4096)
    f8 = timing.fp8_gemm_ceiling(4096)
    assert 200e12 < bf.tflops * 1e12 < config.HOPPER_PEAK["bf16_flops"], bf
    assert bf.tflops < f8.tflops * 1.05 and f8.tflops * 1e12 < config.HOPPER_PEAK["fp8_flops"], (bf, f8)
