// gemm_fp8.cu - Chapter 4's top GEMM design on FP8: E4M3 A and B, fp32 accumulators, block scales in the epilogue.
// judge: target=sm_90a features=wgmma,tma.load,tma.multicast,mbarrier
//
// C (M x N, bf16, row-major) = diag(scale_a) * (A * B^T) * diag(scale_b), where
//   A (M x K) and B (N x K) are FP8 E4M3 stored as bytes, both K-major (the only layout 8-bit
//   wgmma takes: it has no transpose operands), and
//   scale_a[M/128], scale_b[N/128] are float32 block scales: one per 128 rows of A and one per
//   128 rows of B, constant along K:  C[m][n] = acc[m][n] * scale_a[m / 128] * scale_b[n / 128].
// Because a scale does not change along K, it factors out of the sum and is applied once, to the
// fp32 accumulator, in the epilogue. Scales that change along K (one per 128-wide block of K, as
// fine-grained FP8 training recipes use) do not factor out: each K-block's partial sum would have to be
// multiplied by its own scales and added into a second fp32 accumulator ("promotion") inside the
// main loop: the PROMOTE variants below.
//
// PROMOTE=1 (a variant, same file): Hopper's tensor cores do not keep a full fp32 sum while they
// add FP8 products into the accumulator (fewer mantissa bits are kept: a known limit of the FP8
// path; torch._scaled_mm's default, use_fast_accum=False, has cuBLAS work around it). The variant lets each slice's wgmma start from
// zero (scale-d = 0) into one of two partial arrays and adds the finished partial into the real
// accumulator with ordinary fp32 FADDs, so at most 128 products are summed at reduced precision.
// Two partials alternate so one wgmma group stays in flight; three 64 x BN arrays need BN = 128.
// The same promotion step is where per-K-block scales would be applied.
//
// PROMOTE=2 (the faster promoting variant): the plain kernel's 128 x 256 tiles, each slice done in two
// halves of 128 columns (four m64n128k32 each) into ONE 64-register partial, which is added into its
// half of the 128-register sum before the next half starts: 192 registers instead of PROMOTE=1's
// three arrays. A warpgroup has nothing in flight while it adds, and it does not need to: the other
// consumer's wgmma keep the tensor cores busy, so the two warpgroups take turns. Measured on the H200
// against torch._scaled_mm's promoting path, interleaved (explore_h200.py round16, 2026-12-02, two runs):
// 1.008 to 1.011 at 4096^3 and 0.966 to 0.968 at 8192^3, where PROMOTE=1 ran 0.948 to 0.949 and 0.847 to
// 0.849 (the record keeps its own run).
//
// FINE=1 (with PROMOTE=1 or 2): the scales of fine-grained FP8 recipes, applied at that promotion step.
//   scale_a: one per row of A and 128-wide block of K ("1 x 128", per token), stored block-major:
//            scale_a[kb * M + m] (a column-major M x ceil(K/128) array, as torch._scaled_mm takes it);
//   scale_b: one per 128 x 128 block of B: scale_b[nb * ceil(K/128) + kb] (row-major ceil(N/128) x ceil(K/128)).
//   C[m][n] = sum over kb of scale_a[m, kb] * scale_b[n / 128, kb] * (A B^T restricted to block kb)[m][n].
//   A slice is BK = 128 = one K block, and PROMOTE=1's BN = 128 columns (a PROMOTE=2 half) are one B
//   block, so each partial is multiplied by one number per row (a thread's fragment holds two rows: two
//   numbers) and added with an FFMA instead of an FADD; the epilogue then only rounds. The scales of
//   slice kt are loaded before its data is waited for, so their latency hides under the wait.
// The design is gemm_08_tma_store.cu's:
//   warpgroup 0  producer: one thread issues the TMA loads of a STAGES-deep ring; setmaxnreg
//                gives its registers away.
//   warpgroups 1, 2  consumers: 64 rows x 256 columns each, wgmma m64n256k32 E4M3 (128 fp32
//                accumulators per thread), one wgmma group kept in flight before a slot is released.
//   Persistent blocks (one per SM) walk 128 x 256 tiles GROUP_M tile-rows at a time (L2 reuse); the
//   plain kernel in clusters of 2 blocks (two tiles one above the other) that share B's slice by
//   multicast, the promoting ones without (CLUSTER, below, says why).
//   Barriers: "full" = 1 arrival + bytes, "empty" = one arrival per consumer warpgroup of every block
//   of the cluster, parity waits.
//   Epilogue: scale, round to bf16, write 128B-swizzled shared memory, one thread TMA-stores it.
// What FP8 changes:
//   * a 128-byte swizzled row is 128 elements, so BK = 128 and a stage holds twice the K of bf16
//     in the same 48 KiB; each wgmma is k32 (32 bytes, the same +32-byte descriptor step as bf16's
//     k16), four per slice.
//   * the tensor maps are over the bytes (uint8): TMA moves bits, the descriptor never knows the type.
// Sizes: any M, N, K >= 1 with K a multiple of 16 (TMA: every row of A and B starts on a 16-byte
// boundary) and N a multiple of 8 (rows of C). A tail of K is filled by TMA with zero bytes, which
// are +0.0 in E4M3 and add nothing.
// Run on an H200: PYTHONPATH=. python -m chapters.ch05_blackwell.fp8 wgmma   (checks, then times the
// variants against torch._scaled_mm); from Python, fp8.wgmma_fp8_check() and fp8.wgmma_fp8(); on any
// machine, fp8.model_check() runs a variant on the CPU model.
#include "wgmma_fp8.cuh"

