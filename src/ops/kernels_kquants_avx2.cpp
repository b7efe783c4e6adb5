// The AVX2 twins of the K-quant kernels (Q4_K, Q5_K, Q6_K) of kernels_scalar.cpp: the same
// canonical-v1 order, so the same bits. Decode walks two far-apart rows (KQuantK, through
// run_tiles); prefill decodes 4 rows at a time into a panel once per token chunk (KPanel,
// through run_panels). Compiled with AVX2 flags, everything but the three entry points in an
// anonymous namespace, as in kernels_avx2.cpp, and like it built again for the VNNI tables
// (kernels_kquants_avxvnni.cpp, kernels_kquants_avxvnni_evex.cpp; EMBER_AVX2_VNNI).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gguf/blocks.h"
#include "ops/kernels_avx2_driver.h"

namespace ember::ops::detail {
namespace {

using gguf::TensorType;

// ---- Q4_K / Q5_K / Q6_K ------------------------------------------------------------------
// One ymm holds 32 codes in logical order (a Q4_K/Q5_K sub-block, or two Q6_K sub-blocks);
// maddubs + madd against the scale gives 8 int32 lanes, lane l covering elements 4l..4l+3:
// the canonical lanes directly.

// k4_scales_mins and k4_header: the Q4_K / Q5_K scales and mins as bytes by vector ops.
#include "ops/k4_scales.h"

// vpshufb controls of KQuantK::group_scales: group g's scale(s) into every int16 of a 128-bit
// half (Q6_K: the low half takes scale 2g, the high half 2g + 1, each from the vector of
// scales16 that holds it).
template <bool Q6>
struct ScalePick {
  alignas(32) int8_t b[8][32];
  constexpr ScalePick() : b{} {
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 32; ++i) b[g][i] = int8_t(2 * (Q6 ? (2 * g + i / 16) % 8 : g) + i % 2);
  }
};
template <bool Q6>
constexpr ScalePick<Q6> kScalePick{};

// vpshufb controls of the decode tile's Head (Q4_K / Q5_K), whose scales and mins stay bytes
// sc0..7, m0..7 in each 128-bit half: pick[g] makes sc_g an int16 in every lane (odd bytes
// 0x80 give the zero high bytes), mins the pairs m0 m0 m1 m1 ... m7 m7 as int16.
struct BytePick {
  alignas(32) int8_t pick[8][32];
  alignas(32) int8_t mins[32];
  constexpr BytePick() : pick{}, mins{} {
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 32; ++i) pick[g][i] = int8_t(i % 2 ? -128 : g);
    for (int i = 0; i < 32; ++i) mins[i] = int8_t(i % 2 ? -128 : 8 + i / 4);
  }
};
constexpr BytePick kBytePick{};

