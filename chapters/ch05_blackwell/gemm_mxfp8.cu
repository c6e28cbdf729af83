// gemm_mxfp8.cu - one 128 x N tile of a block-scaled GEMM on Blackwell: MXFP8 (E4M3, an E8M0 scale per 32) or NVFP4.
// judge: target=sm_100a features=tcgen05.f8f6f4,tmem.cp,tcgen05.commit,tmem.alloc,tmem.relinquish,tmem.dealloc,tmem.ld,mbarrier.wait
// Build and inspect (any machine, no GPU): python -c "from judge import build; print(build.compile('chapters/ch05_blackwell/gemm_mxfp8.cu').sass)"
// NVFP4 variant: build.compile(path, defines={"NVFP4": 1}) (kind::mxf4nvf4, SASS UTCOMMA); MXFP4: {"MXFP4": 1}.
// Run it on the CPU model (no GPU): chapters/ch05_blackwell/blockscaled.py; tests/chapters/ch05_blackwell/test_blockscaled.py.
// No Blackwell GPU has run this kernel: the course compiles it, reads its SASS and runs its PTX on judge.model.
//
// C[128 * gridDim.x][N] (fp32, row-major) = (A * scale_A) (B * scale_B)^T, A[M][K] and B[N][K] K-major codes:
//   MXFP8 (default)  E4M3 codes, one byte each; an E8M0 scale per 32 elements of K: kind::mxf8f6f4, block32.
//   NVFP4 (NVFP4=1)  E2M1 codes, two per byte (element 2i in the low nibble); a UE4M3 scale per 16
//                    elements: kind::mxf4nvf4, block16 (the FP32 tensor scale is applied by the host).
//   MXFP4 (MXFP4=1)  E2M1 codes, two per byte; an E8M0 scale per 32 elements: kind::mxf4, block32.
// One CTA of 128 threads per 128 rows; N = 32..256 (a multiple of 32), K a multiple of KW.
//
// The K loop goes one SCALE WORD at a time: a 32-bit tensor-memory cell holds 4 one-byte scales of a row,
// which is KW = 128 elements of MXFP8 (4 MMAs of K = 32, scale factor ID 0..3 picks the byte), of MXFP4
// (2 MMAs of K = 64 with 2 scales each, ID 0 and 2 pick the half word) or KW = 64 of NVFP4 (1 MMA of
// K = 64 reading all 4 bytes, ID 0). Per step:
//   1. every thread copies the step's A, B and scale bytes into shared memory (plain loads and stores);
//   2. fence.proxy.async + __syncthreads: the tensor core reads shared memory through the async proxy;
//   3. thread CP_THREAD copies the scales into tensor memory (tcgen05.cp.32x128b.warpx4), thread 0 issues
//      the MMAs and tcgen05.commit;
//   4. everyone waits on the commit's mbarrier (the next step overwrites the shared memory the MMAs read).
// Scales in shared memory, as tcgen05.cp.32x128b.warpx4 reads them (32 rows of 16 bytes, copied to each
// warp's quarter of the 128 lanes): byte 16 l + 4 j + b is scale b of row 32 j + l (rows of A; columns of
// B in groups of 128). In tensor memory that is lane l (+ 32 q), column j, byte b.
#include "tcgen05.cuh"   // judge/include: tensor memory, tcgen05.mma and its commit (namespace tc)

#ifndef NVFP4
#define NVFP4 0
#endif
#ifndef MXFP4
#define MXFP4 0
#endif
#ifndef CP_THREAD
#define CP_THREAD 0       // the thread that issues tcgen05.cp: 0 = the MMA issuer itself, 32 = warp 1's lane 0
#endif

#if NVFP4
#define KW 64             // K elements per scale word: one MMA of K = 64 with 4 scales of 16 per row
#define ROW_BYTES 32      // bytes of one row of A or B per step: 64 FP4 codes, two per byte
#define MMAS 1
#elif MXFP4
#define KW 128            // 2 MMAs of K = 64, each with two scales of 32 per row
#define ROW_BYTES 64
#define MMAS 2
#else
#define KW 128            // 4 MMAs of K = 32, each with one scale of 32 per row
#define ROW_BYTES 128
#define MMAS 4
#endif

