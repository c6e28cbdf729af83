"""Tensor memory and tcgen05 in the CPU model (judge.model.ops.tcgen05): arithmetic against float64 and every rule.

Run: python -m pytest tests/model/test_model_tcgen05.py -q

One probe kernel (PROBE below, compiled for sm_100a) copies a shared-memory image the test lays out
on the host (operands K-major, with judge.hw.wgmma's canonical layouts), issues one MMA per K slice
from host-made descriptors, commits, waits, reads C back through tcgen05.ld and frees the columns.
`MISTAKE = n` compiles it with one thing wrong; each rule test names the rule the model must give.
Inputs are fresh random numbers and C starts as NaN.
"""
import ml_dtypes
import numpy as np
import pytest

from judge import model
from judge.gpu import build
from judge.hw import wgmma
from judge.model.ops import tcgen05

PROBE = r"""
// tcgen05_probe.cu - one CTA: shared image -> MMAs -> commit -> wait -> tcgen05.ld -> C; MISTAKE = n breaks one rule.
#ifndef MISTAKE
#define MISTAKE 0
#endif
#define COLS 256
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void alloc(unsigned* dst, unsigned n) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(smem_addr(dst)), "r"(n) : "memory");
}
__device__ __forceinline__ void dealloc(unsigned t, unsigned n) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(t), "r"(n) : "memory");
}

extern "C" __global__ void __launch_bounds__(128, 1) probe(const uint4* img, int n16, const unsigned long long* descs,
    int n_mma, unsigned idesc, unsigned first_acc, float* C, int N) {
  extern __shared__ __align__(1024) uint4 smem[];
  __shared__ alignas(8) unsigned long long done;
  __shared__ unsigned base, extra;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#if MISTAKE == 1
  if (threadIdx.x == 0) {                       // one thread allocates
#else
  if (warp == 0) {
#endif
#if MISTAKE == 22
    alloc(&base, 96);                           // not a power of two
#else
    alloc(&base, COLS);
#endif
#if MISTAKE != 12 && MISTAKE != 14
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
#endif
#if MISTAKE == 2
    alloc(&extra, 32);                          // after the permit was given up
#endif
  }
#if MISTAKE == 12
  if (warp == 1) alloc(&extra, 256);            // 256 + 256 + 256 > 512 columns: one waits forever
  if (warp == 2) alloc(&extra, 256);
#elif MISTAKE == 14
  if (warp == 1) alloc(&extra, 512);            // more columns than the allocation before it
#endif
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&done)) : "memory");
  }
  for (int i = threadIdx.x; i < n16; i += blockDim.x) smem[i] = img[i];
#if MISTAKE != 17
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // generic stores -> the MMA's async-proxy reads
#endif
  fence_before();
  __syncthreads();
  fence_after();
  const unsigned d = base;
#if MISTAKE == 18 || MISTAKE == 19
  for (int c = 0; c < N; ++c)          // every warp sets its quarter of D to 1.0 (then the MMAs accumulate)
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};"
                 :: "r"(d + ((unsigned)(32 * (warp % 4)) << 16) + c), "r"(__float_as_uint(1.0f)) : "memory");
#if MISTAKE == 19
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
#endif
  fence_before();
  __syncthreads();
  fence_after();
#endif
  if (threadIdx.x == 0) {
    const unsigned long long s4 = smem_addr(smem) >> 4;
    for (int i = 0; i < n_mma; ++i) {
#if MISTAKE == 13
      const unsigned dd = d + COLS;             // past the allocation
#elif MISTAKE == 23
      const unsigned dd = d + (32u << 16);      // D from lane 32: an M = 128 MMA fills lanes 0..127
#else
      const unsigned dd = d;
#endif
      asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %4, 0;\n tcgen05.mma.cta_group::1.kind::KIND [%0], %1, %2, %3, p;\n}"
                   :: "r"(dd), "l"(descs[2 * i] + s4), "l"(descs[2 * i + 1] + s4), "r"(idesc), "r"((unsigned)(i > 0) | first_acc)
                   : "memory");
    }
#if MISTAKE != 10
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem_addr(&done)) : "memory");
#endif
#if MISTAKE == 25
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem_addr(&done)) : "memory");
#endif                                          // a second commit, whose arrival no wait observes before exit
  }
#if MISTAKE == 10
  __syncthreads();                              // no commit, no wait
#elif MISTAKE == 8
  if (warp == 0) {                              // only warp 0 waits, and tells nobody
#else
  {
#endif
#if MISTAKE != 10
    asm volatile("{\n .reg .pred ok;\nW_%=:\n mbarrier.try_wait.parity.shared::cta.b64 ok, [%0], 0;\n @!ok bra W_%=;\n}"
                 :: "r"(smem_addr(&done)) : "memory");
  }
#endif
#if MISTAKE != 7
  fence_after();
#endif
#if MISTAKE == 5
  const unsigned rows = d + ((unsigned)(32 * (warp % 4) + lane) << 16);     // lane-varying
#elif MISTAKE == 6
  const unsigned rows = d + ((unsigned)(32 * ((warp + 1) % 4)) << 16);     // another warp's quarter
#else
  const unsigned rows = d + ((unsigned)(32 * (warp % 4)) << 16);
#endif
  for (int c = 0; c < N; c += 8) {
    unsigned r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(rows + c));
#if MISTAKE != 4
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#endif
    for (int i = 0; i < 8; ++i) {
#if MISTAKE == 15
      C[(32 * warp + lane) * N + c + i] = 2.0f * __uint_as_float(r[i]) + 1.0f;   // derived from TMEM
#elif MISTAKE == 16
      C[(32 * warp + lane) * N + c + i] = 1.0f;                                  // not from TMEM
#elif MISTAKE == 24
      reinterpret_cast<volatile float*>(smem)[threadIdx.x * 8 + i] = __uint_as_float(r[i]);   // staged in shared
      C[(32 * warp + lane) * N + c + i] = reinterpret_cast<volatile float*>(smem)[threadIdx.x * 8 + i];
#else
      C[(32 * warp + lane) * N + c + i] = __uint_as_float(r[i]);
#endif
    }
  }
#if MISTAKE == 20 || MISTAKE == 21
#if MISTAKE == 21
  fence_before();                               // the reads above, ordered before the next tile's MMA
  __syncthreads();
  fence_after();
#endif
  if (threadIdx.x == 0) {                       // the next tile's first MMA into the same columns
    const unsigned long long s4 = smem_addr(smem) >> 4;
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %4, 0;\n tcgen05.mma.cta_group::1.kind::KIND [%0], %1, %2, %3, p;\n}"
                 :: "r"(d), "l"(descs[0] + s4), "l"(descs[1] + s4), "r"(idesc), "r"(0u) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem_addr(&done)) : "memory");
  }
  asm volatile("{\n .reg .pred ok;\nV_%=:\n mbarrier.try_wait.parity.shared::cta.b64 ok, [%0], 1;\n @!ok bra V_%=;\n}"
               :: "r"(smem_addr(&done)) : "memory");
#endif
#if MISTAKE != 9
  fence_before();
  __syncthreads();
#endif
#if MISTAKE != 3
  if (warp == 0) {
    fence_after();
#if MISTAKE == 11
    dealloc(d, COLS / 2);                        // not what was allocated
#else
    dealloc(d, COLS);
#endif
  }
#endif
}
"""

