"""tcgen05.cp and the block-scaled / sub-byte tcgen05.mma in the CPU model (judge.model.ops.tcgen05_cp, judge.model.block_scale).

Run: python -m pytest tests/model/test_model_blockscaled.py -q

A copy probe (CP_PROBE, sm_100a) lays a shared image out, lets one thread issue one tcgen05.cp of the
shape under test, commits, waits, and every warp reads its quarter of 8 columns back with tcgen05.ld:
where each source row must land is written out here per shape (PTX ISA 9.7.16.9.2), not taken from the
model. FP6 / FP4 operands of plain kind::f8f6f4 run through tests/model/test_model_tcgen05.py's probe.
Inputs are fresh random bytes; the outputs start as NaN / poison.
"""
import numpy as np
import pytest

from judge import model
from judge.gpu import build
from judge.hw import formats, wgmma
from judge.model import block_scale as BS
from tests.model import test_model_tcgen05 as T5

CP_PROBE = r"""
// cp_probe.cu - one tcgen05.cp SHAPE of a shared image into tensor memory, then every warp reads 8 columns back.
#ifndef MISTAKE
#define MISTAKE 0
#endif
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
extern "C" __global__ void __launch_bounds__(128, 1) cp_probe(const uint4* img, int n16, unsigned long long desc,
    unsigned lane0, unsigned* out) {
  extern __shared__ __align__(1024) uint4 smem[];
  __shared__ alignas(8) unsigned long long done;
  __shared__ unsigned base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(smem_addr(&base)) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&done)) : "memory");
  for (int i = threadIdx.x; i < n16; i += blockDim.x) smem[i] = img[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (threadIdx.x == 0) {
    asm volatile("tcgen05.cp.cta_group::1.SHAPE [%0], %1;" :: "r"(base + (lane0 << 16)), "l"(desc + (smem_addr(smem) >> 4)) : "memory");
#if MISTAKE != 1
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem_addr(&done)) : "memory");
#endif
  }
#if MISTAKE != 1
  asm volatile("{\n .reg .pred ok;\nW_%=:\n mbarrier.try_wait.parity.shared::cta.b64 ok, [%0], 0;\n @!ok bra W_%=;\n}"
               :: "r"(smem_addr(&done)) : "memory");
#endif
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  unsigned r[8];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(base + ((unsigned)(32 * warp) << 16)));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = r[i];
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(base) : "memory");
  }
}
"""

# shape -> (rows, bytes per row); and where source row r lands, written out from the PTX ISA's text
ROWS = {"128x256b": (128, 32), "128x128b": (128, 16), "4x256b": (4, 32), "64x128b.warpx2::02_13": (64, 16),
        "64x128b.warpx2::01_23": (64, 16), "32x128b.warpx4": (32, 16)}


def expected_lanes(shape, r, lane0):
    if shape in ("128x256b", "128x128b"):
        return [r]
    if shape == "4x256b":
        return [lane0 + 32 * r]
    if shape == "32x128b.warpx4":                       # all four warps
        return [r, r + 32, r + 64, r + 96]
    if shape == "64x128b.warpx2::02_13":                # warps 0 and 2 get rows 0..31, warps 1 and 3 rows 32..63
        return [r, r + 64]
    half, i = divmod(r, 32)                             # 01_23: warps 0, 1 get rows 0..31; warps 2, 3 rows 32..63
    return [64 * half + i, 64 * half + 32 + i]


def cp_probe(shape, mistake=0):
    return build.compile(CP_PROBE.replace("SHAPE", shape), target="sm_100a", defines={"MISTAKE": mistake},
                         name="cp_probe.cu")


