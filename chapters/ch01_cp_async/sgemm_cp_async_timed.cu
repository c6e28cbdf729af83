// sgemm_cp_async_timed.cu - the S-stage cp.async SGEMM of sgemm_cp_async.cu, instrumented with %globaltimer stamps.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=STAGES=3
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch01_cp_async/sgemm_cp_async_timed.cu').sass_of('sgemm_cp_async_timed'))"
//
// Identical to sgemm_cp_async.cu (same shapes, same launch, C written and never read), plus one
// argument: `stamps`, TIMED_BLOCKS * (1 + 3 * K/BK) unsigned 64-bit words. In the first TIMED_BLOCKS
// blocks (linear block id), thread 0 records, in nanoseconds of %globaltimer:
//   stamps[b * (1 + 3T)]              the block's start
//   stamps[b * (1 + 3T) + 1 + 3t + 0] when tile t's copy was issued      (issue)
//   stamps[b * (1 + 3T) + 1 + 3t + 1] when the wait + barrier for tile t returned (ready)
//   stamps[b * (1 + 3T) + 1 + 3t + 2] when thread 0 finished computing tile t     (done)
// The copy itself is invisible: "ready" is an upper bound on its arrival, the moment the block
// could use it. %globaltimer is a global nanosecond clock; the PTX ISA (10.28) documents it as
// "intended for use by NVIDIA tools", target-specific and free to change, so it is used here only to
// observe. It advanced in 32 ns steps on the H200 (measured), so single intervals are coarse: one tile (128x128x8, 131072 FMAs per block) computes for
// roughly a microsecond when two blocks share an SM's 128 FMA lanes.
// Other blocks and threads only test one uniform condition, yet the stamps are not free: each one
// orders the surrounding work (the "memory" clobber, the dependency on the last FMA) and stores to
// global memory. The notebook measures the whole kernel against the plain one.

#include <cuda_pipeline.h>

#ifndef TIMED_BLOCKS
#define TIMED_BLOCKS 4   // blocks 0 .. TIMED_BLOCKS-1 (linear id) record their schedule
#endif
#ifndef STAGES
#define STAGES 3    // shared-memory buffers; STAGES - 1 tiles are loaded ahead of the compute
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

#define THREADS ((BM / TM) * (BN / TN))            // 256
#define STAGE_FLOATS (BM * BK + BK * BN)           // 2048 floats = 8 KB per stage

static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert(THREADS == 256, "the loaders below assume 256 threads");
static_assert(BM * BK == 4 * THREADS && BK * BN == 4 * THREADS,
              "each thread copies exactly one 16-byte chunk of A and one of B per tile");

// Read the global nanosecond timer. volatile keeps it where it is among the other asm and memory
// operations; the "memory" clobber keeps the compiler from moving loads and stores across it.
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
  return t;
}

// The same, but not before `dep` is computed: ties the "done" stamp to the tile's last FMA.
__device__ __forceinline__ unsigned long long globaltimer_after(float dep) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "f"(dep) : "memory");
  return t;
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_cp_async_timed(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, unsigned long long* __restrict__ stamps) {
  // Dynamic shared memory: STAGES buffers, each [A tile 128x8 row-major | B tile 8x128 row-major].
  // cp.async of 16 bytes needs both addresses 16-byte aligned: every row offset below is a
  // multiple of 4 floats, and the buffer itself is aligned to 16.
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int thread_col = tid % (BN / TN);
  const int thread_row = tid / (BN / TN);
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;

  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;

  // Issue this thread's share of tile kt into buffer buf: two 16-byte cp.async (LDGSTS.E.BYPASS.128,
  // i.e. cp.async.cg: 16-byte copies skip L1). The thread does not wait for them.
  auto load_tile = [&](int buf, int kt) {
    float* As = smem + buf * STAGE_FLOATS;
    float* Bs = As + BM * BK;
    const int k0 = kt * BK;
    __pipeline_memcpy_async(&As[a_row * BK + a_col], &A[(size_t)a_row * K + k0 + a_col], 16);
    __pipeline_memcpy_async(&Bs[b_row * BN + b_col], &B[(size_t)(k0 + b_row) * N + b_col], 16);
  };

  const int num_tiles = K / BK;
  const int block_id = blockIdx.y * gridDim.x + blockIdx.x;
  const bool timer = block_id < TIMED_BLOCKS && threadIdx.x == 0;
  unsigned long long* my = stamps + (size_t)(block_id < TIMED_BLOCKS ? block_id : 0) * (1 + 3 * num_tiles);
  if (timer) my[0] = globaltimer();

  // Prologue: tiles 0 .. STAGES-2 go out now, one commit group each. Why STAGES-1 and not STAGES:
  // the loop below issues tile kt+STAGES-1 into the buffer of tile kt-1, the only buffer that
  // is free once everyone has finished computing kt-1. With STAGES buffers, one is always being
  // computed on and STAGES-1 can be in flight.
  // The guard keeps a short K (fewer tiles than stages) correct; the commit is unconditional so
  // that group s always means tile s.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) {
      if (timer) my[1 + 3 * s] = globaltimer();
      load_tile(s, s);
    }
    __pipeline_commit();
  }

  float acc[TM][TN];
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) acc[m][n] = 0.f;
  float a_frag[TM], b_frag[TN];

  for (int kt = 0; kt < num_tiles; ++kt) {
    // Before this line, kt + STAGES - 1 groups have been committed (STAGES-1 in the prologue, one
    // per earlier iteration). wait_prior(STAGES-2) returns once at most STAGES-2 of them are still
    // pending, so the oldest kt+1 groups, tiles 0..kt, have landed: this thread's copies of tile kt
    // are in shared memory (SASS: DEPBAR.LE SB0, STAGES-2).
    __pipeline_wait_prior(STAGES - 2);
    // The wait covers only this thread's own copies. The barrier makes every thread's part of tile
    // kt visible to all, and it also proves everyone has finished computing tile kt-1, whose
    // buffer the next line overwrites.
    __syncthreads();
    if (timer) my[1 + 3 * kt + 1] = globaltimer();

    const int next = kt + STAGES - 1;
    if (next < num_tiles) {
      if (timer) my[1 + 3 * next] = globaltimer();
      load_tile(next % STAGES, next);
    }
    // Commit even when nothing was issued (the last STAGES-1 iterations). An empty group is complete
    // at once; what it keeps is the count: group g holds tile g, and kt + STAGES groups are committed
    // when the next iteration waits for tile kt+1. Drop it and the tail goes wrong: with STAGES=3 and
    // 10 tiles, iteration 9 would find only 10 groups committed, wait_prior(1) would let group 9
    // (tile 9 itself) still be in flight, and the loop would read a buffer that is still being written.
    __pipeline_commit();

    const float* As = smem + (kt % STAGES) * STAGE_FLOATS;
    const float* Bs = As + BM * BK;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int m = 0; m < TM; ++m) a_frag[m] = As[(thread_row * TM + m) * BK + k];
#pragma unroll
      for (int n = 0; n < TN; ++n) b_frag[n] = Bs[k * BN + thread_col * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] = fmaf(a_frag[m], b_frag[n], acc[m][n]);
    }
    // No barrier here: the barrier at the top of the next iteration protects this buffer.
    if (timer) my[1 + 3 * kt + 2] = globaltimer_after(acc[TM - 1][TN - 1]);
  }

  // beta = 0: C is only written.
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    float* row = &C[(size_t)(thread_row * TM + m) * N + thread_col * TN];
#pragma unroll
    for (int n = 0; n < TN; n += 4)
      *reinterpret_cast<float4*>(&row[n]) = make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
  }
}
