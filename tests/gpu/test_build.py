"""The one way to build: NVRTC to an sm_90a cubin on any machine, SASS read from it, errors that point home."""
import re

import pytest

from judge.gpu import build
from judge.hw import sass

CP_ASYNC = r'''
#include <cuda_pipeline.h>
extern "C" __global__ void copy16(const float* a, float* b) {
  __shared__ __align__(16) float s[512];
  __pipeline_memcpy_async(&s[threadIdx.x * 4], &a[threadIdx.x * 4], 16);   // LDGSTS
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  b[threadIdx.x] = s[threadIdx.x];
}
'''


def test_a_cp_async_kernel_builds_for_sm90a_and_its_sass_proves_it():
    b = build.compile(CP_ASYNC)
    assert b.target == "sm_90a"
    assert b.kernels == ["copy16"]
    assert b.uses("cp.async") and b.uses("cp.async.commit") and b.uses("cp.async.wait")
    assert not b.uses("tma.load")
    assert "LDGSTS" in b.sass_of("copy16")
    assert b.resources["copy16"]["shared"] == 2048
    assert b.resources["copy16"]["spill_stores"] == 0


def test_a_file_builds_for_its_declared_target_without_a_target_argument():
    from judge import config
    b = build.compile(config.CHAPTERS_DIR / "05_blackwell" / "tcgen05_tile.cu")
    assert b.target == "sm_100a" and "-arch=sm_100a" in b.options
    assert b.uses("tcgen05")                       # UTCHMMA: an instruction sm_90a has not got


def test_text_and_files_without_a_judge_line_build_for_the_default(tmp_path):
    from judge import config
    f = tmp_path / "plain.cu"
    f.write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    assert build.compile(f).target == config.DEFAULT_TARGET
    f.write_text('// plain.cu - one store\n// judge: target=sm_90 features=\n'
                 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n')
    assert build.compile(f).target == "sm_90"
    assert build.compile(f, target="sm_90a").target == "sm_90a"     # an explicit target wins


def test_plain_loads_show_no_ldgsts():
    b = build.compile('extern "C" __global__ void k(const float4* a, float4* b){ b[threadIdx.x] = a[threadIdx.x]; }')
    assert not b.uses("cp.async")


def test_wgmma_needs_the_arch_specific_target():
    src = r'''
    extern "C" __global__ void fence_only() { asm volatile("wgmma.fence.sync.aligned;"); }
    '''
    build.compile(src, target="sm_90a")
    with pytest.raises(build.CompileError, match="sm_90"):
        build.compile(src, target="sm_90")


def test_a_compile_error_names_the_file_and_line(tmp_path):
    f = tmp_path / "mine.cu"
    f.write_text('extern "C" __global__ void k(float* x) {\n  x[0] = 1.0f;\n  x[1] = undefined_name;\n}\n')
    with pytest.raises(build.CompileError) as e:
        build.compile(f)
    first = e.value.first_error()
    assert "mine.cu(3)" in first and "undefined_name" in first


def test_local_headers_are_inlined_and_errors_still_name_the_right_file(tmp_path):
    (tmp_path / "helper.cuh").write_text('#pragma once\n__device__ float twice(float v) { return 2 * v; }\n')
    f = tmp_path / "main.cu"
    f.write_text('#include "helper.cuh"\nextern "C" __global__ void k(float* x) {\n  x[0] = twice(x[0]) + oops;\n}\n')
    with pytest.raises(build.CompileError) as e:
        build.compile(f)
    assert "main.cu(3)" in e.value.first_error()


def test_the_cache_notices_a_changed_header(tmp_path):
    h = tmp_path / "value.cuh"
    f = tmp_path / "k.cu"
    f.write_text('#include "value.cuh"\nextern "C" __global__ void k(int* x) { x[0] = VALUE; }\n')
    h.write_text("#define VALUE 1\n")
    k1 = build.compile(f).key
    h.write_text("#define VALUE 2\n")
    k2 = build.compile(f).key
    assert k1 != k2


def test_defines_reach_the_source():
    src = 'extern "C" __global__ void k(int* x) { x[0] = STAGES; }'
    with pytest.raises(build.CompileError):
        build.compile(src)
    assert build.compile(src, defines={"STAGES": 4}).kernels == ["k"]


def test_a_missing_header_is_reported_with_its_name(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text('#include "nowhere.cuh"\n')
    with pytest.raises(build.CompileError, match="nowhere.cuh"):
        build.compile(f)


def test_every_known_feature_has_a_description_and_a_valid_pattern():
    for name, feat in sass.FEATURES.items():
        re.compile(feat.pattern)
        assert feat.describe
    with pytest.raises(KeyError, match="unknown SASS feature"):
        sass.uses("", "warp-drive")


def test_running_without_a_gpu_says_why(monkeypatch):
    from judge import gpu
    if gpu.available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(build.NoGPU):
        build.compile(CP_ASYNC).kernel("copy16")
