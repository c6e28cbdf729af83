// handbook_gemm_cp_async.cu - the handbook's cp.async SGEMM design, written for the course: 128x128x8 tiles, 8x8 per thread, 3 stages, C = alpha*A@B + beta*C.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=3
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch01_cp_async/handbook_gemm_cp_async.cu').sass_of('handbook_gemm_cp_async'))"
// Run: chapters/ch01_cp_async/sgemm.py baselines_table() (checked against float64, timed against cuBLAS).
//
// This kernel follows the design of the handbook the chapter was specified from (its
// gemm_cp_async.cu): the same parameters (128x128x8 block tiles, 8x8 outputs per thread, 256
// threads, a 3-stage cp.async ring with one 16-byte copy of A and one of B per thread per tile,
// static shared memory, one commit group per tile, wait_prior(STAGES-2), an alpha/beta epilogue),
// so that the chapter's table can say what that design achieves on an H200 under the course's
// timing protocol. The code is the course's own.
//
// Epilogue semantics: C = alpha * (A @ B) + beta * C, as in BLAS. When beta == 0, C is NOT read
// (BLAS's rule: C may hold anything, NaN included, and must not leak into the result). The
// handbook's epilogue computes alpha*acc + beta*c unconditionally, so a C poisoned with NaN stays
// NaN there even with beta = 0; here the branch on beta is uniform across the grid, so it costs
// nothing measurable.
//
// Measured on the H200 (2026-11-30, random inputs, L2 flushed, cuBLAS in the same process):
// 35.1 TFLOPS at 4096^3 (0.69 of cuBLAS) and 35.4 at 8192^3, the same as the chapter's 3-stage
// kernel (sgemm_cp_async.cu): the design, not this file, sets the figure. Timed the handbook's way
// (inputs all zero, L2 not flushed) it ran at 35.2: the 38.0 TFLOPS the handbook's own program
// reached on the same GPU, built and timed by its own harness, does not come from the data or the
// cache; what remains different is that build (nvcc for sm_80, not NVRTC for sm_90a), not measured here.
//
// C = alpha * A @ B + beta * C, row-major float32; M, N multiples of 128, K a multiple of 8.
// Launch: grid (N / 128, M / 128), 256 threads, no dynamic shared memory (STAGES * 8 KB static,
// which must stay within the 48 KB static limit: STAGES <= 6).

#include <cuda_pipeline.h>

#ifndef STAGES
#define STAGES 3
#endif
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS ((BM / TM) * (BN / TN))            // 256

static_assert(STAGES >= 2 && STAGES <= 6, "2 to 6 stages of 8 KB fit the 48 KB of static shared memory");

extern "C" __global__ void __launch_bounds__(THREADS)
handbook_gemm_cp_async(int M, int N, int K, float alpha, const float* __restrict__ A,
                       const float* __restrict__ B, float beta, float* __restrict__ C) {
  __shared__ __align__(16) float As[STAGES][BM * BK];   // A tile, row-major: 128 rows of 8
  __shared__ __align__(16) float Bs[STAGES][BK * BN];   // B tile, row-major: 8 rows of 128

  const int tid = threadIdx.x;
  const int thread_col = tid % (BN / TN), thread_row = tid / (BN / TN);
  // Per tile each thread copies 16 bytes of A (a 128x8 tile is 2 chunks per row) and 16 of B
  // (an 8x128 tile is 32 chunks per row).
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;

  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;

  const int num_tiles = K / BK;
  auto issue = [&](int slot, int kt) {
    __pipeline_memcpy_async(&As[slot][a_row * BK + a_col], &A[(size_t)a_row * K + kt * BK + a_col], 16);
    __pipeline_memcpy_async(&Bs[slot][b_row * BN + b_col], &B[(size_t)(kt * BK + b_row) * N + b_col], 16);
  };
  // Prologue: STAGES-1 tiles in flight; a group is committed for every slot, even past the last
  // tile, so that group g is always tile g (a short K still waits for the right group).
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) issue(s, s);
    __pipeline_commit();
  }

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  float a_frag[TM], b_frag[TN];

  for (int kt = 0; kt < num_tiles; ++kt) {
    __pipeline_wait_prior(STAGES - 2);   // this thread's copies of tile kt have landed
    __syncthreads();                     // everyone's have; everyone is done with tile kt-1
    if (kt + STAGES - 1 < num_tiles) issue((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    __pipeline_commit();

    const float* as = As[kt % STAGES];
    const float* bs = Bs[kt % STAGES];
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) a_frag[i] = as[(thread_row * TM + i) * BK + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) b_frag[j] = bs[k * BN + thread_col * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
  }

  // Epilogue: BLAS semantics; beta == 0 never reads C.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    float* row = &C[(size_t)(thread_row * TM + i) * N + thread_col * TN];
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      float4 v = make_float4(alpha * acc[i][j], alpha * acc[i][j + 1], alpha * acc[i][j + 2], alpha * acc[i][j + 3]);
      if (beta != 0.f) {
        const float4 c = *reinterpret_cast<const float4*>(&row[j]);
        v.x = fmaf(beta, c.x, v.x); v.y = fmaf(beta, c.y, v.y);
        v.z = fmaf(beta, c.z, v.z); v.w = fmaf(beta, c.w, v.w);
      }
      *reinterpret_cast<float4*>(&row[j]) = v;
    }
  }
}
