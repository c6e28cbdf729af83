"""tests/model/test_model_random_kernels.py - the CPU model can not be told apart from the H200 by arithmetic:
random straight-line kernels of the integer, float and conversion operations a learner writes (random_kernels.py),
compiled by NVRTC as a learner's are, must give on the model what exact arithmetic says, and on the H200 what
the model gives, bit for bit (NaN bits included: the exact reference leaves a NaN's bits open, the H200 does not).

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_random_kernels.py -q
     JUDGE_RANDOM_KERNELS=200 ... for more programs than the default

Each run draws fresh seeds (printed with any failure, so that it can be replayed with random_kernels.program(seed)).
"""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

import random_kernels as rk
from judge.gpu import build

PROGRAMS = int(os.environ.get("JUDGE_RANDOM_KERNELS", "6"))


# one fresh base per run, the same in every xdist worker (they must collect the same tests)
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.urandom(8).hex()


def _seed(i: int) -> int:
    return int(hashlib.sha256(f"{_RUN}:{i}".encode()).hexdigest()[:8], 16)


def _on_model(b, x):
    from judge import model
    out = np.full(x.shape[0] * rk.STEPS, 0xDEADBEEFDEADBEEF, np.uint64)     # poisoned: every result is written
    model.run(b, "random_arith", grid=(x.shape[0] // 64,), block=(64,), args=(x.reshape(-1), out))
    return out.reshape(x.shape[0], rk.STEPS)


def _compile(p, tmp_path):
    path = tmp_path / f"random_arith_{p.seed}.cu"
    path.write_text(p.source)
    return build.compile(path)


@pytest.mark.parametrize("i", range(PROGRAMS))
def test_a_random_arithmetic_kernel_computes_on_the_model_what_exact_arithmetic_says(i, tmp_path):
    seed = _seed(i)
    p = rk.program(seed)
    x = rk.inputs(seed)
    got = _on_model(_compile(p, tmp_path), x)
    assert not (msg := rk.first_difference(got, p.expected(x, got), x, p, "the model")), msg


def test_the_reference_rounds_exactly_where_float64_would_round_twice():
    # 1 + 2^-24 + 2^-60 is just above the halfway point between 1 and its successor: rounding it to float64
    # first lands on the tie and then on 1 (ties to even); the exact rounding gives the successor
    from fractions import Fraction
    x = 1 + Fraction(1, 2 ** 24) + Fraction(1, 2 ** 60)
    assert rk.round_f32(x, "rn") == rk._bits(np.nextafter(np.float32(1), np.float32(2)))
    assert rk.round_f32(x, "rz") == rk.round_f32(x, "rd") == rk._bits(np.float32(1))
    assert rk.round_f32(-x, "rd") == rk._bits(-np.nextafter(np.float32(1), np.float32(2)))
    assert rk.round_f32(Fraction(10) ** 39, "rz") == rk._bits(np.finfo(np.float32).max)
    assert rk.round_f32(Fraction(10) ** 39, "rn") == rk._bits(np.float32(np.inf))
    assert rk.round_f32(-Fraction(1, 10 ** 50), "rn") == 0x80000000          # underflow keeps the sign


def test_the_warp_references_follow_the_programming_guide_at_the_segment_edges():
    lanes = list(range(100, 132))                       # lane i holds 100 + i
    xor8 = rk.shfl_ref("xor", 8)(lanes, [8] * 32)
    assert xor8[9] == 101 and xor8[1] == 101             # lane 9 reads lane 1 (an earlier segment); lane 1 keeps its own
    assert rk.shfl_ref("up", 16)(lanes, [3] * 32)[17] == 117 and rk.shfl_ref("up", 16)(lanes, [3] * 32)[19] == 116
    assert rk.shfl_ref("down", 4)(lanes, [33] * 32)[2] == 103      # delta 33 counts as 1; lane 3 is in the segment
    assert rk.shfl_ref("idx", 8)(lanes, [0xFFFFFFFF] * 32)[12] == 115   # srcLane -1: lane 7 of the segment 8..15
    assert rk.match_any([1, 2, 1] + [3] * 29)[0] == 0b101


def test_a_wrong_model_result_is_named_with_its_operation_and_operands():
    p = rk.program(7)
    x = rk.inputs(7)
    got = p.expected(x)
    got[3, 2] ^= 1
    msg = rk.first_difference(got, p.expected(x, got), x, p, "the model")
    assert "seed 7, thread 3, step 2" in msg and rk.OPS[p.steps[2][0]].expr in msg and "want" in msg


def test_the_h200_computes_random_kernels_as_the_model_does(tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    import cupy
    n = max(PROGRAMS, 40)
    for seed in map(_seed, range(n)):
        p = rk.program(seed)
        x = rk.inputs(seed)
        b = _compile(p, tmp_path)
        on_model = _on_model(b, x)
        on_gpu = cupy.full(x.shape[0] * rk.STEPS, 0xDEADBEEFDEADBEEF, cupy.uint64)
        b.kernel("random_arith")((x.shape[0] // 64, 1, 1), (64, 1, 1), (cupy.asarray(x.reshape(-1)), on_gpu))
        on_gpu = cupy.asnumpy(on_gpu).reshape(x.shape[0], rk.STEPS)
        assert not (msg := rk.first_difference(on_model, on_gpu, x, p, "the model (the H200's is the want)",
                                                exact=True)), msg


# What the H200 gave (tests/model/random_kernels.py programs, and the exact IEEE value where IEEE fixes it): each
# case is one expression on one input word triple, and the bits it must give on the model.
H200_CASES = [
    ("__fsqrt_ru(a)", (0x31E6396E, 0, 0), 0x38ABAA20),            # rounded up, not to nearest
    ("__fadd_rz(a, b)", (0x3F800000, 0x33800001, 0), 0x3F800000),   # 1 + just over half an ulp, toward zero
    ("__fadd_ru(a, b)", (0x3F800000, 0x00000001, 0), 0x3F800001),   # 1 + the smallest subnormal, upward
    ("__fadd_rd(a, b)", (0x3F800000, 0xBF800000, 0), 0x80000000),   # an exact zero rounding down is -0
    ("__uint2float_rz(ua)", (0xD6439FDF, 0, 0), 0x4F56439F),
    ("fmaf(a, b, c)", (0xF1E590CA, 0xC0400000, 0xC0400000), 0x72AC2C97),   # float64's sum sits on a midpoint
    ("-a", (0x7FFFFFFF, 0, 0), 0x7FFFFFFF),                          # every NaN result is 0x7fffffff
    ("fabsf(a)", (0x7F800001, 0, 0), 0x7FFFFFFF),
    ("a + b", (0x7FC00001, 0x3F800000, 0), 0x7FFFFFFF),
    ("fmaxf(a, b)", (0x00000000, 0x80000000, 0), 0x00000000),      # -0 < +0
    ("fminf(a, b)", (0x80000000, 0x00000000, 0), 0x80000000),
    ("__saturatef(a)", (0x80000000, 0, 0), 0x00000000),
    ("__saturatef(a)", (0x7FC00001, 0, 0), 0x00000000),
    ("__uint_as_float((unsigned)__half_as_ushort(__float2half_rn(a)))", (0xFFFFFFFF, 0, 0), 0x7FFF),
    ("__bfloat162float(__ushort_as_bfloat16((unsigned short)ua))", (0x7F86, 0, 0), 0x7F860000),  # payload kept
    ("__half2float(__ushort_as_half((unsigned short)ua))", (0x7C8B, 0, 0), 0x7FFFFFFF),
    # a NaN half from arithmetic on pairs is 0x7fff, neg and abs included; the other half is computed on its own
    ("__uint_as_float(hu(__hneg2(h2(ua))))", (0x7D48ED09, 0, 0), 0x7FFF6D09),
    ("__uint_as_float(bu(__habs2(b2(ua))))", (0x7FC00001, 0, 0), 0x7FFF0001),
    ("__uint_as_float(hu(__hmul2(h2(ua), h2(ub))))", (0xFF800000, 0x7FC00001, 0), 0x7FFF0000),
    ("__uint_as_float(bu(__hadd2(b2(ua), b2(ub))))", (0x41900000, 0xFFFFFFFF, 0), 0x7FFF7FFF),
    # a NaN converted to a 64-bit integer is 0x8000000000000000, unsigned too (to 32 bits it is 0): the high word
    ("__uint_as_float((unsigned)(__float2ull_rz(a) >> 32))", (0x7FC00000, 0, 0), 0x80000000),
    ("__uint_as_float((unsigned)((unsigned long long)__float2ll_rn(a) >> 32))", (0x7FFFFFFF, 0, 0), 0x80000000),
]


def _one(expr, tmp_path):
    src = rk.HALVES + f"""
extern "C" __global__ void one(const unsigned* in, unsigned* out) {{
  const unsigned ua = in[0], ub = in[1];
  const float a = __uint_as_float(in[0]), b = __uint_as_float(in[1]), c = __uint_as_float(in[2]);
  out[0] = __float_as_uint({expr});
}}
"""
    (tmp_path / "one.cu").write_text(src)
    return build.compile(tmp_path / "one.cu")


_IDS = [f"{c[0]}:{c[1][0]:#x}" for c in H200_CASES]


@pytest.mark.parametrize("expr, words, want", H200_CASES, ids=_IDS)
def test_a_float_rule_the_h200_showed_holds_on_the_model(expr, words, want, tmp_path):
    from judge import model
    out = np.full(1, 0xDEADBEEF, np.uint32)
    model.run(_one(expr, tmp_path), "one", grid=(1,), block=(1,), args=(np.array(words, np.uint32), out))
    assert int(out[0]) == want, f"{expr} on {[hex(w) for w in words]}: {int(out[0]):#010x}, want {want:#010x}"


@pytest.mark.parametrize("expr, words, want", H200_CASES, ids=_IDS)
def test_the_h200_still_gives_each_of_those_bits(expr, words, want, tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    import cupy
    out = cupy.full(1, 0xDEADBEEF, cupy.uint32)
    _one(expr, tmp_path).kernel("one")((1, 1, 1), (1, 1, 1), (cupy.asarray(np.array(words, np.uint32)), out))
    assert int(out.get()[0]) == want, f"{expr}: the H200 gave {int(out.get()[0]):#010x}"


def test_a_float_beyond_a_64_bit_integer_saturates_instead_of_crashing_the_model(tmp_path):
    # cvt.rni.s64.f32 / cvt.rzi.u64.f32 past 2^63 and 2^64 used to end the run with an OverflowError; a NaN gives
    # 0x8000000000000000 to both (H200_CASES)
    from judge import model
    src = r"""
extern "C" __global__ void wide(const float* in, unsigned long long* out) {
  const int t = threadIdx.x;
  out[2 * t] = (unsigned long long)__float2ll_rn(in[t]);
  out[2 * t + 1] = __float2ull_rz(in[t]);
}
"""
    (tmp_path / "wide.cu").write_text(src)
    x = np.array([1e19, -1e19, 2.0 ** 63, 1e20, -1.0, np.nan, 12345.5, -2.0 ** 63], np.float32)
    out = np.full(2 * x.size, 0xDEADBEEFDEADBEEF, np.uint64)
    model.run(build.compile(tmp_path / "wide.cu"), "wide", grid=(1,), block=(x.size,), args=(x, out))
    got = out.reshape(-1, 2)
    s64 = [int(v) for v in got[:, 0].view(np.int64)]
    assert s64 == [2**63 - 1, -2**63, 2**63 - 1, 2**63 - 1, -1, -2**63, 12346, -2**63]     # NaN: the H200's bits
    assert [int(v) for v in got[:, 1]] == [int(np.float32(1e19)), 0, 2**63, 2**64 - 1, 0, 2**63, 12345, 0]
