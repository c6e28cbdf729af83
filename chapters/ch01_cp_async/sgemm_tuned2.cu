// sgemm_tuned2.cu - cp.async SGEMM tuned at the register level: 128x256 block tiles, 8x16 outputs per thread in 4x4 quadrants, A stored K-major, fragments double-buffered, one barrier per k-tile.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=3
// Build and inspect: python -c "from judge import build; b = build.compile('chapters/ch01_cp_async/sgemm_tuned2.cu'); print(b.resources); print(b.sass_of('sgemm_tuned2'))"
// Run: chapters/ch01_cp_async/sgemm.py baselines_table() / tuned2_sweep(configs) (checked against
// float64, timed against cuBLAS in the same process); sass_mix('sgemm_tuned2.cu') for the loop's instructions.
//
// C = A @ B, row-major float32, A is M x K, B is K x N, C is M x N; C is written, never read.
// Shapes: M multiple of BM (128), N multiple of BN (256; 128 with NQ=2), K a multiple of BK (16);
// the host refuses others.
// Launch: grid (N / BN, M / BM), 256 threads, dynamic shared memory
// STAGES * BK * (BM + APAD + BN) * 4 bytes: 74.5 KB with the defaults (the host opts in above 48 KB).
//
// What changes from sgemm_tuned.cu (which stores A row-major and reads it along k):
//  * A is stored K-MAJOR in shared memory, As[k][m]: one LDS.128 then gives 4 consecutive rows of
//    A for the same k, exactly what the outer product of step k needs. A 16-byte cp.async cannot
//    transpose, so A travels in 4-byte copies (LDGSTS.E, through L1): a warp copies an 8 (k) x 4 (m)
//    patch, 4 rows of 32 bytes in global memory (4 full sectors), and writes As[k][m] with the row
//    length padded to BM + 4 floats, so that (4 k + m) mod 32 gives the 32 lanes 32 different banks.
//  * Each thread owns 8 x (4 NQ) outputs as 4x4 quadrants: rows r0 + {0..3} and r0 + WM/2 + {0..3},
//    columns c0 + QN q + {0..3}. With NQ = 4 (the default) a thread issues 6 LDS.128 (2 of A, 4 of
//    B) per k for 128 FFMA: 0.75 bytes of shared memory per FFMA, against 1.0 for 8x8 outputs.
//    In one LDS.128 of A the 32 lanes read 8 distinct 16-byte pieces of one 128-byte line (4 lanes
//    share each): no bank conflict; B likewise with 4 distinct pieces.
//  * Fragments are double-buffered in registers: the LDS of step k+1 are issued before the
//    FFMA of step k, so shared-memory latency hides behind arithmetic of the same warp.
//  * One __syncthreads per k-tile, placed before the last k step: it proves both that tile kt+1
//    has landed (after each thread's cp.async wait) and that every warp has finished reading
//    tile kt, whose buffer the next iteration's copy overwrites.
//  * __launch_bounds__(256, MIN_BLOCKS). The 128 accumulators of 8x16 outputs leave room for one
//    block (8 warps) per SM (MIN_BLOCKS = 1). The 8x8 variant (NQ = 2, MIN_BLOCKS = 2) fits 128
//    registers, so two blocks share an SM; on the H200 it was 2-3 % slower (sgemm.py tuned2_sweep).
//  * Grouped block order (GROUP_M block rows walked together) for L2 reuse; float4 stores of C.
//  * Fragment addresses are one base register per stage plus compile-time offsets, so every
//    LDS.128 carries its offset as an immediate. Written as &As[k * LDA + r0] with As recomputed
//    per stage, the H200's NVRTC (13.0) spent an IADD3 and a LEA on each LDS.128: 14 % of the
//    loop's instructions were not FFMA, and ptxas spilled 20 bytes. Now 8 % (sass_mix), no spill.
//
// Measured on the H200 (2026-11-30, cuBLAS FP32 in the same process), in the per-load addressing
// form above: 43.6 TFLOPS at 4096^3 (0.85 of cuBLAS), 44.3 at 8192^3 (0.87). Where the rest went
// (Nsight Compute, 4096^3): 8 warps per SM, so 2 per scheduler; in 21 % of cycles neither was ready
// to issue, and the FMA pipe was busy 66 % of the elapsed cycles.

