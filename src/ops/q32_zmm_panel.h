// Q32Zmm: the prefill of Q8_0, Q4_0 and Q5_0 on the avx512vnni path (kernels_avx512.cpp built
// with EMBER_KERNELS_VNNI). Included inside that file's anonymous namespace after Q32Vnni, whose
// block decoding (codes32) it reuses, and after zmm_panel_tile; nothing else may include it.
//
// Why it looks like this. Q32Vnni's zmm tile decodes each row's block pair (codes, the -128
// sum w bias, the scales) again for every 3 tokens, about as many uops as the dot products,
// and each of its steps multiplies the row's and the token's scales itself: on an Emerald
// Rapids core the default path of an AVX-512 Intel CPU ran this prefill slower than its own
// ymm panels (bench_matmul 1 <path> 512, GOP/s: Q8_0 82-86 against 112-115 for avxvnni,
// Q4_0 76, Q5_0 70). Here
//   - the 4 rows of a row block are decoded once per token chunk into a panel, like the
//     AVX2-class panels;
//   - a zmm holds one block of two tokens: lane 2l is token t's canonical lane l (elements
//     4l..4l+3 of the block), lane 2l + 1 token t + 1's. The tokens arrive interleaved so
//     (a.up, made once per matmul: 4 bytes of t, 4 of t + 1, ..), the panel holds each row's
//     codes with every 4 bytes twice and its bias (-128 times the sum of those 4 codes) in
//     both lanes, so one vpdpbusd gives both tokens' block sums;
//   - the two tokens' scale products are then one 8-byte pair, broadcast by vbroadcastsd from
//     a table (a load; no multiply or shuffle per step): one vmulps per block makes the 16
//     products of the tile's 4 rows and 4 tokens (the rows' scales, 4 times each, stored by
//     fill, by the 4 tokens' scales from a.dt), for a whole chunk before its steps (a load
//     right after its 64-byte store waited for the store to forward).
// Per step (one row, two tokens, one block: 64 MACs): vpdpbusd, vcvtdq2ps, the FMA, where
// Q32Vnni's zmm step (one row, one token, a block pair) adds a vmulps. A tile of 4 rows x 4
// tokens keeps 16 accumulators (row, token pair, even or odd block) in registers, and each
// row's codes and bias stay in registers for both token pairs (the loads bound this loop).
// Measured on that core (bench_matmul 1 avx512vnni 512, GOP/s): Q8_0 82-86 with Q32Vnni's
// tile, 118-124 with a first panel of block pairs and a vmulps per step, 138-146 as written.
//
// The bits are Q32Vnni's and the scalar reference's: per token the same block sums, the same
// products wd * ad and the same FMAs, even blocks into one accumulator and odd blocks into
// another, each in block order; then even + odd and tree8, which is tree16. The accumulators
// wait in memory between chunks of blocks (their values).

template <TensorType TY>
struct Q32Zmm : BlockPanel<32, 576> {
  static_assert(TY == TensorType::Q8_0 || TY == TensorType::Q4_0 || TY == TensorType::Q5_0);
  static constexpr int kT = 8;  // tokens per tile, taken 4 at a time (two pairs)
  // Block b at panel + kBlock b: row r's doubled codes at 128 r, its bias 64 bytes on; at 512
  // the rows' scales wd as 16 floats, rows 0, 0, 0, 0, 1, 1, 1, 1, .. (to meet 4 tokens' ad).
  // Blocks per chunk: 18 KiB of panel stay in L1 while both token groups of a tile pass.
  static constexpr int64_t kChunk = 32;

