// AVX-512 (F, BW, VL, DQ) twins of the scalar reference kernels in kernels_scalar.cpp: the
// same canonical-v1 reduction order, so the same bits, only faster. Every weight type ember
// reads has a twin here. kernels_avx512vnni.cpp compiles this same file again with
// EMBER_KERNELS_VNNI (and -mavx512vnni): only dot4 / dot2_acc differ, with the same integers.
//
// This file is compiled with AVX-512 flags. To keep AVX-512 code out of the rest of the
// program it defines everything it uses in an anonymous namespace and calls no inline
// function of another header (the linker could otherwise keep this file's copy of a shared
// inline function for every caller, including on CPUs without AVX-512).
//
// Blocking: a tile of R weight rows x T tokens keeps R*T independent accumulators in
// registers, so one load of a weight block serves T tokens and R rows (prefill). Decode (one
// token) runs two far-apart rows instead, see run_tiles. Each accumulator still receives its
// contributions in the canonical order, so R and T never change a bit. The R and T loops
// carry `#pragma GCC unroll`: left alone, GCC 12 kept the larger tiles' accumulators in stack
// arrays (Q4_K decode ran at a third of its unrolled speed).
// GCC 12 reports the deliberately undefined upper half of _mm512_castsi256_si512 and friends
// as uninitialized (a false positive inside immintrin.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "gguf/blocks.h"
#include "ops/kernels.h"
#include "ops/prefetch.h"

namespace ember::ops::detail {
namespace {

using gguf::TensorType;

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Canonical trees (kernels_scalar.cpp): 16 lanes -> 8 -> 4 -> 2 -> 1.
inline float tree8(__m256 acc) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
inline float tree16(__m512 acc) {
  return tree8(_mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
}

// The tile of the zmm panels (Q32Zmm, KZmm): T <= 8 tokens as two groups of up to 4 (each
// group's 16 sums in registers), over chunks of P::kChunk blocks that stay in L1 while both
// groups pass; the accumulators wait in acc between chunks (their values; P::kLanes floats per
// row and token, a last odd token's slot included), then y[(t0 + t) * m + i + r] =
// P::reduce(acc, t, r).
template <class P, int T>
void zmm_panel_tile(const P& p, int64_t blocks, const Activations& a, int64_t t0, int64_t m,
                    int64_t i, float* y) {
  alignas(64) float acc[(T + 1) / 2 * 2][4][P::kLanes];
  for (int64_t c0 = 0; c0 < blocks; c0 += P::kChunk) {
    const int64_t c1 = c0 + P::kChunk < blocks ? c0 + P::kChunk : blocks;
    p.template group<(T < 4 ? T : 4)>(a, t0, c0, c1, acc);
    if constexpr (T > 4) p.template group<T - 4>(a, t0 + 4, c0, c1, acc + 4);
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) y[(t0 + t) * m + i + r] = P::reduce(acc, t, r);
}

// ---- The tile driver (ops/tile_driver.h, included here so that this file has its own copy;
// the L2 budget per token chunk is this path's tuned value, AVX2's follows the core's L2).
inline int64_t tile_l2_budget() { return int64_t{384} << 10; }
#include "ops/tile_driver.h"

// ---- F32 / F16 / BF16: 16 lanes, element j in lane j % 16, fma in increasing j ------------
template <TensorType TY>
inline __m512 load_w(const uint8_t* row, int64_t j) {
  if constexpr (TY == TensorType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + j);
  } else if constexpr (TY == TensorType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * j)));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * j));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
template <TensorType TY>
inline __m512 load_w_masked(const uint8_t* row, int64_t j, __mmask16 m) {
  if constexpr (TY == TensorType::F32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + j);
  } else if constexpr (TY == TensorType::F16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * j));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * j);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <TensorType TY>
