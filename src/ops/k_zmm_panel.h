// KZmm: the prefill of Q4_K, Q5_K and Q6_K on the AVX-512 paths (kernels_avx512.cpp, both
// builds). Included inside that file's anonymous namespace after KQuantK, whose block decoding
// (chunk_codes, ops/k4_scales.h, the scale lane map) and arithmetic it reuses; nothing else may
// include it.
//
// Why it exists: KQuantK's prefill tile (1 row x 8 tokens for Q4_K / Q5_K, 2 x 4 for Q6_K)
// decodes a row's codes and spreads its sub-block scales again for every 8 (or 4) tokens. On an
// Emerald Rapids core that left the zmm K-quant prefill behind the ymm panel (KPanel) of the
// AVX2-class paths (bench_matmul 1 <path> 512, GOP/s: Q4_K 110-112 against 116-117 for
// avxvnni, Q6_K 99-100 against 118-122). Here the 4 rows of a row block are decoded once per
// token chunk into a panel (each 64-code chunk beside its int16 scale operand), and a tile of
// 4 rows x 4 tokens keeps its 16 int32 sums and the 4 tokens' bytes in zmm registers; the
// float accumulators (8 lanes per row and token) wait in memory, read and written once per
// super-block. The super-block's 16 products d * ad (and dmin * ad) are one vmulps of the 4
// rows' d by the 4 tokens' ad, read back by vbroadcastss (a load; a broadcast from a register
// is a shuffle), and the mins term multiplies float mins by the token's 32-code sums (a.bsf),
// as KPanel does: each product exact (at most 63 * 4064 < 2^24), so the float of KQuantK's
// vpmaddwd of the mins by the bsums, and the mins FMA is vfnmadd231ps, -(p x) + acc, the same
// exact value as (-p) x + acc before its one rounding. Measured on that core (bench_matmul 1
// avx512vnni 512, GOP/s): Q4_K 110-112 with KQuantK's tile, 121-129 with the panel and a
// scalar product and broadcast per row and token, 145-157 with the tables; Q6_K 99-100,
// 150-162, 169-174.
//
// Q6_K takes KPanel's form: the token + 128 (xor 0x80, once per token and chunk) is the
// unsigned maddubs operand and the codes q - 32 the signed one (no saturation: 2 * 255 * 32
// < 2^15), so each product pair sum is (q - 32) a + 128 (q - 32); the second part depends on
// the row alone, and each row's sums start at -C, C its sum over the super-block made by fill.
// The int32 sums are KQuantK's (integer additions in another order), folded, converted and met
// by the same products in the same two FMAs per super-block, then tree8: the same bits.

template <TensorType TY>
struct KZmm : BlockPanel<256, 2368> {
  using K = KQuantK<TY>;
  static constexpr bool kQ6 = K::kQ6;
  static constexpr int kT = 8;  // tokens per tile, taken 4 at a time
  // Super-block b at panel + kBlock b: row r's chunk c (64 codes: Q4_K / Q5_K unsigned, Q6_K
  // q - 32) at 512 r + 128 c, its scale operand (int16 lane i = the scale of elements 2i, 2i + 1)
  // 64 bytes on; at kMins the rows' 8 mins as floats (Q4_K / Q5_K) or their int32 start -C
  // (16 lanes, Q6_K), 64 bytes a row; at kD the rows' d, then dmin.
  static constexpr int64_t kMins = 2048;
  static constexpr int64_t kD = kMins + 256;
  static_assert(kD + 64 == kBlock);
  // Super-blocks per chunk: 18.5 KiB of panel stay in L1 while both token groups pass.
  static constexpr int64_t kChunk = 8;