  void fill(const uint8_t* const* rows) {
    const __m512i x80 = _mm512_set1_epi8(char(0x80)), zero = _mm512_setzero_si512();
    const __m512i twice = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* p = panel + kBlock * b;
        float d, m;
        const __m512i w = _mm512_permutexvar_epi32(
            twice, _mm512_castsi256_si512(codes32<TY>(rows[r], b, &d, &m)));
        _mm512_store_si512(p + 128 * r, w);
        _mm512_store_si512(p + 128 * r + 64, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, w)));
        _mm_store_ps(reinterpret_cast<float*>(p + 512) + 4 * r, _mm_set1_ps(d));
      }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r]; t0 is even.
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    zmm_panel_tile<Q32Zmm, T>(*this, nb, a, t0, m, i, y);
  }
  // Between chunks, token pair p's accumulators of row r wait as they are: the even blocks'
  // at acc[2 p][r], the odd blocks' at acc[2 p + 1][r] (16 lanes, the pair interleaved).
  static constexpr int kLanes = 16;
  // Token t of its pair is lanes t % 2, t % 2 + 2, ..: even + odd (tree16's first step), those
  // 8 lanes gathered, then tree8.
  static float reduce(const float (*acc)[4][kLanes], int t, int r) {
    const __m512 both = _mm512_add_ps(_mm512_load_ps(acc[t & ~1][r]), _mm512_load_ps(acc[t | 1][r]));
    const __m512i lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m512 g = _mm512_permutexvar_ps(lanes, both);
    return tree8(t & 1 ? _mm512_extractf32x8_ps(g, 1) : _mm512_castps512_ps256(g));
  }

  // Tokens [t0, t0 + G) (t0 even) through blocks [c0, c1): the pairs' accumulators from +0 at
  // the first chunk, from their stored values after.
  template <int G>
  void group(const Activations& a, int64_t t0, int64_t c0, int64_t c1, float (*acc)[4][16]) const {
    constexpr int P = (G + 1) / 2;  // token pairs (a last single token pairs with itself)
    __m512 s[4][P][2];              // row, pair, even / odd block
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
        #pragma GCC unroll 2
        for (int e = 0; e < 2; ++e)
          s[r][p][e] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[2 * p + e][r]);
    const uint8_t* up[P];
    #pragma GCC unroll 2
    for (int p = 0; p < P; ++p) up[p] = a.up + (t0 / 2 + p) * nb * 64;
    // The chunk's scale products first, prd[b - c0][4 r + t] = wd_r * ad_t (token pair p of row
    // r is the 8 bytes at 4 r + 2 p): read by the steps long after they were stored (a load
    // right after its 64-byte store waits for the store to forward).
    alignas(64) float prd[kChunk][16];
    for (int64_t b = c0; b < c1; ++b)
      _mm512_store_ps(prd[b - c0], _mm512_mul_ps(_mm512_load_ps(panel + kBlock * b + 512),
                                                 _mm512_broadcast_f32x4(_mm_loadu_ps(a.dt_at(t0, b)))));
    // Block b into the accumulators of parity E (c0 is even, so E is b's parity).
    auto step = [&]<int E>(int64_t b) {
      const uint8_t* pb = panel + kBlock * b;
      const float* pr4 = prd[b - c0];
      __m512i u[P];
      #pragma GCC unroll 2
      for (int p = 0; p < P; ++p) u[p] = _mm512_loadu_si512(up[p] + 64 * b);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        __m512i w = _mm512_load_si512(pb + 128 * r);
        __m512i bias = _mm512_load_si512(pb + 128 * r + 64);
        // In registers for both token pairs: GCC would load each again as a memory operand,
        // and the loads (codes, bias, product, tokens) are what bound this loop.
        __asm__("" : "+v"(w), "+v"(bias));
        #pragma GCC unroll 2
        for (int p = 0; p < P; ++p) {
          const __m512 pr = _mm512_castpd_ps(
              _mm512_broadcastsd_pd(_mm_load_sd(reinterpret_cast<const double*>(pr4 + 4 * r + 2 * p))));
          s[r][p][E] = _mm512_fmadd_ps(pr, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, u[p], w)),
                                       s[r][p][E]);
        }
      }
    };
    int64_t b = c0;
    for (; b + 2 <= c1; b += 2) {
      step.template operator()<0>(b);
      step.template operator()<1>(b + 1);
    }
    if (b < c1) step.template operator()<0>(b);  // a last even block
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
        #pragma GCC unroll 2
        for (int e = 0; e < 2; ++e) _mm512_store_ps(acc[2 * p + e][r], s[r][p][e]);
  }
};
