"""CTA pairs in the CPU model (tcgen05 .cta_group::2): the M = 256 MMA over two CTAs against float64, and each
pair rule broken by one change to a probe.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_tcgen05_pair.py -q

PAIR below (compiled for sm_100a, launched as one cluster of 2) has each CTA copy its own shared-memory
image (its 128 rows of A, then its N / 2 rows of B, K-major, no swizzle) that the host lays out, allocates
with .cta_group::2 in both CTAs, lets one thread of the even CTA issue the MMAs and a multicast commit
that arrives on the `done` mbarrier of both CTAs, and has every warp of both CTAs read its quarter of its
CTA's 128 rows of D back. `MISTAKE = n` compiles it with one thing changed. Inputs are fresh random bf16
numbers and C starts as NaN.
"""
import ml_dtypes
import numpy as np
import pytest

from judge import model
from judge.gpu import build
from judge.hw import wgmma

PAIR = r"""
// tcgen05_pair_probe.cu - a CTA pair: two shared images -> one M = 256 MMA per K slice -> multicast commit -> C.
#ifndef MISTAKE
#define MISTAKE 0
#endif
#ifndef ISSUER
#define ISSUER 0
#endif
#define COLS 256
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(128, 1) pair(const uint4* img, int n16, const unsigned long long* descs,
    int n_mma, unsigned idesc, float* C, int N) {
  extern __shared__ __align__(1024) uint4 smem[];
  __shared__ alignas(8) unsigned long long done;
  __shared__ unsigned base;
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#if MISTAKE == 3 || MISTAKE == 6
  if (rank == 1) return;                        // the peer never allocates, and exits
#endif
#if MISTAKE == 6
  if (false) {                                  // ... and this CTA does not wait for it: it issues the MMA
#elif MISTAKE == 4
  if (warp == 0 && rank == 0) {                 // one side allocates; the other goes on to the cluster barrier
#else
  if (warp == 0) {
#endif
#if MISTAKE == 5
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;"
                 :: "r"(smem_addr(&base)), "r"(rank == 0 ? COLS : COLS / 2) : "memory");   // different sizes
#else
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;"
                 :: "r"(smem_addr(&base)), "r"(COLS) : "memory");
#endif
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&done)) : "memory");
  const uint4* mine = img + rank * n16;         // this CTA's image: its rows of A, then its half of B
  for (int i = threadIdx.x; i < n16; i += blockDim.x) smem[i] = mine[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  fence_before();
  cluster_sync();                               // both images and both allocations before the MMA
  fence_after();
  const unsigned d = base;
  if (rank == ISSUER && threadIdx.x == 0) {     // one thread of the pair (either CTA may issue)
    const unsigned long long s4 = smem_addr(smem) >> 4;
    for (int i = 0; i < n_mma; ++i)
      asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %4, 0;\n tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n}"
                   :: "r"(d), "l"(descs[2 * i] + s4), "l"(descs[2 * i + 1] + s4), "r"(idesc), "r"((unsigned)(i > 0))
                   : "memory");
#if MISTAKE == 1
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                 :: "r"(smem_addr(&done)) : "memory");                  // no multicast: only this CTA's done
#elif MISTAKE == 7
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                 :: "r"(smem_addr(&done)), "h"((unsigned short)0x5) : "memory");   // rank 2: not in the cluster
#else
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                 :: "r"(smem_addr(&done)), "h"((unsigned short)0x3) : "memory");
#endif
  }
  asm volatile("{\n .reg .pred ok;\nW_%=:\n mbarrier.try_wait.parity.shared::cta.b64 ok, [%0], 0;\n @!ok bra W_%=;\n}"
               :: "r"(smem_addr(&done)) : "memory");
  fence_after();
  const unsigned rows = d + ((unsigned)(32 * (warp % 4)) << 16);
  for (int c = 0; c < N; c += 8) {
    unsigned r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(rows + c));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int i = 0; i < 8; ++i) C[(128 * rank + 32 * warp + lane) * N + c + i] = __uint_as_float(r[i]);
  }
  fence_before();
  cluster_sync();                               // no tensor-memory access of the pair is left
  if (warp == 0) {
    fence_after();
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" :: "r"(d), "r"(COLS) : "memory");
  }
}
"""


