"""tests/model/test_model_places.py - the CPU model's messages name the file and line the code came from: the
learner's own file and line for their code, a header's own path and line (and the learner's line that
called into it) for code inside an inlined header such as judge/include/tma.cuh.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_places.py -q

Each kernel is written into a temporary folder as `mine.cu` and built with judge.gpu.build.compile, which
inlines the course's headers with #line markers and compiles with -lineinfo: the PTX then carries
`.file` and `.loc ... inlined_at` directives (judge.model.ptx.place reads them). Line numbers are found
from marker comments in the kernel and from the header's own text, never written into the test.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from judge import config, model
from judge.gpu import build
from judge.model import ptx, registry

TMA_CUH = config.INCLUDE_DIR / "tma.cuh"
CLUSTER_CUH = config.INCLUDE_DIR / "cluster.cuh"


def _line(text: str, marker: str) -> int:
    """The 1-based line of the only line of text holding marker."""
    hits = [i for i, l in enumerate(text.splitlines(), start=1) if marker in l]
    assert len(hits) == 1, f"{marker!r} is on lines {hits}"
    return hits[0]


def _header_line(path, marker: str) -> int:
    return _line(path.read_text(), marker)


def _build(tmp_path, text: str, name: str = "mine.cu"):
    src = tmp_path / name
    src.write_text(text)
    return build.compile(src)


def _io(n=64):
    rng = np.random.default_rng()
    return rng.standard_normal(n).astype(np.float32), np.full(n, np.nan, np.float32)


# A cp.async whose result is read with no cp.async.wait_group: the mistake is in the learner's own line.
OWN = r'''// mine.cu - a learner's kernel: cp.async into shared memory, then a read that does not wait
#include "tma.cuh"
extern "C" __global__ void k(const float* in, float* out) {
    __shared__ alignas(16) float buf[64];
    unsigned s = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(s), "l"(in + threadIdx.x) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    out[threadIdx.x] = buf[threadIdx.x] * 2.0f;   // MISTAKE: read before cp.async.wait_group
}
'''


def test_a_mistake_in_the_learners_own_code_names_their_file_and_line(tmp_path):
    b = _build(tmp_path, OWN)
    x, y = _io()
    with pytest.raises(model.Violation) as e:
        model.run(b, "k", block=(64, 1, 1), args=(x, y))
    v = e.value
    line = _line(OWN, "MISTAKE")
    assert v.rule == "cp.async-wait"
    assert v.where.startswith(f"mine.cu:{line} [PTX line "), v.where
    assert "tma.cuh" not in v.where                     # the header is included, but not where it broke
    assert f"mine.cu:{line}" in v.message               # the message itself names the place


# The same mistake inside a helper of the learner's own file: its line, and the line that called it.
HELPER = r'''// mine.cu - the read that does not wait sits in a helper of the learner's own file
#include "tma.cuh"
__device__ __forceinline__ float read_slot(const float* buf, int i) {
    return buf[i];                                // HELPER: read before cp.async.wait_group
}
extern "C" __global__ void k(const float* in, float* out) {
    __shared__ alignas(16) float buf[64];
    unsigned s = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(s), "l"(in + threadIdx.x) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    out[threadIdx.x] = read_slot(buf, threadIdx.x);   // CALL
}
'''


def test_a_helper_of_the_learners_file_names_its_line_and_the_line_that_called_it(tmp_path):
    b = _build(tmp_path, HELPER)
    x, y = _io()
    with pytest.raises(model.Violation) as e:
        model.run(b, "k", block=(64, 1, 1), args=(x, y))
    want = f"mine.cu:{_line(HELPER, 'HELPER:')} (in read_slot, inlined at line {_line(HELPER, '// CALL')})"
    assert e.value.rule == "cp.async-wait"
    assert e.value.where.startswith(want), e.value.where


# tma::arrive on a barrier nobody initialized: the broken instruction is tma.cuh's, the mistake the caller's.
UNINIT = r'''// mine.cu - arrives on an mbarrier that was never initialized
#include "tma.cuh"
extern "C" __global__ void k(float* out) {
    __shared__ alignas(8) unsigned long long bar;
    if (threadIdx.x == 0) tma::arrive(&bar);      // ARRIVE: no tma::mbar_init before
    out[threadIdx.x] = 1.0f;
}
'''


def test_a_violation_inside_a_header_helper_names_the_header_and_the_learners_call(tmp_path):
    b = _build(tmp_path, UNINIT)
    _, y = _io(32)
    with pytest.raises(model.Violation) as e:
        model.run(b, "k", block=(32, 1, 1), args=(y,))
    v = e.value
    hdr = _header_line(TMA_CUH, 'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"')
    assert v.rule == "mbarrier-uninitialized"
    assert v.where.startswith(f"mine.cu:{_line(UNINIT, 'ARRIVE')}, through judge/include/tma.cuh:{hdr} "
                              f"(in tma::arrive) [PTX line "), v.where
    assert f"mine.cu:{hdr}" not in v.where              # the header's line is not named as the learner's
    assert f"(at {v.where}) (PTX ISA, " in v.message    # the message a learner reads names it too


# A barrier that expects two arrivals and gets one: the threads hang inside tma::wait -> tma::try_wait.
HANG = r'''// mine.cu - waits for a phase that needs two arrivals; only one thread arrives
#include "tma.cuh"
extern "C" __global__ void k(float* out) {
    __shared__ alignas(8) unsigned long long bar;
    if (threadIdx.x == 0) tma::mbar_init(&bar, 2);
    __syncthreads();
    if (threadIdx.x == 0) tma::arrive(&bar);
    tma::wait(&bar, 0);                           // WAIT: the second arrival never comes
    out[threadIdx.x] = 1.0f;
}
'''


def test_a_hang_names_the_header_line_where_the_threads_wait_and_the_learners_call(tmp_path):
    b = _build(tmp_path, HANG)
    _, y = _io(32)
    with pytest.raises(model.Hang) as e:
        model.run(b, "k", block=(32, 1, 1), args=(y,))
    body = _header_line(TMA_CUH, "bool try_wait(unsigned long long* bar, unsigned parity) {")
    wait = _header_line(TMA_CUH, "while (!try_wait(bar, parity))")
    msg = str(e.value)
    assert "1 of 2 arrivals missing" in msg, msg
    # the asm statement of try_wait spans several lines: the compiler's .loc picks one of them
    hit = re.search(rf"mine\.cu:{_line(HANG, 'WAIT:')}, through judge/include/tma\.cuh:(\d+) \(in tma::try_wait, "
                    rf"called from line {wait} in tma::wait\) \[PTX line \d+: mbarrier\.try_wait", msg)
    assert hit and body < int(hit.group(1)) < body + 8, msg


UNSUPPORTED = r'''// mine.cu - an instruction the CPU model does not run
extern "C" __global__ void k(float* out) {
    out[threadIdx.x] = 1.0f;
    if (threadIdx.x == 5) asm volatile("brkpt;");    // LACKS
}
'''


def test_an_instruction_the_model_lacks_is_named_at_the_learners_line(tmp_path):
    assert registry.lookup(["brkpt"]) is None, "the model runs brkpt now: pick an instruction it lacks"
    b = _build(tmp_path, UNSUPPORTED)
    _, y = _io(32)
    with pytest.raises(model.Unsupported) as e:
        model.run(b, "k", block=(32, 1, 1), args=(y,))
    assert f"(at mine.cu:{_line(UNSUPPORTED, 'LACKS')} [PTX line " in str(e.value), str(e.value)


# A DSMEM read through cluster.cuh with no cluster barrier before it: the header's line, the learner's call.
DSMEM = r'''// mine.cu - reads the peer block's shared memory before any cluster barrier
#include "cluster.cuh"
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* out) {
    __shared__ unsigned word[32];
    word[threadIdx.x] = threadIdx.x + 1;
    unsigned peer = cluster::rank() ^ 1;
    unsigned v = cluster::ld(cluster::map(&word[threadIdx.x], peer));   // PEER: no cluster::sync() before
    out[blockIdx.x * 32 + threadIdx.x] = (float)v;
    cluster::sync();
}
'''


def test_a_dsmem_race_inside_cluster_cuh_names_that_header(tmp_path):
    b = _build(tmp_path, DSMEM)
    y = np.full(64, np.nan, np.float32)
    with pytest.raises(model.Violation) as e:
        model.run(b, "k", grid=(2, 1, 1), block=(32, 1, 1), args=(y,))
    ld = _header_line(CLUSTER_CUH, 'asm volatile("ld.shared::cluster.u32 %0, [%1];"')
    assert e.value.rule == "dsmem-unordered"
    assert f"mine.cu:{_line(DSMEM, 'PEER:')}, through judge/include/cluster.cuh:{ld} (in cluster::ld)" \
        in e.value.where, e.value.where


# ---------------------------------------------------------------------------------- the reader itself
_NO_CALLER = """.version 8.5
.target sm_90a
.address_size 64
.visible .entry k(
    .param .u64 out
)
{
    .reg .b32 %r<4>;
    .loc 2 62 3
    mov.u32 %r1, %tid.x;
    .loc 1 7 5
    mov.u32 %r2, %r1;
    ret;
}
    .file 1 "/somewhere/else/mine.cu"
    .file 2 "/where/nvrtc/ran/judge/include/tma.cuh"
