// bulk_add_one.cu - y = x + 1 over a float32 vector with 1-D bulk copies (cp.async.bulk, no tensor map), an elected issuing lane, and L2 prefetch / cache hints.
// judge: target=sm_90a features=bulk.copy,mbarrier.expect_tx,mbarrier.wait,proxy.fence defines=PREFETCH=1
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/bulk_add_one.cu').sass)"
// Run: chapters/ch02_tma/topics.py bulk_add_one(); grid = a few blocks per SM, 256 threads, n a multiple of CHUNK / 4.
//
// A bulk copy is the TMA without a tensor map: a byte range, 16-byte aligned, a multiple of 16 bytes.
// Loads complete on an mbarrier (expect_tx, as in section 1); stores through bulk groups.
#include "bulk.cuh"

#ifndef CHUNK
#define CHUNK 16384   // bytes per block and round (a multiple of 16)
#endif
#ifndef PREFETCH
#define PREFETCH 1    // 1: while a chunk is computed, ask L2 for the block's next chunk
#endif
#ifndef EVICT_FIRST
#define EVICT_FIRST 0 // 1: the loads carry an L2 evict_first policy (x is read once)
#endif

extern "C" __global__ void __launch_bounds__(256) bulk_add_one(const float* __restrict__ x,
                                                               float* __restrict__ y, int chunks) {
  __shared__ alignas(128) float buf[CHUNK / 4];
  __shared__ alignas(8) unsigned long long bar;
  const int warp = threadIdx.x / 32;
  // One lane issues every copy. elect.sync picks it inside warp 0 (all 32 lanes take part in
  // the election, so warp 0 must be converged here); its answer is the same in all 32 lanes.
  const bool issuer = (warp == 0) && bulk::elect_one();

  if (issuer) {
    tma::mbar_init(&bar, 1);
    tma::fence_proxy_async();     // the init is a generic write; the copies signal it from the async proxy
  }
  __syncthreads();

  unsigned parity = 0;
  for (int c = blockIdx.x; c < chunks; c += gridDim.x) {
    const float* src = x + (size_t)c * (CHUNK / 4);
    if (issuer) {
      tma::arrive_expect_tx(&bar, CHUNK);   // this phase completes with this arrival and CHUNK bytes
#if EVICT_FIRST
      bulk::load_1d_hint(buf, src, CHUNK, &bar, bulk::policy_evict_first());
#else
      bulk::load_1d(buf, src, CHUNK, &bar);
#endif
#if PREFETCH
      if (c + gridDim.x < chunks) bulk::prefetch_l2(src + (size_t)gridDim.x * (CHUNK / 4), CHUNK);
#endif
    }
    tma::wait(&bar, parity);
    parity ^= 1;

    for (int i = threadIdx.x; i < CHUNK / 4; i += blockDim.x) buf[i] += 1.0f;

    tma::fence_proxy_async();       // every writer: its generic writes become visible to the bulk store
    __syncthreads();
    if (issuer) {
      bulk::store_1d(y + (size_t)c * (CHUNK / 4), buf, CHUNK);
      tma::commit();
      tma::wait_read<0>();          // the store has read buf: the next load may overwrite it
    }
    // The next round's load refills buf, which every thread has just READ. Reads need no proxy
    // fence: the barrier below orders them before the issuer's next load.
    __syncthreads();
  }
}