#ifndef PROMOTE
#define PROMOTE 0       // 1: promote each slice's partial sum into a separate fp32 accumulator (below)
#endif
#ifndef FINE
#define FINE 0          // 1 (with PROMOTE=1): fine-grained scales, applied where each slice is promoted
#endif
#if FINE && !PROMOTE
#error "FINE=1 needs PROMOTE=1: fine-grained scales change along K, so they are applied per slice at promotion"
#endif
#ifndef EPI_TURNS
#define EPI_TURNS (PROMOTE == 1)   // 1: the two consumers run their epilogues in turns (below); 0: both at once
#endif
#ifndef CLUSTER
// Blocks sharing B by multicast: each loads half of B's slice into both (chapters/ch04_wgmma rung 7).
// Measured on the H200 (explore_h200.py round7 cluster, 2026-12-02, one interleaved run): the plain
// kernel 2 % faster at 4096^3 and 4.5 % at 8192^3 in clusters of 2, the promoting ones 5 to 7 % SLOWER
// (a slot is free only when both blocks' consumers are done with it, and a promoting consumer stops
// its tensor work at every promotion: the two blocks' stops add up).
#if PROMOTE
#define CLUSTER 1
#else
#define CLUSTER 2
#endif
#endif
#ifndef BN
#if PROMOTE == 2
#define BN 256          // the promoted sum (128 registers) + one half-slice partial (64) fit in 232
#define STAGES 4        // as PROMOTE=0: 4 x 48 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227
#elif PROMOTE
#define BN 128          // three 64 x BN fp32 register arrays per thread must fit in 232 registers
#define STAGES 6        // 6 x 32 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227
#else
#define BN 256          // columns per block (one m64n256k32 per consumer and k-step)
#define STAGES 4        // 4 x 48 KiB ring + 2 x 16 KiB epilogue buffers = 224 KiB of 227
#endif
#define BM 128          // rows per block: 2 consumers x 64; also the rows one scale_a entry covers
#define BK 128          // K per slice: 128 E4M3 = 128-byte rows, 128B swizzle
// Tile-rows walked together (L2 reuse of B). Measured on the H200 (explore_h200.py rounds 9 and 10,
// 2026-12-02, interleaved with torch._scaled_mm): 16 instead of 8 made PROMOTE=2 1.2-1.4 % faster at
// 4096^3 and 8192^3 (0.974 -> 0.987 and 0.978 -> 0.990; 0.933 -> 0.947 and 0.938 -> 0.951 of the
// promoting _scaled_mm) and PROMOTE=1 1-2 %; the plain kernel, in clusters that already share B, 0.4-0.9 % slower.
#if PROMOTE
#define GROUP_M 16
#else
#define GROUP_M 8
#endif
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#define SCALE_ROWS 128  // rows of A (or of B) sharing one block scale
// The epilogue reads one scale_a per block and one scale_b per 128-column half: that needs the tile
// edges on the scale blocks' edges.
static_assert(BM == SCALE_ROWS && BN % SCALE_ROWS == 0, "tiles must line up with the 128-row scale blocks");
static_assert(BK == 128, "one 128-byte swizzled row of E4M3 is 128 elements");