KIND = {"bf16": "f16", "f16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4"}
CODE = {"bf16": 1, "f16": 0, "tf32": 2, "e4m3": 0, "e5m2": 1}          # instruction-descriptor A/B format
ESIZE = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
SWZ = {"none": 0, "128B": 2, "64B": 4, "32B": 6}


def probe(mistake=0, fmt="bf16"):
    return build.compile(PROBE.replace("KIND", KIND[fmt]), target="sm_100a", defines={"MISTAKE": mistake},
                         name="tcgen05_probe.cu")


def values(fmt, shape, rng):
    """Random normal numbers in the format: (codes as raw bytes per element, float64 values)."""
    x = rng.standard_normal(shape).astype(np.float32)
    if fmt == "bf16":
        v = x.astype(ml_dtypes.bfloat16)
    elif fmt == "f16":
        v = x.astype(np.float16)
    elif fmt == "tf32":                                  # representable in tf32: low 13 bits clear
        v = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    else:
        v = x.astype({"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[fmt])
    return np.ascontiguousarray(v).view(np.uint8).reshape(*shape, ESIZE[fmt]), v.astype(np.float64)


def sdesc(start, lbo, sbo, swizzle, version=1):
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 \
        | version << 46 | SWZ[swizzle] << 61


def setup(fmt="bf16", swizzle="none", N=128, k_bytes=128, seed=None, version=1):
    """The image (A at 0, B after it), the descriptors of each 32-byte K slice, the idesc, the reference."""
    rng = np.random.default_rng(seed)
    es = ESIZE[fmt]
    K = k_bytes // es
    (ab, av), (bb, bv) = values(fmt, (128, K), rng), values(fmt, (N, K), rng)
    size_a = 128 * k_bytes
    img = np.zeros(size_a + N * k_bytes, np.uint8)
    for base, raw, rows in ((0, ab, 128), (size_a, bb, N)):
        r, k = np.meshgrid(np.arange(rows), np.arange(K), indexing="ij")
        off = base + wgmma.kmajor_offset(r, k, swizzle, elem_bytes=es, rows=rows, k_elems=K)
        img[off[..., None] + np.arange(es)] = raw
    lbo, sbo = wgmma.kmajor_strides(swizzle, rows=128, k_bytes=k_bytes)
    descs = []
    for i in range(k_bytes // 32):                       # every kind takes 32 bytes of K per MMA
        step = wgmma.kmajor_offset(0, i * 32 // es, swizzle, elem_bytes=es, rows=128, k_elems=K)
        descs += [sdesc(step, lbo, sbo, swizzle, version), sdesc(size_a + step, lbo, sbo, swizzle, version)]
    idesc = (1 << 4) | CODE[fmt] << 7 | CODE[fmt] << 10 | (N >> 3) << 17 | (128 >> 4) << 24
    return img, np.array(descs, np.uint64), idesc, av @ bv.T


def run(mistake=0, fmt="bf16", swizzle="none", N=128, k_bytes=128, first_acc=0, version=1, seed=None, idesc_n=None):
    img, descs, idesc, ref = setup(fmt, swizzle, N, k_bytes, seed, version)
    if idesc_n is not None:                              # an instruction descriptor with another N
        idesc = (idesc & ~(0x3F << 17)) | (idesc_n >> 3) << 17
    c = np.full((128, N), np.nan, np.float32)
    rep = model.run(probe(mistake, fmt), "probe", grid=(1, 1, 1), block=(128, 1, 1),
                    args=(img, np.int32(img.size // 16), descs, np.int32(len(descs) // 2), np.uint32(idesc),
                          np.uint32(first_acc), c, np.int32(N)), shared_bytes=img.size)
    return rep, c, ref


# ------------------------------------------------------------------------------------------ arithmetic
@pytest.mark.parametrize("fmt,swizzle,N", [("bf16", "none", 128), ("bf16", "128B", 64), ("f16", "64B", 256),
                                           ("tf32", "32B", 16), ("e4m3", "none", 128), ("e5m2", "128B", 32)])
def test_mma_matches_float64(fmt, swizzle, N):
    k_bytes = {"none": 128, "128B": 128, "64B": 64, "32B": 32}[swizzle]
    rep, c, ref = run(fmt=fmt, swizzle=swizzle, N=N, k_bytes=k_bytes)
    assert not np.isnan(c).any()
    scale = np.sqrt(np.abs(ref).max() + 1)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-5 * scale * k_bytes)
    assert rep.counts["tcgen05.mma"] == k_bytes // 32
    assert rep.counts["tcgen05.mma.flops"] == 2 * 128 * N * (k_bytes // ESIZE[fmt])


def test_enable_input_d_on_the_first_mma_reads_poisoned_tensor_memory():
    rep, c, ref = run(first_acc=1)
    assert np.isnan(c).all()


def test_tcgen05_st_then_accumulate_adds_onto_what_was_stored():
    rep, c, ref = run(19, first_acc=1)
    np.testing.assert_allclose(c, ref + 1.0, rtol=0, atol=1e-3)
    assert rep.counts["tcgen05.st"] == 4 * 128 and rep.counts["tcgen05.wait::st"] == 4


def test_the_output_carries_tensor_memory_only_when_it_comes_from_tcgen05_ld():
    rep, c, ref = run()
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"] == 128 * 128 * 4
    rep, c, ref = run(15)                              # 2 v + 1: still the MMA's data
    np.testing.assert_allclose(c, 2 * ref + 1, atol=1e-3)
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"]
    rep, c, ref = run(24)                              # through shared memory: the mark goes with the bytes
    np.testing.assert_allclose(c, ref, atol=1e-3)
    assert rep.counts["gstore.from.tcgen05.ld.bytes"] == rep.counts["gstore.bytes"]
    rep, c, ref = run(16)                              # a constant: nothing of the MMA
    assert rep.counts.get("gstore.from.tcgen05.ld.bytes", 0) == 0 and rep.counts["gstore.bytes"] > 0


# ------------------------------------------------------------------------------------------ rules
@pytest.mark.parametrize("mistake,rule", [
    (1, "tcgen05-aligned"), (2, "tcgen05-relinquished"), (3, "tcgen05-leak"), (4, "tcgen05-wait-ld"),
    (5, "tcgen05-uniform"), (6, "tcgen05-lane-quarter"), (7, "tcgen05-fence-after"), (8, "tcgen05-visibility"),
    (9, "tcgen05-dealloc-order"), (10, "tcgen05-ld-in-flight"), (11, "tcgen05-dealloc"), (13, "tcgen05-unallocated"),
    (14, "tcgen05-alloc-grows"), (17, "proxy-fence"), (18, "tcgen05-wait-st"), (20, "tcgen05-mma-overwrite"),
    (22, "tcgen05-alloc-size"), (23, "tcgen05-mma-address"), (25, "tcgen05-commit-at-exit"),
])
def test_each_broken_rule_is_a_violation_naming_it(mistake, rule):
    with pytest.raises(model.Violation) as e:
        run(mistake)
    assert e.value.rule == rule, str(e.value)
    assert "tcgen05_probe.cu:" in str(e.value)
    assert "(PTX ISA, 9.7.16" in str(e.value) or rule == "proxy-fence"


def test_an_allocation_that_never_fits_hangs():
    with pytest.raises(model.Hang, match="tcgen05.alloc of 256 columns"):
        run(12)


def test_a_descriptor_without_its_fixed_bits_is_a_violation():
    with pytest.raises(model.Violation, match="bits 46-48") as e:
        run(version=0)
    assert e.value.rule == "tcgen05-descriptor"


def test_an_instruction_descriptor_with_an_impossible_n_is_a_violation():
    with pytest.raises(model.Violation, match="N = 8") as e:
        run(idesc_n=8)
    assert e.value.rule == "tcgen05-idesc"


def test_every_tcgen05_rule_of_the_model_is_broken_by_a_test_here():
    """tests/model/test_model_rules.py breaks the other rules with PTX snippets; sm_100a rules are broken here,
    in tests/model/test_model_blockscaled.py (tcgen05.cp), tests/chapters/ch05_blackwell/test_blockscaled.py (block
    scaling) and, for CTA pairs, tests/model/test_model_tcgen05_pair.py."""
    from pathlib import Path
    from judge.model import checks
    here = Path(__file__).resolve()
    src = "".join(p.read_text() for p in (here, here.with_name("test_model_blockscaled.py"),
                                          here.with_name("test_model_tcgen05_pair.py"),
                                          here.parents[1] / "chapters" / "ch05_blackwell" / "test_blockscaled.py"))
    assert {r for r in checks.RULES if r.startswith("tcgen05-")} <= {r for r in checks.RULES if f'"{r}"' in src}


def test_the_correct_probe_breaks_no_rule_and_frees_everything():
    rep, c, ref = run(21)                          # with a second tile's MMA, ordered after the reads
    assert rep.counts["tcgen05.mma"] == 5 and rep.counts["tcgen05.commit"] == 2
    rep, c, ref = run()
    assert rep.counts["tcgen05.alloc"] == rep.counts["tcgen05.dealloc"] == 1
    assert rep.counts["tcgen05.commit"] == 1 and rep.counts["tcgen05.ld"] == 4 * 16


UNSUPPORTED = {
    "block_scale A in tensor memory": 'asm volatile("{\\n .reg .pred p;\\n setp.ne.u32 p, %0, 0;\\n tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 [%0], [%0], %1, %0, [%0], [%0], p;\\n}" :: "r"(a), "l"((unsigned long long)a) : "memory");',
    "tcgen05.cp decompressing": 'asm volatile("tcgen05.cp.cta_group::1.128x128b.b8x16.b6x16_p32 [%0], %1;" :: "r"(a), "l"((unsigned long long)a) : "memory");',
}


@pytest.mark.parametrize("what", list(UNSUPPORTED))
def test_what_the_model_does_not_cover_is_unsupported_never_a_verdict(what):
    src = ('extern "C" __global__ void k(unsigned a) { if (threadIdx.x == 0) { ' + UNSUPPORTED[what] + " } }")
    b = build.compile(src, target="sm_100a", name="unsupported.cu")
    with pytest.raises(model.Unsupported):
        model.run(b, "k", grid=1, block=32, args=(np.uint32(0),))


def test_descriptor_decoders_read_the_fields_where_the_isa_puts_them():
    d = tcgen05.decode_sdesc(sdesc(0x1230, 128, 1024, "128B"))
    assert (d["start"], d["lbo"], d["sbo"], d["fixed"], d["swizzle"]) == (0x1230, 128, 1024, 1, 2)
    f = tcgen05.decode_idesc((1 << 4) | (1 << 7) | (1 << 10) | (256 >> 3) << 17 | (128 >> 4) << 24, "kind::f16")
    assert (f["a"], f["b"], f["n"], f["m"], f["dtype"]) == ("bf16", "bf16", 256, 128, 1)
    f = tcgen05.decode_idesc((1 << 4) | (1 << 7) | (5 << 10) | (64 >> 3) << 17 | (128 >> 4) << 24, "kind::f8f6f4")
    assert (f["a"], f["b"]) == ("e5m2", "e2m1")


def test_the_exercise_runs_on_the_model_well_within_five_seconds():
    """tcgen05_gemm's solution on its model cases (what one check runs): under 5 s on the 2-core machine."""
    import importlib.util
    from judge.grading import exercise
    ex = exercise.get("tcgen05_gemm")
    spec = importlib.util.spec_from_file_location("tcgen05_check", ex.folder / "check.py")
    chk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chk)
    b = build.compile(ex.solution_path, target="sm_100a")
    seconds = 0.0
    from judge.grading import cuda_flow
    for case in cuda_flow.draw_model_cases(chk, ex):
        ins = chk.inputs(case, np, np.random.default_rng())
        outs = chk.outputs(case, ins, np)
        outs["c"][:] = np.nan
        seconds += chk.launch(b, case, ins, outs).seconds          # the model's report of this launch
        ref = chk.reference(case, ins)["c"]
        assert np.abs(outs["c"] - ref).max() <= chk.tolerance(case)["atol"]
    assert seconds < 5.0

