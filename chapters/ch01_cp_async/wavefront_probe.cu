// wavefront_probe.cu - one warp reads shared memory at per-lane byte offsets, REPS times, so that ncu can count the wavefronts of one request.
// judge: target=sm_90a features= defines=WIDTH=16
// Run: chapters/ch01_cp_async/wavefronts.py (under ncu on an H200; the model is judge.hw.tma.bank_conflicts).
//
// One block of 32 threads. Lane i reads WIDTH bytes at offsets[i] (a multiple of WIDTH) REPS times
// with one ld.shared each; the loads are volatile so that none is merged or hoisted. Shared memory is
// filled with ordinary stores first: ncu's counters below count loads only
// (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld), so the fill does not disturb them.
#ifndef WIDTH
#define WIDTH 16      // bytes per lane and load: 4, 8 or 16
#endif
#ifndef REPS
#define REPS 64       // loads per lane: wavefronts / REPS is the count of one request
#endif
#define WORDS 4096    // 16 KiB of shared memory: every offset must stay below it

static_assert(WIDTH == 4 || WIDTH == 8 || WIDTH == 16, "ld.shared moves 4, 8 or 16 bytes per lane here");

extern "C" __global__ void __launch_bounds__(32) wavefront_probe(const unsigned* __restrict__ offsets,
                                                                 float* __restrict__ out) {
  __shared__ __align__(16) float s[WORDS];
  for (int i = threadIdx.x; i < WORDS; i += 32) s[i] = static_cast<float>(i);
  __syncthreads();
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(s)) + offsets[threadIdx.x];
  float acc = 0.f;
#pragma unroll 1
  for (int r = 0; r < REPS; ++r) {
#if WIDTH == 4
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a));
    acc += v;
#elif WIDTH == 8
    float v0, v1;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v0), "=f"(v1) : "r"(a));
    acc += v0 + v1;
#else
    float v0, v1, v2, v3;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3) : "r"(a));
    acc += (v0 + v1) + (v2 + v3);
#endif
  }
  out[threadIdx.x] = acc;
}
