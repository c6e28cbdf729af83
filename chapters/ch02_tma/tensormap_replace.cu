// tensormap_replace.cu - a tensor map changed on the device: each block copies a template map to shared memory, points it at its own tensor (tensormap.replace), publishes it to global memory with a proxy fence, and loads through it.
// judge: target=sm_90a features=tma.load,mbarrier.wait
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/tensormap_replace.cu').sass)"
// Run: chapters/ch02_tma/topics.py tensormap_replace(); grid = number of tensors, 64 threads.
//
// A batch of separately allocated 32x32 float32 tensors, one host-encoded template map (for tensor 0).
// Block b: warp 0 copies the 128-byte template into shared memory, lane 0 replaces its global
// address with bases[b] (tensormap.replace, sm_90a), and the whole warp copies it to maps[b] in
// global memory with tensormap.cp_fenceproxy ... release.gpu. Before the TMA may read maps[b] the
// using thread acquires it: fence.proxy.tensormap::generic.acquire.gpu. (Programming Guide,
// "Encoding a tensor map on device"; PTX ISA, tensormap.replace, tensormap.cp_fenceproxy, membar/fence.)
#include "tma.cuh"

extern "C" __global__ void __launch_bounds__(64) tensormap_replace(
    const __grid_constant__ TensorMap tmpl, TensorMap* __restrict__ maps,
    const unsigned long long* __restrict__ bases, float* __restrict__ out) {
  __shared__ alignas(128) TensorMap smap;
  __shared__ alignas(128) float tile[32][32];
  __shared__ alignas(8) unsigned long long bar;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  TensorMap* gmap = maps + blockIdx.x;

  if (warp == 0) {
    // 1. the template into shared memory, 4 bytes per lane (ordinary generic-proxy stores)
    reinterpret_cast<unsigned*>(&smap)[lane] = reinterpret_cast<const unsigned*>(&tmpl)[lane];
    __syncwarp();
    // 2. one field changed in place: the tensor's global address
    if (lane == 0)
      asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                   :: "r"(tma::smem(&smap)), "l"(bases[blockIdx.x]) : "memory");
    __syncwarp();
    // 3. copy to global memory and release it to the tensormap proxy (all 32 lanes: .sync.aligned)
    asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
                 " [%0], [%1], 128;" :: "l"(gmap), "r"(tma::smem(&smap)) : "memory");
    if (lane == 0) {
      // 4. the thread that will issue the copy acquires the map before the TMA reads it
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(gmap) : "memory");
      tma::mbar_init(&bar, 1);
      tma::fence_proxy_async();
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(&bar, sizeof(tile));
    tma::load_2d(tile, gmap, 0, 0, &bar);     // the map's address is a global-memory address now
  }
  tma::wait(&bar, 0);
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) out[(size_t)blockIdx.x * 1024 + i] = tile[i / 32][i % 32];
}