__device__ __forceinline__ void mma_scaled(unsigned d, unsigned long long a, unsigned long long b, unsigned idesc,
                                           unsigned sfa, unsigned sfb, unsigned accumulate) {
  asm volatile("{\n .reg .pred acc;\n setp.ne.u32 acc, %6, 0;\n"
#if NVFP4
               " tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%4], [%5], acc;\n}"
#elif MXFP4
               " tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32 [%0], %1, %2, %3, [%4], [%5], acc;\n}"
#else
               " tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 [%0], %1, %2, %3, [%4], [%5], acc;\n}"
#endif
               :: "r"(d), "l"(a), "l"(b), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate) : "memory");
}
// 32 rows x 128 bits of shared memory -> every warp's 32 lanes, 4 columns (PTX ISA 9.7.16.9.2). Asynchronous:
// a later tcgen05.mma of the SAME thread reads the copy: tcgen05.cp -> tcgen05.mma of the same .cta_group is
// one of the pipelined pairs the PTX ISA orders (9.7.16.6.2; other asynchronous tcgen05 operations may
// complete in any order); another thread must see its tcgen05.commit arrive first.
__device__ __forceinline__ void copy_scales(unsigned taddr, const void* src) {
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;"
               :: "r"(taddr), "l"(tc::smem_desc(src, 16, 128)) : "memory");
}

// Instruction descriptor of the block-scaled kinds: scale factor B ID in bits 4-5, A / B format in 7-9 /
// 10-12, N >> 3 in 17-22, scale type in bit 23 (1 = UE8M0, 0 = UE4M3), M >> 7 in 27-28, scale factor A ID
// in 29-30 (PTX ISA 9.7.16.4.2). E4M3 is format 0 of mxf8f6f4; E2M1 is format 1 of mxf4 / mxf4nvf4.
__host__ __device__ constexpr unsigned idesc_scaled(unsigned N, unsigned sf_id) {
  return (sf_id << 4) | (NVFP4 || MXFP4 ? (1u << 7) | (1u << 10) : 0u) | ((N >> 3) << 17) | ((NVFP4 ? 0u : 1u) << 23)
         | ((128u >> 7) << 27) | (sf_id << 29);
}

// A core-matrix (8 rows x 16 bytes) K-major layout, no swizzle: byte k of row r at (r / 8) * SBO +
// (k / 16) * 128 + (r % 8) * 16 + k % 16, SBO = ROW_BYTES * 8 (PTX ISA 9.7.16.10.6, K-major no swizzle).
__device__ __forceinline__ int core_offset(int r, int chunk) {
  return (r / 8) * (ROW_BYTES * 8) + chunk * 128 + (r % 8) * 16;
}