struct FloatK {
  static constexpr TensorType kType = TY;
  static constexpr int64_t kElemBytes = TY == TensorType::F32 ? 4 : 2;
  static constexpr int kR = 4, kT = 4;
  static constexpr int64_t kActBytes = 4;
  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t k = a.k;
    const float* x[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) x[t] = a.f32 + (t0 + t) * k;
    __m512 acc[R][T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      if (streamed<T>(a.n)) prefetch_ahead<R, 16 * kElemBytes>(rows, j * kElemBytes);
      __m512 w[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) w[r] = load_w<TY>(rows[r], j);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_loadu_ps(x[t] + j);
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], xv, acc[r][t]);
      }
    }
    if (j < k) {  // tail: lanes without an element keep their value (mask3 keeps acc)
      const __mmask16 m = __mmask16((1u << (k - j)) - 1);
      __m512 w[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) w[r] = load_w_masked<TY>(rows[r], j, m);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + j);
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_mask3_fmadd_ps(w[r], xv, acc[r][t], m);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r * T + t] = tree16(acc[r][t]);
  }
};

float dot_f32_avx512(const float* a, const float* b, int64_t k) {
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc);
  if (j < k) {
    const __mmask16 m = __mmask16((1u << (k - j)) - 1);
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j),
                                acc, m);
  }
  return tree16(acc);
}

// ---- Q8_0 / Q4_0 / Q5_0: signed 32-blocks against Q8_0-style activations -----------------
// Two blocks per zmm: int32 lanes 0-7 hold block b's isum[0..7], lanes 8-15 block b+1's, so
// the float accumulator's low half takes the even blocks and its high half the odd ones,
// exactly the scalar acc[8 * (b & 1) + l].
// Field offsets of the 32-block types (gguf/blocks.h): d at 0; m at 2 (Q4_1 / Q5_1).
template <TensorType TY>
struct Layout32 {
  static constexpr bool kMin = TY == TensorType::Q4_1 || TY == TensorType::Q5_1;
  static constexpr bool kHigh = TY == TensorType::Q5_0 || TY == TensorType::Q5_1;
  static constexpr int kBytes = TY == TensorType::Q8_0 ? 34 : TY == TensorType::Q4_0 ? 18
                              : TY == TensorType::Q4_1 ? 20 : TY == TensorType::Q5_0 ? 22 : 24;
  static constexpr int kQh = kMin ? 4 : 2;             // Q5_0 / Q5_1
  static constexpr int kQs = 2 + (kMin ? 2 : 0) + (kHigh ? 4 : 0);
  static constexpr int kOffset = TY == TensorType::Q4_0 ? 8 : TY == TensorType::Q5_0 ? 16 : 0;
};
static_assert(Layout32<TensorType::Q4_0>::kBytes == sizeof(gguf::BlockQ4_0));
static_assert(Layout32<TensorType::Q4_1>::kBytes == sizeof(gguf::BlockQ4_1));
static_assert(Layout32<TensorType::Q5_0>::kBytes == sizeof(gguf::BlockQ5_0));
static_assert(Layout32<TensorType::Q5_1>::kBytes == sizeof(gguf::BlockQ5_1));
static_assert(Layout32<TensorType::Q8_0>::kBytes == sizeof(gguf::BlockQ8_0));
static_assert(Layout32<TensorType::Q5_1>::kQs == offsetof(gguf::BlockQ5_1, qs));
static_assert(Layout32<TensorType::Q5_0>::kQs == offsetof(gguf::BlockQ5_0, qs));
static_assert(Layout32<TensorType::Q4_1>::kQs == offsetof(gguf::BlockQ4_1, qs));
static_assert(Layout32<TensorType::Q5_1>::kQh == offsetof(gguf::BlockQ5_1, qh));