def probe(mistake=0, issuer=0):
    return build.compile(PAIR, target="sm_100a", defines={"MISTAKE": mistake, "ISSUER": issuer},
                         name="tcgen05_pair_probe.cu")


def sdesc(start, lbo, sbo):
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | 1 << 46


def setup(N=128, K=64, seed=None):
    """Two images (CTA 0's, CTA 1's): each its 128 rows of A at 0 and its N / 2 rows of B after them, K-major
    8 x 16-byte core matrices; the descriptors of each 16-element K slice; the idesc (M = 256); A B^T."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((256, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
    k_bytes, size_a = 2 * K, 128 * 2 * K
    imgs = []
    for q in range(2):
        img = np.zeros(size_a + (N // 2) * k_bytes, np.uint8)
        for start, vals in ((0, a[128 * q:128 * (q + 1)]), (size_a, b[(N // 2) * q:(N // 2) * (q + 1)])):
            rows = vals.shape[0]
            r, k = np.meshgrid(np.arange(rows), np.arange(K), indexing="ij")
            off = start + wgmma.kmajor_offset(r, k, "none", elem_bytes=2, rows=rows, k_elems=K)
            img[off[..., None] + np.arange(2)] = np.ascontiguousarray(vals).view(np.uint8).reshape(rows, K, 2)
        imgs.append(img)
    lbo, sbo = wgmma.kmajor_strides("none", rows=128, k_bytes=k_bytes)
    descs = []
    for i in range(K // 16):
        step = wgmma.kmajor_offset(0, i * 16, "none", elem_bytes=2, rows=128, k_elems=K)
        descs += [sdesc(step, lbo, sbo), sdesc(size_a + step, lbo, sbo)]
    idesc = (1 << 4) | (1 << 7) | (1 << 10) | (N >> 3) << 17 | (256 >> 4) << 24
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    return np.concatenate(imgs), imgs[0].size, np.array(descs, np.uint64), idesc, ref


def run(mistake=0, N=128, K=64, cluster=(2, 1, 1), seed=None, issuer=0):
    img, size, descs, idesc, ref = setup(N, K, seed)
    c = np.full((256, N), np.nan, np.float32)
    rep = model.run(probe(mistake, issuer), "pair", grid=(2, 1, 1), block=(128, 1, 1), cluster=cluster,
                    args=(img, np.int32(size // 16), descs, np.int32(len(descs) // 2), np.uint32(idesc), c,
                          np.int32(N)), shared_bytes=size)
    return rep, c, ref


@pytest.mark.parametrize("N,K", [(128, 64), (256, 32), (64, 128)])
def test_the_pair_mma_matches_float64_in_both_ctas(N, K):
    rep, c, ref = run(N=N, K=K)
    assert not np.isnan(c).any()
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-5 * K)
    assert rep.counts["tcgen05.mma.cta_group::2"] == K // 16          # one MMA per K slice, for both CTAs
    assert rep.counts["tcgen05.mma.flops"] == 2 * 256 * N * K
    assert rep.counts["tcgen05.alloc"] == rep.counts["tcgen05.dealloc"] == 2
    assert rep.counts["tcgen05.commit"] == 1 and rep.counts["tcgen05.ld"] == 2 * 4 * (N // 8)


def test_the_odd_cta_may_issue_the_pair_mma_too():
    """PTX ISA 9.7.16.5: "a single thread from the CTA-Pair" issues it; the rows still land by CTA."""
    rep, c, ref = run(issuer=1)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-5 * 64)


FULL = r"""
// tcgen05_pair_full.cu - warp 0 of each CTA takes all 512 columns as a pair; warp 1's pair alloc waits until
// warp 0 has freed them in BOTH CTAs (the two deallocs come one after the other), then gets its columns.
extern "C" __global__ void __launch_bounds__(64, 1) full(unsigned* out) {
  __shared__ unsigned first, second;
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int warp = threadIdx.x / 32;
  if (warp == 0)
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 512;"
                 :: "r"((unsigned)__cvta_generic_to_shared(&first)) : "memory");
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (warp == 1) {                              // tensor memory is full: this waits for warp 0's dealloc
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 256;"
                 :: "r"((unsigned)__cvta_generic_to_shared(&second)) : "memory");
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 256;" :: "r"(second) : "memory");
    if (threadIdx.x == 32) out[rank] = second;
  } else {
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 512;" :: "r"(first) : "memory");
  }
}
"""


def test_a_pair_alloc_that_finds_tensor_memory_full_waits_for_a_dealloc_in_either_cta():
    b = build.compile(FULL, target="sm_100a", name="tcgen05_pair_full.cu")
    out = np.full(2, 0xFFFFFFFF, np.uint32)
    rep = model.run(b, "full", grid=(2, 1, 1), block=(64, 1, 1), cluster=(2, 1, 1), args=(out,))
    assert out[0] == out[1] and out[0] in (0, 256)                 # the same columns in both CTAs
    assert rep.counts["tcgen05.alloc"] == rep.counts["tcgen05.dealloc"] == 4


def test_a_commit_without_multicast_leaves_the_peer_waiting():
    with pytest.raises(model.Hang, match=r"block rank 1"):
        run(1)


def test_a_pair_alloc_whose_peer_exits_is_a_violation():
    with pytest.raises(model.Violation, match="exited without allocating") as e:
        run(3)
    assert e.value.rule == "tcgen05-pair-alloc"


def test_a_pair_alloc_made_by_one_side_only_hangs_and_says_why():
    with pytest.raises(model.Hang, match=r"tcgen05.alloc.cta_group::2 of block rank 0 for a warp of the peer"):
        run(4)


def test_a_pair_alloc_of_different_sizes_is_a_violation():
    with pytest.raises(model.Violation, match="the same columns in both") as e:
        run(5)
    assert e.value.rule == "tcgen05-pair-alloc"


def test_an_mma_issued_after_the_peer_exited_is_a_violation():
    with pytest.raises(model.Violation, match="after its peer CTA") as e:
        run(6)
    assert e.value.rule == "tcgen05-pair-exited"


def test_a_commit_mask_naming_a_cta_outside_the_cluster_is_a_violation():
    with pytest.raises(model.Violation, match="ctaMask 0x0005") as e:
        run(7)
    assert e.value.rule == "tcgen05-commit-mask"


def test_mixing_cta_group_1_and_2_in_one_kernel_is_a_violation():
    """ptxas refuses such a kernel ("uses single CTA(.cta_group::1) and CTA pair granularity(.cta_group::2)");
    the model, which runs PTX, says so too: the probe's PTX with its commit made .cta_group::1."""
    text = probe().ptx
    commit = "tcgen05.commit.cta_group::2."
    assert text.count(commit) == 1
    img, size, descs, idesc, ref = setup()
    c = np.full((256, 128), np.nan, np.float32)
    with pytest.raises(model.Violation, match=r"with \.cta_group::1 .* after the \.cta_group::2") as e:
        model.run(text.replace(commit, "tcgen05.commit.cta_group::1."), "pair", grid=(2, 1, 1), block=(128, 1, 1),
                  cluster=(2, 1, 1), args=(img, np.int32(size // 16), descs, np.int32(len(descs) // 2),
                                           np.uint32(idesc), c, np.int32(128)), shared_bytes=size)
    assert e.value.rule == "tcgen05-cta-group-mix"


def test_a_pair_instruction_without_a_cluster_is_a_violation():
    with pytest.raises(model.Violation, match="no peer CTA") as e:
        run(cluster=(1, 1, 1))
    assert e.value.rule == "tcgen05-pair"


def test_an_m128_pair_mma_is_unsupported_never_a_verdict():
    img, size, descs, idesc, ref = setup()
    idesc = (idesc & ~(0x1F << 24)) | (128 >> 4) << 24
    c = np.full((256, 128), np.nan, np.float32)
    with pytest.raises(model.Unsupported, match="M = 128 with .cta_group::2"):
        model.run(probe(), "pair", grid=(2, 1, 1), block=(128, 1, 1), cluster=(2, 1, 1),
                  args=(img, np.int32(size // 16), descs, np.int32(len(descs) // 2), np.uint32(idesc), c,
                        np.int32(128)), shared_bytes=size)