template <TensorType TY>
struct KQuantK {
  static constexpr TensorType kType = TY;
  static constexpr bool kQ6 = TY == TensorType::Q6_K;
  // Prefill tiles only for the last rows of a range that no panel covers (KPanel); as the
  // prefill tile before the panels, 1 x 4 measured Q4_K +24 % over 2 x 2 (bench_matmul, Zen 4).
  static constexpr int kR = 1, kT = 4;
  static constexpr int64_t kBlockBytes =
      int64_t(TY == TensorType::Q4_K   ? sizeof(gguf::BlockQ4_K)
              : TY == TensorType::Q5_K ? sizeof(gguf::BlockQ5_K)
                                       : sizeof(gguf::BlockQ6_K));
  static constexpr int64_t kActBytes = 1;

  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t k = a.k, nb = k / 256;
    __m256 acc[R][T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      if (streamed<T>(a.n)) prefetch_ahead<R, kBlockBytes>(rows, b * kBlockBytes);
      __m256i isum[R][T];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      Head h[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) h[r] = head(rows[r], b);
      #pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {  // 8 groups of 32 elements
        __m256i wq[R], scv[R];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          wq[r] = group_codes(rows[r], b, g, m0f);
          scv[r] = head_scales(h[r], g);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256i av = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(a.q + (t0 + t) * k + b * 256 + g * 32));
          __m256i off = _mm256_setzero_si256();
          if constexpr (kQ6) off = _mm256_maddubs_epi16(_mm256_set1_epi8(32), av);
          #pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            __m256i p16 = _mm256_maddubs_epi16(wq[r], av);
            if constexpr (kQ6) p16 = _mm256_sub_epi16(p16, off);
            isum[r][t] = dot2_acc(isum[r][t], p16, scv[r]);
            // Kept a chain: GCC otherwise reassociates the 8 groups' integer sums into a
            // tree and spills the products it holds for it.
            __asm__("" : "+x"(isum[r][t]));
          }
        }
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const __m256 ad = _mm256_broadcast_ss(a.d + tt * nb + b);
        __m256i bs = _mm256_setzero_si256();
        if constexpr (!kQ6)
          bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + tt * (k / 16) + b * 16));
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = head_fma(acc[r][t], isum[r][t], h[r], ad, bs);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r * T + t] = tree8(acc[r][t]);
  }

  // A row's super-block header as the decode tile keeps it, made once for all of the tile's
  // tokens: the scales and mins by k4_scales_mins, d and dmin by one vcvtph2ps (two scalar
  // f16 conversions in block_header, which the panel's fill keeps).
  //   s:  head_scales' operand: Q4_K / Q5_K sc0..7, m0..7 as bytes in each 128-bit half of
  //       s[0]; Q6_K scales16's two vectors.
  //   dm: d, dmin (Q4_K / Q5_K; 0 for Q6_K) as floats in lanes 0 and 1.
  struct Head {
    __m256i s[2];
    __m128 dm;
  };

  static Head head(const uint8_t* row, int64_t b) {
    Head h;
    const uint8_t* blk = row + b * kBlockBytes;
    if constexpr (kQ6) {
      const auto* q6 = reinterpret_cast<const gguf::BlockQ6_K*>(blk);
      scales16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q6->scales)), h.s);
      h.dm = _mm_set_ss(h2f(reinterpret_cast<const uint8_t*>(&q6->d)));
    } else {
      const __m128i hd = k4_header(blk);
      h.s[0] = h.s[1] = _mm256_broadcastsi128_si256(k4_scales_mins(hd));
      h.dm = _mm_cvtph_ps(hd);
    }
    return h;
  }

  // The madd operand of group g (elements [32g, 32g + 32)) from a Head: the integers of
  // group_scales.
  static __m256i head_scales(const Head& h, int g) {
    if constexpr (kQ6) return group_scales(h.s, g);
    return _mm256_shuffle_epi8(
        h.s[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(kBytePick.pick[g])));
  }

  // One super-block's FMAs for one (row, token), in the canonical order: acc += (d * ad) *
  // isum, then for Q4_K / Q5_K acc += -(dmin * ad) * (mins . bs), bs the token's bsums of the
  // super-block. The products d * ad and dmin * ad are those of the scalars (a lane of a
  // broadcast), and fnmadd(p, x, acc) rounds -(p x) + acc once, as fma(-p, x, acc) did.
  static __m256 head_fma(__m256 acc, __m256i isum, const Head& h, __m256 ad, __m256i bs) {
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_broadcastss_ps(h.dm), ad), _mm256_cvtepi32_ps(isum), acc);
    if constexpr (!kQ6) {
      const __m256i mins2 = _mm256_shuffle_epi8(
          h.s[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(kBytePick.mins)));
      acc = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(h.dm)), ad),
                             _mm256_cvtepi32_ps(_mm256_madd_epi16(mins2, bs)), acc);
    }
    return acc;
  }

  // Super-block b's scales d and dmin (0 for Q6_K), its sub-block scales as bytes (Q4_K /
  // Q5_K: sc0..7, m0..7; Q6_K: 16 int8) and the mins as int16 pairs m0 m0 m1 m1 ... (Q4_K /
  // Q5_K, the madd operand against the bsums; 0 for Q6_K).
  static void block_header(const uint8_t* row, int64_t b, float* d, float* dmin, uint8_t* scb,
                           __m256i* mins2) {
    if constexpr (kQ6) {
      const auto* blk = reinterpret_cast<const gguf::BlockQ6_K*>(row) + b;
      *d = h2f(blk->d);
      *dmin = 0;
      std::memcpy(scb, blk->scales, 16);
      *mins2 = _mm256_setzero_si256();
    } else {
      const uint8_t* blk = row + b * kBlockBytes;
      *d = h2f(blk + offsetof(gguf::BlockQ4_K, d));
      *dmin = h2f(blk + offsetof(gguf::BlockQ4_K, dmin));
      const __m128i sm = k4_scales_mins(k4_header(blk));
      std::memcpy(scb, &sm, 16);
      *mins2 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
          sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
    }
  }

  // The sub-block scales as int16 for group_scales, once per super-block, from v, the scale
  // bytes of block_header (Q4_K / Q5_K sc0..7 first, Q6_K 16 int8): Q4_K / Q5_K sc0..7 in
  // each 128-bit half of s[0] (s[1] a copy); Q6_K scales 0-7 in both halves of s[0], 8-15 in
  // both halves of s[1].
  static void scales16(__m128i v, __m256i (&s)[2]) {
    if constexpr (kQ6) {
      s[0] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(v));
      s[1] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(v, 8)));
    } else {
      s[0] = s[1] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
    }
  }

  // The madd operand of group g (elements [32g, 32g + 32)): its sub-block scale(s) as int16,
  // one per product pair (Q6_K: the first 8 pairs take scale 2g, the last 8 scale 2g + 1).
  // One vpshufb of scales16's vectors: the same integers as a broadcast of the scale byte,
  // which took an extract, a move and a broadcast per group and row in a decode step.
  static __m256i group_scales(const __m256i (&s)[2], int g) {
    const __m256i pick = _mm256_load_si256(reinterpret_cast<const __m256i*>(kScalePick<kQ6>.b[g]));
    return _mm256_shuffle_epi8(s[kQ6 && g >= 4 ? 1 : 0], pick);
  }

  // The 32 codes of elements [32g, 32g + 32) of super-block b, unsigned, in logical order.
  static __m256i group_codes(const uint8_t* row, int64_t b, int g, __m256i m0f) {
    if constexpr (TY == TensorType::Q4_K || TY == TensorType::Q5_K) {
      const int c = g >> 1, hi = g & 1;
      const uint8_t* qs;
      if constexpr (TY == TensorType::Q4_K)
        qs = (reinterpret_cast<const gguf::BlockQ4_K*>(row) + b)->qs;
      else
        qs = (reinterpret_cast<const gguf::BlockQ5_K*>(row) + b)->qs;
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i v = _mm256_and_si256(hi ? _mm256_srli_epi16(q, 4) : q, m0f);
      if constexpr (TY == TensorType::Q5_K) {
        const auto* blk = reinterpret_cast<const gguf::BlockQ5_K*>(row) + b;
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh));
        v = _mm256_or_si256(v, _mm256_and_si256(bit_to(h, g, 4), _mm256_set1_epi8(0x10)));
      }
      return v;
    } else {
      // Q6_K: group g = 4h + gg holds elements 128h + 32gg + l (blocks.h).
      const int h = g >> 2, gg = g & 3;
      const auto* blk = reinterpret_cast<const gguf::BlockQ6_K*>(row) + b;
      const __m256i ql = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(blk->ql + 64 * h + 32 * (gg & 1)));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h));
      const __m256i lo = _mm256_and_si256(gg >= 2 ? _mm256_srli_epi16(ql, 4) : ql, m0f);
      return _mm256_or_si256(lo, _mm256_and_si256(bit_to(qh, 2 * gg, 4), _mm256_set1_epi8(0x30)));
    }
  }

  // The bits of every byte of v from bit `from` on moved to start at bit `to` (Q5_K: one bit,
  // g to 4; Q6_K: two, 2gg to 4), the byte's other bits arbitrary: one 16-bit shift, whose
  // bits crossing into the neighbouring byte never reach the moved ones there (a left shift
  // of at most `to`, a right one of at most 8 - to - the bits moved: here 0-4 left, 0-3
  // right). With a constant g (the decode tile's unrolled loop) an immediate shift, where a
  // shift, a mask and a shift back took three instructions.
  static __m256i bit_to(__m256i v, int from, int to) {
    if (from == to) return v;
    return from < to ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - from))
                     : _mm256_srl_epi16(v, _mm_cvtsi32_si128(from - to));
  }
};

// ---- Q4_K / Q5_K / Q6_K prefill: each row block decoded once per token chunk -------------
#include "ops/k_panel.h"

}  // namespace

void EMBER_KQUANT(q4_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y) {
  run_panels<KQuantK<TensorType::Q4_K>, KPanel<TensorType::Q4_K>>(W, a, r0, r1, y);
}
void EMBER_KQUANT(q5_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y) {
  run_panels<KQuantK<TensorType::Q5_K>, KPanel<TensorType::Q5_K>>(W, a, r0, r1, y);
}
void EMBER_KQUANT(q6_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y) {
  run_panels<KQuantK<TensorType::Q6_K>, KPanel<TensorType::Q6_K>>(W, a, r0, r1, y);
}

}  // namespace ember::ops::detail