// The codes of blocks b and b + 1 in logical order (block b in the low 256 bits) and their
// scales (and mins). Signed for Q8_0 / Q4_0 / Q5_0 (offset removed), unsigned for Q4_1 /
// Q5_1. Nibble types unpack both blocks at once: 128-bit lanes [qs_b, qs_b, qs_b1, qs_b1],
// shifted right by 0 / 4 / 0 / 4 bits.
template <TensorType TY>
inline __m512i codes64(const uint8_t* row, int64_t b, float* d, float* m) {
  using L = Layout32<TY>;
  const uint8_t* p0 = row + b * L::kBytes;
  const uint8_t* p1 = p0 + L::kBytes;
  d[0] = h2f(p0);
  d[1] = h2f(p1);
  if constexpr (L::kMin) {
    m[0] = h2f(p0 + 2);
    m[1] = h2f(p1 + 2);
  }
  if constexpr (TY == TensorType::Q8_0) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)), 1);
  } else {
    const __m256i y0 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + L::kQs)));
    const __m256i y1 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + L::kQs)));
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1);
    const __m512i shifts = _mm512_set_epi32(0x40004, 0x40004, 0x40004, 0x40004, 0, 0, 0, 0,
                                            0x40004, 0x40004, 0x40004, 0x40004, 0, 0, 0, 0);
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(v, shifts), _mm512_set1_epi8(0x0F));
    if constexpr (L::kHigh) {
      uint32_t h0, h1;
      std::memcpy(&h0, p0 + L::kQh, 4);
      std::memcpy(&h1, p1 + L::kQh, 4);
      const __mmask64 hm = __mmask64(h0) | (__mmask64(h1) << 32);
      if constexpr (L::kOffset == 16)  // Q5_0: (lo | 16 h) - 16 is lo where h, lo - 16 elsewhere
        return _mm512_mask_sub_epi8(q, ~hm, q, _mm512_set1_epi8(16));
      q = _mm512_or_si512(q, _mm512_maskz_mov_epi8(hm, _mm512_set1_epi8(0x10)));
    }
    if constexpr (L::kOffset != 0) q = _mm512_sub_epi8(q, _mm512_set1_epi8(L::kOffset));
    return q;
  }
}

// The f16 scales of blocks b and b + 1 as 16 f32 lanes (8 + 8), converted in one vcvtph2ps:
// the same exact values as two scalar conversions and broadcasts, in a third of the uops.
template <TensorType TY>
inline __m512 scales64(const uint8_t* row, int64_t b) {
  const uint8_t* p0 = row + b * Layout32<TY>::kBytes;
  uint16_t h0, h1;
  std::memcpy(&h0, p0, 2);
  std::memcpy(&h1, p0 + Layout32<TY>::kBytes, 2);
  const __m128i v0 = _mm_set1_epi16(int16_t(h0)), v1 = _mm_set1_epi16(int16_t(h1));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(v0), v1, 1));
}

// One block (the last of an odd count) in the low 256 bits.
template <TensorType TY>
inline __m256i codes32(const uint8_t* row, int64_t b, float* d, float* m) {
  using L = Layout32<TY>;
  const uint8_t* p = row + b * L::kBytes;
  *d = h2f(p);
  if constexpr (L::kMin) *m = h2f(p + 2);
  if constexpr (TY == TensorType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + L::kQs));
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    if constexpr (L::kHigh) {
      uint32_t h;
      std::memcpy(&h, p + L::kQh, 4);
      if constexpr (L::kOffset == 16)  // Q5_0, as in codes64
        return _mm256_mask_sub_epi8(q, __mmask32(~h), q, _mm256_set1_epi8(16));
      q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(__mmask32(h), _mm256_set1_epi8(0x10)));
    }
    if constexpr (L::kOffset != 0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(L::kOffset));
    return q;
  }
}

// Exact integer dot products: int32 lane i = sum over bytes 4i..4i+3 of u[j] * s[j] (u
// unsigned, s signed), and acc + the sum of the two int16 products of lane i. Without VNNI
// through maddubs (whose int16 saturation never triggers here: |u| <= 128 against |s| <= 127,
// or u <= 63) and madd; with VNNI in one instruction. Same integers either way.
inline __m512i dot4(__m512i u, __m512i s, __m512i ones16) {
#ifdef EMBER_KERNELS_VNNI
  (void)ones16;
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), ones16);
#endif
}
inline __m512i dot2_acc(__m512i acc, __m512i a16, __m512i b16) {
#ifdef EMBER_KERNELS_VNNI
  return _mm512_dpwssd_epi32(acc, a16, b16);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a16, b16));
#endif
}

