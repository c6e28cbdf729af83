// tma_copy_fast.cu - TMA copy with big boxes and a deep ring in dynamic shared memory: persistent blocks, full/empty mbarriers, several stores in flight.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier.expect_tx,mbarrier.wait defines=STAGES=4,BOX_W=256,BOX_H=32
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/tma_copy_fast.cu').sass)"
// Run: chapters/ch02_tma/run.py copy_fast(); grid = BLOCKS_PER_SM x SMs, block = 64 threads (two warps),
// dynamic shared memory STAGES * BOX_W * BOX_H * 4 bytes (above 48 KB the host opts in).
//
// Same protocol as tma_copy_pipelined.cu (warp 0 lane 0 loads, warp 1 lane 0 stores from the same
// slot, no thread touches the data), with three knobs that decide how many bytes are in flight:
//  * BOX_W x BOX_H: one box of up to 256 x 256 elements (the hardware's limit per box dimension).
//    The host describes the matrix as rows of BOX_W floats, so a box of 256 x 32 floats is 32 KB of
//    CONTIGUOUS memory: whole DRAM pages, not 32 separate 256-byte pieces of 32 rows.
//  * STAGES: ring slots in dynamic shared memory (up to 227 KB per block).
//  * STORE_LAG: stores allowed to be still reading shared memory before a slot is handed back
//    (tma_copy_pipelined.cu uses 1). RULE: STORE_LAG < STAGES, or the producer waits for a
//    slot that only a later store would release: a deadlock.
//  * ORDER: 0 hands out tiles round-robin (block b takes tiles b, b + grid, ...: at any moment the
//    grid works on one stretch of memory), 1 gives each block one contiguous range of tiles (the
//    grid works on `grid` stretches far apart at once).
//
// Measured on the H200 (2026-11-30, 1 GiB float32, judge.gpu.timing.bench, bit-exact check first;
// run.py copy_fast() prints the table): the best shape, 256 x 32 boxes over the matrix's own
// 8192-float rows (32 rows of 1 KB each), 4 stages (128 KB in flight per SM), 1 block per SM:
// 4041-4051 GB/s, 0.96 of the device-to-device copy of the same size (4224 GB/s). It does NOT
// reach 0.97, and the sweep says it is not a matter of bytes in flight: 128 KB per SM (4 slots of
// 32 KB, or 4 blocks x 4 slots of 8 KB as in tma_copy_pipelined.cu) and 192 KB (2 blocks x 3 x 32 KB,
// 2 x 6 x 16 KB) all landed between 0.951 and 0.957, with a spread of about 1 %; a store lag of 2-4
// or no L2 promotion changed nothing beyond that. What moved it was the ORDER in which DRAM sees the
// addresses, and only downwards: the same 32 KB box over 32 KB of CONTIGUOUS memory fell to 0.92,
// and giving each block a contiguous range of tiles to 0.92-0.93.
#include "tma.cuh"

#ifndef STAGES
#define STAGES 4
#endif
#ifndef BOX_W
#define BOX_W 256     // floats per box row (1 KB)
#endif
#ifndef BOX_H
#define BOX_H 32      // box rows: 256 x 32 x 4 = 32 KB per slot
#endif
#ifndef STORE_LAG
#define STORE_LAG 1
#endif
#ifndef ORDER
#define ORDER 0
#endif

static_assert(STORE_LAG >= 1 && STORE_LAG < STAGES, "a slot is released STORE_LAG stores later: keep it below STAGES");
static_assert(BOX_W <= 256 && BOX_H <= 256, "a box dimension holds at most 256 elements");

extern "C" __global__ void __launch_bounds__(64) tma_copy_fast(
    const __grid_constant__ TensorMap src, const __grid_constant__ TensorMap dst, int tiles_x, int tiles) {
  // The swizzle-free TMA needs 128-byte aligned slots; every slot here is a multiple of 1 KB.
  extern __shared__ __align__(1024) unsigned char ring[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  constexpr unsigned SLOT = BOX_W * BOX_H * 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // This block's tiles: first, first + step, ... below last.
  const int per_block = (tiles + gridDim.x - 1) / gridDim.x;
  const int first = ORDER ? blockIdx.x * per_block : blockIdx.x;
  const int step = ORDER ? 1 : gridDim.x;
  const int last = ORDER ? min(tiles, first + per_block) : tiles;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], 1);
    }
    tma::fence_proxy_async();
    tma::prefetch_map(&src);
    tma::prefetch_map(&dst);
  }
  __syncthreads();
  if (lane != 0) return;

  if (warp == 0) {                    // producer
    int i = 0;
    for (int t = first; t < last; t += step, ++i) {
      const int s = i % STAGES;
      if (i >= STAGES) tma::wait(&empty[s], ((i / STAGES) - 1) & 1);   // release number i/STAGES - 1
      tma::arrive_expect_tx(&full[s], SLOT);
      tma::load_2d(ring + s * SLOT, &src, (t % tiles_x) * BOX_W, (t / tiles_x) * BOX_H, &full[s]);
    }
  } else {                            // storer
    int i = 0;
    for (int t = first; t < last; t += step, ++i) {
      const int s = i % STAGES;
      tma::wait(&full[s], (i / STAGES) & 1);
      tma::store_2d(&dst, (t % tiles_x) * BOX_W, (t / tiles_x) * BOX_H, ring + s * SLOT);
      tma::commit();
      if (i >= STORE_LAG) {           // store i - STORE_LAG has finished reading its slot
        tma::wait_read<STORE_LAG>();
        tma::arrive(&empty[(i - STORE_LAG) % STAGES]);
      }
    }
    tma::wait_read<0>();              // shared memory must outlive the last stores' reads
  }
}
