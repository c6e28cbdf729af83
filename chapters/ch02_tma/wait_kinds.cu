// wait_kinds.cu - three ways to wait on an mbarrier (test_wait spin, try_wait, try_wait with a suspend-time hint), measured by what they cost a warp that shares the waiter's scheduler.
// judge: target=sm_90a features=mbarrier.wait defines=HOW=1
// Build and inspect: python -c "from judge import build; print(build.compile('chapters/ch02_tma/wait_kinds.cu').sass)"
// Run: chapters/ch02_tma/topics.py wait_kinds(); one block of 160 threads per SM.
//
// Warp 4 (the WORKER) runs WORK dependent FMAs, then arrives on the barrier. Lane 0 of warp 0 (the
// WAITER) waits for that phase. Warps 0 and 4 sit on the same SM sub-partition (warp % 4 == 0), so
// they share one warp scheduler: a waiter that spins steals issue slots from the worker.
// HOW = 0: test_wait in a loop (never blocks); 1: try_wait in a loop (may suspend the thread for
// a system-dependent time); 2: try_wait with a suspend-time hint of HINT_NS nanoseconds.
// Per block: [worker cycles, waiter polls, waiter wake-up delay in cycles after the arrival].
#include "bulk.cuh"

#ifndef HOW
#define HOW 1
#endif
#ifndef WORK
#define WORK 20000    // dependent FMAs the worker runs before it arrives
#endif
#ifndef HINT_NS
#define HINT_NS 1000000
#endif

extern "C" __global__ void __launch_bounds__(160) wait_kinds(float seed, long long* __restrict__ out,
                                                             float* __restrict__ sink) {
  __shared__ alignas(8) unsigned long long bar;
  __shared__ long long arrived_at;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) tma::mbar_init(&bar, 1);
  __syncthreads();

  if (warp == 4 && lane == 0) {                       // the worker
    float v = seed;
    const long long t0 = clock64();
#pragma unroll 1
    for (int i = 0; i < WORK; ++i) v = fmaf(v, 0.999999f, 1e-7f);
    const long long t1 = clock64();
    sink[blockIdx.x] = v;                             // keeps the chain alive
    arrived_at = t1;
    tma::arrive(&bar);                                // the arrival releases arrived_at to the waiter
    out[3 * blockIdx.x] = t1 - t0;
  } else if (warp == 0 && lane == 0) {                // the waiter
    long long polls = 0;
    bool done = false;
    while (!done) {
      ++polls;
#if HOW == 0
      done = bulk::test_wait(&bar, 0);
#elif HOW == 1
      done = tma::try_wait(&bar, 0);
#else
      done = bulk::try_wait_hint(&bar, 0, HINT_NS);
#endif
    }
    const long long woke = clock64();
    out[3 * blockIdx.x + 1] = polls;
    out[3 * blockIdx.x + 2] = woke - arrived_at;      // same SM, same clock
  }
}