// Scalar fma without leaving the vector unit (and without a libm call).
inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Q4_1 / Q5_1 codes are unsigned (< 32), so the sign trick below leaves them as they are;
// their min term follows the scalar order: macc = fma(m_b, ad_b * float(asum_b), macc) per
// block in order, result tree16(acc) + macc.
template <TensorType TY>
struct Q32K {
  static constexpr TensorType kType = TY;
  static constexpr bool kMin = Layout32<TY>::kMin;
  static constexpr int kR = 4, kT = 3;
  static constexpr int64_t kActBytes = 2;  // q and d8
  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t k = a.k, nb = k / 32;
    __m512 acc[R][T];
    float macc[R][T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps(), macc[r][t] = 0.0f;
    const __m512i ones = _mm512_set1_epi16(1);
    const __m512i zero = _mm512_setzero_si512();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      if (streamed<T>(a.n))
        prefetch_ahead<R, 2 * Layout32<TY>::kBytes>(rows, b * Layout32<TY>::kBytes);
      __m512i aw[R];
      __mmask64 neg[R];
      __m512 wd[R];
      float wm[R][2];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float d[2];
        const __m512i w = codes64<TY>(rows[r], b, d, wm[r]);
        aw[r] = _mm512_abs_epi8(w);
        neg[r] = _mm512_movepi8_mask(w);
        wd[r] = scales64<TY>(rows[r], b);
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const __m512i av = _mm512_loadu_si512(a.q + tt * k + b * 32);
        const __m512 ad = _mm512_loadu_ps(a.d8 + (tt * nb + b) * 8);
        float s0 = 0, s1 = 0;
        if constexpr (kMin) {
          s0 = a.d[tt * nb + b] * float(a.sum[tt * nb + b]);
          s1 = a.d[tt * nb + b + 1] * float(a.sum[tt * nb + b + 1]);
        }
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i sa = _mm512_mask_sub_epi8(av, neg[r], zero, av);
          const __m512i p = dot4(aw[r], sa, ones);
          acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ad), _mm512_cvtepi32_ps(p), acc[r][t]);
          if constexpr (kMin) {
            macc[r][t] = fma1(wm[r][0], s0, macc[r][t]);
            macc[r][t] = fma1(wm[r][1], s1, macc[r][t]);
          }
        }
      }
    }
    if (b < nb) {  // a last even block: low half only
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float d0, m0 = 0;
        const __m512i w = _mm512_castsi256_si512(codes32<TY>(rows[r], b, &d0, &m0));
        const __m512i aw = _mm512_abs_epi8(w);
        const __mmask64 neg = _mm512_movepi8_mask(w) & 0xFFFFFFFFull;
        const __m512 wd = _mm512_set1_ps(d0);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int64_t tt = t0 + t;
          const __m512i av = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a.q + tt * k + b * 32);
          const __m512 ad = _mm512_maskz_loadu_ps(0x00FF, a.d8 + (tt * nb + b) * 8);
          const __m512i sa = _mm512_mask_sub_epi8(av, neg, zero, av);
          const __m512i p = dot4(aw, sa, ones);
          acc[r][t] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(wd, ad), _mm512_cvtepi32_ps(p),
                                            acc[r][t], 0x00FF);
          if constexpr (kMin)
            macc[r][t] = fma1(m0, a.d[tt * nb + b] * float(a.sum[tt * nb + b]), macc[r][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        float v = tree16(acc[r][t]);
        if constexpr (kMin) v = v + macc[r][t];
        out[r * T + t] = v;
      }
  }
};

