// KPanel: the prefill of Q4_K, Q5_K and Q6_K on every AVX2-class path (kernels_kquants_avx2.cpp,
// built once per table: avx2, avxvnni, avxvnni-evex). Included inside that file's anonymous
// namespace after KQuantK, whose block decoding the fill reuses; nothing else may include it.
//
// A KQuantK tile decodes its row's codes and scales for every few tokens, and for Q6_K that is
// more work than the dot products; here the 4 rows of a row block are decoded once per token
// chunk into a panel, and a tile of 4 rows x 2 tokens does no decoding. Per 32 elements of one
// row and token (a step): vpmaddubsw of the codes by the token's bytes, vpmaddwd by the group's
// scales, vpaddd into the super-block's int32 sums (vpdpwssd for the last two on the VNNI
// paths); two uops on the two ports of an Intel core that multiply, 1.0 cycle a step at best.
// Per super-block, row and token, the epilogue (the two FMAs of the canonical order, the second
// after the product of the mins by the token's 32-code sums) adds 2 or 4 such uops. The C++
// form of this tile ran 2.1 cycles a step on an Emerald Rapids core (88-91 GOP/s): its 8 int32
// sums and 8 float accumulators do not fit the 16 registers with the codes and tokens, and each
// scale product d * ad was a scalar multiply and a broadcast. Here
//   - the panel is super-block major, so that a chunk of kChunk super-blocks stays in L1 while
//     every token pair of the tile passes through it (at k = 4864 the whole panel is 42 KiB);
//   - one asm statement per token pair and chunk keeps the 8 int32 sums, the pair's two groups
//     of 32 token bytes and the temporaries in registers, and leaves the 8 float accumulators in
//     memory, where each is read and written once per super-block;
//   - each super-block's 8 products d * ad (and dmin * ad) are one vmulps of the panel's 4 rows'
//     d, each twice, by the pair's two ad side by side, read back by vbroadcastss;
//   - Q6_K needs no offset per row and token (pass says why).
//
// Measured on that core (1 thread, 3.0 GHz, ops::matmul of 512 tokens, best of 5-7, GOP/s; the
// VM's speed drifts by 10 %, so each pair ran back to back): the tile over L1 data, k = 2048,
// q4_K 1.52 cycles a step (124 GOP/s), of which the epilogue 0.33; in place q4_K 88-97 -> 100-111
// on avx2, 118-120 on avxvnni (vpdpwssd), q6_K 84-94 -> 106-132 (avx2), 125-148 (avxvnni).
//
// The bits are KQuantK's: the same int32 sums (integer additions in another order), converted
// by the same vcvtdq2ps, met by the same products in the same two FMAs per super-block (the
// second as vfnmadd231ps: -(p x) + acc is the same exact value as (-p) x + acc, so the same
// rounding), then tree8.

// The int16 products in ymm13 against the scales at SC, into ymm ACC: vpmaddwd + vpaddd, or
// one vpdpwssd in the VNNI builds (the same integers; no vpaddd to crowd the vector ports).
#if EMBER_AVX2_VNNI == 1
#define EMBER_KP_DOT2(SC, ACC) "%{vex%} vpdpwssd (" SC ")(%[pan]), %%ymm13, %%ymm" #ACC "\n\t"
#elif EMBER_AVX2_VNNI == 2
#define EMBER_KP_DOT2(SC, ACC) "%{evex%} vpdpwssd (" SC ")(%[pan]), %%ymm13, %%ymm" #ACC "\n\t"
#else
#define EMBER_KP_DOT2(SC, ACC)                                     \
  "vpmaddwd (" SC ")(%[pan]), %%ymm13, %%ymm13\n\t"                \
  "vpaddd %%ymm13, %%ymm" #ACC ", %%ymm" #ACC "\n\t"
#endif
// One step of Q4_K / Q5_K: the unsigned codes of row R in ymm12 by the token's bytes in ymm AV,
// then the group's scales of row R at panel offset SC; into ymm ACC.
#define EMBER_KP_STEP(AV, ACC, SC)                                 \
  "vpmaddubsw %%ymm" #AV ", %%ymm12, %%ymm13\n\t"                  \
  EMBER_KP_DOT2(SC, ACC)
