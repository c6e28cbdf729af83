"""tests/model/test_model_tensormap.py - tensor maps edited on the device (tensormap.replace, cp_fenceproxy, the
tensormap proxy's fences) on the CPU model, with chapter 2's tensormap_replace.cu as the worked case.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_tensormap.py -q      (no GPU)

The model keeps a map as an object whose identity is its 128 bytes (judge.model.tensormaps), never the
undocumented CUtensorMap layout. Each run draws fresh tensors, poisons the output, and compares it with
the tensors themselves (a copy is exact). A kernel that drops the acquire fence must be a Violation
citing the PTX ISA; the same kernel with the fence, and a kernel written another way (the map edited
in global memory, fenced with the address-free release), must pass.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge import model
from judge.gpu import build
from judge.grading import compare
from judge.hw import tma
from judge.model import checks, tensormaps

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "chapters" / "ch02_tma" / "tensormap_replace.cu"
ACQUIRE = 'asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(gmap) : "memory");'


def _batch(rng, batch):
    """batch separate 32 x 32 float32 tensors, a template map over the first, the table of their addresses."""
    arrs = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(batch)]
    bases = np.array([a.ctypes.data for a in arrs], np.uint64)
    return arrs, tma.tensor_map_spec(arrs[0], box=(32, 32)), bases


def _run(source, batch, rng, seed=None):
    arrs, tmpl, bases = _batch(rng, batch)
    maps = np.zeros(batch * 16, np.uint64)
    out = compare.poison(np.empty((batch, 32, 32), np.float32))
    rep = model.run(build.compile(source, name="tensormap_replace.cu"), "tensormap_replace", grid=(batch,),
                    block=(64,), args=(tmpl, maps, bases, out), memory=arrs, seed=seed)
    return rep, arrs, out


def test_chapter_2_tensormap_replace_loads_each_tensor_through_its_own_map():
    rng = np.random.default_rng()
    batch = int(rng.integers(2, 6))
    rep, arrs, out = _run(KERNEL, batch, rng)
    for b in range(batch):
        np.testing.assert_array_equal(out[b], arrs[b], err_msg=f"block {b} loaded another tensor")
    assert rep.counts["tensormap.replace"] == batch
    assert rep.counts["tma.load"] == batch
    assert rep.counts["fence.proxy.tensormap.acquire"] == batch


def test_without_the_acquire_fence_the_tma_may_read_a_stale_map():
    text = KERNEL.read_text()
    assert ACQUIRE in text
    wrong = text.replace(ACQUIRE, "// (no acquire: the MISTAKE)")
    with pytest.raises(model.Violation) as e:
        _run(wrong, 2, np.random.default_rng())
    assert e.value.rule == "tensormap-proxy-fence"
    assert e.value.message.endswith(checks.cite("tensormap-proxy-fence"))
    assert ".cu:45" in e.value.where                      # the TMA's line in the kernel file


def test_a_map_edited_after_its_release_is_not_the_map_acquired():
    """Editing the global copy again after cp_fenceproxy's release (and acquiring anyway) is caught: the
    release published an older object than the one the TMA reads."""
    text = KERNEL.read_text()
    late = ('asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;" :: "l"(gmap), "r"(32) '
            ': "memory");   // MISTAKE: an edit after the release\n      ' + ACQUIRE)
    with pytest.raises(model.Violation) as e:
        _run(text.replace(ACQUIRE, late), 2, np.random.default_rng())
    assert e.value.rule == "tensormap-proxy-fence"


# The same job written another way: the template copied to global memory with plain stores, its fields
# edited there (tensormap.replace .global), released with the address-free fence by every writer, a
# warp barrier, then acquired by the issuing thread. Fields: the address, and the number of rows (the
# rows past it come back zero-filled, or NaN with fill_mode 1).
OTHER_WAY = r'''
#include "tma.cuh"
extern "C" __global__ void __launch_bounds__(64) tensormap_replace(
    const __grid_constant__ TensorMap tmpl, TensorMap* __restrict__ maps,
    const unsigned long long* __restrict__ bases, float* __restrict__ out) {
  __shared__ alignas(128) float tile[32][32];
  __shared__ alignas(8) unsigned long long bar;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  TensorMap* gmap = maps + blockIdx.x;
  if (warp == 0) {
    reinterpret_cast<unsigned*>(gmap)[lane] = reinterpret_cast<const unsigned*>(&tmpl)[lane];
    __syncwarp();
    if (lane == 0) {
      asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;"
                   :: "l"(gmap), "l"(bases[blockIdx.x]) : "memory");
      asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;"
                   :: "l"(gmap), "r"(ROWS) : "memory");
      asm volatile("tensormap.replace.tile.fill_mode.global.b1024.b32 [%0], %1;"
                   :: "l"(gmap), "n"(FILL) : "memory");
    }
    asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
    __syncwarp();
    if (lane == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(gmap) : "memory");
      tma::mbar_init(&bar, 1);
      tma::fence_proxy_async();
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, sizeof(tile));
    tma::load_2d(tile, gmap, 0, 0, &bar);
  }
  tma::wait(&bar, 0);
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) out[(size_t)blockIdx.x * 1024 + i] = tile[i / 32][i % 32];
}
'''


@pytest.mark.parametrize("fill", [0, 1])
def test_a_map_edited_in_global_memory_another_way_is_correct_field_by_field(fill):
    rng = np.random.default_rng()
    rows = int(rng.integers(1, 32))
    src = f"#define ROWS {rows}\n#define FILL {fill}\n" + OTHER_WAY
    batch = 3
    rep, arrs, out = _run(src, batch, rng)
    for b in range(batch):
        want = np.full((32, 32), np.nan if fill else 0.0, np.float32)
        want[:rows] = arrs[b][:rows]
        np.testing.assert_array_equal(out[b], want, err_msg=f"block {b}, {rows} rows, fill_mode {fill}")
    assert rep.counts["tensormap.replace"] == 3 * batch


def test_the_same_kernel_without_its_release_is_caught():
    src = "#define ROWS 32\n#define FILL 0\n" + OTHER_WAY.replace(
        'asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");', "")
    with pytest.raises(model.Violation) as e:
        _run(src, 2, np.random.default_rng())
    assert e.value.rule == "tensormap-proxy-fence"
    assert "no fence.proxy.tensormap::generic.release" in e.value.message


def test_replace_edits_one_field_of_the_object():
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 48)).astype(np.float32)
    spec = tma.tensor_map_spec(a, box=(16, 8))

    class Ins:
        text = "tensormap.replace"
    got = tensormaps.replace(spec, "box_dim", 1, 4, Ins)
    assert got.box == (16, 4) and got.dims == spec.dims
    got = tensormaps.replace(spec, "global_stride", 0, 256, Ins)
    assert got.strides == (256,)
    got = tensormaps.replace(spec, "rank", None, 2, Ins)           # the field holds rank - 1
    assert got.rank == 3 and got.box == (16, 8, 1)
    got = tensormaps.replace(spec, "swizzle_mode", None, 3, Ins)
    assert got.swizzle == "128B"
    with pytest.raises(model.Unsupported):
        tensormaps.replace(spec, "elemtype", None, 9, Ins)      # codes above 7: the two tables differ


def test_the_address_windows_are_the_machines():
    from judge.model import state
    assert (tensormaps.SHARED_BASE, tensormaps.PARAM_BASE) == (state.SHARED_BASE, state.PARAM_BASE)


def test_identity_bytes_round_trip_and_a_partial_copy_is_no_map():
    class M:
        tensormap_objs = []
    raw = tensormaps.encode(M, "spec-a")
    raw2 = tensormaps.encode(M, "spec-b")
    assert tensormaps.decode(raw) == 0 and tensormaps.decode(raw2) == 1
    mixed = raw.copy()
    mixed[64:] = raw2[64:]
    assert tensormaps.decode(mixed) is None
    assert tensormaps.decode(np.zeros(128, np.uint8)) is None
