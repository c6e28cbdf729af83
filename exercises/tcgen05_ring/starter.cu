// tcgen05_ring.cu - complete a warp-specialized tcgen05 GEMM: the commit-released ring and the double-buffered accumulator.
// judge: target=sm_100a features=tcgen05,tcgen05.commit,tma.load,tmem.ld
// Check: python practice/judge.py check tcgen05_ring   (compiled for sm_100a and run on the CPU model; README.md)
// The chapter's kernel is chapters/ch05_blackwell/gemm_ws.cu; five hand-offs between its roles are marked TODO.
//
//
// C[M][N] (fp32, row-major) = A[M][K] (bf16, row-major) * B[N][K]^T (bf16, row-major): both operands K-major.
// Tiles of BM x BN = 128 x BN; grid = any number of CTAs <= tiles (persistent: CTA b takes tiles
// b, b + gridDim.x, ...); block = 192 threads = 6 warps, one CTA per SM.
//
// Roles (warp-specialized; none of them waits for another except through an mbarrier):
//   warp 0, lane 0     PRODUCER: TMA loads of A and B K-slices into a ring of STAGES shared-memory slots.
//   warp 1             allocates tensor memory (whole warp), then lane 0 is the MMA ISSUER: one thread
//                      issues every tcgen05.mma of the CTA; warp 1 frees the columns at the end.
//   warps 2..5         EPILOGUE, four warps (not a warpgroup: a warpgroup starts at a warp rank that is a
//                      multiple of 4): tensor memory -> registers (tcgen05.ld) -> C in global memory.
// Barriers (mbarriers in shared memory; everyone tracks its own phase parity):
//   full[s]       producer's arrive.expect_tx + the TMA bytes        -> the issuer may read slot s
//   empty[s]      tcgen05.commit after the MMAs that read slot s     -> the producer may refill it
//   acc_full[b]   tcgen05.commit after a tile's last MMA into buffer b -> the epilogue may read it
//   acc_empty[b]  all 128 epilogue threads, after their last tcgen05.ld of buffer b -> the issuer may
//                 overwrite it with a later tile
// Tensor memory: ACC_BUFS = 2 accumulators of 128 lanes x BN fp32 columns, so the epilogue of tile i
// (buffer i % 2) runs while the MMAs of tile i + 1 fill the other buffer.
#include "tma.cuh"
#include "tcgen05.cuh"   // given, in judge/include: tc::alloc, tc::mma_bf16, tc::commit, tc::ld_32x32b_x8,
                         // tc::wait_ld, tc::fence_before / fence_after, tc::desc_sw128, ... (inline PTX only)

#ifndef BN
#define BN 128          // columns per tile = fp32 TMEM columns per accumulator buffer (N of the MMA)
#endif
#ifndef STAGES
#define STAGES 4        // ring depth: 4 x 32 KiB of shared memory for BN = 128
#endif
#define BM 128          // rows per tile = TMEM lanes: the cta_group::1 M = 128 MMA shape
#define BK 64           // K per slot: 64 bf16 = one 128-byte row, the 128B swizzle's span
#define UMMA_K 16       // K of one kind::f16 MMA (32 bytes of bf16)
#define ACC_BUFS 2
#define TMEM_COLS (ACC_BUFS * BN)   // RULE: a power of two >= 32 and <= 512 (PTX ISA 9.7.16.7.1)
#define THREADS 192
#define A_BYTES (BM * BK * 2)
#define B_BYTES (BN * BK * 2)
// Shared memory the host must give: the ring, the barriers, and 1024 bytes to align the ring.
#define SMEM_BYTES (STAGES * (A_BYTES + B_BYTES) + 1024 + 256)

typedef unsigned short bf16;

