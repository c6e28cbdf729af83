// histogram.cu - the two histograms a cluster histogram is measured against: one global atomic
// per element, and per-block shared-memory histograms of one slice of the bins each.
// judge: target=sm_90a features=
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch03_clusters/histogram.cu').sass)"
//
// Both ADD into hist: the caller zeroes it first (the same memset for every variant).
// hist_global:  grid (any), 256 threads; every element is one atomicAdd in L2.
// hist_sliced:  grid (blocks, slices); block (b, s) counts only bins [s * slice, (s+1) * slice)
//               in shared memory (4 * slice bytes of dynamic shared memory), then adds its
//               non-zero counts to hist. When the bins do not fit one block, the input is read
//               once per slice: that is what DSMEM avoids.

extern "C" __global__ void __launch_bounds__(256) hist_global(const int* __restrict__ x, int n,
                                                              unsigned* hist) {
  const int stride = gridDim.x * blockDim.x;
  const int n4 = n / 4;
  const int4* x4 = reinterpret_cast<const int4*>(x);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    int4 v = x4[i];
    atomicAdd(&hist[v.x], 1u); atomicAdd(&hist[v.y], 1u);
    atomicAdd(&hist[v.z], 1u); atomicAdd(&hist[v.w], 1u);
  }
  for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&hist[x[i]], 1u);
}

extern "C" __global__ void __launch_bounds__(256) hist_sliced(const int* __restrict__ x, int n,
                                                              int bins, int slice, unsigned* hist) {
  extern __shared__ unsigned counts[];
  const int lo = blockIdx.y * slice;
  const int cnt = min(slice, bins - lo);
  for (int i = threadIdx.x; i < cnt; i += blockDim.x) counts[i] = 0;
  __syncthreads();
  const int stride = gridDim.x * blockDim.x;
  const int n4 = n / 4;
  const int4* x4 = reinterpret_cast<const int4*>(x);
  auto add = [&](int b) {
    unsigned off = static_cast<unsigned>(b - lo);
    if (off < static_cast<unsigned>(cnt)) atomicAdd(&counts[off], 1u);
  };
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    int4 v = x4[i];
    add(v.x); add(v.y); add(v.z); add(v.w);
  }
  for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) add(x[i]);
  __syncthreads();
  for (int i = threadIdx.x; i < cnt; i += blockDim.x)
    if (counts[i]) atomicAdd(&hist[lo + i], counts[i]);
}