#ifndef DESC_STEP
#define DESC_STEP 1     // 1: step the descriptors by adding to their address field (below); 0: build each anew
#endif
// A k32 step's descriptor differs from the slice's first only in its start address, 32 bytes on:
// +2 in the field's 16-byte units. Building each anew from the address costs a mask, a shift, an OR and a
// move on the uniform datapath per operand, in a chain the next wgmma waits for; adding 2 to the low word
// costs one add (what cuBLAS's FP8 kernels do between their QGMMAs, by their SASS under ncu).
// Measured on the H200: Nsight Compute's per-instruction warp samples (explore_h200.py round13 and
// ledger, 2026-12-02) put PROMOTE=2's consumers waiting on that chain before their QGMMAs; stepped
// (round16, two interleaved runs, of the _scaled_mm path each is judged against, 4096^3 / 8192^3):
// PROMOTE=2 0.992-0.995 -> 1.008-1.011 and 0.951-0.954 -> 0.966-0.968, the plain kernel 0.973-0.979 ->
// 0.975-0.980 and 0.984 -> 0.986-0.988, PROMOTE=1 0.930-0.931 -> 0.948-0.949 and 0.854-0.856 -> 0.847-0.849.
// RULE (PTX ISA, matrix descriptor): bits 0-13 hold (address & 0x3FFFF) >> 4; the add must not carry out
// of them. A shared-memory address is below 228 KiB, so the field stays below 14592 + 6 < 2^14.
// The two words are put together by mov.b64, so the compiler sees a 32-bit add on the low one.
__device__ __forceinline__ unsigned long long desc_step(unsigned long long d, unsigned units16) {
  unsigned long long out;
  asm("mov.b64 %0, {%1, %2};" : "=l"(out) : "r"((unsigned)d + units16), "r"((unsigned)(d >> 32)));
  return out;
}

// One slice of K for one consumer: four k32 wgmma on the 64 rows of A at `a` and the BN rows of B
// at `b`. The first starts from d (scale_first = 1) or from zero (0); the others accumulate.
template <int R>
__device__ __forceinline__ void mma_slice(float (&d)[R], const unsigned char* a, const unsigned char* b,
                                          int scale_first) {
  const unsigned long long da = wg::desc_kmajor<BK>(a), db = wg::desc_kmajor<BK>(b);
#pragma unroll
  for (int k = 0; k < BK / 32; ++k)                // four k32 steps of 32 bytes each
    wg::mma_k32_e4m3(d, DESC_STEP ? desc_step(da, 2 * k) : wg::desc_kmajor<BK>(a + k * 32),
                     DESC_STEP ? desc_step(db, 2 * k) : wg::desc_kmajor<BK>(b + k * 32), k == 0 ? scale_first : 1);
}

// PROMOTE=2: half H of the tile (columns 128 H .. 128 H + 127) += p, a 64 x 128 partial; FINE: times the
// row's scale. Fragment element i of an m64nN accumulator lies in column 8 (i / 4) + 2 (lane % 4) + i % 2,
// so an m64n128 partial's element i is element 64 H + i of the m64n256 sum.
template <int H>
__device__ __forceinline__ void add_half(float (&acc)[BN / 2], const float (&p)[64], float s0, float s1) {
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[64 * H + i] = FINE ? fmaf(p[i], ((i >> 1) & 1) ? s1 : s0, acc[64 * H + i])
                                                      : acc[64 * H + i] + p[i];
}

__device__ __forceinline__ void add_into(float (&acc)[BN / 2], const float (&p)[BN / 2]) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] += p[i];
}

// FINE: acc += p x the row's scale. Fragment element i lies in the thread's first row (s0) when
// (i / 2) is even, its second (8 rows lower, s1) when odd; i is a compile-time constant, so no select.
__device__ __forceinline__ void add_scaled(float (&acc)[BN / 2], const float (&p)[BN / 2], float s0, float s1) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = fmaf(p[i], ((i >> 1) & 1) ? s1 : s0, acc[i]);
}

