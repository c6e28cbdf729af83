"""MN-major operands and base offsets on the CPU model: wgmma (imm-trans) and tcgen05.mma (idesc bits 15-16).

Run: python -m pytest tests/model/test_model_descriptors.py -q
Each case lays A and B out in shared memory in a canonical layout (judge.hw.mma_layout), names them by
descriptors, runs the kernel's PTX on the model with fresh random inputs and a NaN-poisoned output, and
compares C with a float64 GEMM. A descriptor with one classic mistake (LBO and SBO not swapped for an
MN-major tile, the wrong transpose bit, base offset 0 for a tile off its swizzle's repeat) must give a
wrong C, while the same tile read K-major from a K-major copy (written another way) gives the right one.
"""
import ml_dtypes
import numpy as np
import pytest

from judge import model
from judge.hw import mma_layout as L
from judge.hw import umma
from judge.hw import wgmma as hw_wgmma
from judge.model import snippet
from tests.model.test_model_tcgen05 import ESIZE, probe, values

WG_PARAMS = (("img", "u64"), ("out", "u64"), ("da", "u64"), ("db", "u64"))


def place(img, base, mat_bytes, swizzle, major, rows, k_elems, eb):
    """Write a rows x k_elems operand (raw bytes per element) at img[base:] in the canonical layout."""
    r, k = np.meshgrid(np.arange(rows), np.arange(k_elems), indexing="ij")
    off = base + L.tile_offset(r, k, swizzle, major, rows=rows, k_elems=k_elems, elem_bytes=eb)
    img[off[..., None] + np.arange(eb)] = mat_bytes


