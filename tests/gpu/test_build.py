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
    b = build.compile(config.CHAPTERS_DIR / "ch05_blackwell" / "tcgen05_tile.cu")
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


# ------------------------------------------------------------------ what a compile found in the cache costs
def test_nvrtc_version_is_the_one_cupy_compiles_with():
    # read from the wheel's file names (no library loaded); it is part of every compile's cache key
    from cupy.cuda import nvrtc
    from judge.gpu import toolkit
    assert toolkit.nvrtc_version() == "{}.{}".format(*nvrtc.getVersion())


def test_sass_and_resources_are_kept_beside_the_cached_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path))
    src = '// judge: target=sm_90a\nextern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n'
    first = build.compile(src, name="kept.cu")
    sass, res = first.sass, first.resources
    assert "FADD" in sass and res["k"]["spill_stores"] == 0
    kept = sorted(p.name.split(".")[1] for p in (tmp_path / "cubin").glob(f"{first.key}.*.txt"))
    assert kept == ["res", "sass"]
    # the same compile again: read from the cache, no disassembler run
    monkeypatch.setattr(build, "disassemble", lambda p: (_ for _ in ()).throw(AssertionError("ran nvdisasm")))
    monkeypatch.setattr(build, "resource_usage", lambda p: (_ for _ in ()).throw(AssertionError("ran cuobjdump")))
    again = build.compile(src, name="kept.cu")
    assert again.key == first.key and again.sass == sass and again.resources == res


def test_without_a_gpu_device_node_nothing_imports_cupy_to_find_out(tmp_path):
    import glob
    import os
    import subprocess
    import sys
    if glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/dxg") or sys.platform != "linux":
        pytest.skip("this machine has a GPU device node")
    code = ("import sys; from judge import gpu; from judge.gpu import build; "
            "b = build.compile('exercises/tma_tiles/solution.cu'); "
            "print(gpu.available(), gpu.no_gpu_reason(), 'cupy' in sys.modules)")
    build.compile("exercises/tma_tiles/solution.cu")            # in the cache first
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(build.config.ROOT),
                         env={**os.environ, "PYTHONPATH": str(build.config.ROOT)}, timeout=120).stdout
    assert out.split() == ["False", "no", "CUDA", "driver", "or", "device", "was", "found", "False"], out


@pytest.mark.parametrize("line,says", [
    ("#include <cstdio>", "printf needs no #include"), ("#include <stdint.h>", "<cuda/std/cstdint>"),
    ("#include <cmath>", "cuda::std::sqrt"), ("#include <iostream>", "printf")])
def test_a_host_header_fails_with_what_to_include_instead(tmp_path, line, says):
    f = tmp_path / "habit.cu"
    f.write_text(f'{line}\nextern "C" __global__ void k(int* p) {{ p[0] = 1; }}\n')
    with pytest.raises(build.CompileError) as e:
        build.compile(f)
    first = e.value.first_error()
    assert "habit.cu(1)" in first and "NVRTC compiles device code only" in first and says in first


def test_the_hints_name_what_compiles():
    # each replacement the hints name builds here: printf and assert bare, the <cuda/std/...> headers
    src = ('#include <cuda/std/cstdint>\n#include <cuda/std/climits>\n#include <cuda/std/cmath>\n'
           '#include <cuda/std/algorithm>\n#include <cuda/std/type_traits>\n#include <cuda/std/limits>\n'
           '#include <cuda/std/utility>\n#include <cuda/std/array>\n'
           'extern "C" __global__ void k(int* p, float* f) {\n'
           '  uint32_t a = INT_MAX; cuda::std::array<int, 2> v{1, 2}; cuda::std::swap(v[0], v[1]);\n'
           '  static_assert(cuda::std::is_same_v<uint32_t, cuda::std::uint32_t>);\n'
           '  p[0] = cuda::std::min(v[0], (int)a) + cuda::std::numeric_limits<int>::max() + min(1, 2);\n'
           '  f[0] = cuda::std::sqrt(f[1]) + sqrtf(f[2]); printf("%d\\n", p[0]); assert(p[0] != 0);\n'
           '  memcpy(p + 1, p, 4); memset(p + 2, 0, 4);\n}\n')
    assert "k" in build.compile(src, name="replacements.cu").kernels


def test_a_fixed_width_type_or_std_name_without_its_header_says_which_header(tmp_path):
    for body, says in (("uint32_t a = 1; p[0] = a;", "<cuda/std/cstdint>"), ("p[0] = std::min(1, 2);", "cuda::std::min")):
        with pytest.raises(build.CompileError) as e:
            build.compile(f'extern "C" __global__ void k(int* p) {{ {body} }}\n', name="bare.cu")
        assert says in e.value.first_error()
