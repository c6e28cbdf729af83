// attention.cu - the consumer's online softmax inside a warp-specialized attention kernel (chapter 6).
// O = softmax(Q K^T / sqrt(d)) V and LSE = log(sum(exp(Q K^T / sqrt(d)))) per query row, bf16 Q, K, V
// (B, H, S, 64) as torch's SDPA takes them, fp32 accumulation, bf16 O (B, H, S, 64), fp32 LSE (B, H, S);
// causal (key <= query) or not. Block = 3 warpgroups per 128 query rows of one (batch, head): warpgroup 0
// produces (Q once, then K and V blocks of 64 keys into a 2-slot TMA ring), warpgroups 1 and 2 consume
// 64 query rows each. What you write: each consumer's step per key block, between the product S = Q K^T
// and the release of the slot, and the final normalization. README.md states the rules.
// Check it: python practice/judge.py check attention_softmax
// judge: target=sm_90a features=wgmma,wgmma.rs,setmaxnreg,tma.load,mbarrier.wait
#include "attention.cuh"

#define HEAD_DIM 64
#define BLOCK_N 64      // keys per block
#define STAGES 2
#define BLOCK_M 64      // query rows per consumer warpgroup
#define CONSUMERS 2
#define Q_BYTES (BLOCK_M * HEAD_DIM * 2)
#define KV_BYTES (BLOCK_N * HEAD_DIM * 2)

extern "C" __global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
attention_softmax(const __grid_constant__ TensorMap mapQ, const __grid_constant__ TensorMap mapK,
                  const __grid_constant__ TensorMap mapV, unsigned short* O, float* LSE, int S, int causal,
                  float scale_log2) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = (unsigned char*)(((unsigned long long)raw + 1023) & ~1023ull);
  unsigned char* sQ = base;                                 // CONSUMERS x (64 rows x 128 bytes)
  unsigned char* sK = sQ + CONSUMERS * Q_BYTES;             // STAGES x (64 keys x 128 bytes)
  unsigned char* sV = sK + STAGES * KV_BYTES;
  __shared__ __align__(8) unsigned long long qbar, full[STAGES], empty[STAGES];

  const int bh = blockIdx.y;
  const int q0 = blockIdx.x * BLOCK_M * CONSUMERS;
  const int all_blocks = (S + BLOCK_N - 1) / BLOCK_N;
  auto blocks_of = [&](int c) {          // key blocks consumer c needs (causal: those with a key <= its last row)
    return causal ? min(all_blocks, (q0 + BLOCK_M * (c + 1) + BLOCK_N - 1) / BLOCK_N) : all_blocks;
  };
  const int n_blocks = blocks_of(CONSUMERS - 1);
  if (threadIdx.x == 0) {
    tma::mbar_init(&qbar, 1);
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(&full[s], 1);
      tma::mbar_init(&empty[s], CONSUMERS);
    }
    tma::fence_proxy_async();
  }
  __syncthreads();

  if (threadIdx.x / 128 == 0) {
    // ------------------------------------------------------------------ producer (given)
    wg::regs_dec<24>();
    if (threadIdx.x == 0) {
      tma::arrive_expect_tx(&qbar, CONSUMERS * Q_BYTES);
      for (int c = 0; c < CONSUMERS; ++c) tma::load_3d(sQ + c * Q_BYTES, &mapQ, 0, q0 + BLOCK_M * c, bh, &qbar);
      for (int j = 0; j < n_blocks; ++j) {
        const int s = j % STAGES;
        tma::wait(&empty[s], ((j / STAGES) & 1) ^ 1);
        tma::arrive_expect_tx(&full[s], 2 * KV_BYTES);
        tma::load_3d(sK + s * KV_BYTES, &mapK, 0, j * BLOCK_N, bh, &full[s]);
        tma::load_3d(sV + s * KV_BYTES, &mapV, 0, j * BLOCK_N, bh, &full[s]);
      }
    }
    return;
  }
  // ------------------------------------------------------------------ consumers
  wg::regs_inc<240>();
  const int c = threadIdx.x / 128 - 1;
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  const int mine = blocks_of(c);
  const int row0 = q0 + BLOCK_M * c + 16 * w + l / 4;   // this thread's rows: row0 and row0 + 8
  float o[HEAD_DIM / 2];                                // O: m64n64 fp32 accumulator fragment
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.f;
  float m[2] = {ATTN_NEG_INF, ATTN_NEG_INF};            // running maximum of the raw scores, rows row0, row0 + 8
  float lsum[2] = {0.f, 0.f};                           // this thread's share of the running sums
  tma::wait(&qbar, 0);

  for (int j = 0; j < n_blocks; ++j) {
    const int s = j % STAGES;
    tma::wait(&full[s], (j / STAGES) & 1);
    if (j >= mine) {                                    // (causal) a block only the other consumer needs
      if (t == 0) tma::arrive(&empty[s]);
      continue;
    }
    // S = Q K^T: m64n64, fp32. sc[i] is S[row0 + 8 ((i / 2) % 2)][j * 64 + 8 (i / 4) + 2 (l % 4) + i % 2].
    float sc[BLOCK_N / 2];
    wg::fence();
#pragma unroll
    for (int k = 0; k < HEAD_DIM / 16; ++k)
      wg::mma_k16(sc, wg::desc_sw128(sQ + c * Q_BYTES + k * 32), wg::desc_sw128(sK + s * KV_BYTES + k * 32), k > 0);
    wg::commit();
    // TODO: wait for S; mask keys >= S (and, causal, keys after the query) to -inf; the new maximum per
    // row (attn::quad_max); alpha = 2^(m_old c - m_new c); P = 2^(S c - m_new c) (attn::ex2); the running
    // sums; O rescaled by alpha; P into bf16 A fragments (attn::p_fragment); O += P V (attn::mma_pv with
    // attn::desc_v<BLOCK_N>), with its fence, commit and wait; then release slot s.
  }

  const size_t head = (size_t)bh * S;
  // TODO: the row sums over the quad (attn::quad_sum); O / l (0 for a row with no key); LSE in
  // natural log, (m c + log2 l) ln 2 (attn::lg2), -inf for a row with no key, written for rows < S
  // by one thread of each quad.
  wg::store_fragment_bf16(o, O + head * HEAD_DIM, S, HEAD_DIM, q0 + BLOCK_M * c, 0);
}
