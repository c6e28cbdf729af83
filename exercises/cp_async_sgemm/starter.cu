// pipelined_sgemm.cu - exercise cp_async_sgemm: give a register-tiled SGEMM a multi-stage cp.async pipeline.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait
// Check it: python practice/judge.py check cp_async_sgemm     (statement: exercises/cp_async_sgemm/README.md)
//
// C (M x N) = A (M x K) @ B (K x N), row-major float32; M, N multiples of 128, K a multiple of 8.
// Grid (N/128, M/128), 256 threads, STAGES * 8 KB of dynamic shared memory.
#include <cuda_pipeline.h>

#ifndef STAGES
#define STAGES 3
#endif
constexpr int BM = 128, BN = 128, BK = 8;   // block tile; one k-tile is BM x BK of A and BK x BN of B
constexpr int TM = 8, TN = 8;               // each thread accumulates an 8 x 8 patch of C
constexpr int THREADS = (BM / TM) * (BN / TN);                 // 256
constexpr int STAGE_FLOATS = BM * BK + BK * BN;                // 2048 floats = 8 KB per stage

// ----------------------------------------------------------------- given: leave as it is
// Issue the copies of k-tile `kt` into stage buffer `buf`: each thread moves 16 bytes of A and 16 of B
// straight from global to shared memory (LDGSTS), without passing through registers.
// Rule: a 16-byte cp.async needs both addresses 16-byte aligned (K and N multiples of 4 ensure it).
__device__ __forceinline__ void load_tile(float* smem, const float* A, const float* B, int K, int N,
                                          int kt, int buf) {
  float* As = smem + buf * STAGE_FLOATS;
  float* Bs = As + BM * BK;
  const int t = threadIdx.x;
  const int a_row = t / (BK / 4), a_col = (t % (BK / 4)) * 4;   // 128 rows x 2 vectors
  const int b_row = t / (BN / 4), b_col = (t % (BN / 4)) * 4;   // 8 rows x 32 vectors
  const int k0 = kt * BK;
  __pipeline_memcpy_async(&As[a_row * BK + a_col], &A[(size_t)a_row * K + k0 + a_col], 16);
  __pipeline_memcpy_async(&Bs[b_row * BN + b_col], &B[(size_t)(k0 + b_row) * N + b_col], 16);
}

// Multiply-accumulate k-tile `kt`, which must be resident in stage buffer `buf`, into acc.
__device__ __forceinline__ void compute_tile(float (&acc)[TM][TN], const float* smem, int kt, int buf) {
  const float* As = smem + buf * STAGE_FLOATS;
  const float* Bs = As + BM * BK;
  const int row0 = (threadIdx.x / (BN / TN)) * TM, col0 = (threadIdx.x % (BN / TN)) * TN;
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    float a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = As[(row0 + i) * BK + k];
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + col0 + j];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
  }
}

// ----------------------------------------------------------------- the kernel
extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_pipelined(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                float* __restrict__ C) {
  extern __shared__ __align__(16) float smem[];      // STAGES buffers of STAGE_FLOATS
  A += (size_t)blockIdx.y * BM * K;                   // this block's rows of A
  B += (size_t)blockIdx.x * BN;                       // this block's columns of B
  float acc[TM][TN] = {};
  const int num_tiles = K / BK;

  // Your pipeline goes here (STAGES buffers; load_tile / compute_tile above do the work):
  //  1. prologue: start loading the first STAGES-1 k-tiles, one commit group per tile;
  //  2. for each k-tile kt: wait until tile kt has arrived, make every thread's part of it
  //     visible, start loading tile kt+STAGES-1 into the buffer tile kt-1 used, commit, compute kt.
  // Until then C is all zeros, and the check says WRONG.

  // Write this thread's 8 x 8 patch (C is only written, never read: it may hold anything before).
  const int row0 = blockIdx.y * BM + (threadIdx.x / (BN / TN)) * TM;
  const int col0 = blockIdx.x * BN + (threadIdx.x % (BN / TN)) * TN;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      *reinterpret_cast<float4*>(&C[(size_t)(row0 + i) * N + col0 + j]) =
          make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}
