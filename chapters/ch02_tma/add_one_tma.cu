// add_one_tma.cu - add one to every int of a 1024x2048 matrix, one 16x32 tile per block, moved by TMA.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier.expect_tx,mbarrier.wait,proxy.fence
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/add_one_tma.cu').sass)"
// Run: chapters/ch02_tma/run.py add_one(); the host builds the tensor map with judge.hw.tma.tensor_map(a, box=(32, 16)).
//
// One thread issues the load and the store; the whole block does the arithmetic. Two kernels,
// the same body: the map arrives as a `const __grid_constant__` parameter, or in __constant__ memory.
#include "tma.cuh"

#ifndef BOX_W
#define BOX_W 32      // innermost box dimension: 32 ints = 128 bytes (a multiple of 16: rule box_inner)
#endif
#ifndef BOX_H
#define BOX_H 16
#endif

extern "C" {
__constant__ TensorMap g_map;   // filled from the host with TensorMap.to_constant(module, "g_map")
}

__device__ __forceinline__ void add_one_tile(const TensorMap* map) {
  // TMA writes whole 16-byte chunks and wants a 128-byte aligned destination.
  __shared__ alignas(128) int tile[BOX_H][BOX_W];
  __shared__ alignas(8) unsigned long long bar;
  // Innermost first: x is the column, y the row.
  const int x = blockIdx.x * BOX_W, y = blockIdx.y * BOX_H;

  if (threadIdx.x == 0) {
    tma::mbar_init(&bar, 1);        // one arrival per phase: thread 0's arrive.expect_tx
    tma::fence_proxy_async();       // the init is a generic write; the TMA (async proxy) must see it
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    // Announce the whole box, 16 * 32 * 4 = 2048 bytes, no later than the arrival that could
    // complete the phase: here they are one instruction. Bytes may land before they are announced
    // (the tx-count goes negative; PTX ISA, "Contents of the mbarrier object"), which tx_late.cu
    // runs on purpose; what must not happen is the last pending arrival before the expect-tx.
    tma::arrive_expect_tx(&bar, sizeof(tile));
    tma::load_2d(tile, map, x, y, &bar);
  }
  tma::wait(&bar, 0);               // phase 0 completes when the arrival and all 2048 bytes are in

  for (int i = threadIdx.x; i < BOX_H * BOX_W; i += blockDim.x) tile[i / BOX_W][i % BOX_W] += 1;

  tma::fence_proxy_async();         // every writer: make its generic writes visible to the TMA store
  __syncthreads();                  // ...and all writers are done before thread 0 issues it
  if (threadIdx.x == 0) {
    tma::store_2d(map, x, y, tile);
    tma::commit();
    tma::wait_read<0>();            // the TMA must finish reading `tile` before the block's smem is freed
  }
}

extern "C" __global__ void add_one_tma(const __grid_constant__ TensorMap map) { add_one_tile(&map); }

extern "C" __global__ void add_one_tma_const() { add_one_tile(&g_map); }
