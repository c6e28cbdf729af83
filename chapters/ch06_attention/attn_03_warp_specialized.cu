// attn_03_warp_specialized.cu - rungs 3, 4 and 5 of Chapter 6: attention with a producer warpgroup and two
// consumer warpgroups (rung 3), the consumers' products taking turns around their softmax (rung 4), and
// each consumer's softmax overlapping its own second product (rung 5).
// The problem is rung 2's (attn_02_one_warpgroup.cu): bf16 Q, K, V (B, H, S, d), fp32 accumulation,
// bf16 O (B, H, S, d), fp32 LSE (B, H, S), causal or not, any S.
// Block = 3 warpgroups (384 threads) per 128 query rows of one (batch, head):
//   warpgroup 0  producer: setmaxnreg.dec to 24; one thread loads Q once and every K and V block into a
//                STAGES-deep ring, K and V of a slot on barriers of their own (S = Q K^T may start
//                while V is still landing);
//   warpgroups 1, 2  consumers (setmaxnreg.inc to 240): consumer c owns query rows q0 + 64c .. + 63,
//                runs rung 2's loop on them, and releases a slot with one arrival on its empty barrier.
// Causal: consumer 0's rows end 64 earlier, so it may need one key block fewer than consumer 1; it still
// waits for that block's data and releases it (every phase of an empty barrier counts both consumers).
//   PINGPONG 0 (rung 3): each consumer alone: S_j = Q K_j^T, wait, softmax, O += P_j V_j, wait.
//   PINGPONG 1 (rung 4): each consumer issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} as one batch on its
//                turn, gives the turn to the other consumer, and runs softmax j while the other's batch
//                occupies the tensor cores. Turns are ordered named barriers (chapter 4's
//                gemm_09_pingpong.cu): consumer c waits on barrier BAR + c (bar.sync, 256) for the other
//                to give it (bar.arrive, 256). Every arrival is matched by a wait: with n0 <= n1 blocks,
//                consumer 0 waits before block j > 0 and gives after each block; consumer 1 waits before
//                block j < n0 and gives after block j while j + 1 < n0. No barrier is left half-arrived.
//   INTRA 1 (rung 5, with PINGPONG 1): inside one consumer, softmax j no longer waits for P_{j-1} V_{j-1}:
//                wgmma.wait_group 1 after the batch (S_j's group is the older one, and groups complete in
//                order), softmax j on S_j, then wait_group 0, O rescaled, P_j packed. The register cost:
//                P_{j-1}'s fragment stays live beside S_j while the softmax runs (BLOCK_N / 4 registers).
// Ring depth: in rungs 4 and 5 a consumer releases block j-1's slot only once the batch holding S_j is done,
// and block j+1 goes into that slot when STAGES is 2: its load cannot start before that batch ends, and the
// next turn waits for it. attention.py builds them with STAGES 3 at d = 128 (rung 3 releases after each P V).
// Run: chapters/ch06_attention/attention.py (model_check("warp specialized", "ping-pong" or "intra-warpgroup overlap", ...)).
// judge: target=sm_90a features=wgmma,wgmma.rs,setmaxnreg,tma.load,mbarrier.wait
#include "attention.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128    // d: 64 or 128
#define BLOCK_N 128     // keys per block
#define STAGES 2        // K/V blocks in flight
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef INTRA
#define INTRA 0         // rung 5 (with PINGPONG 1): softmax j runs while P_{j-1} V_{j-1} is still in flight
#endif
#define BLOCK_M 64                            // query rows per consumer warpgroup
#define CONSUMERS 2
#define BOXES (HEAD_DIM / 64)
#define Q_BYTES (BLOCK_M * HEAD_DIM * 2)      // one consumer's Q tile
#define KV_BYTES (BLOCK_N * HEAD_DIM * 2)
#define BAR 2                                 // named barriers 2, 3: consumer c's turn (1 + c: its own sync)

// ---- one consumer's softmax on a block of scores (rung 2's): mask, new maximum, rescale factor alpha,
// exponentials, running sum. It touches no O register: rung 5 runs it while a wgmma still adds into O.
template <int N>
__device__ __forceinline__ void softmax_scores(float (&sc)[N], float (&m)[2], float (&lsum)[2], float (&alpha)[2],
                                               int k0, int tile0, int row0, int S, int causal, float scale_log2) {
  const int l = threadIdx.x % 32;
  if (k0 + 2 * N > S || (causal && k0 + 2 * N - 1 > tile0)) {    // a tail, or a block crossing the diagonal
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int key = k0 + 8 * (i / 4) + 2 * (l % 4) + (i % 2);
      const int row = row0 + 8 * ((i / 2) % 2);
      if (key >= S || (causal && key > row)) sc[i] = ATTN_NEG_INF;
    }
  }
  float mc[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = m[h];
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((i / 2) % 2 == h) mx = fmaxf(mx, sc[i]);
    mx = attn::quad_max(mx);
    mc[h] = mx == ATTN_NEG_INF ? 0.f : mx * scale_log2;   // never -inf - (-inf)
    alpha[h] = attn::ex2(m[h] * scale_log2 - mc[h]);
    m[h] = mx;
    lsum[h] *= alpha[h];
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int h = (i / 2) % 2;
    sc[i] = attn::ex2(fmaf(sc[i], scale_log2, -mc[h]));
    lsum[h] += sc[i];
  }
}