extern "C" __global__ void __launch_bounds__(THREADS, 1) tcgen05_ring(
    const __grid_constant__ TensorMap map_a,   // A: box 64 (K) x BM rows, 128B swizzle
    const __grid_constant__ TensorMap map_b,   // B: box 64 (K) x BN rows, 128B swizzle
    float* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // RULE: a 128B-swizzled TMA destination (and the MMA descriptor's base offset 0) needs the slot
  // on a 1024-byte boundary; dynamic shared memory is guaranteed only 16-byte alignment, so align by hand.
  unsigned char* ring = smem_raw + ((1024 - (tc::smem(smem_raw) & 1023)) & 1023);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(ring + STAGES * (A_BYTES + B_BYTES));
  unsigned long long* full = bars;                       // [STAGES]
  unsigned long long* empty = bars + STAGES;             // [STAGES]
  unsigned long long* acc_full = bars + 2 * STAGES;      // [ACC_BUFS]
  unsigned long long* acc_empty = bars + 2 * STAGES + ACC_BUFS;
  unsigned* tmem_slot = reinterpret_cast<unsigned*>(bars + 2 * STAGES + 2 * ACC_BUFS);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles_n = N / BN, tiles = (M / BM) * tiles_n, k_blocks = K / BK;

  if (warp == 1) {                       // RULE: one whole warp allocates (.sync.aligned)
    tc::alloc(tmem_slot, TMEM_COLS);
    tc::relinquish();                    // this CTA allocates nothing more
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tc::mbar_init(&full[s], 1);        // the producer's arrive.expect_tx (+ the bytes)
      tc::mbar_init(&empty[s], 1);       // one tcgen05.commit
    }
    for (int b = 0; b < ACC_BUFS; ++b) {
      tc::mbar_init(&acc_full[b], 1);    // one tcgen05.commit
      tc::mbar_init(&acc_empty[b], 128); // every epilogue thread
    }
    tc::fence_proxy_async();             // the inits (generic writes) before TMA / commit signal them
  }
  // RULE: the TMEM address arrives through shared memory; tcgen05.fence::before_thread_sync /
  // bar.sync / tcgen05.fence::after_thread_sync order the alloc before every later tcgen05 use
  // (PTX ISA 9.7.16.6, 9.7.16.11.1 tcgen05.fence).
  tc::fence_before();
  __syncthreads();
  tc::fence_after();
  const unsigned tmem = *tmem_slot;      // lane 0, first allocated column

  if (warp == 0 && lane == 0) {
    // ---------------------------------------------------------------- PRODUCER (one thread)
    int it = 0;                          // slot uses so far: slot it % STAGES, use number it / STAGES
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % STAGES;
        // Parity trick: a fresh mbarrier is in phase 0, and waiting for parity 1 (the phase
        // "before" it) succeeds at once, so the first pass over the ring does not wait.
        tma::wait(&empty[s], ((it / STAGES) & 1) ^ 1);
        unsigned char* sa = ring + s * (A_BYTES + B_BYTES);
        // RULE: expect_tx announces exactly the bytes both boxes deliver (PTX ISA, mbarrier expect-tx).
        tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
        tma::load_2d(sa, &map_a, kb * BK, m0, &full[s]);
        tma::load_2d(sa + A_BYTES, &map_b, kb * BK, n0, &full[s]);
      }
    }
    // Tail: wait (as for a next load) until each slot's last commit has arrived, so that no tcgen05.commit
    // arrival is still on its way to this CTA's shared memory when the CTA exits.
    for (int i = 0; i < STAGES; ++i, ++it) tma::wait(&empty[it % STAGES], ((it / STAGES) & 1) ^ 1);
  } else if (warp == 1 && lane == 0) {
    // ---------------------------------------------------------------- MMA ISSUER (one thread)
    constexpr unsigned idesc = tc::idesc_bf16_f32(BM, BN);
    int it = 0, local = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++local) {
      const int buf = local % ACC_BUFS;
      const unsigned d = tmem + buf * BN;          // this tile's accumulator: columns buf * BN ...
      // RULE: the MMAs below overwrite buffer buf: every tcgen05.ld of its previous tile must be
      // ordered before them (the epilogue's fence::before_thread_sync + arrive, our wait +
      // fence::after_thread_sync; PTX ISA 9.7.16.11.1). First use of each buffer: parity trick.
      // TODO 1: before the first MMA into buffer buf, wait until the epilogue has read its previous tile (acc_empty[buf]; which parity on its first use?), then order your tcgen05 work after that wait.
      
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % STAGES;
        tma::wait(&full[s], (it / STAGES) & 1);    // the TMA bytes of slot s have landed
        tc::fence_after();
        const unsigned char* sa = ring + s * (A_BYTES + B_BYTES);
        #pragma unroll
        for (int k = 0; k < BK / UMMA_K; ++k) {    // + 32 bytes per K step inside the 128-byte span
          tc::mma_bf16(d, tc::desc_sw128(sa + 32 * k), tc::desc_sw128(sa + A_BYTES + 32 * k), idesc,
                       (kb > 0 || k > 0) ? 1u : 0u);   // the tile's first MMA overwrites D
        }
        // RULE: the MMAs read slot s asynchronously; the slot is free only when they have
        // completed. tcgen05.commit arrives on empty[s] then
        // (PTX ISA 9.7.16.12.1 tcgen05.commit), and this thread
        // goes on issuing: there is no wait here at all.
        // TODO 2: release slot s to the producer once the MMAs that read it have COMPLETED (not when they were issued).
        
      }
      // TODO 3: tell the epilogue that this tile's accumulator is complete.
      
    }
  } else if (warp >= 2) {
    // ---------------------------------------------------------------- EPILOGUE (4 warps)
    // RULE: warp w reaches only TMEM lanes 32 * (w % 4) .. + 31 (PTX ISA 9.7.16.8.1): warps 2, 3, 4, 5
    // read quarters 2, 3, 0, 1 = rows 64.., 96.., 0.., 32.. of the tile. Together they cover all 128.
    const int quarter = warp % 4;
    int local = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++local) {
      const int buf = local % ACC_BUFS;
      const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
      // TODO 4: wait until buffer buf holds this tile's finished accumulator, then order your tcgen05.ld after the wait.
      
      const unsigned rows = tmem + buf * BN + ((unsigned)(32 * quarter) << 16);
      float* crow = C + (size_t)(m0 + 32 * quarter + lane) * N + n0;
      for (int c = 0; c < BN; c += 8) {
        float v[8];
        tc::ld_32x32b_x8(rows + c, v);   // thread `lane` gets row 32 * quarter + lane, 8 columns
        tc::wait_ld();                   // RULE: registers are valid only after tcgen05.wait::ld
        reinterpret_cast<float4*>(crow + c)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(crow + c)[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
      // TODO 5: hand buffer buf back to the issuer, with your tcgen05.ld ordered before the hand-off.
      
    }
  }

  // RULE: the allocating warp frees exactly what it allocated, after every MMA into it completed
  // (the epilogue waited acc_full of the last tile, whose commit covers every earlier MMA) and every
  // tcgen05.ld is done: fence, barrier, fence, then dealloc (PTX ISA 9.7.16.7.1).
  tc::fence_before();
  __syncthreads();
  if (warp == 1) {
    tc::fence_after();
    tc::dealloc(tmem, TMEM_COLS);
  }
}