// Epilogue turns (EPI_TURNS=1, PROMOTE=1's default). The two consumers share every slice, so they
// finish a tile together; if both then run their epilogue, the tensor cores idle for its length.
// Measured on the H200 (explore_h200.py round13, 2026-12-02): running each epilogue twice cost the plain
// kernel 6.4 % at 4096^3 and 3.1 % at 8192^3, and PROMOTE=2 9.2 % and 5.2 %. With turns (consumer c
// waits on named barrier BAR_EPI + c), consumer 1 runs tile j's epilogue only after consumer 0 has
// issued its own, and consumer 0 runs tile j + 1's only after consumer 1 has issued tile j's: after the
// first tile consumer 1 trails by one epilogue, and each epilogue runs under the other's wgmma, as far
// as the ring lets the consumer in front run ahead (a slot is refilled only when both have read it).
// Measured (round14, two interleaved runs, of the _scaled_mm path each is judged against, 4096^3 /
// 8192^3): PROMOTE=1 (128 x 128 tiles, 6 stages of 32 KiB) gained, 0.907-0.910 -> 0.924-0.927 and
// 0.830-0.833 -> 0.853-0.861; the 128 x 256 kernels (4 stages of 48 KiB) lost, the plain one 0.975-0.977
// -> 0.963-0.967 and 0.983 -> 0.982, PROMOTE=2 0.988-0.991 -> 0.942-0.944 and 0.951-0.953 -> 0.928: there
// the one in front is stopped by the ring after about two slices, and PROMOTE=2's consumer alone leaves
// the tensor cores idle while it adds. An epilogue stored in 64 x 64 boxes through two buffers
// (explore_fp8_boxes.patch, round15) did not pay either: within 0.4 % on the 128 x 256 kernels, 2 % slower
// on PROMOTE=1.
// RULE (PTX ISA, bar/barrier): a named barrier completes when `count` threads have arrived, those that
// bar.sync (and wait) and those that bar.arrive (and go on); 128 wait + 128 arrive make the 256. Every
// arrival is matched by a wait, so none is left half-arrived when the block exits: consumer 0 gives
// its turn after every epilogue and consumer 1 waits before every one; consumer 1 gives its turn only
// when a tile follows, and consumer 0 waits only when a tile came before. An id is never reused before
// its wait: consumer 0's next arrival on BAR_EPI + 1 comes after its own wait on BAR_EPI, which follows
// consumer 1's wait on BAR_EPI + 1.
#define BAR_EPI 5       // named barriers 5 and 6 (0 is __syncthreads, 1 and 2 each consumer's own)
__device__ __forceinline__ void turn_wait(int id) {
  asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory");
}
__device__ __forceinline__ void turn_give(int id) {
  asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory");
}

// Tile t -> (tile row, tile column), GROUP_M tile-rows at a time, column by column.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (t / per_group) * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);
  const int r = t % per_group;
  tm = first_m + r % rows;
  tn = r / rows;
}

// A consumer warpgroup (one thread) frees a slot in every block of the cluster: each block's producer
// multicasts into all of them, so each needs every block's consumers to be done with the slot.
__device__ __forceinline__ void release(unsigned long long* empty_slot) {
  if (CLUSTER == 1) {
    tma::arrive(empty_slot);
  } else {
    for (int p = 0; p < CLUSTER; ++p) wg::arrive_cluster(empty_slot, p);
  }
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_fp8(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
         const __grid_constant__ TensorMap mapC, const float* __restrict__ scale_a,
         const float* __restrict__ scale_b, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  // RULE: a 128B-swizzled tile starts on the swizzle's 1024-byte repeat (TMA and the descriptor agree).
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK, B_BYTES = BN * BK;   // one byte per element
  constexpr int C_BYTES = 64 * 128 * 2;                 // one consumer's half tile: 64 x 128 bf16
  unsigned char* sA = base;
  unsigned char* sB = sA + STAGES * A_BYTES;
  unsigned char* sC = sB + STAGES * B_BYTES;            // CONSUMERS x C_BYTES, 1024-aligned
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const unsigned rank = CLUSTER > 1 ? wg::cluster_rank() : 0;
  const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  constexpr int B_HALF = B_BYTES / CLUSTER;            // the part of B's slice this block loads
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);   // in cluster tiles: CLUSTER x BM rows
  const int tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS * CLUSTER);
    }
    tma::fence_proxy_async();                            // the inits before any TMA signals them
    if (CLUSTER > 1) wg::fence_barrier_init();           // ... and before the other block's arrivals
  }
  if (CLUSTER > 1) wg::cluster_sync(); else __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    // ------------------------------------------------------------------ producer
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = cluster_id; t < tiles; t += clusters) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, tm, tn);
        const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES, round = it / STAGES;
          tma::wait(&empty[s], (round & 1) ^ 1);   // fresh barrier: parity 1 is already complete
          // RULE: expect the WHOLE boxes, zero-filled parts past the edges included.
          tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
          tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
          if (CLUSTER > 1)                         // this block's part of B, into every block of the cluster
            wg::load_2d_multicast(sB + s * B_BYTES + rank * B_HALF, &mapB, kt * BK,
                                  n0 + rank * (BN / CLUSTER), &full[s], (1 << CLUSTER) - 1);
          else
            tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ consumers
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    const int t128 = threadIdx.x % 128, w = t128 / 32, l = t128 % 32;
    unsigned char* myC = sC + c * C_BYTES;
    float acc[BN / 2];
