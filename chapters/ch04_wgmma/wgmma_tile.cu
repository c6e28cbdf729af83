// wgmma_tile.cu - one warpgroup, one 64x64 tile: C = A * B^T with wgmma.mma_async, descriptors built by hand.
// judge: target=sm_90a features=wgmma,proxy.fence defines=SWIZZLE=128
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch04_wgmma/wgmma_tile.cu').sass)"
// Run (an H200): chapters/ch04_wgmma.ipynb, section "A first wgmma"; judge/hw/wgmma.py models every address below.
//
// A (64 x 64 bf16) and B (64 x 64 bf16) are row-major in global memory: both K-major. That is this
// kernel's choice: for 16-bit types wgmma also takes MN-major tiles through its transpose operands
// (PTX ISA, wgmma.mma_async, imm-trans-a / imm-trans-b; CUTLASS's Layout_MN_SW* atoms); only tf32,
// FP8 and int8 operands must be K-major. One block of 128 threads (one warpgroup) copies them into shared memory in the
// canonical K-major layout of the chosen swizzle (the layout a TMA box with the same swizzle leaves),
// then issues K/16 = 4 wgmma m64n64k16 and writes the fp32 accumulators to C (64 x 64, row-major)
// through the register fragment layout. Every layout rule the chapter states is used here once.
#include "tma.cuh"

#ifndef SWIZZLE
#define SWIZZLE 128            // bytes per shared-memory row of the operand tile: 128, 64 or 32
#endif

#define TILE 64                // M = N = K = 64
#define SPAN_ELEMS (SWIZZLE / 2)                  // bf16 per row of one swizzle atom
#define ATOM_COLS (TILE / SPAN_ELEMS)             // atoms side by side along K: 1, 2 or 4
#define TILE_BYTES (TILE * TILE * 2)

#if SWIZZLE == 128
#define LAYOUT 1ull
#elif SWIZZLE == 64
#define LAYOUT 2ull
#elif SWIZZLE == 32
#define LAYOUT 3ull
#else
#error "SWIZZLE must be 128, 64 or 32"
#endif

// Byte offset of element [row][k] inside a tile laid out as ATOM_COLS column blocks of TILE rows,
// each row SWIZZLE bytes. RULE: the swizzle XORs the 16-byte chunk index (address bits 4..) with the
// row's 128-byte line index (bits 7..), as many bits as a row has chunks - the same rule as TMA's.
__device__ __forceinline__ unsigned kmajor_offset(int row, int k) {
  unsigned block = (unsigned)(k / SPAN_ELEMS);
  unsigned plain = (block * TILE + row) * SWIZZLE + (k % SPAN_ELEMS) * 2;
  unsigned mask = SWIZZLE / 16 - 1;                      // 7, 3 or 1
  return plain ^ (((plain >> 7) & mask) << 4);
}

// The 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits 0-13 start >> 4 | 16-29 leading byte offset >> 4 | 32-45 stride byte offset >> 4 |
//   49-51 base offset | 62-63 layout (1 = 128B, 2 = 64B, 3 = 32B swizzle, 0 = none).
// K-major and swizzled: the 8-row groups are 8 * SWIZZLE bytes apart (stride byte offset); one k16
// slice (32 bytes) never leaves a row, so the leading byte offset is unused (set to 1, 16 bytes).
__device__ __forceinline__ unsigned long long descriptor(unsigned start) {
  return (unsigned long long)((start & 0x3FFFF) >> 4)
       | (1ull << 16)
       | ((unsigned long long)((8 * SWIZZLE) >> 4) << 32)
       | (LAYOUT << 62);
}

extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_tile(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C,
           unsigned* smem_base) {
  // RULE: a swizzled tile must start on the pattern's repeat (8 rows: 1024 bytes for 128B), so that
  // the address bits the hardware XORs count rows from the tile's first row (base offset 0).
  __shared__ alignas(1024) unsigned char sA[TILE_BYTES];
  __shared__ alignas(1024) unsigned char sB[TILE_BYTES];
  const int t = threadIdx.x;

  for (int e = t; e < TILE * TILE; e += 128) {          // element e = row * 64 + k of A and of B
    int row = e / TILE, k = e % TILE;
    *(unsigned short*)(sA + kmajor_offset(row, k)) = A[e];
    *(unsigned short*)(sB + kmajor_offset(row, k)) = B[e];
  }
  if (t == 0) *smem_base = tma::smem(sA);
  // RULE: wgmma reads shared memory through the async proxy; these stores went through the generic
  // proxy. fence.proxy.async makes them visible to it (after the barrier, to every thread's stores).
  tma::fence_proxy_async();
  __syncthreads();

  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  // RULE: wgmma.fence before the first wgmma: the accumulator registers were just written.
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int ks = 0; ks < TILE / 16; ++ks) {
    // The ks-th 16-element slice: its atom column block, then 32 bytes further per slice inside it.
    unsigned off = (unsigned)((ks * 16) / SPAN_ELEMS) * TILE * SWIZZLE + ((ks * 16) % SPAN_ELEMS) * 2;
    unsigned long long da = descriptor(tma::smem(sA) + off);
    unsigned long long db = descriptor(tma::smem(sB) + off);
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db));
  }
  // The four wgmma form one group; wait until none is pending before reading d.
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

  // Accumulator fragment (PTX ISA, wgmma .m64nNk16 register fragment D): warp w = t / 32, lane l holds
  // d[i] at row 16w + l/4 + 8*((i/2)%2), column 8*(i/4) + 2*(l%4) + i%2.
  const int w = t / 32, l = t % 32;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    int row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
    int col = 8 * (i / 4) + 2 * (l % 4) + (i % 2);
    C[row * TILE + col] = d[i];
  }
}