// O's rows moved to the new maximum. RULE (PTX ISA, wgmma.mma_async): not while a wgmma adds into O.
template <int D>
__device__ __forceinline__ void rescale(float (&o)[D], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D; ++i) o[i] *= alpha[(i / 2) % 2];
}

__device__ __forceinline__ void turn_wait(int id) { asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory"); }
__device__ __forceinline__ void turn_give(int id) { asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory"); }

extern "C" __global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)   // ", 1": else setmaxnreg is ignored
attn_warp_specialized(const __grid_constant__ TensorMap mapQ, const __grid_constant__ TensorMap mapK,
                      const __grid_constant__ TensorMap mapV, unsigned short* O, float* LSE, int S,
                      int causal, float scale_log2) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  unsigned char* sQ = base;                                  // CONSUMERS x BOXES x (64 rows x 128 bytes)
  unsigned char* sK = sQ + CONSUMERS * Q_BYTES;
  unsigned char* sV = sK + STAGES * KV_BYTES;
  __shared__ __align__(8) unsigned long long qbar, fullK[STAGES], fullV[STAGES], empty[STAGES];

  const int bh = blockIdx.y;
  const int qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;      // causal: longest rows first
  const int q0 = qt * BLOCK_M * CONSUMERS;
  const int all_blocks = (S + BLOCK_N - 1) / BLOCK_N;
  // key blocks consumer c needs: all of them, or (causal) those holding a key <= its last row
  auto blocks_of = [&](int c) {
    return causal ? min(all_blocks, (q0 + BLOCK_M * (c + 1) + BLOCK_N - 1) / BLOCK_N) : all_blocks;
  };
  const int n_blocks = blocks_of(CONSUMERS - 1);            // what the producer loads

  if (threadIdx.x == 0) {
    tma::mbar_init(&qbar, 1);
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&fullK[s], 1);
      tma::mbar_init(&fullV[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS);                 // one arrival per consumer warpgroup
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  const int wg_index = threadIdx.x / 128;
  if (wg_index == 0) {
    // ------------------------------------------------------------------ producer
    wg::regs_dec<24>();
    if (threadIdx.x == 0) {
      tma::arrive_expect_tx(&qbar, CONSUMERS * Q_BYTES);
      for (int c = 0; c < CONSUMERS; ++c)
#pragma unroll
        for (int b = 0; b < BOXES; ++b)
          tma::load_3d(sQ + c * Q_BYTES + b * BLOCK_M * 128, &mapQ, 64 * b, q0 + BLOCK_M * c, bh, &qbar);
      for (int j = 0; j < n_blocks; ++j) {
        const int s = j % STAGES, round = j / STAGES;
        tma::wait(&empty[s], (round & 1) ^ 1);               // fresh barrier: parity 1 is already complete
        tma::arrive_expect_tx(&fullK[s], KV_BYTES);          // the whole boxes, zero-filled rows included
#pragma unroll
        for (int b = 0; b < BOXES; ++b)
          tma::load_3d(sK + s * KV_BYTES + b * BLOCK_N * 128, &mapK, 64 * b, j * BLOCK_N, bh, &fullK[s]);
        tma::arrive_expect_tx(&fullV[s], KV_BYTES);
#pragma unroll
        for (int b = 0; b < BOXES; ++b)
          tma::load_3d(sV + s * KV_BYTES + b * BLOCK_N * 128, &mapV, 64 * b, j * BLOCK_N, bh, &fullV[s]);
      }
    }
  } else {
    // ------------------------------------------------------------------ consumers
    wg::regs_inc<240>();       // 128 x 24 + 256 x 240 = 64512 <= 65536 registers of the SM
    const int c = wg_index - 1;
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    const int mine = blocks_of(c);
    const int other = blocks_of(1 - c);
    unsigned char* myQ = sQ + c * Q_BYTES;
    const int row0 = q0 + BLOCK_M * c + 16 * w + l / 4;
    float o[HEAD_DIM / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.f;
    float m[2] = {ATTN_NEG_INF, ATTN_NEG_INF}, lsum[2] = {0.f, 0.f};
    float sc[BLOCK_N / 2];
    tma::wait(&qbar, 0);

    // RULE (ptxas, info C7520): a branch or a wait loop between the wgmma of one batch makes ptxas
    // serialize every wgmma of the kernel. The mbarrier waits come before the batch, never inside it.
    auto qk = [&](int j) {                                   // issue S = Q K_j^T (not committed)
      const int s = j % STAGES;
#pragma unroll
      for (int k = 0; k < HEAD_DIM / 16; ++k)
        wg::mma_k16(sc, wg::desc_sw128(myQ + (k / 4) * BLOCK_M * 128 + (k % 4) * 32),
                    wg::desc_sw128(sK + s * KV_BYTES + (k / 4) * BLOCK_N * 128 + (k % 4) * 32), k > 0);
    };
    auto pv = [&](int j, const unsigned (&p)[BLOCK_N / 16][4]) {   // issue O += P V_j (not committed)
      const int s = j % STAGES;
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        attn::mma_pv(o, p[kk], attn::desc_v<BLOCK_N>(sV + s * KV_BYTES + kk * 16 * 128));
    };
    auto release = [&](int j) {
      if (t == 0) tma::arrive(&empty[j % STAGES]);           // this warpgroup's reads of the slot are done
    };

#if PINGPONG
    unsigned p[BLOCK_N / 16][4];
    // One turn: S_j = Q K_j^T, and (WITH_PV) O += P_{j-1} V_{j-1}, issued as one batch; then softmax j.
    // Block 0's turn has no P V: it is a copy of its own (a branch between the wgmma would make ptxas
    // serialize them, C7520).
    auto turn = [&](int j, bool with_pv) {   // inlined twice, with_pv a constant in each
      if (c == 0 ? j > 0 : j < other) turn_wait(BAR + c);    // the other consumer's batch is issued
      tma::wait(&fullK[j % STAGES], (j / STAGES) & 1);
      if (with_pv) tma::wait(&fullV[(j - 1) % STAGES], ((j - 1) / STAGES) & 1);
      // RULE (PTX ISA, wgmma.fence): O was rescaled and P written since the last batch: fence first
      // (and pin those registers before it: attention.cuh, fence_operand).
      attn::fence_operand(o);
      attn::fence_operand(p);
      attn::fence_operand(sc);
      wg::fence();
      qk(j);
#if INTRA
      wg::commit();                                          // S_j alone in the older group
#endif
      if (with_pv) pv(j - 1, p);
      wg::commit();
      if (c == 0 ? j < other : j + 1 < other) turn_give(BAR + 1 - c);
      float alpha[2];
#if INTRA
      // Groups complete in order: wait<1> leaves only the newer group (P_{j-1} V_{j-1}) running, so S_j is
      // in registers while the tensor cores still add into O. The softmax touches S, m and l only; O is
      // rescaled, and P overwritten, after wait<0>.
      if (with_pv) wg::wait<1>(); else wg::wait<0>();
      attn::fence_operand(sc);                               // no read of S hoisted above the wait
      softmax_scores(sc, m, lsum, alpha, j * BLOCK_N, q0 + BLOCK_M * c, row0, S, causal, scale_log2);
      wg::wait<0>();
      attn::fence_operand(o);                                // no rescale of O hoisted above the wait
      if (with_pv) release(j - 1);
#else
      wg::wait<0>();                                         // S_j is in registers, P_{j-1} V_{j-1} added
      attn::fence_operand(sc);
      attn::fence_operand(o);
      if (with_pv) release(j - 1);
      softmax_scores(sc, m, lsum, alpha, j * BLOCK_N, q0 + BLOCK_M * c, row0, S, causal, scale_log2);
#endif
      rescale(o, alpha);
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) attn::p_fragment(p[kk], sc, kk);
    };
    if (mine > 0) turn(0, false);
    for (int j = 1; j < mine; ++j) turn(j, true);
    if (mine > 0) {                                          // the last block's P V
      tma::wait(&fullV[(mine - 1) % STAGES], ((mine - 1) / STAGES) & 1);
      attn::fence_operand(o);
      attn::fence_operand(p);
      wg::fence();
      pv(mine - 1, p);
      wg::commit();
      wg::wait<0>();
      release(mine - 1);
    }
#else
    for (int j = 0; j < mine; ++j) {
      tma::wait(&fullK[j % STAGES], (j / STAGES) & 1);
      attn::fence_operand(sc);
      wg::fence();
      qk(j);
      wg::commit();
      wg::wait<0>();
      attn::fence_operand(sc);                               // no read of S hoisted above the wait
      float alpha[2];
      softmax_scores(sc, m, lsum, alpha, j * BLOCK_N, q0 + BLOCK_M * c, row0, S, causal, scale_log2);
      rescale(o, alpha);
      unsigned p[BLOCK_N / 16][4];
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) attn::p_fragment(p[kk], sc, kk);
      tma::wait(&fullV[j % STAGES], (j / STAGES) & 1);
      attn::fence_operand(o);
      attn::fence_operand(p);
      wg::fence();                                           // P and O written since the last fence
      pv(j, p);
      wg::commit();
      wg::wait<0>();
      release(j);
    }
#endif
    // Blocks the producer loads for the other consumer only (causal): wait for them, release them.
    for (int j = mine; j < n_blocks; ++j) {
      tma::wait(&fullK[j % STAGES], (j / STAGES) & 1);
      tma::wait(&fullV[j % STAGES], (j / STAGES) & 1);
      release(j);
    }

    // ---- epilogue (rung 2's): O / l, LSE
    const size_t head = (size_t)bh * S;
    attn::finish(o, m, lsum, row0, S, scale_log2, LSE + head);
    wg::store_fragment_bf16(o, O + head * HEAD_DIM, S, HEAD_DIM, q0 + BLOCK_M * c, 0);
  }
}
