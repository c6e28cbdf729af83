// wgmma_tile.cu - the same 128x128 bf16 GEMM tile on Hopper: wgmma from shared memory into registers.
// judge: target=sm_90a features=wgmma
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/wgmma_tile.cu').sass)"
// The Hopper side of chapter 5's comparison with tcgen05_tile.cu (same tile, same shared-memory
// layout, same descriptors except two bits). Compiled and read here; timing GEMMs is chapter 4's job.
//
// C[M][N] (fp32) = A[M][K] (bf16, row-major) * B[N][K]^T (bf16, row-major).
// grid = (N / 128, M / 128), block = 128 threads = ONE warpgroup.
//
// The differences that chapter 5 is about:
//   - all 128 threads issue every wgmma (.sync.aligned over the warpgroup); tcgen05: one thread;
//   - the accumulator is 128 fp32 registers per thread (64 per m64 half of the tile);
//     tcgen05: 128 columns of tensor memory and no registers at all until the epilogue;
//   - completion: wgmma.commit_group / wait_group on the issuing threads; tcgen05: an mbarrier.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif

typedef unsigned short bf16;   // raw bf16 bits: the kernel never does arithmetic on them

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Same 8 x 8 core-matrix layout as tcgen05_tile.cu.
__device__ __forceinline__ int core_offset(int r, int k) {
  return ((r / 8) * (BK / 8) + k / 8) * 64 + (r % 8) * 8 + (k % 8);
}
// Hopper's descriptor: start >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte
// offset >> 4 (32-45), swizzle in bits 62-63 (0 = none). Unlike sm_100 there is no version field.
__device__ __forceinline__ unsigned long long wgmma_desc(const void* start, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((smem_u32(start) >> 4) & 0x3FFF)
       | (unsigned long long)((lbo >> 4) & 0x3FFF) << 16
       | (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
}

// One m64n128k16 MMA: 64 fp32 accumulators per thread; accumulate = 0 overwrites them.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long a,
                                                 unsigned long long b, int accumulate) {
  asm volatile(
      "{\n .reg .pred acc;\n setp.ne.b32 acc, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},\n"
      " %64, %65, acc, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

extern "C" __global__ void __launch_bounds__(128, 1) wgmma_tile(
    const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ alignas(128) bf16 sA[BM * BK];
  __shared__ alignas(128) bf16 sB[BN * BK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[2][64];                      // rows 0-63 and 64-127 of the tile: 128 registers

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int c = threadIdx.x; c < BM * BK / 8; c += blockDim.x) {
      int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&sA[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&A[(size_t)(row0 + r) * K + k0 + k]);
      *reinterpret_cast<uint4*>(&sB[core_offset(r, k)]) =
          *reinterpret_cast<const uint4*>(&B[(size_t)(col0 + r) * K + k0 + k]);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // stores -> async proxy
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");        // accumulator registers in order
    #pragma unroll
    for (int s = 0; s < BK / 16; ++s) {
      unsigned long long b = wgmma_desc(&sB[s * 128], 128, (BK / 8) * 128);
      #pragma unroll
      for (int h = 0; h < 2; ++h) {                                // two m64 halves of BM = 128
        unsigned long long a = wgmma_desc(&sA[h * 64 * BK + s * 128], 128, (BK / 8) * 128);
        wgmma_m64n128k16(acc[h], a, b, (k0 > 0 || s > 0));
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    // RULE: the next stage overwrites sA/sB: every wgmma reading them must have completed.
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncthreads();
  }
  // Accumulator fragment of m64nN: warp w owns rows 16w..16w+15 of each half; lane l holds row
  // 16w + l/4 (and +8), columns 8j + 2(l%4) and +1.
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    #pragma unroll
    for (int i = 0; i < 64; ++i) {
      int j = i / 4, r = row0 + h * 64 + 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
      int c = col0 + 8 * j + 2 * (lane % 4) + (i % 2);
      C[(size_t)r * N + c] = acc[h][i];
    }
  }
}