#ifdef EMBER_KERNELS_VNNI
// The VNNI twin of Q32K: one vpdpbusd per (row, token, block pair), no per-token sign work.
// vpdpbusd multiplies unsigned by signed bytes without saturation, so:
// - signed codes (Q8_0 / Q4_0 / Q5_0, |w| <= 128): the activations enter as u = q + 128
//   (q ^ 0x80, once per token and block pair, shared by the R rows), and the accumulator
//   starts at -128 * (sum of the lane's 4 codes), made once per row and block pair:
//   -128 sum w + sum (q + 128) w = sum q w, the exact isum;
// - unsigned codes (Q4_1 / Q5_1, < 32): the codes are the unsigned operand as they are.
// The integers are those of Q32K, and the float part is the same operations in the same
// order. (Measured on Zen 4, bench_matmul 512 q8_0, 1 thread: +7 % over Q32K with VNNI;
// one ymm per block with the scale products made for 8 tokens at once and broadcast from a
// stack buffer was 15 % slower than Q32K, with a vmulps per (row, token) as fast as this.)
template <TensorType TY>
struct Q32Vnni {
  static constexpr TensorType kType = TY;
  static constexpr bool kMin = Layout32<TY>::kMin;
  static constexpr int kR = 4, kT = 3;
  static constexpr int64_t kActBytes = 2;  // q and d8
  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t k = a.k, nb = k / 32;
    __m512 acc[R][T];
    float macc[R][T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps(), macc[r][t] = 0.0f;
    const __m512i x80 = _mm512_set1_epi8(char(0x80));
    const __m512i zero = _mm512_setzero_si512();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      if (streamed<T>(a.n))
        prefetch_ahead<R, 2 * Layout32<TY>::kBytes>(rows, b * Layout32<TY>::kBytes);
      __m512i w[R], bias[R];
      __m512 wd[R];
      float wm[R][2];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float d[2];
        w[r] = codes64<TY>(rows[r], b, d, wm[r]);
        if constexpr (!kMin) bias[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, w[r]));
        wd[r] = scales64<TY>(rows[r], b);
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const __m512i av = _mm512_loadu_si512(a.q + tt * k + b * 32);
        const __m512 ad = _mm512_loadu_ps(a.d8 + (tt * nb + b) * 8);
        const __m512i u = kMin ? av : _mm512_xor_si512(av, x80);
        float s0 = 0, s1 = 0;
        if constexpr (kMin) {
          s0 = a.d[tt * nb + b] * float(a.sum[tt * nb + b]);
          s1 = a.d[tt * nb + b + 1] * float(a.sum[tt * nb + b + 1]);
        }
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i p = kMin ? _mm512_dpbusd_epi32(zero, w[r], av)
                                 : _mm512_dpbusd_epi32(bias[r], u, w[r]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ad), _mm512_cvtepi32_ps(p), acc[r][t]);
          if constexpr (kMin) {
            macc[r][t] = fma1(wm[r][0], s0, macc[r][t]);
            macc[r][t] = fma1(wm[r][1], s1, macc[r][t]);
          }
        }
      }
    }
    if (b < nb) {  // a last even block: low half only
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float d0, m0 = 0;
        const __m512i w = _mm512_zextsi256_si512(codes32<TY>(rows[r], b, &d0, &m0));
        const __m512i bias = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, w));
        const __m512 wd = _mm512_set1_ps(d0);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int64_t tt = t0 + t;
          const __m512i av = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a.q + tt * k + b * 32);
          const __m512 ad = _mm512_maskz_loadu_ps(0x00FF, a.d8 + (tt * nb + b) * 8);
          const __m512i p = kMin ? _mm512_dpbusd_epi32(zero, w, av)
                                 : _mm512_dpbusd_epi32(bias, _mm512_xor_si512(av, x80), w);
          acc[r][t] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(wd, ad), _mm512_cvtepi32_ps(p),
                                            acc[r][t], 0x00FF);
          if constexpr (kMin)
            macc[r][t] = fma1(m0, a.d[tt * nb + b] * float(a.sum[tt * nb + b]), macc[r][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        float v = tree16(acc[r][t]);
        if constexpr (kMin) v = v + macc[r][t];
        out[r * T + t] = v;
      }
  }
};
template <TensorType TY>
using Q32Best = Q32Vnni<TY>;
#include "ops/q32_zmm_panel.h"
#else
template <TensorType TY>
using Q32Best = Q32K<TY>;
#endif

// ---- Q4_K / Q5_K / Q6_K against Q8_K-style activations -----------------------------------
// A super-block is 4 chunks of 64 elements; one zmm holds a chunk's 64 codes in logical
// order. maddubs + madd against the sub-block scales gives 16 int32 lanes, lane i covering
// chunk elements 4i..4i+3, i.e. canonical lane i % 8; lanes i and i + 8 are folded (exact
// integer add) at the end of the super-block, then the float part follows the scalar order.

// k4_scales_mins and k4_header: the Q4_K / Q5_K scales and mins as bytes by vector ops,
// widened here to the 16 int16 sc0..sc7, m0..m7 of the zmm code's madd operand.
#include "ops/k4_scales.h"

