// sgemm_cp_async.cu - S-stage cp.async SGEMM: 128x128x8 block tiles, 8x8 outputs per thread.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=3
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch01_cp_async/sgemm_cp_async.cu').sass_of('sgemm_cp_async'))"
//
// C = A @ B, row-major float32, A is M x K, B is K x N, C is M x N.
// Shapes: M and N multiples of 128, K a multiple of 8; the host (sgemm.py) refuses others.
// C is written, never read (beta = 0). Same tiling and shared layout as sgemm_sync.cu; only the
// way tiles reach shared memory differs: cp.async (SASS: LDGSTS) copies global -> shared without
// a register, and the copies of the next STAGES-1 tiles are in flight while this tile is computed.
// Launch: grid (N / 128, M / 128), 256 threads, dynamic shared memory STAGES * 8 KB
// (above 48 KB the host must first raise cudaFuncAttributeMaxDynamicSharedMemorySize;
//  Hopper allows up to 227 KB per block, so up to 28 stages would fit one block; but the wait below,
//  __pipeline_wait_prior(n), is a switch over n = 0..7 in <cuda_pipeline_primitives.h> that sends
//  every larger n to wait_group 8 (<cuda_pipeline_helpers.h> clamps at _CUDA_PIPELINE_MAX_STAGES, 8), so past 10 stages the loop
//  waits for more groups than it has to and the extra buffers stop adding copies in flight. The clamp
//  is the header's, not the hardware's: PTX sets no bound on cp.async.wait_group N, and a raw
//  `cp.async.wait_group 12` compiles to DEPBAR.LE SB0, 0xc (chapter 1, section 4, shows both).

#include <cuda_pipeline.h>

#ifndef STAGES
#define STAGES 3    // shared-memory buffers; STAGES - 1 tiles are loaded ahead of the compute
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

#define THREADS ((BM / TM) * (BN / TN))            // 256
#define STAGE_FLOATS (BM * BK + BK * BN)           // 2048 floats = 8 KB per stage

static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert(THREADS == 256, "the loaders below assume 256 threads");
static_assert(BM * BK == 4 * THREADS && BK * BN == 4 * THREADS,
              "each thread copies exactly one 16-byte chunk of A and one of B per tile");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_cp_async(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
               float* __restrict__ C) {
  // Dynamic shared memory: STAGES buffers, each [A tile 128x8 row-major | B tile 8x128 row-major].
  // cp.async of 16 bytes needs both addresses 16-byte aligned: every row offset below is a
  // multiple of 4 floats, and the buffer itself is aligned to 16.
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int thread_col = tid % (BN / TN);
  const int thread_row = tid / (BN / TN);
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;

  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;

  // Issue this thread's share of tile kt into buffer buf: two 16-byte cp.async (LDGSTS.E.BYPASS.128,
  // i.e. cp.async.cg: 16-byte copies skip L1). The thread does not wait for them.
  auto load_tile = [&](int buf, int kt) {
    float* As = smem + buf * STAGE_FLOATS;
    float* Bs = As + BM * BK;
    const int k0 = kt * BK;
    __pipeline_memcpy_async(&As[a_row * BK + a_col], &A[(size_t)a_row * K + k0 + a_col], 16);
    __pipeline_memcpy_async(&Bs[b_row * BN + b_col], &B[(size_t)(k0 + b_row) * N + b_col], 16);
  };

  const int num_tiles = K / BK;

  // Prologue: tiles 0 .. STAGES-2 go out now, one commit group each. Why STAGES-1 and not STAGES:
  // the loop below issues tile kt+STAGES-1 into the buffer of tile kt-1, the only buffer that
  // is free once everyone has finished computing kt-1. With STAGES buffers, one is always being
  // computed on and STAGES-1 can be in flight.
  // The guard keeps a short K (fewer tiles than stages) correct; the commit is unconditional so
  // that group s always means tile s.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    __pipeline_commit();
  }

  float acc[TM][TN];
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) acc[m][n] = 0.f;
  float a_frag[TM], b_frag[TN];

  for (int kt = 0; kt < num_tiles; ++kt) {
    // Before this line, kt + STAGES - 1 groups have been committed (STAGES-1 in the prologue, one
    // per earlier iteration). wait_prior(STAGES-2) returns once at most STAGES-2 of them are still
    // pending, so the oldest kt+1 groups, tiles 0..kt, have landed: this thread's copies of tile kt
    // are in shared memory (SASS: DEPBAR.LE SB0, STAGES-2).
    __pipeline_wait_prior(STAGES - 2);
    // The wait covers only this thread's own copies. The barrier makes every thread's part of tile
    // kt visible to all, and it also proves everyone has finished computing tile kt-1, whose
    // buffer the next line overwrites.
    __syncthreads();

    const int next = kt + STAGES - 1;
    if (next < num_tiles) load_tile(next % STAGES, next);
    // Commit even when nothing was issued (the last STAGES-1 iterations). An empty group is complete
    // at once; what it keeps is the count: group g holds tile g, and kt + STAGES groups are committed
    // when the next iteration waits for tile kt+1. Drop it and the tail goes wrong: with STAGES=3 and
    // 10 tiles, iteration 9 would find only 10 groups committed, wait_prior(1) would let group 9
    // (tile 9 itself) still be in flight, and the loop would read a buffer that is still being written.
    __pipeline_commit();

    const float* As = smem + (kt % STAGES) * STAGE_FLOATS;
    const float* Bs = As + BM * BK;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int m = 0; m < TM; ++m) a_frag[m] = As[(thread_row * TM + m) * BK + k];
#pragma unroll
      for (int n = 0; n < TN; ++n) b_frag[n] = Bs[k * BN + thread_col * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] = fmaf(a_frag[m], b_frag[n], acc[m][n]);
    }
    // No barrier here: the barrier at the top of the next iteration protects this buffer.
  }

  // beta = 0: C is only written.
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    float* row = &C[(size_t)(thread_row * TM + m) * N + thread_col * TN];
#pragma unroll
    for (int n = 0; n < TN; n += 4)
      *reinterpret_cast<float4*>(&row[n]) = make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
  }
}
