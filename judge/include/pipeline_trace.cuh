// pipeline_trace.cuh - the judge's hooks for cp.async pipelines: free in a normal build, a protocol trace under -DJUDGE_TRACE.
//
// A race in a cp.async pipeline (a dropped empty commit, a wait one group too loose, a buffer
// overwritten without a barrier) usually gives the right answer anyway: the copy happened to land
// in time. The judge does not rely on luck. It builds the learner's kernel once more with
// -DJUDGE_TRACE: then thread 0 of block 0 writes every commit, wait, barrier, tile load and tile
// read into judge_trace[], and judge.pipesim replays that sequence under the rule that a group is
// complete only once a wait has covered it.
//
// Include it after <cuda_pipeline.h>. Kernels call JUDGE_TRACE_LOAD(tile, buf) where a tile's
// copies are issued and JUDGE_TRACE_READ(tile, buf) where its buffer is computed on; in a trace
// build __pipeline_commit, __pipeline_wait_prior and __syncthreads are recorded as they run.
#pragma once

enum JudgeTraceOp { JT_LOAD = 1, JT_COMMIT = 2, JT_WAIT = 3, JT_BARRIER = 4, JT_READ = 5 };

#ifdef JUDGE_TRACE
#define JUDGE_TRACE_CAP 4096
__device__ int judge_trace[1 + 3 * JUDGE_TRACE_CAP];   // [count, (op, a, b)...]

__device__ __forceinline__ bool judge_trace_thread() {
  return threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
}
__device__ __forceinline__ void judge_trace_put(int op, int a, int b) {
  if (!judge_trace_thread()) return;
  int n = judge_trace[0];
  if (n < JUDGE_TRACE_CAP) {
    judge_trace[1 + 3 * n] = op;
    judge_trace[2 + 3 * n] = a;
    judge_trace[3 + 3 * n] = b;
    judge_trace[0] = n + 1;
  }
}
// The wrappers call the real functions; the macros below are defined after them, so the
// wrappers' own bodies still reach the originals.
__device__ __forceinline__ void judge_commit() { judge_trace_put(JT_COMMIT, 0, 0); __pipeline_commit(); }
__device__ __forceinline__ void judge_wait_prior(int n) { __pipeline_wait_prior(n); judge_trace_put(JT_WAIT, n, 0); }
__device__ __forceinline__ void judge_syncthreads() { __syncthreads(); judge_trace_put(JT_BARRIER, 0, 0); }
#define __pipeline_commit() judge_commit()
#define __pipeline_wait_prior(n) judge_wait_prior(n)
#define __syncthreads() judge_syncthreads()
#define JUDGE_TRACE_LOAD(tile, buf) judge_trace_put(JT_LOAD, (tile), (buf))
#define JUDGE_TRACE_READ(tile, buf) judge_trace_put(JT_READ, (tile), (buf))
#else
#define JUDGE_TRACE_LOAD(tile, buf) ((void)0)
#define JUDGE_TRACE_READ(tile, buf) ((void)0)
#endif