extern "C" __global__ void __launch_bounds__(128, 1) gemm_mxfp8(
    const uint4* A, const uint4* B, const uint4* SFA, const uint4* SFB, float* C, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sa = smem;                                  // 128 rows x ROW_BYTES
  unsigned char* sb = sa + 128 * ROW_BYTES;                  // N rows x ROW_BYTES
  unsigned char* ssfa = sb + 256 * ROW_BYTES;                // 512 bytes: 128 rows of A, 4 scales each
  unsigned char* ssfb = ssfa + 512;                          // N / 128 (rounded up) x 512 bytes
  __shared__ alignas(8) unsigned long long done, scales_in;
  __shared__ unsigned tmem_base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const int m0 = blockIdx.x * 128, steps = K / KW, sfb_groups = (N + 127) / 128;
  const unsigned cols = N <= 128 ? 256u : 512u;              // D (N columns) + 4 for scale_A + N / 32 for scale_B

  if (warp == 0) { tc::alloc(&tmem_base, cols); tc::relinquish(); }
  if (tid == 0) { tc::mbar_init(&done, 1); tc::mbar_init(&scales_in, 1); tc::fence_proxy_async(); }
  tc::fence_before();
  __syncthreads();
  tc::fence_after();
  const unsigned d_tmem = tmem_base;
  // RULE: the scale columns are inside the allocation (PTX ISA 9.7.16.7.1); scale_A's 4 columns start
  // 128-bit aligned after D, scale_B's N / 32 columns after them.
  const unsigned sfa_tmem = tmem_base + N, sfb_tmem = tmem_base + N + 4;

  for (int s = 0; s < steps; ++s) {
    // 1. this step's bytes, 16 at a time, into the core-matrix layout (global rows are K-major, ROW_BYTES per step)
    const int row_bytes_g = K / KW * ROW_BYTES;                // bytes of one row of A or B in global memory
    for (int i = tid; i < 128 * ROW_BYTES / 16; i += 128) {
      const int r = i / (ROW_BYTES / 16), ch = i % (ROW_BYTES / 16);
      *reinterpret_cast<uint4*>(sa + core_offset(r, ch)) = A[((m0 + r) * row_bytes_g + s * ROW_BYTES) / 16 + ch];
    }
    for (int i = tid; i < N * ROW_BYTES / 16; i += 128) {
      const int r = i / (ROW_BYTES / 16), ch = i % (ROW_BYTES / 16);
      *reinterpret_cast<uint4*>(sb + core_offset(r, ch)) = B[(r * row_bytes_g + s * ROW_BYTES) / 16 + ch];
    }
    if (tid < 32) reinterpret_cast<uint4*>(ssfa)[tid] = SFA[(blockIdx.x * steps + s) * 32 + tid];
    for (int i = tid; i < 32 * sfb_groups; i += 128) reinterpret_cast<uint4*>(ssfb)[i] = SFB[s * 32 * sfb_groups + i];
    // 2. RULE: generic-proxy stores become visible to the tensor core (async proxy) only after
    // fence.proxy.async by the writing thread, ordered before the issue by the barrier.
    tc::fence_proxy_async();
    __syncthreads();
    // 3. one thread copies the scales into tensor memory, one thread issues the MMAs
    if (tid == CP_THREAD) {
      copy_scales(sfa_tmem, ssfa);
      for (int g = 0; g < sfb_groups; ++g) copy_scales(sfb_tmem + 4 * g, ssfb + 512 * g);
#if CP_THREAD != 0
      tc::commit(&scales_in);                                  // the copies complete -> the MMA thread may read them
#endif
    }
    if (tid == 0) {
#if CP_THREAD != 0
      // RULE: scales another thread copied are read after its commit's arrival, then fence::after_thread_sync
      tc::mbar_wait(&scales_in, s & 1);
      tc::fence_after();
#endif
#pragma unroll
      for (int j = 0; j < MMAS; ++j) {                        // MMA j uses scale bytes 4 j / MMAS ..: ID = 4 j / MMAS
        const int kb = j * (ROW_BYTES / MMAS);                  // 32 bytes (K = 32 of E4M3 / K = 64 of E2M1)
        mma_scaled(d_tmem, tc::smem_desc(sa + kb / 16 * 128, 128, ROW_BYTES * 8),
                   tc::smem_desc(sb + kb / 16 * 128, 128, ROW_BYTES * 8), idesc_scaled(N, 4 / MMAS * j), sfa_tmem, sfb_tmem,
                   (s > 0 || j > 0) ? 1u : 0u);
      }
      tc::commit(&done);
    }
    // 4. RULE: the MMAs read shared memory until their commit arrives: wait before the next step's stores
    tc::mbar_wait(&done, s & 1);
    tc::fence_after();
  }

  // epilogue: warp w reads lanes 32w.. (rows m0 + 32w + lane) of D, 8 columns at a time (PTX ISA 9.7.16.8.1)
  float* crow = C + (size_t)(m0 + 32 * warp + lane) * N;
  for (int c = 0; c < N; c += 8) {
    float v[8];
    tc::ld_32x32b_x8(d_tmem + ((unsigned)(32 * warp) << 16) + c, v);
    tc::wait_ld();
    for (int i = 0; i < 8; ++i) crow[c + i] = v[i];
  }
  tc::fence_before();
  __syncthreads();
  if (warp == 0) { tc::fence_after(); tc::dealloc(tmem_base, cols); }
}
