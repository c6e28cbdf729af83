// tcgen05_gemm.cu - complete a Blackwell GEMM tile: TMEM allocation, tcgen05.mma, commit, epilogue, dealloc.
// judge: target=sm_100a features=tcgen05,tcgen05.commit,tmem.alloc,tmem.dealloc,tmem.ld
// Check: python practice/judge.py check tcgen05_gemm   (compiled for sm_100a and simulated; README.md)
//
// C[M][N] (fp32) = A[M][K] (bf16) * B[N][K]^T (bf16), both row-major. One CTA = 4 warps computes a
// 128 x 128 tile of C; grid = (N / 128, M / 128). The helpers are given (judge/include/tcgen05.cuh, namespace
// tc); fill in the parts marked TODO in tcgen05_gemm (chapter 5, "What changes from Hopper", explains each one).

#define BM 128
#define BN 128
#define BK 64
#define TMEM_COLS 128   // columns to allocate: the fp32 accumulator of a 128 x BN tile

typedef unsigned short bf16;   // raw bf16 bits

#include "tcgen05.cuh"   // given, in judge/include: tc::alloc, tc::relinquish, tc::dealloc, tc::mma_bf16,
                         // tc::commit, tc::mbar_init / mbar_wait, tc::ld_32x32b_x8 + tc::wait_ld, tc::smem_desc

#define IDESC ((1u << 4) | (1u << 7) | (1u << 10) | ((BN >> 3) << 17) | ((BM >> 4) << 24))
__device__ __forceinline__ int core_offset(int r, int k) {
  return ((r / 8) * (BK / 8) + k / 8) * 64 + (r % 8) * 8 + (k % 8);
}

extern "C" __global__ void __launch_bounds__(128, 1) tcgen05_gemm(
    const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ alignas(128) bf16 sA[BM * BK];
  __shared__ alignas(128) bf16 sB[BN * BK];
  __shared__ alignas(8) unsigned long long mma_done;
  __shared__ unsigned tmem_base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  // TODO 1: allocate TMEM_COLS columns (which threads?), then give up the allocation permit.
  // BEGIN SOLUTION
  //> 
  if (warp == 0) {
    tc::alloc(&tmem_base, TMEM_COLS);
    tc::relinquish();
  }
  // END SOLUTION
  if (threadIdx.x == 0) {
    tc::mbar_init(&mma_done, 1);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  tc::fence_before();
  __syncthreads();
  tc::fence_after();
  const unsigned d_tmem = tmem_base;

  unsigned phase = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int c = threadIdx.x; c < BM * BK / 8; c += blockDim.x) {
      int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&sA[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&A[(size_t)(row0 + r) * K + k0 + k]);
      *reinterpret_cast<uint4*>(&sB[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&B[(size_t)(col0 + r) * K + k0 + k]);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    tc::fence_after();
    // TODO 2: issue the BK / 16 MMAs of this stage (who issues them?), accumulate except at the
    // very first one, then make their completion arrive on mma_done.
    // A descriptor for K step s: tc::smem_desc(&sA[s * 128], 128, (BK / 8) * 128), same for sB.
    // BEGIN SOLUTION
    //> 
    if (threadIdx.x == 0) {
      for (int s = 0; s < BK / 16; ++s) {
        tc::mma_bf16(d_tmem, tc::smem_desc(&sA[s * 128], 128, (BK / 8) * 128),
                     tc::smem_desc(&sB[s * 128], 128, (BK / 8) * 128), IDESC, (k0 > 0 || s > 0) ? 1u : 0u);
      }
      tc::commit(&mma_done);
    }
    // END SOLUTION
    // TODO 3: sA and sB are overwritten next: wait until the MMAs reading them have completed.
    // BEGIN SOLUTION
    //> 
    tc::mbar_wait(&mma_done, phase);
    phase ^= 1;
    // END SOLUTION
    tc::fence_after();
  }

  // TODO 4: the TMEM address of this warp's first lane (lane in bits 31-16, column in 15-0).
  // BEGIN SOLUTION
  //> const unsigned my_rows = d_tmem;   // fix me
  const unsigned my_rows = d_tmem + ((unsigned)(32 * (warp % 4)) << 16);
  // END SOLUTION
  float* crow = C + (size_t)(row0 + 32 * (warp % 4) + lane) * N + col0;
  for (int c = 0; c < BN; c += 8) {
    float v[8];
    tc::ld_32x32b_x8(my_rows + c, v);
    tc::wait_ld();                       // RULE: registers are valid only after tcgen05.wait::ld
    for (int i = 0; i < 8; ++i) crow[c + i] = v[i];
  }
  tc::fence_before();
  __syncthreads();
  // TODO 5: give the columns back.
  // BEGIN SOLUTION
  //> 
  if (warp == 0) {
    tc::fence_after();
    tc::dealloc(d_tmem, TMEM_COLS);
  }
  // END SOLUTION
}