// One step of Q6_K: the token's bytes + 128 (unsigned, ymm AV) by the signed codes q - 32 at
// panel offset CODES, then the scales at SC; into ymm ACC.
#define EMBER_KP_STEP6(AV, ACC, CODES, SC)                         \
  "vpmaddubsw (" CODES ")(%[pan]), %%ymm" #AV ", %%ymm13\n\t"      \
  EMBER_KP_DOT2(SC, ACC)
// Row R of group G: codes at G * 256 + R * 32, scales 128 bytes on.
#define EMBER_KP_ROW(G, R, A0, A1)                                 \
  "vmovdqa (" #G " * 256 + " #R " * 32)(%[pan]), %%ymm12\n\t"      \
  EMBER_KP_STEP(8, A0, #G " * 256 + 128 + " #R " * 32")            \
  EMBER_KP_STEP(9, A1, #G " * 256 + 128 + " #R " * 32")
#define EMBER_KP_ROW6(G, R, A0, A1)                                \
  EMBER_KP_STEP6(8, A0, #G " * 256 + " #R " * 32", #G " * 256 + 128 + " #R " * 32") \
  EMBER_KP_STEP6(9, A1, #G " * 256 + " #R " * 32", #G " * 256 + 128 + " #R " * 32")
// Group G (elements 32 G on) of both tokens, and a prefetch of line L of the next pair's token
// at PF (k2 or k3 bytes on).
#define EMBER_KP_TOKENS(G, PF, L)                                  \
  "vmovdqu (" #G " * 32)(%[act]), %%ymm8\n\t"                      \
  "vmovdqu (" #G " * 32)(%[act],%[stride],1), %%ymm9\n\t"          \
  "prefetcht0 (" #L " * 64)(%[act],%[" PF "],1)\n\t"
#define EMBER_KP_GROUP(G, PF, L)                                   \
  EMBER_KP_TOKENS(G, PF, L)                                        \
  EMBER_KP_ROW(G, 0, 0, 1) EMBER_KP_ROW(G, 1, 2, 3)                \
  EMBER_KP_ROW(G, 2, 4, 5) EMBER_KP_ROW(G, 3, 6, 7)
// Q6_K takes the tokens' bytes + 128 (xor 0x80, ymm15), unsigned.
#define EMBER_KP_GROUP6(G, PF, L)                                  \
  "vpxor (" #G " * 32)(%[act]), %%ymm15, %%ymm8\n\t"               \
  "vpxor (" #G " * 32)(%[act],%[stride],1), %%ymm15, %%ymm9\n\t"   \
  "prefetcht0 (" #L " * 64)(%[act],%[" PF "],1)\n\t"               \
  EMBER_KP_ROW6(G, 0, 0, 1) EMBER_KP_ROW6(G, 1, 2, 3)              \
  EMBER_KP_ROW6(G, 2, 4, 5) EMBER_KP_ROW6(G, 3, 6, 7)
// The super-block's 8 groups; the prefetch walks the next pair's first token (k2 on) in groups
// 0-3 and its second (k3 on) in 4-7, the 4 lines of this super-block's 256 bytes each.
#define EMBER_KP_GROUPS(GR)                                        \
  GR(0, "k2", 0) GR(1, "k2", 1) GR(2, "k2", 2) GR(3, "k2", 3)      \
  GR(4, "k3", 0) GR(5, "k3", 1) GR(6, "k3", 2) GR(7, "k3", 3)
// Sum I (row I / 2, token I % 2): acc[I] += (d * ad) * float(sum), the product at 256 + 4 I
// of the accumulator block.
#define EMBER_KP_FMA_D(I)                                          \
  "vcvtdq2ps %%ymm" #I ", %%ymm" #I "\n\t"                         \
  "vbroadcastss (256 + 4 * " #I ")(%[acc]), %%ymm13\n\t"           \
  "vfmadd213ps (32 * " #I ")(%[acc]), %%ymm13, %%ymm" #I "\n\t"
// ... then acc[I] -= (dmin * ad) * (mins . bsums), the 8 products of row R's mins (floats at the
// panel's kMins) by the token's 32-code sums (a.bsf, in ymm BS): each exact (at most 63 * 4096
// < 2^24), so the floats of KQuantK's vpmaddwd of the mins by the bsums and its conversion
// (one multiply-port uop where those were two); the product (dmin * ad) at 288 + 4 I.
#define EMBER_KP_FMA_MIN(I, R, BS)                                 \
  "vmulps (%c[mins] + 32 * " #R ")(%[pan]), %%ymm" #BS ", %%ymm14\n\t" \
  "vbroadcastss (288 + 4 * " #I ")(%[acc]), %%ymm13\n\t"           \
  "vfnmadd231ps %%ymm13, %%ymm14, %%ymm" #I "\n\t"
#define EMBER_KP_STORE(I) "vmovaps %%ymm" #I ", (32 * " #I ")(%[acc])\n\t"
#define EMBER_KP_EPI(I, R, BS) EMBER_KP_FMA_D(I) EMBER_KP_FMA_MIN(I, R, BS) EMBER_KP_STORE(I)
#define EMBER_KP_EPI6(I) EMBER_KP_FMA_D(I) EMBER_KP_STORE(I)

template <TensorType TY>
struct KPanel : BlockPanel<256, 2240> {
  using K = KQuantK<TY>;
  static constexpr bool kQ6 = K::kQ6;
  static constexpr int kT = 8;  // tokens per tile (a panel holds 4 rows), taken 2 at a time

  // Super-block b at panel + kBlock * b: group g (elements [32g, 32g + 32)) at 256 g, the 4
  // rows' codes in logical order (32 bytes each; Q4_K / Q5_K unsigned, Q6_K as q - 32), then
  // their madd operands (the group's scales as int16, one per product pair); at kMins the rows'
  // 8 mins as floats (Q4_K / Q5_K) or, for Q6_K, each row's int32 start -C (see pass); at kD
  // the rows' d as floats, rows 0, 0, 1, 1, 2, 2, 3, 3 (to meet a token pair's two ad); at
  // kDmin their dmin likewise (Q4_K / Q5_K).
  static constexpr int64_t kMins = 2048;
  static constexpr int64_t kD = kMins + 128;
  static constexpr int64_t kDmin = kD + 32;
  static_assert(kDmin + 32 == kBlock);  // Q6_K leaves the last 32 bytes unused
  // Super-blocks per chunk: 17.5 KiB of panel and 16 KiB of a tile's tokens in L1.
  static constexpr int64_t kChunk = 8;

  void fill(const uint8_t* const* rows) {
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* sb = panel + kBlock * b;
        alignas(16) uint8_t scb[16];
        float d, dmin;
        __m256i mins2;
        K::block_header(rows[r], b, &d, &dmin, scb, &mins2);
        __m256i s16[2];
        K::scales16(_mm_load_si128(reinterpret_cast<const __m128i*>(scb)), s16);
        __m256i c = _mm256_setzero_si256();  // Q6_K: sum over groups of 128 (q - 32) . scales
        for (int g = 0; g < 8; ++g) {
          __m256i codes = K::group_codes(rows[r], b, g, m0f);
          const __m256i sc = K::group_scales(s16, g);
          if constexpr (kQ6) {
            codes = _mm256_sub_epi8(codes, _mm256_set1_epi8(32));
            c = _mm256_add_epi32(c, _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_set1_epi8(char(0x80)), codes), sc));
          }
          _mm256_store_si256(reinterpret_cast<__m256i*>(sb + 256 * g + 32 * r), codes);
          _mm256_store_si256(reinterpret_cast<__m256i*>(sb + 256 * g + 128 + 32 * r), sc);
        }
        if constexpr (kQ6)
          _mm256_store_si256(reinterpret_cast<__m256i*>(sb + kMins + 32 * r),
                             _mm256_sub_epi32(_mm256_setzero_si256(), c));
        float* dd = reinterpret_cast<float*>(sb + kD);
        dd[2 * r] = dd[2 * r + 1] = d;
        if constexpr (!kQ6) {
          (void)mins2;
          _mm256_store_ps(reinterpret_cast<float*>(sb + kMins + 32 * r),
                          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scb + 8)))));
          float* dm = reinterpret_cast<float*>(sb + kDmin);
          dm[2 * r] = dm[2 * r + 1] = dmin;
        }
      }
  }

  // A token pair's accumulators (row r, token t at 2 r + t) and the current super-block's
  // scale products: d * ad at prd[0..7], dmin * ad at prd[8..15] (the asm's offsets 256, 288).
  struct alignas(32) PairAcc {
    float acc[8][8];
    float prd[16];
  };

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r]. A last single
  // token runs as a pair of itself (its second copy is not written). Chunk by chunk, every
  // token pair through the chunk's super-blocks before the next chunk.
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    constexpr int P = (T + 1) / 2;
    PairAcc pairs[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      #pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_store_ps(pairs[p].acc[j], _mm256_setzero_ps());
    for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
      const int64_t c1 = c0 + kChunk < nb ? c0 + kChunk : nb;
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        // The pair's two ad per super-block side by side are a.dp's (a single last token's
        // second is the next token's, or its own: that copy is not written).
        const int64_t t = t0 + 2 * p, u = 2 * p + 1 < T ? t + 1 : t;
        pass(panel + kBlock * c0, a.q + t * k + 256 * c0, (u - t) * k, a.dp + 2 * (t * nb + c0),
             a.bsf + t * (k / 32) + 8 * c0, (u - t) * (k / 32) * 4, c1 - c0, pairs[p], k);
      }
    }
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        for (int t = 0; t < (2 * p + 1 < T ? 2 : 1); ++t)
          y[(t0 + 2 * p + t) * m + i + r] = tree8(_mm256_load_ps(pairs[p].acc[2 * r + t]));
  }

  // count super-blocks (pan, act, ad, bs at the first) of a token pair into pa; the second
  // token's bytes at act + stride, its 32-code sums (a.bsf) at bs + bstride (bytes). The next
  // pair's bytes (2k and 3k on) are prefetched, as in Q32Panel.
  static void pass(const uint8_t* pan, const int8_t* act, int64_t stride, const float* ad,
                   const float* bs, int64_t bstride, int64_t count, PairAcc& pa, int64_t k) {
    if constexpr (kQ6) {
      (void)bs, (void)bstride;
      // KQuantK's sums are of (q - 32) a over each group's pairs: it takes 32 (a + a') off
      // vpmaddubsw(q, a), one vpsubw per row and token. Here the token is the unsigned operand,
      // u = a + 128 (0..255), and the codes the signed one, q - 32 (-32..31): no pair sum
      // saturates (2 * 255 * 32 < 2^15), and it is (q - 32) a + 128 (q - 32) summed, whose
      // second part depends on the row alone. So each row's sums start at -C, C the sum over
      // groups of vpmaddwd(128 (q - 32) pair sums, scales), made by fill: the same integers.
      alignas(32) static const uint8_t c80[32] = {
          0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
          0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
          0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
      // ymm0-7: the int32 sums; ymm8, ymm9: the tokens' group + 128; ymm13: the products;
      // ymm12-14: epilogue temporaries; ymm15: 0x80 in every byte.
      __asm__ volatile(
          "vmovdqa (%[c80]), %%ymm15\n\t"
          "1:\n\t"
          "vmovdqa %c[mins](%[pan]), %%ymm0\n\t"
          "vmovdqa %c[mins](%[pan]), %%ymm1\n\t"
          "vmovdqa (%c[mins] + 32)(%[pan]), %%ymm2\n\t"
          "vmovdqa (%c[mins] + 32)(%[pan]), %%ymm3\n\t"
          "vmovdqa (%c[mins] + 64)(%[pan]), %%ymm4\n\t"
          "vmovdqa (%c[mins] + 64)(%[pan]), %%ymm5\n\t"
          "vmovdqa (%c[mins] + 96)(%[pan]), %%ymm6\n\t"
          "vmovdqa (%c[mins] + 96)(%[pan]), %%ymm7\n\t"
          EMBER_KP_GROUPS(EMBER_KP_GROUP6)
          "vbroadcastsd (%[ad]), %%ymm12\n\t"
          "vmulps %c[d](%[pan]), %%ymm12, %%ymm13\n\t"
          "vmovaps %%ymm13, 256(%[acc])\n\t"
          EMBER_KP_EPI6(0) EMBER_KP_EPI6(1) EMBER_KP_EPI6(2) EMBER_KP_EPI6(3)
          EMBER_KP_EPI6(4) EMBER_KP_EPI6(5) EMBER_KP_EPI6(6) EMBER_KP_EPI6(7)
          "add %[super], %[pan]\n\t"
          "add $256, %[act]\n\t"
          "add $8, %[ad]\n\t"
          "dec %[count]\n\t"
          "jnz 1b\n\t"
          : [pan] "+r"(pan), [act] "+r"(act), [ad] "+r"(ad), [count] "+r"(count)
          : [stride] "r"(stride), [acc] "r"(&pa), [c80] "r"(c80), [k2] "r"(2 * k),
            [k3] "r"(3 * k), [d] "i"(kD), [mins] "i"(kMins), [super] "i"(kBlock)
          : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
            "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    } else {
      // ymm0-7: the int32 sums; ymm8, ymm9: the tokens' group, then their bsf; ymm12: a
      // row's codes; ymm13, ymm14: temporaries.
      __asm__ volatile(
          "1:\n\t"
          "vpxor %%xmm0, %%xmm0, %%xmm0\n\t" "vpxor %%xmm1, %%xmm1, %%xmm1\n\t"
          "vpxor %%xmm2, %%xmm2, %%xmm2\n\t" "vpxor %%xmm3, %%xmm3, %%xmm3\n\t"
          "vpxor %%xmm4, %%xmm4, %%xmm4\n\t" "vpxor %%xmm5, %%xmm5, %%xmm5\n\t"
          "vpxor %%xmm6, %%xmm6, %%xmm6\n\t" "vpxor %%xmm7, %%xmm7, %%xmm7\n\t"
          EMBER_KP_GROUPS(EMBER_KP_GROUP)
          "vbroadcastsd (%[ad]), %%ymm12\n\t"
          "vmulps %c[d](%[pan]), %%ymm12, %%ymm13\n\t"
          "vmovaps %%ymm13, 256(%[acc])\n\t"
          "vmulps %c[dmin](%[pan]), %%ymm12, %%ymm13\n\t"
          "vmovaps %%ymm13, 288(%[acc])\n\t"
          "vmovups (%[bs]), %%ymm8\n\t"
          "vmovups (%[bs],%[bstride],1), %%ymm9\n\t"
          EMBER_KP_EPI(0, 0, 8) EMBER_KP_EPI(1, 0, 9) EMBER_KP_EPI(2, 1, 8)
          EMBER_KP_EPI(3, 1, 9) EMBER_KP_EPI(4, 2, 8) EMBER_KP_EPI(5, 2, 9)
          EMBER_KP_EPI(6, 3, 8) EMBER_KP_EPI(7, 3, 9)
          "add %[super], %[pan]\n\t"
          "add $256, %[act]\n\t"
          "add $8, %[ad]\n\t"
          "add $32, %[bs]\n\t"
          "dec %[count]\n\t"
          "jnz 1b\n\t"
          : [pan] "+r"(pan), [act] "+r"(act), [ad] "+r"(ad), [bs] "+r"(bs),
            [count] "+r"(count)
          : [stride] "r"(stride), [bstride] "r"(bstride), [acc] "r"(&pa), [k2] "r"(2 * k),
            [k3] "r"(3 * k), [d] "i"(kD), [dmin] "i"(kDmin), [mins] "i"(kMins),
            [super] "i"(kBlock)
          : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
            "xmm8", "xmm9", "xmm12", "xmm13", "xmm14");
    }
  }
};

#undef EMBER_KP_EPI6
#undef EMBER_KP_EPI
#undef EMBER_KP_STORE
#undef EMBER_KP_FMA_MIN
#undef EMBER_KP_FMA_D
#undef EMBER_KP_GROUPS
#undef EMBER_KP_GROUP6
#undef EMBER_KP_GROUP
#undef EMBER_KP_TOKENS
#undef EMBER_KP_ROW6
#undef EMBER_KP_ROW
#undef EMBER_KP_STEP6
#undef EMBER_KP_STEP
#undef EMBER_KP_DOT2
