// tcgen05_tile.cu - one 128x128 bf16 GEMM tile per CTA on Blackwell: tcgen05.mma into tensor memory.
// judge: target=sm_100a features=tcgen05,tcgen05.commit,tmem.alloc,tmem.relinquish,tmem.dealloc,tmem.ld,mbarrier.wait
// Build and inspect (any machine, no GPU): python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/tcgen05_tile.cu', target='sm_100a').sass)"
// It needs a B200/GB200 (sm_100a) to run; the course compiles it, reads its SASS and replays its
// alloc -> mma -> commit -> wait -> ld -> dealloc protocol in judge/hw/tmem.py. It has not run on a GPU.
//
// C[M][N] (fp32) = A[M][K] (bf16, row-major) * B[N][K]^T (bf16, row-major: both operands K-major).
// grid = (N / 128, M / 128), block = 128 threads (4 warps). The same tile as wgmma_tile.cu (Hopper).
//
// What changes from Hopper, in the order the kernel meets it:
//   1. warp 0 ALLOCATES 128 columns of tensor memory (the 128x128 fp32 accumulator) and
//      relinquishes the allocation permit; the TMEM address arrives through shared memory;
//   2. ONE thread issues every MMA (wgmma needed the whole warpgroup of 128 threads);
//   3. the accumulator never sits in registers while it is being built: 0 registers for D;
//   4. completion comes from tcgen05.commit, which arrives on an mbarrier;
//   5. each warp copies ITS quarter of the lanes (rows 32w..32w+31) to registers with tcgen05.ld;
//   6. warp 0 frees the columns once every read of them has finished.
#include "tcgen05.cuh"   // judge/include: tensor memory, tcgen05.mma and its commit (namespace tc)

typedef unsigned short bf16;   // raw bf16 bits: the kernel never does arithmetic on them

#ifndef BM
#define BM 128          // rows of the tile = TMEM lanes used (the M = 128 MMA shape)
#endif
#ifndef BN
#define BN 128          // columns of the tile = TMEM columns allocated (fp32: one column each)
#endif
#ifndef BK
#define BK 64           // K per shared-memory stage; each MMA takes K = 16 of it
#endif

// Element (r, k) of a BM x BK (or BN x BK) bf16 tile, stored as 8 x 8 core matrices (8 rows of
// 16 bytes): the layout a no-swizzle K-major descriptor describes.
__device__ __forceinline__ int core_offset(int r, int k) {
  return ((r / 8) * (BK / 8) + k / 8) * 64 + (r % 8) * 8 + (k % 8);
}

extern "C" __global__ void __launch_bounds__(128, 1) tcgen05_tile(
    const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
  __shared__ alignas(128) bf16 sA[BM * BK];
  __shared__ alignas(128) bf16 sB[BN * BK];
  __shared__ alignas(8) unsigned long long mma_done;
  __shared__ unsigned tmem_base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  if (warp == 0) {                       // a whole warp: .sync.aligned
    tc::alloc(&tmem_base, BN);           // BN = 128: a power of two >= 32
    tc::relinquish();
  }
  if (threadIdx.x == 0) {
    tc::mbar_init(&mma_done, 1);         // one arrival per phase: the commit's
    tc::fence_proxy_async();
  }
  tc::fence_before();
  __syncthreads();
  tc::fence_after();
  const unsigned d_tmem = tmem_base;     // lane 0, first allocated column

  constexpr unsigned idesc = tc::idesc_bf16_f32(BM, BN);
  unsigned phase = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    // Plain 16-byte loads into the core-matrix layout (a production kernel uses TMA here,
    // exactly as on Hopper: chapter 2).
    for (int c = threadIdx.x; c < BM * BK / 8; c += blockDim.x) {
      int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&sA[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&A[(size_t)(row0 + r) * K + k0 + k]);
    }
    for (int c = threadIdx.x; c < BN * BK / 8; c += blockDim.x) {
      int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&sB[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&B[(size_t)(col0 + r) * K + k0 + k]);
    }
    tc::fence_proxy_async();             // generic stores -> visible to the MMA's async-proxy reads
    __syncthreads();
    tc::fence_after();
    if (threadIdx.x == 0) {
      #pragma unroll
      for (int s = 0; s < BK / 16; ++s) {  // 16 bf16 along K = two core matrices = 256 bytes
        unsigned long long a = tc::smem_desc(&sA[s * 128], 128, (BK / 8) * 128);
        unsigned long long b = tc::smem_desc(&sB[s * 128], 128, (BK / 8) * 128);
        tc::mma_bf16(d_tmem, a, b, idesc, (k0 > 0 || s > 0) ? 1u : 0u);
      }
      tc::commit(&mma_done);             // arrives when the MMAs above have completed
    }
    // RULE: the next stage overwrites sA/sB, which the MMAs may still be reading: wait for them.
    tc::mbar_wait(&mma_done, phase);
    phase ^= 1;
    tc::fence_after();
  }

  // Epilogue: warp w reads TMEM lanes 32w..32w+31 = rows 32w..32w+31 of the tile.
  const unsigned lane_base = (unsigned)(32 * (warp % 4)) << 16;
  float* crow = C + (size_t)(row0 + 32 * warp + lane) * N + col0;
  for (int c = 0; c < BN; c += 8) {
    float v[8];
    tc::ld_32x32b_x8(d_tmem + lane_base + c, v);
    tc::wait_ld();
    #pragma unroll
    for (int i = 0; i < 8; ++i) crow[c + i] = v[i];
  }
  tc::fence_before();
  __syncthreads();                       // every warp's tcgen05.ld has completed
  if (warp == 0) {
    tc::fence_after();
    tc::dealloc(d_tmem, BN);             // the allocating warp frees exactly what it allocated
  }
}
