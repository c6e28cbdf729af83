// gemm_rs.cu - Chapter 4's warp-specialized GEMM with wgmma's A operand in REGISTERS (the RS form):
// C (M x N, bf16) = diag(scale) A B^T, A (M x K) and B (N x K) bf16 row-major (K-major), scale a
// float per row of A, fp32 accumulation. TMA brings A and B into shared memory; each consumer thread
// reads its part of A's fragment with ld.shared, multiplies it by its rows' scales, rounds it back to
// bf16 and hands the registers to wgmma, while B stays in shared memory (descriptor). That is how an
// attention kernel feeds P = softmax(...) (computed in registers) into P V without a trip through
// shared memory; here the per-row scale stands for that work.
// Block = 3 warpgroups: warpgroup 0 produces, warpgroups 1, 2 own 64 rows each of the 128 x 128 tile.
// Run: chapters/ch04_wgmma/variants.py (model_check("rs", ...), measure()).
// judge: target=sm_90a features=wgmma,wgmma.rs,tma.load,mbarrier.wait
#include "wgmma.cuh"

#ifndef BN
#define BN 128
#define BM 128
#define BK 64
#define STAGES 4
#define KEEP 0     // wgmma groups left in flight before the slot is released (must stay 0: see below)
#endif
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))

// D(64 x 128, fp32) += A(64 x 16, four .b32 registers per thread) * B(128 x 16, K-major descriptor)^T.
__device__ __forceinline__ void mma_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ unsigned ld_shared(const void* p) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(tma::smem(p)));
  return v;
}

// A's register fragment of one m64k16 slice (PTX ISA, wgmma "Register Fragments", .m64nNk16 A):
// thread t (warp w = t / 32, lane l) holds in a[j] the two bf16 at row 16w + l/4 + 8 (j % 2),
// columns 2 (l % 4) + 8 (j / 2) + {0, 1} (the lower column in the lower half). The slot was written
// by TMA with the 128B swizzle: row r's 16-byte chunk q lies at chunk q ^ (r % 8) of its 128-byte line.
__device__ __forceinline__ void load_scaled_fragment(unsigned (&a)[4], const unsigned char* tile, int k16,
                                                     float s_lo, float s_hi) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int r = 16 * w + l / 4 + 8 * (j % 2);
    const int kb = 2 * (16 * k16 + 2 * (l % 4) + 8 * (j / 2));         // byte of K within the row
    const unsigned v = ld_shared(tile + r * 128 + ((((kb >> 4) ^ (r % 8))) << 4) + (kb & 15));
    const float s = (j % 2) ? s_hi : s_lo;
    a[j] = wg::pack_bf16x2(__uint_as_float(v << 16) * s, __uint_as_float(v & 0xFFFF0000u) * s);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_rs(const __grid_constant__ TensorMap mapA, const __grid_constant__ TensorMap mapB,
        const float* scale, unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * A_BYTES;
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS);
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    wg::regs_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES, round = kt / STAGES;
        tma::wait(&empty[s], (round & 1) ^ 1);
        tma::arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
        tma::load_2d(sA + s * A_BYTES, &mapA, kt * BK, m0, &full[s]);
        tma::load_2d(sB + s * B_BYTES, &mapB, kt * BK, n0, &full[s]);
      }
    }
  } else {
    wg::regs_inc<232>();
    const int c = wg_index - 1;
    const int t = threadIdx.x % 128;
    const int row = m0 + c * 64 + 16 * (t / 32) + (t % 32) / 4;
    const float s_lo = row < M ? scale[row] : 0.f, s_hi = row + 8 < M ? scale[row + 8] : 0.f;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES, round = kt / STAGES;
      tma::wait(&full[s], round & 1);
      // RULE (PTX ISA, wgmma.mma_async): a wgmma reads A's registers asynchronously, like its
      // accumulators. Writing them while a wgmma that reads them is still running is undefined:
      // the wgmma.wait_group at the bottom of the previous slice (KEEP = 0) is what makes these
      // writes safe. With KEEP = 1 the previous slice's wgmma may still be reading a[][] here.
      unsigned a[BK / 16][4];
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        load_scaled_fragment(a[k], sA + s * A_BYTES + c * 64 * 128, k, s_lo, s_hi);
      // RULE (PTX ISA, wgmma.fence): the registers were written since the last wgmma.fence, so a
      // fence must come after those writes and before the first wgmma that reads them. Fencing at
      // the top of the slice (before the loads above) leaves the writes unordered with the wgmma.
      wg::fence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        mma_rs_n128(acc, a[k], wg::desc_sw128(sB + s * B_BYTES + k * 32));
      wg::commit();
      wg::wait<KEEP>();
      if (threadIdx.x % 128 == 0) tma::arrive(&empty[s]);   // A was read into registers, B by the wgmma
    }
    wg::store_fragment_bf16(acc, C, M, N, m0 + c * 64, n0);
  }
}