  void fill(const uint8_t* const* rows) {
    const __m512i m0f = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* sb = panel + kBlock * b;
        float* dd = reinterpret_cast<float*>(sb + kD);
        __m512i sc16;
        if constexpr (kQ6) {
          const auto* blk = reinterpret_cast<const gguf::BlockQ6_K*>(rows[r]) + b;
          dd[r] = h2f(blk->d);
          dd[4 + r] = 0;
          sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales))));
        } else {
          const uint8_t* blk = rows[r] + b * K::kBlockBytes;
          dd[r] = h2f(blk + offsetof(gguf::BlockQ4_K, d));
          dd[4 + r] = h2f(blk + offsetof(gguf::BlockQ4_K, dmin));
          const __m256i sm = _mm256_cvtepu8_epi16(k4_scales_mins(k4_header(blk)));
          sc16 = _mm512_castsi256_si512(sm);
          _mm256_store_ps(reinterpret_cast<float*>(sb + kMins + 64 * r),
                          _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(sm, 1))));
        }
        __m512i c = _mm512_setzero_si512();  // Q6_K: the sum of the 128 (q - 32) parts
        #pragma GCC unroll 4
        for (int ch = 0; ch < 4; ++ch) {
          __m512i q = K::chunk_codes(rows[r], b, ch, m0f);
          const __m512i idx =
              kQ6 ? _mm512_add_epi16(_mm512_set1_epi16(int16_t(4 * ch)),
                                     _mm512_srli_epi16(K::lane_index16(), 3))
                  : _mm512_add_epi16(_mm512_set1_epi16(int16_t(2 * ch)),
                                     _mm512_srli_epi16(K::lane_index16(), 4));
          const __m512i scv = _mm512_permutexvar_epi16(idx, sc16);
          if constexpr (kQ6) {
            q = _mm512_sub_epi8(q, _mm512_set1_epi8(32));
            c = dot2_acc(c, _mm512_maddubs_epi16(_mm512_set1_epi8(char(0x80)), q), scv);
          }
          _mm512_store_si512(sb + 512 * r + 128 * ch, q);
          _mm512_store_si512(sb + 512 * r + 128 * ch + 64, scv);
        }
        if constexpr (kQ6)
          _mm512_store_si512(sb + kMins + 64 * r, _mm512_sub_epi32(_mm512_setzero_si512(), c));
      }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r].
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    zmm_panel_tile<KZmm, T>(*this, nb, a, t0, m, i, y);
  }
  static constexpr int kLanes = 8;  // float accumulators per row and token
  static float reduce(const float (*acc)[4][kLanes], int t, int r) { return tree8(_mm256_load_ps(acc[t][r])); }

  // Tokens [t0, t0 + G) through super-blocks [c0, c1): acc[t][r] from +0 at the first chunk,
  // from its stored values after.
  template <int G>
  void group(const Activations& a, int64_t t0, int64_t c0, int64_t c1, float (*acc)[4][8]) const {
    if (c0 == 0)
      #pragma GCC unroll 4
      for (int t = 0; t < G; ++t)
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) _mm256_store_ps(acc[t][r], _mm256_setzero_ps());
    const __m512i x80 = _mm512_set1_epi8(char(0x80));
    for (int64_t b = c0; b < c1; ++b) {
      const uint8_t* sb = panel + kBlock * b;
      __m512i is[4][G];
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        #pragma GCC unroll 4
        for (int t = 0; t < G; ++t)
          is[r][t] = kQ6 ? _mm512_load_si512(sb + kMins + 64 * r) : _mm512_setzero_si512();
      #pragma GCC unroll 4
      for (int ch = 0; ch < 4; ++ch) {
        __m512i av[G];
        #pragma GCC unroll 4
        for (int t = 0; t < G; ++t) {
          av[t] = _mm512_loadu_si512(a.q + (t0 + t) * k + 256 * b + 64 * ch);
          if constexpr (kQ6) av[t] = _mm512_xor_si512(av[t], x80);
        }
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m512i q = _mm512_load_si512(sb + 512 * r + 128 * ch);
          const __m512i scv = _mm512_load_si512(sb + 512 * r + 128 * ch + 64);
          #pragma GCC unroll 4
          for (int t = 0; t < G; ++t)
            is[r][t] = dot2_acc(is[r][t],
                                kQ6 ? _mm512_maddubs_epi16(av[t], q) : _mm512_maddubs_epi16(q, av[t]),
                                scv);
        }
      }
      // The super-block's scale products, d_r * ad_t at 4 t + r and dmin_r * ad_t 16 on: one
      // vmulps each of the 4 rows' d (dmin) by the group's ad, 4 times each (a.dp pairs).
      alignas(64) float prd[32];
      const float* dp = a.dp + 2 * (t0 * nb + b);
      __m128 ad4 = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(dp)));
      if constexpr (G > 2)
        ad4 = _mm_castpd_ps(_mm_loadh_pd(_mm_castps_pd(ad4), reinterpret_cast<const double*>(dp + 4 * nb)));
      const __m512 adv = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_castps128_ps512(ad4));
      const float* dd = reinterpret_cast<const float*>(sb + kD);
      _mm512_store_ps(prd, _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(dd)), adv));
      if constexpr (!kQ6)
        _mm512_store_ps(prd + 16, _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(dd + 4)), adv));
      #pragma GCC unroll 4
      for (int t = 0; t < G; ++t) {
        __m256 bsf = _mm256_setzero_ps();
        if constexpr (!kQ6) bsf = _mm256_loadu_ps(a.bsf + (t0 + t) * (k / 32) + 8 * b);
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(is[r][t]),
                                              _mm512_extracti64x4_epi64(is[r][t], 1));
          __m256 s = _mm256_fmadd_ps(_mm256_broadcast_ss(prd + 4 * t + r), _mm256_cvtepi32_ps(i8),
                                     _mm256_load_ps(acc[t][r]));
          if constexpr (!kQ6)
            s = _mm256_fnmadd_ps(_mm256_broadcast_ss(prd + 16 + 4 * t + r),
                                 _mm256_mul_ps(_mm256_load_ps(reinterpret_cast<const float*>(sb + kMins + 64 * r)), bsf),
                                 s);
          _mm256_store_ps(acc[t][r], s);
        }
      }
    }
  }
};