# ---------------------------------------------------------------------------------------------- wgmma
def wgmma_run(swizzle, major_a, major_b, n=64, mistake=None):
    """One m64n{n}k16 bf16 wgmma (scale-d 0) from A (64 x 16) at 0 and B (n x 16) at 2048, each in the
    layout of its major; imm-trans-a/b = 1 for an MN-major operand. Returns (C, float64 reference)."""
    rng = np.random.default_rng()
    A = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((n, 16)).astype(ml_dtypes.bfloat16)
    img = np.zeros(4096, np.uint8)
    descs = []
    for mat, base, major, rows in ((A, 0, major_a, 64), (B, 2048, major_b, n)):
        # a K-major k16 tile has 32 bytes per row: dense in the 32B layout (or none), not in 64B / 128B
        sw = swizzle if major == "MN" or swizzle == "none" else "32B"
        place(img, base, mat.view(np.uint8).reshape(rows, 16, 2), sw, major, rows, 16, 2)
        lbo, sbo = L.tile_strides(sw, major, rows=rows, k_elems=16)
        if mistake == "lbo_sbo_not_swapped" and major == "MN":
            lbo, sbo = sbo, lbo                     # K-major roles: SBO taken for the M/N step
        descs.append(hw_wgmma.encode(base, lbo, sbo, sw))
    ta, tb = int(major_a == "MN"), int(major_b == "MN")
    if mistake == "transpose_bit":
        tb = 1 - tb
    out = np.full((128, n // 2), np.nan, np.float32)
    regs = ", ".join(f"%f{i}" for i in range(1, n // 2 + 1))
    stores = "".join(f"    st.global.f32 [%rd8+{4 * i}], %f{i + 1};\n" for i in range(n // 2))
    snippet.run(f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [img];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [da];
    ld.param.u64 %rd4, [db];
    mov.u32 %r1, buf;
    mul.wide.u32 %rd5, %r0, 32;
    add.s64 %rd6, %rd1, %rd5;
    shl.b32 %r2, %r0, 5;
    add.u32 %r3, %r1, %r2;
    ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd6];
    ld.global.v4.u32 {{%r14, %r15, %r16, %r17}}, [%rd6+16];
    st.shared.v4.u32 [%r3], {{%r10, %r11, %r12, %r13}};
    st.shared.v4.u32 [%r3+16], {{%r14, %r15, %r16, %r17}};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{regs}}}, %rd3, %rd4, 0, 1, 1, {ta}, {tb};
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    mul.wide.u32 %rd7, %r0, {2 * n};
    add.s64 %rd8, %rd2, %rd7;
{stores}""", (img, out, np.uint64(descs[0]), np.uint64(descs[1])), params=WG_PARAMS,
                shared="    .shared .align 1024 .b8 buf[16384];\n", block=(128, 1, 1))   # room for a wrong stride
    C = np.full((64, n), np.nan)
    for t in range(128):
        for i in range(n // 2):
            r, c = hw_wgmma.fragment_coord(t, i, n)
            C[r, c] = out[t, i]
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    return C, A64 @ B64.T, np.abs(A64) @ np.abs(B64).T


def close(C, ref, mag):
    return not np.isnan(C).any() and bool(np.all(np.abs(C - ref) <= mag * 2.0 ** -22 + 1e-30))


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("majors", [("K", "MN"), ("MN", "K"), ("MN", "MN")])
def test_wgmma_reads_mn_major_operands_with_the_transpose_immediates(swizzle, majors):
    C, ref, mag = wgmma_run(swizzle, *majors)
    assert close(C, ref, mag), np.nanmax(np.abs(C - ref))


@pytest.mark.parametrize("mistake", ["lbo_sbo_not_swapped", "transpose_bit"])
def test_wgmma_mn_major_mistakes_give_a_wrong_c_and_the_k_major_copy_a_right_one(mistake):
    C, ref, mag = wgmma_run("128B", "K", "MN", mistake=mistake)
    assert not close(C, ref, mag)
    C, ref, mag = wgmma_run("128B", "K", "K")                  # the same B written K-major
    assert close(C, ref, mag)


# ---------------------------------------------------------------------------------------------- tcgen05
def tcgen05_run(fmt, swizzle, major_a, major_b, N=64, a_at=0, mistake=None, seed=None):
    """M = 128, N, K = 128 bytes of K (four MMAs): A at a_at (its pattern starting there), B after it."""
    rng = np.random.default_rng(seed)
    es = ESIZE[fmt]
    K = 128 // es
    (ab, av), (bb, bv) = values(fmt, (128, K), rng), values(fmt, (N, K), rng)
    size_a = 128 * K * es
    b_at = -(-(a_at + size_a) // 1024) * 1024
    img = np.zeros(b_at + N * K * es + 32768, np.uint8)       # room past B for a wrong stride to read
    place(img, a_at, ab, swizzle, major_a, 128, K, es)
    place(img, b_at, bb, swizzle, major_b, N, K, es)
    bo = umma.base_offset_for(a_at, swizzle) if mistake != "base_offset" else 0
    descs = []
    for ks in range(4):
        da = umma.tile_descriptor(a_at, swizzle, major_a, rows=128, k_elems=K, ks=ks, elem_bytes=es, base_offset=bo)
        db = umma.tile_descriptor(b_at, swizzle, major_b, rows=N, k_elems=K, ks=ks, elem_bytes=es)
        if mistake == "lbo_sbo_not_swapped" and major_b == "MN":
            f = umma.decode(db)
            db = umma.encode(f.start, f.sbo, f.lbo, swizzle)
        descs += [da, db]
    kind = {"bf16": "kind::f16", "f16": "kind::f16", "tf32": "kind::tf32", "e4m3": "kind::f8f6f4"}[fmt]
    bm = major_b if mistake != "transpose_bit" else {"K": "MN", "MN": "K"}[major_b]
    idesc = umma.encode_idesc(kind, fmt, fmt, M=128, N=N, a_major=major_a, b_major=bm)
    c = np.full((128, N), np.nan, np.float32)
    model.run(probe(0, fmt), "probe", grid=(1, 1, 1), block=(128, 1, 1),
              args=(img, np.int32(img.size // 16), np.array(descs, np.uint64), np.int32(4), np.uint32(idesc),
                    np.uint32(0), c, np.int32(N)), shared_bytes=img.size)
    ref = av @ bv.T
    return c, ref, np.abs(av) @ np.abs(bv).T


def t_close(c, ref, mag):
    return not np.isnan(c).any() and bool(np.all(np.abs(c - ref) <= mag * 2.0 ** -21 + 1e-30))


@pytest.mark.parametrize("fmt,swizzle,majors", [
    ("bf16", "128B", ("K", "MN")), ("bf16", "64B", ("MN", "MN")), ("f16", "32B", ("MN", "K")),
    ("bf16", "none", ("MN", "MN")), ("tf32", "128B_base32B", ("MN", "MN")), ("e4m3", "128B", ("MN", "K"))])
def test_tcgen05_mma_reads_mn_major_operands_by_the_transpose_bits(fmt, swizzle, majors):
    c, ref, mag = tcgen05_run(fmt, swizzle, *majors)
    assert t_close(c, ref, mag), np.nanmax(np.abs(c - ref))


@pytest.mark.parametrize("swizzle,a_at", [("128B", 384), ("64B", 128), ("32B", 128), ("128B", 640)])
def test_tcgen05_mma_reads_a_tile_off_the_repeat_through_its_base_offset(swizzle, a_at):
    c, ref, mag = tcgen05_run("bf16", swizzle, "K", "MN", a_at=a_at)
    assert t_close(c, ref, mag)
    c, ref, mag = tcgen05_run("bf16", swizzle, "K", "MN", a_at=a_at, mistake="base_offset")
    assert not t_close(c, ref, mag)


@pytest.mark.parametrize("mistake", ["lbo_sbo_not_swapped", "transpose_bit"])
def test_tcgen05_mn_major_mistakes_give_a_wrong_c_and_the_k_major_copy_a_right_one(mistake):
    c, ref, mag = tcgen05_run("bf16", "128B", "K", "MN", N=128, mistake=mistake)
    assert not t_close(c, ref, mag)
    c, ref, mag = tcgen05_run("bf16", "128B", "K", "K", N=128)
    assert t_close(c, ref, mag)


def test_an_fp4_operand_marked_mn_major_is_a_verdict_and_an_fp8_one_is_read():
    with pytest.raises(ValueError, match="K-major"):
        umma.encode_idesc("kind::f8f6f4", "e2m1", "e2m1", M=128, N=64, b_major="MN")
    img = np.zeros(8 * 4096, np.uint8)                      # the verdict comes before any arithmetic
    descs = np.array([umma.encode(0, 16, 1024, "128B"), umma.encode(16384, 8192, 1024, "128B")] * 4, np.uint64)
    idesc = 1 << 4 | 0 << 7 | 5 << 10 | 1 << 16 | (64 >> 3) << 17 | (128 >> 4) << 24   # B e2m1, MN-major
    with pytest.raises(model.Violation, match="bit 16") as e:
        model.run(probe(0, "e4m3"), "probe", grid=(1, 1, 1), block=(128, 1, 1),
                  args=(img, np.int32(img.size // 16), descs, np.int32(4), np.uint32(idesc), np.uint32(0),
                        np.full((128, 64), np.nan, np.float32), np.int32(64)), shared_bytes=img.size)
    assert e.value.rule == "tcgen05-idesc"
    c, ref, mag = tcgen05_run("e4m3", "128B", "K", "MN", N=128)   # the same bit on an E4M3 B: read, and right
    assert t_close(c, ref, mag)


def test_the_register_form_a_fragment_is_the_isa_layout_written_as_strides():
    # The same layout written another way: thread (t0 = lane % 4, t1 = lane / 4, t2 = warp) and value
    # (v0, v1, v2) of 2 x 2 x 2 bf16 land at index t0*128 + t1 + t2*16 + v0*64 + v1*8 + v2*512 of the
    # 64 x 16 slice stored column-major (index = row + 64 k); register a[j] holds values 2j and 2j + 1.
    def by_strides(t, j, v0, v1_of=lambda j: j % 2, v2_of=lambda j: j // 2):
        idx = (t % 4) * 128 + ((t % 32) // 4) + (t // 32) * 16 + v0 * 64 + v1_of(j) * 8 + v2_of(j) * 512
        return idx % 64, idx // 64

    for t in range(128):
        for j in range(4):
            row, k = hw_wgmma.a_fragment_coord(t, j)
            for v0 in (0, 1):
                assert (row, k + v0) == by_strides(t, j, v0), (t, j, v0)
    # the comparison sees a mistake: registers 1 and 2 swapped (k halves before row bands) differ
    swapped = [by_strides(t, j, 0, v1_of=lambda j: j // 2, v2_of=lambda j: j % 2) for t in range(128) for j in range(4)]
    assert swapped != [hw_wgmma.a_fragment_coord(t, j) for t in range(128) for j in range(4)]
    with pytest.raises(ValueError, match="four .b32 registers"):
        hw_wgmma.a_fragment_coord(0, 4)