template <TensorType TY>
struct KQuantK {
  static constexpr TensorType kType = TY;
  static constexpr bool kQ6 = TY == TensorType::Q6_K;
  static constexpr int kR = kQ6 ? 2 : 1, kT = kQ6 ? 4 : 8;  // bench_matmul, Zen 4: Q4_K +8 % at 1 x 8
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
    const __m512i m0f = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      if (streamed<T>(a.n)) prefetch_ahead<R, kBlockBytes>(rows, b * kBlockBytes);
      __m512i isum[R][T];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
      float d[R], dmin[R];
      __m512i sc16[R];   // the block's sub-block scales as int16 in the low lanes
      __m256i mins2[R];  // Q4_K/Q5_K: m0,m0,m1,m1,...,m7,m7
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (kQ6) {
          const auto* blk = reinterpret_cast<const gguf::BlockQ6_K*>(rows[r]) + b;
          d[r] = h2f(blk->d);
          dmin[r] = 0;
          sc16[r] = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales))));
          mins2[r] = _mm256_setzero_si256();
        } else {
          // Q4_K and Q5_K share the d, dmin, scales prefix; only the block size differs.
          const uint8_t* blk = rows[r] + b * kBlockBytes;
          const __m128i hd = k4_header(blk);
          const __m128 dm = _mm_cvtph_ps(hd);  // d, dmin
          d[r] = _mm_cvtss_f32(dm);
          dmin[r] = _mm_cvtss_f32(_mm_movehdup_ps(dm));
          const __m256i sm = _mm256_cvtepu8_epi16(k4_scales_mins(hd));
          sc16[r] = _mm512_castsi256_si512(sm);
          mins2[r] = _mm256_permutexvar_epi16(
              _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), sm);
        }
      }
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m512i wq[R], scv[R];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          wq[r] = chunk_codes(rows[r], b, c, m0f);
          // int16 lane i (elements 2i, 2i+1) takes the scale of its sub-block.
          const __m512i idx =
              kQ6 ? _mm512_add_epi16(_mm512_set1_epi16(int16_t(4 * c)),
                                     _mm512_srli_epi16(lane_index16(), 3))
                  : _mm512_add_epi16(_mm512_set1_epi16(int16_t(2 * c)),
                                     _mm512_srli_epi16(lane_index16(), 4));
          scv[r] = _mm512_permutexvar_epi16(idx, sc16[r]);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_loadu_si512(a.q + (t0 + t) * k + b * 256 + c * 64);
          __m512i off = _mm512_setzero_si512();
          if constexpr (kQ6) off = _mm512_maddubs_epi16(_mm512_set1_epi8(32), av);
          #pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            __m512i p16 = _mm512_maddubs_epi16(wq[r], av);
            if constexpr (kQ6) p16 = _mm512_sub_epi16(p16, off);
            isum[r][t] = dot2_acc(isum[r][t], p16, scv[r]);
            // A chain, as in kernels_kquants_avx2.cpp (GCC would make the sums a tree).
            __asm__("" : "+v"(isum[r][t]));
          }
        }
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const float ad = a.d[(t0 + t) * nb + b];
        const __m256i bs = block_bsums(a, t0 + t, b);
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = finish(isum[r][t], d[r], dmin[r], ad, mins2[r], bs, acc[r][t]);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r * T + t] = tree8(acc[r][t]);
  }

  // Token t's 16 bsums of super-block b (Q4_K / Q5_K; zero for Q6_K, which has no mins).
  static __m256i block_bsums(const Activations& a, int64_t t, int64_t b) {
    if constexpr (kQ6) return _mm256_setzero_si256();
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.k / 16) + b * 16));
  }

  // A super-block's float part for one row and token, in the scalar order: the 16 int32
  // sums folded to 8 (lanes i and i + 8), acc + (d * ad) * sum, then (Q4_K / Q5_K) minus
  // (dmin * ad) * (mins . bsums). (KZmm computes the same values with its products in tables.)
  static __m256 finish(__m512i isum, float d, float dmin, float ad, __m256i mins2, __m256i bs,
                       __m256 acc) {
    const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d * ad), _mm256_cvtepi32_ps(i8), acc);
    if constexpr (!kQ6)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(-(dmin * ad)),
                            _mm256_cvtepi32_ps(_mm256_madd_epi16(mins2, bs)), acc);
    return acc;
  }

  static __m512i lane_index16() {
    return _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                            14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  }

  // The 64 codes of chunk c of super-block b, in logical order, as unsigned bytes.
  static __m512i chunk_codes(const uint8_t* row, int64_t b, int c, __m512i m0f) {
    if constexpr (TY == TensorType::Q4_K) {
      const auto* blk = reinterpret_cast<const gguf::BlockQ4_K*>(row) + b;
      const __m512i q = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * c)));
      // low half: low nibbles (elements 64c..64c+31), high half: high nibbles.
      return _mm512_and_si512(_mm512_srlv_epi16(q, shift_pair(0, 4)), m0f);
    } else if constexpr (TY == TensorType::Q5_K) {
      const auto* blk = reinterpret_cast<const gguf::BlockQ5_K*>(row) + b;
      const __m512i q = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * c)));
      const __m512i h = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh)));
      const __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(q, shift_pair(0, 4)), m0f);
      const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(h, shift_pair(2 * c, 2 * c + 1)),
                                          _mm512_set1_epi8(1));
      return _mm512_or_si512(lo, _mm512_slli_epi16(hb, 4));
    } else {
      // Q6_K chunk c = (half h, part p): elements 128h + 64p + [0, 64) are groups g = 2p and
      // 2p + 1 (blocks.h), low nibbles of ql[64h..] for p = 0, high nibbles for p = 1.
      const int h = c >> 1, p = c & 1;
      const auto* blk = reinterpret_cast<const gguf::BlockQ6_K*>(row) + b;
      const __m512i ql = _mm512_loadu_si512(blk->ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h)));
      const __m512i lo = _mm512_and_si512(p ? _mm512_srli_epi16(ql, 4) : ql, m0f);
      const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, shift_pair(4 * p, 4 * p + 2)),
                                          _mm512_set1_epi8(3));
      return _mm512_or_si512(lo, _mm512_slli_epi16(hb, 4));
    }
  }

  // Per-16-bit-lane shift counts: s0 for the low 256 bits, s1 for the high 256 bits.
  static __m512i shift_pair(int s0, int s1) {
    return _mm512_inserti64x4(_mm512_set1_epi16(int16_t(s0)), _mm256_set1_epi16(int16_t(s1)), 1);
  }
};