"""


def test_a_header_line_whose_caller_the_ptx_does_not_give_is_said_to_be_inside_the_header():
    mod = ptx.parse(_NO_CALLER)
    first, second = mod.kernels["k"].code[:2]
    assert ptx.place(mod, first, "mine.cu") == (
        "judge/include/tma.cuh:62 (inside the header: the PTX names no line that called it)")
    assert ptx.place(mod, second, "mine.cu") == "mine.cu:7"


def test_files_are_named_as_the_course_names_them():
    assert ptx.file_label("/any/dir/nvrtc/ran/in/judge/include/wgmma.cuh", "mine.cu") == "judge/include/wgmma.cuh"
    assert ptx.file_label(str(config.INCLUDE_DIR / "tma.cuh"), "mine.cu") == "judge/include/tma.cuh"
    assert ptx.file_label("/home/someone/work/mine.cu", "mine.cu") == "mine.cu"
    assert ptx.file_label("/x/site-packages/nvidia/cu13/include/cuda/std/cstdint", "mine.cu") == "cuda/std/cstdint"


@pytest.mark.parametrize("mangled,name", [
    ("_ZN3tma9mbar_initEPyj", "tma::mbar_init"),
    ("_ZN3tma4waitEPyj", "tma::wait"),
    ("_Z9read_slotPKfi", "read_slot"),
    ("_ZL6helperv", "helper"),
    ("_ZN5wgmma3mmaILi64EEEvPf", "wgmma::mma<...>"),
    ("k", "k"),
])
def test_function_names_are_read_back_from_their_mangled_form(mangled, name):
    assert ptx.demangle(mangled) == name


def test_inside_the_cuda_toolkits_headers_only_the_function_the_code_called_is_named():
    mod = ptx.Module(kernels={}, vars=[], files={
        1: "/home/someone/mine.cu",
        3: "/venv/site-packages/nvidia/cu13/include/cuda_pipeline_helpers.h",
        4: "/venv/site-packages/nvidia/cu13/include/cuda_pipeline_primitives.h"})
    ins = ptx.Instr("cp.async.cg.shared.global", ["cp", "async", "cg", "shared", "global"], [], None, 312,
                    ((3, 203), (3, 219), (4, 69), (1, 30), (1, 71)), "cp.async.cg.shared.global [%r37], [%rd47], 16, 16",
                    ("nvcuda::experimental::ImplementationChooser<...>", "nvcuda::experimental::pipeline_memcpy_async<...>",
                     "__pipeline_memcpy_async", "load_tile", ""))
    assert ptx.place(mod, ins, "mine.cu") == (
        "mine.cu:30 (in load_tile, inlined at line 71), through cuda_pipeline_primitives.h:69 "
        "(in __pipeline_memcpy_async)")


def test_the_place_of_an_unsupported_instruction_survives_pickling():
    import pickle
    e = model.Unsupported("brkpt").at("mine.cu:4 [PTX line 20: brkpt]")
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) == "the CPU model does not support `brkpt` (at mine.cu:4 [PTX line 20: brkpt])"
