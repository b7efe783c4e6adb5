// Q32Zmm: the prefill of Q8_0, Q4_0 and Q5_0 on the avx512vnni path (kernels_avx512.cpp built
// with EMBER_KERNELS_VNNI). Included inside that file's anonymous namespace after Q32Vnni, whose
// block decoding (codes64, scales64, codes32) and arithmetic it reuses; nothing else may include
// it.
//
// Why it exists: Q32Vnni's tile decodes each row's block pair (codes, the -128 sum w bias, the
// scales) again for every 3 tokens, about as many uops as the 3 tokens' dot products. On an
// Emerald Rapids core that made the zmm prefill slower than the ymm one, whose panels decode
// once per token chunk (bench_matmul 1 <path> 512, GOP/s: Q8_0 82-86 against 112-115 for
// avxvnni, Q4_0 76 against 113-116, Q5_0 70 against 111-115). Here the 4 rows of a row block
// are decoded once per token chunk into a panel, like the AVX2-class panels, and a tile of 4
// rows x 4 tokens keeps its 16 accumulators, the 4 tokens' bytes and scales and one row's
// operands in the 32 zmm registers. Each step (one row, one token, a block pair: 64 MACs) is
// Q32Vnni's: vpdpbusd from the row's bias, vmulps of the row's and the token's scales,
// vcvtdq2ps, the FMA.
//
// The bits are Q32Vnni's (and so Q32K's and the scalar reference's): the same integers, the
// same product, conversion and FMA per block pair in the same order (the even block in the low
// half, the odd in the high half), a last odd block in the low half under the same masks, then
// tree16. The accumulators wait in memory between chunks of block pairs (their values).

template <TensorType TY>
struct Q32Zmm {
  static_assert(TY == TensorType::Q8_0 || TY == TensorType::Q4_0 || TY == TensorType::Q5_0);
  static constexpr int kT = 8;           // tokens per tile, taken 4 at a time
  static constexpr int64_t kRow = 192;   // a row's codes (64 bytes), bias (16 x i32), scales
  static constexpr int64_t kPair = 4 * kRow;
  // Block pairs per chunk: 12 KiB of panel stay in L1 while both token groups of a tile pass.
  static constexpr int64_t kChunk = 16;

  int64_t k = 0, nb = 0, np = 0;
  uint8_t* panel = nullptr;  // block pair j of row r at panel + kPair j + kRow r

  static int64_t bytes(int64_t k) { return kPair * ((k / 32 + 1) / 2); }

  void bind(uint8_t* mem, int64_t k_) {
    k = k_, nb = k_ / 32, np = (nb + 1) / 2;
    panel = mem;
  }

  void fill(const uint8_t* const* rows) {
    const __m512i x80 = _mm512_set1_epi8(char(0x80)), zero = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      for (int64_t j = 0; j < np; ++j) {
        uint8_t* p = panel + kPair * j + kRow * r;
        __m512i w;
        __m512 wd;
        if (2 * j + 1 < nb) {
          float d[2], m[2];
          w = codes64<TY>(rows[r], 2 * j, d, m);
          wd = scales64<TY>(rows[r], 2 * j);
        } else {  // a last odd block, as Q32Vnni's tail: low half only
          float d0, m0;
          w = _mm512_zextsi256_si512(codes32<TY>(rows[r], 2 * j, &d0, &m0));
          wd = _mm512_set1_ps(d0);
        }
        _mm512_store_si512(p, w);
        _mm512_store_si512(p + 64, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, w)));
        _mm512_store_ps(p + 128, wd);
      }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r].
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    zmm_panel_tile<Q32Zmm, T>(*this, np, a, t0, m, i, y);
  }
  static constexpr int kLanes = 16;  // float accumulators per row and token (even | odd block)
  static float reduce(const float* acc) { return tree16(_mm512_load_ps(acc)); }

  // Tokens [t0, t0 + G) through block pairs [c0, c1): acc[t][r] from +0 at the first chunk,
  // from its stored values after.
  template <int G>
  void group(const Activations& a, int64_t t0, int64_t c0, int64_t c1,
             float (*acc)[4][16]) const {
    const __m512i x80 = _mm512_set1_epi8(char(0x80));
    __m512 s[4][G];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < G; ++t) s[r][t] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[t][r]);
    const int8_t* q[G];
    const float* d8[G];
    #pragma GCC unroll 4
    for (int t = 0; t < G; ++t) {
      q[t] = a.q + (t0 + t) * k;
      d8[t] = a.d8 + (t0 + t) * nb * 8;
    }
    const int64_t whole = c1 < nb / 2 ? c1 : nb / 2;
    for (int64_t j = c0; j < whole; ++j) {
      __m512i u[G];
      __m512 ad[G];
      #pragma GCC unroll 4
      for (int t = 0; t < G; ++t) {
        u[t] = _mm512_xor_si512(_mm512_loadu_si512(q[t] + 64 * j), x80);
        ad[t] = _mm512_loadu_ps(d8[t] + 16 * j);
      }
      const uint8_t* p = panel + kPair * j;
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512i w = _mm512_load_si512(p + kRow * r);
        const __m512i bias = _mm512_load_si512(p + kRow * r + 64);
        const __m512 wd = _mm512_load_ps(p + kRow * r + 128);
        #pragma GCC unroll 4
        for (int t = 0; t < G; ++t)
          s[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, ad[t]),
                                    _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, u[t], w)), s[r][t]);
      }
    }
    if (whole < c1) {  // the last odd block (block pair np - 1): Q32Vnni's tail
      const int64_t j = whole;
      const uint8_t* p = panel + kPair * j;
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512i w = _mm512_load_si512(p + kRow * r);
        const __m512i bias = _mm512_load_si512(p + kRow * r + 64);
        const __m512 wd = _mm512_load_ps(p + kRow * r + 128);
        #pragma GCC unroll 4
        for (int t = 0; t < G; ++t) {
          const __m512i av = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q[t] + 64 * j);
          const __m512 ad = _mm512_maskz_loadu_ps(0x00FF, d8[t] + 16 * j);
          s[r][t] = _mm512_mask3_fmadd_ps(
              _mm512_mul_ps(wd, ad),
              _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, _mm512_xor_si512(av, x80), w)), s[r][t],
              0x00FF);
        }
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < G; ++t) _mm512_store_ps(acc[t][r], s[r][t]);
  }
};