#include <cuda_pipeline.h>

#ifndef STAGES
#define STAGES 3          // shared-memory buffers; STAGES - 1 k-tiles in flight
#endif
#ifndef BK
#define BK 16             // depth of one k-tile (multiple of 8)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1      // resident blocks per SM the register budget must allow (2 with NQ=2)
#endif
#ifndef GROUP_M
#define GROUP_M 8         // block rows walked together (L2 reuse)
#endif
#ifndef WARPS_M
#define WARPS_M 2         // 2 x 4 warps of 64 x 32 outputs, or 4 x 2 warps of 32 x 64
#endif
#ifndef NQ
#define NQ 4              // 4-wide column quadrants per thread: 4 (8x16 outputs, BN 256) or 2 (8x8, BN 128)
#endif

#define BM 128
#define THREADS 256
#define WARPS_N (8 / WARPS_M)
#define WM (BM / WARPS_M)            // warp tile rows: 64 (or 32)
#define LANES_M (WM / 8)             // lanes along M: 8 (or 4); each covers 4 rows twice
#define LANES_N (32 / LANES_M)       // lanes along N: 4 (or 8)
#define QN (LANES_N * 4)             // column distance between a thread's quadrants
#define WN (QN * NQ)                 // warp tile columns: 32 (or 64, or 128 with NQ 4)
#define BN (WARPS_N * WN)            // 128 (256 with NQ 4)
#define TN (4 * NQ)                  // columns per thread
#define APAD 4
#define LDA (BM + APAD)              // K-major A row: 132 floats = 528 bytes (a multiple of 16)
#define A_STAGE (BK * LDA)
#define STAGE_FLOATS (BK * LDA + BK * BN)

