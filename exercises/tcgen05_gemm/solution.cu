// tcgen05_gemm.cu - complete a Blackwell GEMM tile: TMEM allocation, tcgen05.mma, commit, epilogue, dealloc.
// judge: target=sm_100a features=tcgen05,tcgen05.commit,tmem.alloc,tmem.dealloc,tmem.ld
// Check: python practice/judge.py check tcgen05_gemm   (compiled for sm_100a and simulated; README.md)
//
// C[M][N] (fp32) = A[M][K] (bf16) * B[N][K]^T (bf16), both row-major. One CTA = 4 warps computes a
// 128 x 128 tile of C; grid = (N / 128, M / 128). The helpers below are given; fill in the parts
// marked TODO in tcgen05_gemm (chapter 5, "What changes from Hopper", explains each one).

#define BM 128
#define BN 128
#define BK 64
#define TMEM_COLS 128   // columns to allocate: the fp32 accumulator of a 128 x BN tile

typedef unsigned short bf16;   // raw bf16 bits

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// ---- tensor memory: one whole warp allocates; the address arrives in shared memory
__device__ __forceinline__ void tmem_alloc(unsigned* dst, unsigned ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
               :: "r"(smem_addr(dst)), "r"(ncols) : "memory");
}
__device__ __forceinline__ void tmem_relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tmem_dealloc(unsigned taddr, unsigned ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols) : "memory");
}
__device__ __forceinline__ void fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
// ---- mbarrier
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile("{\n .reg .pred done;\nWAIT_%=:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               " @!done bra WAIT_%=;\n}" :: "r"(smem_addr(bar)), "r"(parity) : "memory");
}
// ---- MMA: issued by ONE thread; D (TMEM) (+)= A (smem) * B (smem)
__device__ __forceinline__ void mma_bf16(unsigned d_tmem, unsigned long long a, unsigned long long b,
                                         unsigned idesc, unsigned accumulate) {
  asm volatile("{\n .reg .pred acc;\n setp.ne.u32 acc, %4, 0;\n"
               " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n}"
               :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}
// The MMAs issued so far by this thread arrive once on `bar` when they have completed.
__device__ __forceinline__ void mma_commit(unsigned long long* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :: "r"(smem_addr(bar)) : "memory");
}
// ---- TMEM -> registers: 32 lanes (one per thread of the warp) x 8 columns
__device__ __forceinline__ void tmem_ld8(unsigned taddr, float (&v)[8]) {
  unsigned r[8];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  for (int i = 0; i < 8; ++i) v[i] = __uint_as_float(r[i]);
}
// ---- descriptors (no swizzle, K-major, 8 x 16-byte core matrices)
__device__ __forceinline__ unsigned long long smem_desc(const void* start, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((smem_addr(start) >> 4) & 0x3FFF) | (unsigned long long)((lbo >> 4) & 0x3FFF) << 16
       | (unsigned long long)((sbo >> 4) & 0x3FFF) << 32 | 1ull << 46;
}
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
    tmem_alloc(&tmem_base, TMEM_COLS);
    tmem_relinquish();
  }
  // END SOLUTION
  if (threadIdx.x == 0) {
    mbar_init(&mma_done, 1);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  fence_before();
  __syncthreads();
  fence_after();
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
    fence_after();
    // TODO 2: issue the BK / 16 MMAs of this stage (who issues them?), accumulate except at the
    // very first one, then make their completion arrive on mma_done.
    // A descriptor for K step s: smem_desc(&sA[s * 128], 128, (BK / 8) * 128), same for sB.
    // BEGIN SOLUTION
    //> 
    if (threadIdx.x == 0) {
      for (int s = 0; s < BK / 16; ++s) {
        mma_bf16(d_tmem, smem_desc(&sA[s * 128], 128, (BK / 8) * 128),
                 smem_desc(&sB[s * 128], 128, (BK / 8) * 128), IDESC, (k0 > 0 || s > 0) ? 1u : 0u);
      }
      mma_commit(&mma_done);
    }
    // END SOLUTION
    // TODO 3: sA and sB are overwritten next: wait until the MMAs reading them have completed.
    // BEGIN SOLUTION
    //> 
    mbar_wait(&mma_done, phase);
    phase ^= 1;
    // END SOLUTION
    fence_after();
  }

  // TODO 4: the TMEM address of this warp's first lane (lane in bits 31-16, column in 15-0).
  // BEGIN SOLUTION
  //> const unsigned my_rows = d_tmem;   // fix me
  const unsigned my_rows = d_tmem + ((unsigned)(32 * (warp % 4)) << 16);
  // END SOLUTION
  float* crow = C + (size_t)(row0 + 32 * (warp % 4) + lane) * N + col0;
  for (int c = 0; c < BN; c += 8) {
    float v[8];
    tmem_ld8(my_rows + c, v);
    for (int i = 0; i < 8; ++i) crow[c + i] = v[i];
  }
  fence_before();
  __syncthreads();
  // TODO 5: give the columns back.
  // BEGIN SOLUTION
  //> 
  if (warp == 0) {
    fence_after();
    tmem_dealloc(d_tmem, TMEM_COLS);
  }
  // END SOLUTION
}