#include "ops/k_zmm_panel.h"

KernelTable make_table() {
  KernelTable t = scalar_kernels();
  t.dot_f32 = dot_f32_avx512;
  t.f32 = run_tiles<FloatK<TensorType::F32>>;
  t.f16 = run_tiles<FloatK<TensorType::F16>>;
  t.bf16 = run_tiles<FloatK<TensorType::BF16>>;
#ifdef EMBER_KERNELS_VNNI
  t.q8_0 = run_panels<Q32Best<TensorType::Q8_0>, Q32Zmm<TensorType::Q8_0>>;
  t.q4_0 = run_panels<Q32Best<TensorType::Q4_0>, Q32Zmm<TensorType::Q4_0>>;
  t.q5_0 = run_panels<Q32Best<TensorType::Q5_0>, Q32Zmm<TensorType::Q5_0>>;
#else
  t.q8_0 = run_tiles<Q32Best<TensorType::Q8_0>>;
  t.q4_0 = run_tiles<Q32Best<TensorType::Q4_0>>;
  t.q5_0 = run_tiles<Q32Best<TensorType::Q5_0>>;
#endif
  t.q4_1 = run_tiles<Q32Best<TensorType::Q4_1>>;
  t.q5_1 = run_tiles<Q32Best<TensorType::Q5_1>>;
  t.q4_k = run_panels<KQuantK<TensorType::Q4_K>, KZmm<TensorType::Q4_K>>;
  t.q5_k = run_panels<KQuantK<TensorType::Q5_K>, KZmm<TensorType::Q5_K>>;
  t.q6_k = run_panels<KQuantK<TensorType::Q6_K>, KZmm<TensorType::Q6_K>>;
  return t;
}

}  // namespace

#ifdef EMBER_KERNELS_VNNI
const KernelTable& avx512vnni_kernels() {
#else
const KernelTable& avx512_kernels() {
#endif
  static const KernelTable table = make_table();
  return table;
}

}  // namespace ember::ops::detail