#if PROMOTE == 2
    float part[64];                                  // one half-slice's partial: 64 rows x 128 columns
#elif PROMOTE
    float part0[BN / 2], part1[BN / 2];              // slice partials, alternating (even / odd kt)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) part0[i] = part1[i] = 0.f;
#endif
    int it = 0;
    for (int t = cluster_id; t < tiles; t += clusters) {
      int tm, tn;
      tile_coords(t, tiles_m, tiles_n, tm, tn);
      const int m0 = tm * (CLUSTER * BM) + rank * BM, n0 = tn * BN;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
#if PROMOTE == 2
      // Half-slices: the slice's left 128 columns into `part` (four m64n128k32 from zero), wait for
      // them, add part into acc's left half; the same for the right half. The warpgroup waits with
      // nothing in flight while it adds, but the OTHER consumer's wgmma keep the tensor cores busy:
      // the two warpgroups drift half a step apart and take turns (a wait + 64 FADDs against the
      // other's 4 wgmma). A half is also one 128-row block of B's scales: FINE applies one number
      // per row there.
#if FINE
      const int r0 = m0 + c * 64 + 16 * w + l / 4, r1 = r0 + 8;
      const float* sb_row = scale_b + (size_t)(n0 / SCALE_ROWS) * k_tiles;
#endif
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
#if FINE
        const float sa0 = r0 < M ? scale_a[(size_t)kt * M + r0] : 0.f;   // loaded before the wait
        const float sa1 = r1 < M ? scale_a[(size_t)kt * M + r1] : 0.f;
        const float sb0 = sb_row[kt];
        const float sb1 = n0 + 128 < N ? sb_row[k_tiles + kt] : 0.f;       // no block past N
#else
        const float sa0 = 1.f, sa1 = 1.f, sb0 = 1.f, sb1 = 1.f;
#endif
        const unsigned char* a = sA + s * A_BYTES + c * 64 * BK;
        const unsigned char* b = sB + s * B_BYTES;
        tma::wait(&full[s], round & 1);
        wg::fence();                                 // after the last add read part's registers
        mma_slice(part, a, b, 0);                    // B rows 0..127: the left half
        wg::commit();
        wg::wait<0>();
        add_half<0>(acc, part, sa0 * sb0, sa1 * sb0);
        wg::fence();
        mma_slice(part, a, b + 128 * BK, 0);         // B rows 128..255 (16 KiB on: a whole swizzle repeat)
        wg::commit();
        wg::wait<0>();
        if (t128 == 0) release(&empty[s]);       // both halves have read the stage
        add_half<1>(acc, part, sa0 * sb1, sa1 * sb1);
      }
#elif PROMOTE
      // One slice into partial p (from zero); then the previous slice, in q, is done: promote it
      // and free its stage. RULE: which registers a wgmma writes must not depend on a run-time
      // value. Choosing part0 or part1 with an `if` makes the compiler merge the two with selp,
      // which reads the accumulators of a wgmma still in flight; so the loop is unrolled by two
      // and each wgmma names its array statically.
#if FINE
      // This thread's two rows of the tile, and the scales of the slice promoted last (ps0, ps1).
      const int r0 = m0 + c * 64 + 16 * w + l / 4, r1 = r0 + 8;
      const float* sb_row = scale_b + (size_t)(n0 / SCALE_ROWS) * k_tiles;
      float ps0 = 0.f, ps1 = 0.f;