def run_cp(shape, lane0=0, mistake=0, seed=None):
    rng = np.random.default_rng(seed)
    rows, rb = ROWS[shape.split(".b8x16")[0]]
    src = rng.integers(0, 2 ** 32, (rows, rb // 4), dtype=np.uint64).astype(np.uint32)
    # K-major core matrices, no swizzle: row r, 16-byte chunk h at (r // 8) * SBO + h * LBO + (r % 8) * 16
    lbo, sbo = 128 * max(1, rows // 8), 128                 # the second 16-byte half after every row group
    img = np.zeros(max(1024, rows * rb), np.uint8)
    for r in range(rows):
        for h in range(rb // 16):
            off = (r // 8) * sbo + h * lbo + (r % 8) * 16
            img[off:off + 16] = src[r, 4 * h:4 * h + 4].view(np.uint8)
    desc = T5.sdesc(0, lbo, sbo, "none")
    out = np.full((128, 8), 0xDEADBEEF, np.uint32)
    rep = model.run(cp_probe(shape, mistake), "cp_probe", grid=1, block=128,
                    args=(img, np.int32(img.size // 16), np.uint64(desc), np.uint32(lane0), out), shared_bytes=img.size)
    return rep, src, out


@pytest.mark.parametrize("shape", list(ROWS))
def test_each_cp_shape_lands_every_source_row_where_the_isa_says(shape):
    lane0 = 5 if shape == "4x256b" else 0
    rep, src, out = run_cp(shape, lane0)
    rows, rb = ROWS[shape]
    want = np.full((128, 8), 0x7FC0DEAD, np.uint32)       # cells no copy wrote keep the model's poison
    for r in range(rows):
        for lane in expected_lanes(shape, r, lane0):
            want[lane, :rb // 4] = src[r]
    assert np.array_equal(out, want)
    assert rep.counts["tcgen05.cp"] == 1


def test_a_copy_read_before_its_commit_arrives_is_a_violation():
    with pytest.raises(model.Violation) as e:
        run_cp("128x128b", mistake=1)
    assert e.value.rule == "tcgen05-ld-in-flight"


def test_a_copy_of_all_128_lanes_from_lane_32_is_a_violation():
    with pytest.raises(model.Violation) as e:
        run_cp("128x128b", lane0=32)
    assert e.value.rule == "tcgen05-cp-shape"


def test_decompressing_copies_are_unsupported():
    for form in ("128x128b.b8x16.b6x16_p32", "128x256b.b8x16.b4x16_p64"):
        with pytest.raises(model.Unsupported):
            run_cp(form)


# ------------------------------------------------------------------------------------------ decoding
def test_sub_byte_packing_round_trips_and_decodes_through_judge_hw_formats():
    rng = np.random.default_rng()
    for fmt, bits in (("e2m1", 4), ("e3m2", 6), ("e2m3", 6)):
        codes = rng.integers(0, 2 ** bits, (8, 64)).astype(np.uint8)
        packed = BS.pack_f8f6f4(codes, fmt)
        assert packed.shape == (8, 64)
        used = BS.PACKED16[fmt]
        assert (packed.reshape(8, 4, 16)[..., used:] == 0).all()             # the padding of each 16-byte unit
        assert np.array_equal(BS.unpack_f8f6f4(packed, fmt), codes)
    # FP6 little-endian bit order: element 0 in bits 0-5 of byte 0, element 1 from bit 6
    c = np.zeros((1, 16), np.uint8)
    c[0, 0], c[0, 1] = 0b000001, 0b100000
    assert list(BS.pack_f8f6f4(c, "e3m2")[0, :2]) == [0b00000001, 0b00001000]


def test_scale_ids_pick_the_bytes_of_each_cell():
    cells = np.zeros((128, 8), np.uint32)
    m = np.arange(128)
    codes = np.stack([(m + 17 * b) % 200 + 20 for b in range(4)], axis=1).astype(np.uint8)   # scale b of row m
    cells[m, m // 32] = sum(codes[:, b].astype(np.uint32) << np.uint32(8 * b) for b in range(4))   # byte b = scale b
    for sf_id in range(4):
        got = BS.scales_a(cells, 0, 128, 1, sf_id, "ue8m0")
        assert np.array_equal(got[:, 0], np.exp2(codes[:, sf_id].astype(np.float64) - 127))
    got = BS.scales_a(cells, 0, 128, 2, 2, "ue8m0")
    assert np.array_equal(got, np.exp2(codes[:, 2:4].astype(np.float64) - 127))
    got = BS.scales_a(cells, 0, 128, 4, 0, "ue4m3")
    assert np.array_equal(got, formats.decode(codes & 0x7F, "e4m3"), equal_nan=True)    # 0x7F: E4M3's NaN


def test_invalid_scale_vector_combinations_are_named():
    assert BS.scale_problem("kind::mxf8f6f4", 1, "ue8m0", 3, 2) == ""
    assert "scale_vec::1X" in BS.scale_problem("kind::mxf8f6f4", 2, "ue8m0", 0, 0)
    assert "UE4M3" in BS.scale_problem("kind::mxf4nvf4", 2, "ue4m3", 0, 0)
    assert BS.scale_problem("kind::mxf4nvf4", 4, "ue4m3", 0, 0) == ""
    assert "multiple of 2" in BS.scale_problem("kind::mxf4", 2, "ue8m0", 1, 0)
    assert BS.scale_vector("kind::mxf4nvf4", ["block16"])[0] == 4
    assert BS.scale_vector("kind::mxf4", [])[0] == 2
    assert BS.scale_vector("kind::mxf8f6f4", ["scale_vec::1X"])[0] == 1


# ------------------------------------------------------------------------------------------ kind::f8f6f4, FP6 / FP4
CODE = {"e2m3": 3, "e3m2": 4, "e2m1": 5}


@pytest.mark.parametrize("fa,fb", [("e2m1", "e2m1"), ("e3m2", "e2m3"), ("e2m3", "e2m1")])
def test_fp6_and_fp4_operands_of_kind_f8f6f4_match_float64(fa, fb):
    rng = np.random.default_rng()
    K, N = 128, 64
    ca = rng.integers(0, 2 ** formats.element(fa).bits, (128, K)).astype(np.uint8)
    cb = rng.integers(0, 2 ** formats.element(fb).bits, (N, K)).astype(np.uint8)
    img = np.zeros(128 * K + N * K, np.uint8)
    for base, codes, fmt, rows in ((0, ca, fa, 128), (128 * K, cb, fb, N)):
        raw = BS.pack_f8f6f4(codes, fmt)                                  # bytes laid out as 8-bit elements
        r, k = np.meshgrid(np.arange(rows), np.arange(K), indexing="ij")
        img[base + wgmma.kmajor_offset(r, k, "none", elem_bytes=1, rows=rows, k_elems=K)] = raw
    lbo, sbo = wgmma.kmajor_strides("none", rows=128, k_bytes=K)
    descs = []
    for i in range(K // 32):
        step = wgmma.kmajor_offset(0, i * 32, "none", elem_bytes=1, rows=128, k_elems=K)
        descs += [T5.sdesc(step, lbo, sbo, "none"), T5.sdesc(128 * K + step, lbo, sbo, "none")]
    idesc = (1 << 4) | CODE[fa] << 7 | CODE[fb] << 10 | (N >> 3) << 17 | (128 >> 4) << 24
    c = np.full((128, N), np.nan, np.float32)
    model.run(T5.probe(0, "e4m3"), "probe", grid=1, block=128,
              args=(img, np.int32(img.size // 16), np.array(descs, np.uint64), np.int32(len(descs) // 2),
                    np.uint32(idesc), np.uint32(0), c, np.int32(N)), shared_bytes=img.size)
    ref = formats.decode(ca, fa) @ formats.decode(cb, fb).T
    assert np.abs(c - ref).max() <= K * 2.0 ** -24 * (np.abs(formats.decode(ca, fa)) @ np.abs(formats.decode(cb, fb)).T).max()
    assert not np.isnan(c).any()


# ------------------------------------------------------------------------------------------ scales stored by the warps
ST_PROBE = r"""
// st_scales_probe.cu - the warps store the scale factors with tcgen05.st, thread 0 issues one MXFP8 MMA (K = 32, N = 32).
#ifndef MISTAKE
#define MISTAKE 0
#endif
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
extern "C" __global__ void __launch_bounds__(128, 1) st_probe(const uint4* img, int n16, unsigned long long adesc,
    unsigned long long bdesc, unsigned idesc, const unsigned* sfa_words, const unsigned* sfb_words, float* C) {
  extern __shared__ __align__(1024) uint4 smem[];
  __shared__ alignas(8) unsigned long long done;
  __shared__ unsigned base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 64;" :: "r"(smem_addr(&base)) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&done)) : "memory");
  for (int i = threadIdx.x; i < n16; i += blockDim.x) smem[i] = img[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const unsigned d = base, sfa = base + 32, sfb = base + 36;
  const unsigned mine = (unsigned)(32 * warp) << 16;     // this warp's lane quarter
  const unsigned* a = sfa_words + 4 * threadIdx.x;
  asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};"
               :: "r"(sfa + mine), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]) : "memory");
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" :: "r"(sfb + mine), "r"(sfb_words[threadIdx.x]) : "memory");
#if MISTAKE != 1
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
#endif
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (threadIdx.x == 0) {
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, 0, 0;\n"
                 " tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 [%0], %1, %2, %3, [%4], [%5], p;\n}"
                 :: "r"(d), "l"(adesc + (smem_addr(smem) >> 4)), "l"(bdesc + (smem_addr(smem) >> 4)), "r"(idesc),
                    "r"(sfa), "r"(sfb) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem_addr(&done)) : "memory");
  }
  asm volatile("{\n .reg .pred ok;\nW_%=:\n mbarrier.try_wait.parity.shared::cta.b64 ok, [%0], 0;\n @!ok bra W_%=;\n}"
               :: "r"(smem_addr(&done)) : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  unsigned r[8];
  for (int c = 0; c < 32; c += 8) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(d + mine + c));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int i = 0; i < 8; ++i) C[threadIdx.x * 32 + c + i] = __uint_as_float(r[i]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 64;" :: "r"(base) : "memory");
  }
}
"""


def run_st(mistake=0, sf_id=0):
    """One MMA, M = 128, N = 32, K = 32 of E4M3 with E8M0 scales the warps stored: C and the float64 reference.
    The host writes the cells as the ISA lays them out (lane l of quarter q, column j: the scale of row 32 j + l
    in byte sf_id; the other bytes hold other codes, which the MMA must not read)."""
    rng = np.random.default_rng()
    ca = rng.integers(0, 0x7F, (128, 32)).astype(np.uint8) & 0x7E           # E4M3 codes, no NaN
    cb = rng.integers(0, 0x7F, (32, 32)).astype(np.uint8) & 0x7E
    sa = rng.integers(120, 135, 128).astype(np.uint32)                       # E8M0: 2^-7 .. 2^7
    sb = rng.integers(120, 135, 32).astype(np.uint32)
    other = np.uint32(0x7F7F7F7F) & ~(np.uint32(0xFF) << np.uint32(8 * sf_id))   # 2^0 in the unread bytes
    sa_cells = np.zeros((128, 4), np.uint32)                                 # thread 32 w + l: lane 32 w + l
    for t in range(128):
        for j in range(4):
            sa_cells[t, j] = other | sa[32 * j + t % 32] << np.uint32(8 * sf_id)
    sb_cells = np.array([other | sb[t % 32] << np.uint32(8 * sf_id) for t in range(128)], np.uint32)
    img = np.zeros(128 * 32 + 32 * 32, np.uint8)
    for base, codes, rows in ((0, ca, 128), (128 * 32, cb, 32)):
        r, k = np.meshgrid(np.arange(rows), np.arange(32), indexing="ij")
        img[base + wgmma.kmajor_offset(r, k, "none", elem_bytes=1, rows=rows, k_elems=32)] = codes
    lbo, sbo = wgmma.kmajor_strides("none", rows=128, k_bytes=32)
    idesc = sf_id << 4 | (32 >> 3) << 17 | 1 << 23 | (128 >> 7) << 27 | sf_id << 29
    c = np.full((128, 32), np.nan, np.float32)
    b = build.compile(ST_PROBE, target="sm_100a", defines={"MISTAKE": mistake}, name="st_scales_probe.cu")
    model.run(b, "st_probe", grid=1, block=128,
              args=(img, np.int32(img.size // 16), np.uint64(T5.sdesc(0, lbo, sbo, "none")),
                    np.uint64(T5.sdesc(128 * 32, lbo, sbo, "none")), np.uint32(idesc), sa_cells.reshape(-1), sb_cells, c),
              shared_bytes=img.size)
    A = formats.decode(ca, "e4m3") * formats.e8m0_decode(sa)[:, None]
    B = formats.decode(cb, "e4m3") * formats.e8m0_decode(sb)[:, None]
    return c, A @ B.T, 32 * 2.0 ** -24 * (np.abs(A) @ np.abs(B).T)


@pytest.mark.parametrize("sf_id", [0, 3])
def test_scales_stored_by_the_warps_are_read_where_the_isa_lays_them_out(sf_id):
    c, ref, tol = run_st(sf_id=sf_id)
    assert not np.isnan(c).any() and (np.abs(c - ref) <= tol).all()


def test_scales_stored_without_tcgen05_wait_st_is_a_violation():
    with pytest.raises(model.Violation) as e:
        run_st(mistake=1)
    assert e.value.rule == "tcgen05-wait-st" and "scale" in str(e.value)
