// wait_spellings.cu - the same group wait spelled two ways, __pipeline_wait_prior(N) and a raw cp.async.wait_group N, to read what each becomes in SASS.
// judge: target=sm_90a features=cp.async,cp.async.commit,cp.async.wait defines=WAIT_N=12
// Build and inspect: python -c "from judge import build; b = build.compile('chapters/ch01_cp_async/wait_spellings.cu', defines={'WAIT_N': 12}); print(b.sass)"
//
// Each thread commits GROUPS groups of one 16-byte cp.async each, then waits until at most WAIT_N
// of them are pending. <cuda_pipeline_primitives.h> implements __pipeline_wait_prior(n) as a switch
// over n = 0..7 whose default case waits with 8, and the template it calls clamps its count at
// _CUDA_PIPELINE_MAX_STAGES = 8 (<cuda_pipeline_helpers.h>): any larger n becomes DEPBAR.LE SB0, 0x8. The PTX ISA sets no bound on N (section 9.7.9.25.3.3, cp.async.wait_group),
// and ptxas keeps the raw form's N: wait_group 12 becomes DEPBAR.LE SB0, 0xc. (The SASS field has
// 6 bits: in this compiler wait_group 64 came out as 0x3f.)
#include <cuda_pipeline.h>

#ifndef WAIT_N
#define WAIT_N 12     // groups left pending by the wait
#endif
#define GROUPS 20

extern "C" __global__ void wait_prior_header(const float4* __restrict__ g, float* __restrict__ out) {
  __shared__ float4 s[GROUPS][32];
  for (int i = 0; i < GROUPS; ++i) {
    __pipeline_memcpy_async(&s[i][threadIdx.x], g + i * 32 + threadIdx.x, 16);
    __pipeline_commit();
  }
  __pipeline_wait_prior(WAIT_N);                      // the header's spelling
  out[threadIdx.x] = s[0][threadIdx.x].x;             // group 0 is covered for any WAIT_N < GROUPS
}

extern "C" __global__ void wait_group_raw(const float4* __restrict__ g, float* __restrict__ out) {
  __shared__ float4 s[GROUPS][32];
  for (int i = 0; i < GROUPS; ++i) {
    __pipeline_memcpy_async(&s[i][threadIdx.x], g + i * 32 + threadIdx.x, 16);
    __pipeline_commit();
  }
  asm volatile("cp.async.wait_group %0;" :: "n"(WAIT_N) : "memory");   // PTX, N as written
  out[threadIdx.x] = s[0][threadIdx.x].x;
}
