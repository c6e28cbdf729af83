// gemm_2cta.cu - a tcgen05 GEMM whose tiles of 256 x BN are computed by a PAIR of CTAs (cta_group::2), sm_100a.
// judge: target=sm_100a features=tcgen05.2cta,tcgen05.commit,tma.load,mbarrier.wait,tmem.alloc,tmem.relinquish,tmem.dealloc,tmem.ld,cluster.barrier
// Build and inspect (any machine, no GPU): python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/gemm_2cta.cu').sass)"
// Run it on the CPU model (no GPU): chapters/ch05_blackwell/gemm_2cta.py (run_on_model); tests/chapters/ch05_blackwell/test_gemm_2cta.py.
// No Blackwell GPU has run this kernel: the course compiles it, reads its SASS and runs its PTX on judge.model.
//
// C[M][N] (fp32, row-major) = A[M][K] (bf16, row-major) * B[N][K]^T (bf16, row-major): both operands K-major.
// Clusters of 2 CTAs; the two CTAs of a cluster are a CTA PAIR (their %cluster_ctarank differ in bit 0).
// A pair computes one tile of 256 x BN at a time (persistent: pair p takes tiles p, p + pairs, ...):
//   rank 0 (the LEADER) holds rows m0 .. m0 + 127 of A and rows n0 .. n0 + BN/2 - 1 of B in its shared memory,
//   rank 1 (its PEER)   holds rows m0 + 128 .. m0 + 255 of A and rows n0 + BN/2 .. n0 + BN - 1 of B,
// and ONE thread of the leader issues tcgen05.mma.cta_group::2 of M = 256: it reads both CTAs' shared memory
// and writes rows m0 .. m0 + 127 of C's tile into the leader's tensor memory, rows m0 + 128 .. into the peer's.
// Each CTA loads half of B, so a pair moves (256 + BN) x 64 bf16 per K slice where two single CTAs making
// the same 256 x BN outputs would move (256 + 2 BN) x 64 (gemm_2cta.py's traffic_per_tile computes it).
//
// Roles (block = 192 threads = 6 warps, in both CTAs):
//   warp 0, lane 0   PRODUCER (both CTAs): waits its own empty[s], TMA-loads its A rows and B half into slot s,
//                    the bytes counted on the LEADER's full[s] (.cta_group::2 lets a TMA signal the peer's
//                    mbarrier); only the leader announces them (expect_tx of both CTAs' bytes).
//   warp 1           allocates tensor memory with .cta_group::2 (one warp in each CTA, together); in the leader,
//                    lane 0 is the MMA ISSUER of the pair.
//   warps 2..5       EPILOGUE (both CTAs): their own tensor memory -> C, then arrive on the leader's acc_empty.
// Barriers (every CTA has all of them at the same offsets; which ones are used):
//   full[s]       leader: its producer's arrive.expect_tx + both CTAs' TMA bytes  -> the issuer may read slot s
//   empty[s]      both: ONE multicast tcgen05.commit arrives in both CTAs          -> each producer may refill
//   acc_full[b]   both: ONE multicast commit after a tile's last MMA              -> each epilogue may read
//   acc_empty[b]  leader: all 256 epilogue threads of the pair                    -> the issuer may overwrite b
#include "cluster.cuh"
#include "tma.cuh"
#include "gemm_common.cuh"   // gemm::tmem_row_to_global (and judge/include/tcgen05.cuh: tc::desc_sw128)

#ifndef BN
#define BN 256          // columns per tile = N of the MMA = fp32 TMEM columns per accumulator buffer
#endif
#ifndef STAGES
#define STAGES 4        // ring depth: 4 x 32 KiB of shared memory per CTA for BN = 256
#endif
#define BM 128          // rows per CTA = TMEM lanes; the pair's tile is 2 * BM = 256 rows (M of the MMA)
#define BK 64           // K per slot: 64 bf16 = one 128-byte row, the 128B swizzle's span
#define UMMA_K 16       // K of one kind::f16 MMA (32 bytes of bf16)
#define ACC_BUFS 2
#define TMEM_COLS (ACC_BUFS * BN)   // RULE: a power of two >= 32 and <= 512 (PTX ISA 9.7.16.7.1)
#define THREADS 192
#define A_BYTES (BM * BK * 2)
#define B_BYTES ((BN / 2) * BK * 2)  // this CTA's half of B
#define PAIR_MASK 0x3   // ctaMask of the pair's commits: ranks 0 and 1 of the cluster
// Shared memory the host must give (per CTA): the ring, the barriers, and 1024 bytes to align the ring.
#define SMEM_BYTES (STAGES * (A_BYTES + B_BYTES) + 1024 + 256)

