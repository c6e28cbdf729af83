// sgemm_tuned.cu - tuned cp.async SGEMM: 128x128x16 block tiles, 64x32 warp tiles, 8x8 outputs per thread, 4 stages.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=4
// Build and inspect: python -c "from judge import build; b = build.compile('chapters/ch01_cp_async/sgemm_tuned.cu'); print(b.resources); print(b.sass_of('sgemm_tuned'))"
//
// C = A @ B, row-major float32, A is M x K, B is K x N, C is M x N.
// Shapes: M multiple of BM (128), N multiple of BN (128), K a multiple of BK (16); the host refuses others.
// C is written, never read (beta = 0).
// Launch: grid (N / BN, M / BM), THREADS (256) threads, dynamic shared memory
// STAGES * (BM * (BK + A_PAD) + BK * BN) * 4 bytes (72 KB at 4 stages: the host must raise the
// 48 KB default limit with cudaFuncAttributeMaxDynamicSharedMemorySize).
//
// What changes from sgemm_cp_async.cu, and why:
//  * BK = 16: twice the FMAs per __syncthreads and per wait, and 16-byte copies along k for A.
//  * Warp tiling: warp w owns a 64x32 piece of the block tile; inside it, lane (tr, tc) = (lane/4,
//    lane%4) owns rows tr + 8i (i = 0..7) and columns tc*4 + {0..3} and 16 + tc*4 + {0..3}.
//    A warp's fragment loads then touch few distinct shared-memory addresses, spread over all banks.
//  * Both operands come out of shared memory as float4 (LDS.128): B along n, A along k. cp.async
//    copies 16 bytes as they are, so A cannot be transposed on the way in; instead each thread reads
//    4 consecutive k of one A row at once and uses them over 4 k steps. Per 4 k steps a thread issues
//    8 + 8 LDS.128 for 256 FFMA, the same ratio a transposed A would give.
//  * Padded A rows: BK + A_PAD = 20 floats (80 bytes). The 8 rows a warp reads in one LDS.128 are
//    consecutive (tr + 8i), so their 16-byte chunks start at 0, 80, 160, ... bytes: modulo 128 bytes
//    (32 banks) 8 different chunk slots. A 16-byte load is served per half-warp, so that read costs
//    2 wavefronts, the least a warp pays for 16-byte loads of different addresses; with 64-byte rows
//    (A_PAD=0) rows tr and tr + 2 share banks and it costs 4. Measured with ncu on an H200:
//    chapters/ch01_cp_async/wavefronts_h200.json (2 and 4 per load; judge.hw.tma.bank_conflicts agrees).
//  * Grouped block order: consecutive blocks walk down GROUP_M block rows before moving right, so
//    the blocks resident at one time share A and B panels in L2.
//  * float4 stores of C.

#include <cuda_pipeline.h>

#ifndef STAGES
#define STAGES 4          // shared-memory buffers (STAGES - 1 tiles in flight)
#endif
#ifndef BK
#define BK 16             // depth of one k-tile
#endif
#ifndef WARPS_M
#define WARPS_M 2         // warps along M; each warp covers 64 rows
#endif
#ifndef WARPS_N
#define WARPS_N 4         // warps along N; each warp covers 32 columns
#endif
#ifndef GROUP_M
#define GROUP_M 8         // block rows walked together (L2 reuse)
#endif
#ifndef A_PAD
#define A_PAD 4           // floats of padding per A row (0: unpadded, for the wavefront measurement)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1      // __launch_bounds__ minimum resident blocks per SM (2 caps registers at 128)
#endif

#define WM 64
#define WN 32
#define BM (WARPS_M * WM)                      // 128
#define BN (WARPS_N * WN)                      // 128
#define THREADS (32 * WARPS_M * WARPS_N)       // 256
#define LDA (BK + A_PAD)                       // padded A row, in floats
#define LDB BN                                 // B rows are not padded: a warp reads 4 chunks of one row
#define A_STAGE (BM * LDA)
#define STAGE_FLOATS (BM * LDA + BK * BN)

static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert(BK % 4 == 0, "A is read as float4 along k");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
static_assert((LDA * 4) % 16 == 0, "cp.async of 16 bytes needs 16-byte aligned shared rows");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_tuned(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
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
  const int tr = lane / 4, tc = lane % 4;
  const int row0 = warp_m * WM + tr;             // this thread's rows: row0 + 8 * i
  const int col0 = warp_n * WN + tc * 4;         // this thread's columns: col0 + {0..3}, col0 + 16 + {0..3}

  constexpr int A_CHUNKS = BM * BK / 4 / THREADS;   // 16-byte copies per thread per tile: 2
  constexpr int B_CHUNKS = BK * BN / 4 / THREADS;   // 2

  auto load_tile = [&](int buf, int kt) {
    float* As = smem + buf * STAGE_FLOATS;
    float* Bs = As + A_STAGE;
    const int k0 = kt * BK;
#pragma unroll
    for (int r = 0; r < A_CHUNKS; ++r) {
      const int c = tid + r * THREADS;
      const int row = c / (BK / 4), col = (c % (BK / 4)) * 4;
      __pipeline_memcpy_async(&As[row * LDA + col], &A[(size_t)row * K + k0 + col], 16);
    }
#pragma unroll
    for (int r = 0; r < B_CHUNKS; ++r) {
      const int c = tid + r * THREADS;
      const int row = c / (BN / 4), col = (c % (BN / 4)) * 4;
      __pipeline_memcpy_async(&Bs[row * LDB + col], &B[(size_t)(k0 + row) * N + col], 16);
    }
  };

  const int num_tiles = K / BK;
  // Prologue: STAGES-1 tiles in flight, one commit group per tile (empty groups past the end).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    __pipeline_commit();
  }

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  for (int kt = 0; kt < num_tiles; ++kt) {
    __pipeline_wait_prior(STAGES - 2);   // kt + STAGES - 1 groups committed: tiles 0..kt have landed
    __syncthreads();                     // everyone's copies visible; everyone done with tile kt-1
    const int next = kt + STAGES - 1;
    if (next < num_tiles) load_tile(next % STAGES, next);   // into tile kt-1's buffer
    __pipeline_commit();                 // also when empty: group g stays tile g

    const float* As = smem + (kt % STAGES) * STAGE_FLOATS;
    const float* Bs = As + A_STAGE;
#pragma unroll
    for (int k4 = 0; k4 < BK; k4 += 4) {
      float4 a[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        a[i] = *reinterpret_cast<const float4*>(&As[(row0 + 8 * i) * LDA + k4]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[(k4 + kk) * LDB + col0]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[(k4 + kk) * LDB + col0 + 16]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float av = kk == 0 ? a[i].x : kk == 1 ? a[i].y : kk == 2 ? a[i].z : a[i].w;
          acc[i][0] = fmaf(av, b0.x, acc[i][0]);
          acc[i][1] = fmaf(av, b0.y, acc[i][1]);
          acc[i][2] = fmaf(av, b0.z, acc[i][2]);
          acc[i][3] = fmaf(av, b0.w, acc[i][3]);
          acc[i][4] = fmaf(av, b1.x, acc[i][4]);
          acc[i][5] = fmaf(av, b1.y, acc[i][5]);
          acc[i][6] = fmaf(av, b1.z, acc[i][6]);
          acc[i][7] = fmaf(av, b1.w, acc[i][7]);
        }
      }
    }
  }

  // beta = 0: C is only written; each row of a thread is two float4 stores (4 lanes cover 64 bytes).
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* row = &C[(size_t)(row0 + 8 * i) * N + col0];
    *reinterpret_cast<float4*>(row) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(row + 16) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}