#define PROMOTE_INTO(q) add_scaled(acc, q, ps0, ps1)
#else
#define PROMOTE_INTO(q) add_into(acc, q)
#endif
      auto slice = [&](float (&p)[BN / 2], float (&q)[BN / 2], int kt) {
        const int s = it % STAGES, round = it / STAGES;
#if FINE
        const float sbk = sb_row[kt];                // rows past M have no scale: they are clipped anyway
        const float cs0 = r0 < M ? scale_a[(size_t)kt * M + r0] * sbk : 0.f;
        const float cs1 = r1 < M ? scale_a[(size_t)kt * M + r1] * sbk : 0.f;
#endif
        tma::wait(&full[s], round & 1);
        wg::fence();                                 // after add_into last read p's registers
        mma_slice(p, sA + s * A_BYTES + c * 64 * BK, sB + s * B_BYTES, 0);
        wg::commit();
        wg::wait<1>();                               // the previous slice's group has finished
        if (kt >= 1) {
          PROMOTE_INTO(q);                           // slice kt - 1, with its own scales
          if (t128 == 0) release(&empty[(it - 1) % STAGES]);
        }
#if FINE
        ps0 = cs0;
        ps1 = cs1;
#endif
        ++it;
      };
      int kt = 0;
      for (; kt + 1 < k_tiles; kt += 2) {
        slice(part0, part1, kt);
        slice(part1, part0, kt + 1);
      }
      if (kt < k_tiles) {                            // an odd number of slices: the last is in part0
        slice(part0, part1, kt);
        wg::wait<0>();
        PROMOTE_INTO(part0);
      } else {
        wg::wait<0>();
        if (k_tiles >= 1) PROMOTE_INTO(part1);
      }
#undef PROMOTE_INTO
      if (k_tiles >= 1 && t128 == 0) release(&empty[(it - 1) % STAGES]);
#else
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES, round = it / STAGES;
        tma::wait(&full[s], round & 1);
        // RULE: wgmma.fence before the first wgmma after the accumulators were written (zeroed).
        wg::fence();
        mma_slice(acc, sA + s * A_BYTES + c * 64 * BK, sB + s * B_BYTES, 1);
        wg::commit();
        // Release a slot only when the wgmma that read it have finished: keep one group in flight.
        wg::wait<1>();
        if (kt >= 1 && t128 == 0) release(&empty[(it - 1) % STAGES]);
      }
      wg::wait<0>();                                 // the tile's last group
      if (k_tiles >= 1 && t128 == 0) release(&empty[(it - 1) % STAGES]);
#endif

      // Epilogue: 64 x BN fp32 -> x scale_a x scale_b -> bf16 -> shared (BN / 128 pieces of
      // 64 x 128) -> TMA store. The block's 128 rows are one scale_a block; each piece of 128
      // columns is one scale_b block, so each piece multiplies by one number.
      // FINE: scaled at promotion already. A block past M (the cluster's second, at the bottom edge)
      // has no scale: its rows are clipped by the store.
      const float sa = FINE || m0 >= M ? 1.f : scale_a[m0 / SCALE_ROWS];
      if (EPI_TURNS && (c == 1 || t != cluster_id)) turn_wait(BAR_EPI + c);   // the other's epilogue is issued
#pragma unroll
      for (int h = 0; h < BN / 128; ++h) {
        const int nb = n0 + h * 128;                 // a half past N is clipped by the store
        const float sab = nb < N ? (FINE ? 1.f : sa * scale_b[nb / SCALE_ROWS]) : 0.f;
        if (t128 == 0) tma::wait_read<0>();          // the previous store has read myC
        wg::named_sync(1 + c, 128);
#pragma unroll
        for (int j = 0; j < 16; ++j) {               // 16 chunks of 8 columns
          const float* d = &acc[(h * 16 + j) * 4];
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int row = 16 * w + l / 4 + 8 * hr;
            // Two 64 x 64 boxes of 128-byte rows, 128B-swizzled like the map: the 16-byte
            // chunk index is XORed with row % 8.
            const int off = (j / 8) * 8192 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + (l % 4) * 4;
            wg::st_shared(myC + off, wg::pack_bf16x2(d[2 * hr] * sab, d[2 * hr + 1] * sab));
          }
        }
        // RULE: every writer fences its generic writes against the TMA's async-proxy read,
        // THEN the warpgroup meets, THEN one thread issues the store.
        tma::fence_proxy_async();
        wg::named_sync(1 + c, 128);
        if (t128 == 0) {
          tma::store_2d(&mapC, nb, m0 + c * 64, myC);
          tma::store_2d(&mapC, nb + 64, m0 + c * 64, myC + 8192);
          tma::commit();
        }
      }
      if (EPI_TURNS && (c == 0 || t + clusters < tiles)) turn_give(BAR_EPI + 1 - c);   // the other's turn
    }
    if (t128 == 0) tma::wait_all<0>();               // shared memory outlives the stores' reads
  }
  // RULE: no block of a cluster exits while another may still multicast into its shared memory or
  // arrive on its barriers.
  if (CLUSTER > 1) wg::cluster_sync();
}