static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert(BK % 8 == 0, "A is copied in 8 (k) x 4 (m) patches");
static_assert(WARPS_M == 2 || WARPS_M == 4, "warp tiles of 64 x 32 or 32 x 64");
static_assert(LANES_M * 8 == WM, "each lane covers two 4-wide quadrants along M");
static_assert(BN % 128 == 0 && (BK * BN / 4) % THREADS == 0, "B rows are copied in whole rounds of 256 x 16 bytes");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_tuned2(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
             float* __restrict__ C) {
  extern __shared__ __align__(16) float smem[];

  // ---- which tile of C: grouped order over a (N/BN) x (M/BM) grid
  const int grid_n = gridDim.x, grid_m = gridDim.y;
  const int pid = blockIdx.y * grid_n + blockIdx.x;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int rows_here = min(grid_m - first_m, GROUP_M);
  const int bm = first_m + (pid % per_group) % rows_here;
  const int bn = (pid % per_group) / rows_here;

  A += (size_t)bm * BM * K;
  B += (size_t)bn * BN;
  C += (size_t)bm * BM * N + (size_t)bn * BN;

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int ty = lane / LANES_N, tx = lane % LANES_N;
  const int r0 = warp_m * WM + ty * 4;           // rows r0 + {0..3} and r0 + WM/2 + {0..3}
  const int c0 = warp_n * WN + tx * 4;           // columns c0 + QN * q + {0..3}, q = 0..NQ-1

  // A copy: a warp's lane (ka, ma) = (lane % 8, lane / 8) copies A[m][k] of an 8 (k) x 4 (m) patch;
  // copy r of a thread is patch warp + 8 r: rows + 32 (r % 4), columns + 8 (r / 4).
  // The addresses are kept as one base pointer plus compile-time offsets (times K for rows):
  // every extra 64-bit pointer kept live costs two of the 128 registers.
  constexpr int A_COPIES = BM * BK / THREADS;            // 4-byte copies per thread per tile (BK / 2)
  constexpr int B_CHUNKS = BK * BN / 4 / THREADS;        // 16-byte copies per thread per tile
  const float* a_src = A + (size_t)(warp * 4 + lane / 8) * K + lane % 8;
  const int a_dst = (lane % 8) * LDA + warp * 4 + lane / 8;
  constexpr int B_ROWS = THREADS / (BN / 4);             // B rows covered by one round of copies
  const float* b_src = B + (size_t)(tid / (BN / 4)) * N + (tid % (BN / 4)) * 4;
  const int b_dst = (tid / (BN / 4)) * BN + (tid % (BN / 4)) * 4;

  auto load_tile = [&](int buf, int kt) {
    float* As = smem + buf * STAGE_FLOATS;
    float* Bs = As + A_STAGE;
    const float* a = a_src + kt * BK;
    const float* b = b_src + (size_t)kt * BK * N;
#pragma unroll
    for (int r = 0; r < A_COPIES; ++r) {
      // 4-byte cp.async (cp.async.ca): only 4, 8 and 16 bytes exist, and only 16 may bypass L1.
      __pipeline_memcpy_async(&As[a_dst + (r / 4) * 8 * LDA + (r % 4) * 32],
                              a + (size_t)((r % 4) * 32) * K + (r / 4) * 8, 4);
    }
#pragma unroll
    for (int r = 0; r < B_CHUNKS; ++r)      // B rows tid/(BN/4) + B_ROWS r: whole rows, 16 bytes a lane
      __pipeline_memcpy_async(&Bs[b_dst + r * B_ROWS * BN], b + (size_t)(r * B_ROWS) * N, 16);
  };

  const int num_tiles = K / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    __pipeline_commit();                 // group s is tile s, also when empty
  }

  float acc[8][TN];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  float4 fa[2][2], fb[2][NQ];            // [which k buffer][which quadrant]
  // Fragment loads address shared memory from one base per stage plus compile-time byte offsets.
  const float* a_frag = smem + r0;
  const float* b_frag = smem + A_STAGE + c0;
  auto load_frag = [&](int slot, int stage, int k) {
    const float4* ap = reinterpret_cast<const float4*>(a_frag + stage * STAGE_FLOATS + k * LDA);
    const float4* bp = reinterpret_cast<const float4*>(b_frag + stage * STAGE_FLOATS + k * BN);
    fa[slot][0] = ap[0];
    fa[slot][1] = ap[WM / 8];
#pragma unroll
    for (int q = 0; q < NQ; ++q) fb[slot][q] = bp[q * QN / 4];
  };

  __pipeline_wait_prior(STAGES - 2);     // STAGES-1 groups committed: tile 0 has landed
  __syncthreads();
  load_frag(0, 0, 0);

  // Ring positions kept as running indices: kt % STAGES would cost an integer division per use
  // when STAGES is not a power of two.
  int rd = 0, wr = STAGES - 1;           // buffer of tile kt, buffer for tile kt + STAGES - 1
  for (int kt = 0; kt < num_tiles; ++kt) {
    // Tile kt+STAGES-1 goes into the buffer of tile kt-1: the barrier of the previous iteration
    // was met only after every warp had read its last fragment of tile kt-1.
    const int next = kt + STAGES - 1;
    if (next < num_tiles) load_tile(wr, next);
    __pipeline_commit();
    wr = (wr + 1 == STAGES) ? 0 : wr + 1;

    const int cur_stage = rd;
    rd = (rd + 1 == STAGES) ? 0 : rd + 1;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const int cur = k & 1;
      if (k < BK - 1) {
        load_frag(cur ^ 1, cur_stage, k + 1);
      } else if (kt + 1 < num_tiles) {
        // kt + STAGES groups committed: wait_prior(STAGES-2) leaves tiles 0..kt+1 landed.
        __pipeline_wait_prior(STAGES - 2);
        __syncthreads();                 // everyone's copies of kt+1 visible; everyone done reading kt
        load_frag(cur ^ 1, rd, 0);                         // rd already names tile kt+1's buffer
      }
      const float a[8] = {fa[cur][0].x, fa[cur][0].y, fa[cur][0].z, fa[cur][0].w,
                          fa[cur][1].x, fa[cur][1].y, fa[cur][1].z, fa[cur][1].w};
      float b[TN];
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        b[4 * q] = fb[cur][q].x; b[4 * q + 1] = fb[cur][q].y; b[4 * q + 2] = fb[cur][q].z; b[4 * q + 3] = fb[cur][q].w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }

  // beta = 0: C is only written, as float4 (4 lanes along N cover 64 contiguous bytes per row).
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* row = &C[(size_t)(r0 + (i / 4) * (WM / 2) + i % 4) * N + c0];
#pragma unroll
    for (int q = 0; q < NQ; ++q)
      *reinterpret_cast<float4*>(row + q * QN) =
          make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
  }
}