namespace pair {
// RULE: with .cta_group::2 one warp in EACH CTA of the pair executes alloc / relinquish / dealloc, and
// the first to arrive waits for the other (PTX ISA 9.7.16.5 Issue granularity); both get the same columns.
__device__ __forceinline__ void alloc(unsigned* dst_smem, unsigned ncols) {
  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;"
               :: "r"(tc::smem(dst_smem)), "r"(ncols) : "memory");
}
__device__ __forceinline__ void relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void dealloc(unsigned taddr, unsigned ncols) {
  asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols) : "memory");
}
// One thread issues it for the pair: A from the same offset in both CTAs' shared memory (128 rows each),
// B likewise (N / 2 rows each), D at the same tensor-memory address in both (128 lanes each).
__device__ __forceinline__ void mma_bf16(unsigned d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                         unsigned idesc, unsigned accumulate) {
  asm volatile(
      "{\n .reg .pred acc;\n"
      " setp.ne.u32 acc, %4, 0;\n"
      " tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, acc;\n}"
      :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}
// RULE: the MMAs read BOTH CTAs' shared memory and write both tensor memories: their completion must reach
// both CTAs. .multicast::cluster arrives once on the mbarrier at this offset in every CTA of ctaMask.
__device__ __forceinline__ void commit_both(unsigned long long* bar) {
  asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
               :: "r"(tc::smem(bar)), "h"((unsigned short)PAIR_MASK) : "memory");
}
// The same commit without .multicast: it arrives on the one mbarrier it names.
__device__ __forceinline__ void commit_one(unsigned long long* bar) {
  asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :: "r"(tc::smem(bar)) : "memory");
}
// A TMA box into THIS CTA's shared memory whose bytes are counted on the mbarrier at `bar_cluster` (a
// shared::cluster address). RULE: without .cta_group::2 that mbarrier must be in the destination CTA; with
// it, in the destination CTA or its peer (PTX ISA, cp.async.bulk.tensor).
__device__ __forceinline__ void load_2d(void* dst, const void* map, int x, int y, unsigned bar_cluster) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2"
               " [%0], [%1, {%2, %3}], [%4];"
               :: "r"(tc::smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
                  "r"(bar_cluster) : "memory");
}
// An arrival on the mbarrier at `bar_cluster` (possibly the peer's).
__device__ __forceinline__ void arrive_at(unsigned bar_cluster) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(bar_cluster) : "memory");
}
}  // namespace pair

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS, 1) gemm_2cta(
    const __grid_constant__ TensorMap map_a,   // A: box 64 (K) x BM rows, 128B swizzle
    const __grid_constant__ TensorMap map_b,   // B: box 64 (K) x BN / 2 rows, 128B swizzle
    float* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // RULE: a 128B-swizzled TMA destination (and the descriptor's base offset 0) needs 1024-byte alignment.
  unsigned char* ring = smem_raw + ((1024 - (tc::smem(smem_raw) & 1023)) & 1023);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(ring + STAGES * (A_BYTES + B_BYTES));
  unsigned long long* full = bars;                       // [STAGES]
  unsigned long long* empty = bars + STAGES;             // [STAGES]
  unsigned long long* acc_full = bars + 2 * STAGES;      // [ACC_BUFS]
  unsigned long long* acc_empty = bars + 2 * STAGES + ACC_BUFS;
  unsigned* tmem_slot = reinterpret_cast<unsigned*>(bars + 2 * STAGES + 2 * ACC_BUFS);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned rank = cluster::rank();                 // 0: the leader, 1: its peer
  const bool leader = (rank & 1) == 0;
  const unsigned lead = rank & ~1u;                      // the leader's rank
  const int pair_id = cluster::id_x(), pairs = cluster::count_x();
  const int tiles_n = N / BN, tiles = (M / (2 * BM)) * tiles_n, k_blocks = K / BK;

  if (warp == 1) {                       // RULE: one whole warp in EACH CTA of the pair (.sync.aligned)
    pair::alloc(tmem_slot, TMEM_COLS);
    pair::relinquish();
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tc::mbar_init(&full[s], 1);        // the leader's arrive.expect_tx (+ both CTAs' bytes)
      tc::mbar_init(&empty[s], 1);       // one multicast tcgen05.commit
    }
    for (int b = 0; b < ACC_BUFS; ++b) {
      tc::mbar_init(&acc_full[b], 1);    // one multicast tcgen05.commit
      tc::mbar_init(&acc_empty[b], 2 * 128);   // every epilogue thread of the pair
    }
    tc::fence_proxy_async();
    cluster::fence_mbarrier_init();      // RULE: the peer signals these: init, fence, then a cluster barrier
  }
  tc::fence_before();
  cluster::sync();                       // both CTAs' barriers and allocations exist before anyone signals
  tc::fence_after();
  const unsigned tmem = *tmem_slot;      // the same columns in both CTAs

  if (warp == 0 && lane == 0) {
    // ---------------------------------------------------------------- PRODUCER (one thread per CTA)
    int it = 0;
    for (int t = pair_id; t < tiles; t += pairs) {
      const int m0 = (t / tiles_n) * (2 * BM), n0 = (t % tiles_n) * BN;
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % STAGES;
        tma::wait(&empty[s], ((it / STAGES) & 1) ^ 1);   // parity trick: the first pass does not wait
        unsigned char* sa = ring + s * (A_BYTES + B_BYTES);
        // RULE: only the leader's full[s] counts the slot's bytes, both CTAs' of them, and only the leader
        // announces them: 2 * (A_BYTES + B_BYTES). The peer's bytes may arrive first (the tx-count may go
        // below zero until the expect_tx comes).
        if (leader) tma::arrive_expect_tx(&full[s], 2 * (A_BYTES + B_BYTES));
        const unsigned bar = cluster::map(&full[s], lead);
        pair::load_2d(sa, &map_a, kb * BK, m0 + BM * (int)(rank & 1), bar);
        pair::load_2d(sa + A_BYTES, &map_b, kb * BK, n0 + (BN / 2) * (int)(rank & 1), bar);
      }
    }
    // Tail: every slot's last commit has arrived here before the CTA may exit.
    for (int i = 0; i < STAGES; ++i, ++it) tma::wait(&empty[it % STAGES], ((it / STAGES) & 1) ^ 1);
  } else if (warp == 1 && lane == 0 && leader) {
    // ---------------------------------------------------------------- MMA ISSUER (one thread of the pair)
    constexpr unsigned idesc = tc::idesc_bf16_f32(2 * BM, BN);   // M = 256: the pair's rows
    int it = 0, local = 0;
    for (int t = pair_id; t < tiles; t += pairs, ++local) {
      const int buf = local % ACC_BUFS;
      const unsigned d = tmem + buf * BN;
      // RULE: every tcgen05.ld of this buffer's previous tile, in BOTH CTAs, is ordered before these MMAs
      // overwrite it: all 256 epilogue threads arrive here after their fence::before_thread_sync.
      tma::wait(&acc_empty[buf], ((local / ACC_BUFS) & 1) ^ 1);
      tc::fence_after();
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % STAGES;
        tma::wait(&full[s], (it / STAGES) & 1);          // both CTAs' bytes of slot s have landed
        tc::fence_after();
        const unsigned char* sa = ring + s * (A_BYTES + B_BYTES);
        #pragma unroll
        for (int k = 0; k < BK / UMMA_K; ++k)            // the same offsets describe the peer's slot s
          pair::mma_bf16(d, tc::desc_sw128(sa + 32 * k), tc::desc_sw128(sa + A_BYTES + 32 * k), idesc,
                         (kb > 0 || k > 0) ? 1u : 0u);
        pair::commit_both(&empty[s]);    // slot s is free in BOTH CTAs once these MMAs completed
      }
      pair::commit_both(&acc_full[buf]); // the tile's rows are in both tensor memories
    }
  } else if (warp >= 2) {
    // ---------------------------------------------------------------- EPILOGUE (4 warps per CTA)
    const int quarter = warp % 4;        // RULE: warp w reaches TMEM lanes 32 * (w % 4) .. + 31 only
    int local = 0;
    for (int t = pair_id; t < tiles; t += pairs, ++local) {
      const int buf = local % ACC_BUFS;
      const int m0 = (t / tiles_n) * (2 * BM) + BM * (int)(rank & 1), n0 = (t % tiles_n) * BN;   // OUR rows
      tma::wait(&acc_full[buf], (local / ACC_BUFS) & 1);
      tc::fence_after();                 // RULE: after the wait, before the first tcgen05.ld
      const unsigned rows = tmem + buf * BN + ((unsigned)(32 * quarter) << 16);
      gemm::tmem_row_to_global(rows, C + (size_t)(m0 + 32 * quarter + lane) * N + n0, BN);
      tc::fence_before();                // our reads of buf, ordered before the issuer's next MMAs
      pair::arrive_at(cluster::map(&acc_empty[buf], lead));
    }
  }

  // RULE: no tcgen05 access of the pair is left when its columns are freed, and no CTA exits while the
  // leader's MMAs may still read its shared memory or its commits arrive there: fence, cluster barrier,
  // fence, then each CTA's warp 1 frees the pair's columns (PTX ISA 9.7.16.5, 9.7.16.7.1).
  tc::fence_before();
  cluster::sync();
  if (warp == 1) {
    tc::fence_after();
    pair::dealloc(tmem, TMEM_COLS);
  }
}
