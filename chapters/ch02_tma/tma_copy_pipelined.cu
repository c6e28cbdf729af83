// tma_copy_pipelined.cu - copy a float32 matrix with TMA: persistent blocks, an S-stage ring of full/empty mbarriers.
// judge: target=sm_90a features=tma.load,tma.store,mbarrier.expect_tx,mbarrier.wait defines=STAGES=4
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/tma_copy_pipelined.cu').sass)"
// Run: chapters/ch02_tma/run.py copy_speed(); grid = a few blocks per SM, block = 64 threads (two warps).
//
// Warp 0, lane 0 is the PRODUCER: for each of its tiles it waits until the ring slot is empty,
// announces the bytes on the slot's FULL barrier and issues the TMA load.
// Warp 1, lane 0 is the STORER: it waits on the FULL barrier, issues the TMA store from the same
// slot, and once the store has READ the slot it arrives on the slot's EMPTY barrier.
// The data never passes through registers, and no thread writes shared memory: no proxy fence
// is needed between the load and the store (both are async-proxy accesses, ordered by the barrier).
#include "tma.cuh"

#ifndef STAGES
#define STAGES 4
#endif
#ifndef BOX_W
#define BOX_W 64      // 256 bytes per box row
#endif
#ifndef BOX_H
#define BOX_H 32      // 32 x 64 x 4 = 8 KiB per stage
#endif

// With one slot the ring deadlocks: the producer's second load waits for the storer to release
// the slot, and the storer releases a slot only after issuing its NEXT store (it keeps one store in
// flight), which needs that second load. Two slots are the least that can run.
static_assert(STAGES >= 2, "tma_copy_pipelined needs STAGES >= 2: with one slot the producer waits for a "
                           "release that the storer gives only after the next load has landed (deadlock)");

extern "C" __global__ void __launch_bounds__(64) tma_copy_pipelined(
    const __grid_constant__ TensorMap src, const __grid_constant__ TensorMap dst, int tiles_x, int tiles) {
  __shared__ alignas(128) float ring[STAGES][BOX_H][BOX_W];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);    // the producer's arrive.expect_tx (plus the bytes)
      tma::mbar_init(&empty[s], 1);   // the storer's arrive once the slot has been read
    }
    tma::fence_proxy_async();
    tma::prefetch_map(&src);
    tma::prefetch_map(&dst);
  }
  __syncthreads();
  if (lane != 0) return;              // one thread per role; the others have nothing to do

  if (warp == 0) {                    // producer
    int i = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++i) {
      const int s = i % STAGES;
      // Use number u = i / STAGES of slot s. Before reusing it (u >= 1), wait for the storer's
      // release number u - 1, i.e. phase u - 1 of empty[s], parity (u - 1) & 1.
      if (i >= STAGES) tma::wait(&empty[s], ((i / STAGES) - 1) & 1);
      tma::arrive_expect_tx(&full[s], sizeof(ring[0]));
      tma::load_2d(ring[s], &src, (t % tiles_x) * BOX_W, (t / tiles_x) * BOX_H, &full[s]);
    }
  } else {                            // storer
    int i = 0, pending = -1;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++i) {
      const int s = i % STAGES;
      tma::wait(&full[s], (i / STAGES) & 1);   // load number i / STAGES into slot s has landed
      tma::store_2d(&dst, (t % tiles_x) * BOX_W, (t / tiles_x) * BOX_H, ring[s]);
      tma::commit();
      if (pending >= 0) {             // keep one store in flight: release the slot before this one
        tma::wait_read<1>();          // all but the newest group have finished reading shared memory
        tma::arrive(&empty[pending]);
      }
      pending = s;
    }
    tma::wait_read<0>();              // shared memory must outlive the last store's reads
  }
}
