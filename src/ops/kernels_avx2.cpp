// AVX2+FMA twins of the scalar reference kernels in kernels_scalar.cpp: the same canonical-v1
// reduction order, so the same bits, only faster. Every weight type ember reads has a twin:
// the float and 32-block types here, the K quants in kernels_kquants_avx2.cpp, with the tile
// and panel drivers both use in kernels_avx2_driver.h.
//
// Compiled with AVX2 flags: like kernels_avx512.cpp it keeps everything in an anonymous
// namespace (the driver header's too) and calls no inline function of another header, so no
// AVX2 code can leak into callers on other paths through the linker's choice of inline copies.
//
// The 16 canonical f32 lanes are two ymm registers (lanes 0-7 and 8-15); the 32-block types
// keep the even blocks in the first and the odd blocks in the second, exactly the scalar
// acc[8 * (b & 1) + l]. Tiles of R rows x T tokens, two far-apart rows for decode, loops unrolled,
// as in the AVX-512 file; the prefill of Q8_0 / Q4_0 / Q5_0 (and of the K quants) runs on row
// panels, 4 rows decoded once per token chunk (Q32Panel here, Q32Vnni in the VNNI builds,
// KPanel for the K quants).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gguf/blocks.h"
#include "ops/kernels_avx2_driver.h"

namespace ember::ops::detail {
namespace {

using gguf::TensorType;

// ---- F32 / F16 / BF16 --------------------------------------------------------------------
template <TensorType TY>
inline __m256 load_w8(const uint8_t* row, int64_t j) {
  if constexpr (TY == TensorType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + j);
  } else if constexpr (TY == TensorType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * j)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * j));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <TensorType TY>
struct FloatK {
  static constexpr TensorType kType = TY;
  static constexpr int kElemBytes = TY == TensorType::F32 ? 4 : 2;
  static constexpr int kR = 2, kT = 2;
  static constexpr int64_t kActBytes = 4;
  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t k = a.k;
    const float* x[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) x[t] = a.f32 + (t0 + t) * k;
    __m256 acc[R][T][2];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      if (streamed<T>(a.n)) prefetch_ahead<R, 16 * kElemBytes>(rows, j * kElemBytes);
      __m256 w[R][2];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        w[r][0] = load_w8<TY>(rows[r], j);
        w[r][1] = load_w8<TY>(rows[r], j + 8);
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 x0 = _mm256_loadu_ps(x[t] + j), x1 = _mm256_loadu_ps(x[t] + j + 8);
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc[r][t][0] = _mm256_fmadd_ps(w[r][0], x0, acc[r][t][0]);
          acc[r][t][1] = _mm256_fmadd_ps(w[r][1], x1, acc[r][t][1]);
        }
      }
    }
    if (j < k) {  // tail: zero-padded copies; lanes without an element keep their value
      const int rem = int(k - j);
      const __m256 m0 = tail_mask(rem, 0), m1 = tail_mask(rem, 1);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        alignas(32) uint8_t wbuf[16 * 4] = {};
        std::memcpy(wbuf, rows[r] + j * kElemBytes, size_t(rem) * kElemBytes);
        const __m256 w0 = load_w8<TY>(wbuf, 0), w1 = load_w8<TY>(wbuf, 8);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          alignas(32) float xbuf[16] = {};
          std::memcpy(xbuf, x[t] + j, size_t(rem) * 4);
          const __m256 x0 = _mm256_load_ps(xbuf), x1 = _mm256_load_ps(xbuf + 8);
          acc[r][t][0] = _mm256_blendv_ps(acc[r][t][0], _mm256_fmadd_ps(w0, x0, acc[r][t][0]), m0);
          acc[r][t][1] = _mm256_blendv_ps(acc[r][t][1], _mm256_fmadd_ps(w1, x1, acc[r][t][1]), m1);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r * T + t] = tree16(acc[r][t][0], acc[r][t][1]);
  }
};

float dot_f32_avx2(const float* a, const float* b, int64_t k) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), hi);
  }
  if (j < k) {
    const int rem = int(k - j);
    alignas(32) float ab[16] = {}, bb[16] = {};
    std::memcpy(ab, a + j, size_t(rem) * 4);
    std::memcpy(bb, b + j, size_t(rem) * 4);
    lo = _mm256_blendv_ps(lo, _mm256_fmadd_ps(_mm256_load_ps(ab), _mm256_load_ps(bb), lo),
                          tail_mask(rem, 0));
    hi = _mm256_blendv_ps(hi, _mm256_fmadd_ps(_mm256_load_ps(ab + 8), _mm256_load_ps(bb + 8), hi),
                          tail_mask(rem, 1));
  }
  return tree16(lo, hi);
}

// ---- Q8_0 / Q4_0 / Q5_0 ------------------------------------------------------------------
// Bit j of x -> byte j as 0xFF / 0x00.
inline __m256i bits_to_bytes(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                        2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(x)), shuf), bit);
  return _mm256_cmpeq_epi8(v, bit);
}

// Field offsets of the 32-block types (gguf/blocks.h): d at 0; m at 2 (Q4_1 / Q5_1).
template <TensorType TY>
struct Layout32 {
  static constexpr bool kMin = TY == TensorType::Q4_1 || TY == TensorType::Q5_1;
  static constexpr bool kHigh = TY == TensorType::Q5_0 || TY == TensorType::Q5_1;
  static constexpr int kBytes = TY == TensorType::Q8_0 ? 34 : TY == TensorType::Q4_0 ? 18
                              : TY == TensorType::Q4_1 ? 20 : TY == TensorType::Q5_0 ? 22 : 24;
  static constexpr int kQh = kMin ? 4 : 2;
  static constexpr int kQs = 2 + (kMin ? 2 : 0) + (kHigh ? 4 : 0);
  static constexpr int kOffset = TY == TensorType::Q4_0 ? 8 : TY == TensorType::Q5_0 ? 16 : 0;
};
static_assert(Layout32<TensorType::Q5_1>::kBytes == sizeof(gguf::BlockQ5_1));
static_assert(Layout32<TensorType::Q4_1>::kBytes == sizeof(gguf::BlockQ4_1));
static_assert(Layout32<TensorType::Q5_1>::kQs == offsetof(gguf::BlockQ5_1, qs));
static_assert(Layout32<TensorType::Q5_0>::kQs == offsetof(gguf::BlockQ5_0, qs));

// The 32 codes of block b in logical order: signed for Q8_0 / Q4_0 / Q5_0 (offset removed),
// unsigned for Q4_1 / Q5_1; and the block's scale (and min).
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
      uint32_t qh;
      std::memcpy(&qh, p + L::kQh, 4);
      if constexpr (L::kOffset == 16)  // Q5_0: (lo | 16 h) - 16 is lo where h, lo - 16 elsewhere
        return _mm256_sub_epi8(q, _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8(16)));
      q = _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    if constexpr (L::kOffset != 0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(L::kOffset));
    return q;
  }
}

inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Broadcast lane I of each 128-bit half (shufps with an immediate; r below is an unrolled
// loop index, so the switch folds away).
template <int I>
inline __m256 lane_bcast(__m256 v) { return _mm256_shuffle_ps(v, v, I * 0x55); }
inline __m256 lane_bcast(__m256 v, int r) {
  switch (r) {
    case 0: return lane_bcast<0>(v);
    case 1: return lane_bcast<1>(v);
    case 2: return lane_bcast<2>(v);
    default: return lane_bcast<3>(v);
  }
}

// Q4_1 / Q5_1 codes are unsigned, so the sign trick leaves them as they are; their min term
// follows the scalar order (macc per block in order, result tree16(acc) + macc).
//
// Prefill tiles (T > 1) take the blocks in two passes, the even blocks (lanes 0-7) and then
// the odd ones (lanes 8-15): the two halves of the canonical accumulators are independent
// chains, each still walked in increasing block order, so the bits are those of the one-pass
// loop, while only one ymm per (row, token) is live and the tile can hold more rows (each
// activation load and sign then serve R rows). The R rows' scales of a block are converted
// in one vcvtph2ps and multiplied by a token's scale in one vmulps; a shufps puts row r's
// product in every lane. Decode (T = 1) keeps the one-pass loop over two far-apart rows.
template <TensorType TY>
struct Q32K {
  static constexpr TensorType kType = TY;
  static constexpr bool kMin = Layout32<TY>::kMin;
  // bench_matmul 1 avx2 512, Zen 4, best of 5: q8_0 / q5_0 GOP/s 65 / 53 with the one-pass
  // 1 x 4 tile this replaced; two passes at 2 x 4: 73 / 56, 3 x 4: 80 / 60, 4 x 3: 83 / 63.
  // The VNNI builds (bias trick below) take 6 tokens: bench_matmul 1 avxvnni-evex 512 q8_0,
  // AMD EPYC Zen 4, a loaded machine, process CPU time, GOP/s: 4 x 3 97, 3 x 4 102, 4 x 4 104,
  // 4 x 5 111, 4 x 6 113, 4 x 8 112 (avx2 at 4 x 3 86, and 85-86 at 4 x 4 and 4 x 6: its
  // maddubs + madd + fma per 32 MACs keep two vector ports busy whatever the tile).
  static constexpr int kR = 4, kT = EMBER_AVX2_VNNI ? 6 : 3;
  static constexpr int64_t kActBytes = 1;
  template <int R, int T>
  static void tile(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    static_assert(R <= 4);
    if constexpr (T == 1) {
      onepass<R>(rows, a, t0, out);
    } else {
      __m256 even[R][T], odd[R][T];
      half_pass<R, T, 0>(rows, a, t0, even);
      half_pass<R, T, 1>(rows, a, t0, odd);
      float macc[R][T] = {};
      if constexpr (kMin) min_pass<R, T>(rows, a, t0, macc);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          float v = tree16(even[r][t], odd[r][t]);
          if constexpr (kMin) v = v + macc[r][t];
          out[r * T + t] = v;
        }
    }
  }

  // The f16 scales of block b of the R rows (R <= 4) in one vcvtph2ps: row r's in lane r of
  // each 128-bit half, for lane_bcast.
  template <int R>
  static __m256 row_scales(const uint8_t* const* rows, int64_t b) {
    uint64_t packed = 0;
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint16_t h;
      std::memcpy(&h, rows[r] + b * Layout32<TY>::kBytes, 2);
      packed |= uint64_t(h) << (16 * r);
    }
    const __m128 w4 = _mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(packed)));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(w4), w4, 1);
  }

  // Blocks H, H + 2, H + 4, ... into acc (8 lanes per row and token).
  template <int R, int T, int H>
  static void half_pass(const uint8_t* const* rows, const Activations& a, int64_t t0,
                        __m256 (&res)[R][T]) {
    const int64_t k = a.k, nb = k / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
#if EMBER_AVX2_VNNI
    if constexpr (!kMin) {
      // VNNI builds, signed codes: vpdpbusd multiplies unsigned by signed bytes without
      // saturation, so the activations enter as u = q + 128 (q ^ 0x80, once per token, shared
      // by the R rows) and the accumulator starts at -128 * (sum of the lane's 4 codes), made
      // once per row: -128 sum w + sum (q + 128) w = sum q w, the isum of the sign trick, with
      // no per-(row, token) sign (as kernels_avx512.cpp's Q32Vnni). The float part is the same.
      const __m256i x80 = _mm256_set1_epi8(char(0x80));
      for (int64_t b = H; b < nb; b += 2) {
        __m256i w[R], bias[R];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          float d, m;
          w[r] = codes32<TY>(rows[r], b, &d, &m);
          bias[r] = _mm256_sub_epi32(_mm256_setzero_si256(), dpbusd(_mm256_setzero_si256(), x80, w[r]));
        }
        const __m256 wd = row_scales<R>(rows, b);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int64_t tt = t0 + t;
          const __m256i u = _mm256_xor_si256(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + tt * k + b * 32)), x80);
          const __m256 s = _mm256_mul_ps(wd, _mm256_broadcast_ss(a.d + tt * nb + b));
          #pragma GCC unroll 8
          for (int r = 0; r < R; ++r)
            acc[r][t] = _mm256_fmadd_ps(lane_bcast(s, r), _mm256_cvtepi32_ps(dpbusd(bias[r], u, w[r])),
                                        acc[r][t]);
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) res[r][t] = acc[r][t];
      return;
    }
#endif
    for (int64_t b = H; b < nb; b += 2) {
      __m256i aw[R], sg[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float d, m;
        sg[r] = codes32<TY>(rows[r], b, &d, &m);
        aw[r] = _mm256_sign_epi8(sg[r], sg[r]);
      }
      const __m256 wd = row_scales<R>(rows, b);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + tt * k + b * 32));
        const __m256 s = _mm256_mul_ps(wd, _mm256_broadcast_ss(a.d + tt * nb + b));
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i p = dot4(aw[r], _mm256_sign_epi8(av, sg[r]), ones);
          acc[r][t] = _mm256_fmadd_ps(lane_bcast(s, r), _mm256_cvtepi32_ps(p), acc[r][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) res[r][t] = acc[r][t];
  }

  // Q4_1 / Q5_1: macc = fma(m_b, ad_b * float(asum_b), macc), blocks in order.
  template <int R, int T>
  static void min_pass(const uint8_t* const* rows, const Activations& a, int64_t t0,
                       float (&macc)[R][T]) {
    const int64_t nb = a.k / 32;
    for (int64_t b = 0; b < nb; ++b)
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float wm = h2f(rows[r] + b * Layout32<TY>::kBytes + 2);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int64_t i = (t0 + t) * nb + b;
          macc[r][t] = fma1(wm, a.d[i] * float(a.sum[i]), macc[r][t]);
        }
      }
  }

  // One token, R rows, every block in one loop (decode).
  template <int R>
  static void onepass(const uint8_t* const* rows, const Activations& a, int64_t t0, float* out) {
    const int64_t nb = a.k / 32;
    __m256 acc[R][2];
    float macc[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps(), macc[r] = 0.0f;
    // Blocks in pairs, so the accumulator half (even / odd block) is known at compile time:
    // with b & 1 as a run-time index GCC kept all accumulators on the stack (a load and a
    // store per FMA).
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      prefetch_ahead<R, 2 * Layout32<TY>::kBytes>(rows, b * Layout32<TY>::kBytes);
      block<R, 0>(rows, a, t0, b, acc, macc);
      block<R, 1>(rows, a, t0, b + 1, acc, macc);
    }
    if (b < nb) block<R, 0>(rows, a, t0, b, acc, macc);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float v = tree16(acc[r][0], acc[r][1]);
      if constexpr (kMin) v = v + macc[r];
      out[r] = v;
    }
  }

  template <int R, int H>
  __attribute__((always_inline)) static inline void block(const uint8_t* const* rows, const Activations& a, int64_t tt,
                           int64_t b, __m256 (&acc)[R][2], float (&macc)[R]) {
    const int64_t k = a.k, nb = k / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + tt * k + b * 32));
    const float ad = a.d[tt * nb + b];
    float sa = 0;
    if constexpr (kMin) sa = ad * float(a.sum[tt * nb + b]);
    // The R rows' scale products wd * ad in one vmulps (lane r: row r).
    const __m256 s = _mm256_mul_ps(row_scales<R>(rows, b), _mm256_set1_ps(ad));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float wd, wm;
      const __m256i sg = codes32<TY>(rows[r], b, &wd, &wm);
      const __m256i p = dot4(_mm256_sign_epi8(sg, sg), _mm256_sign_epi8(av, sg), ones);
      acc[r][H] = _mm256_fmadd_ps(lane_bcast(s, r), _mm256_cvtepi32_ps(p), acc[r][H]);
      if constexpr (kMin) macc[r] = fma1(wm, sa, macc[r]);
    }
  }
};

// ---- Q8_0 / Q4_0 / Q5_0 prefill: each row block decoded once per token chunk --------------
// A Q32K tile decodes its R rows' blocks again for every T = 3 tokens, and for Q5_0 that
// decode is as much work as the dot products. In prefill the 4 rows of a row block are decoded
// once per token chunk instead, into a panel, and its token tiles do no decoding: Q32Panel
// (ops/q32_panel.h) in this build, Q32Vnni (ops/q32_vnni_panel.h) in the VNNI builds.
//
// Both keep a tile's 8 accumulators in ymm0-7 (32-byte rows of an array operand when they
// leave the registers); these three pieces of their asm are shared.
#define EMBER_ASM_ZERO_ACC                                                                  \
  "vxorps %%ymm0, %%ymm0, %%ymm0\n\t" "vxorps %%ymm1, %%ymm1, %%ymm1\n\t"                  \
  "vxorps %%ymm2, %%ymm2, %%ymm2\n\t" "vxorps %%ymm3, %%ymm3, %%ymm3\n\t"                  \
  "vxorps %%ymm4, %%ymm4, %%ymm4\n\t" "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"                  \
  "vxorps %%ymm6, %%ymm6, %%ymm6\n\t" "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
#define EMBER_ASM_LOAD_ACC(OP)                                                              \
  "vmovaps 0(%[" OP "]), %%ymm0\n\t" "vmovaps 32(%[" OP "]), %%ymm1\n\t"                   \
  "vmovaps 64(%[" OP "]), %%ymm2\n\t" "vmovaps 96(%[" OP "]), %%ymm3\n\t"                  \
  "vmovaps 128(%[" OP "]), %%ymm4\n\t" "vmovaps 160(%[" OP "]), %%ymm5\n\t"                \
  "vmovaps 192(%[" OP "]), %%ymm6\n\t" "vmovaps 224(%[" OP "]), %%ymm7\n\t"
#define EMBER_ASM_STORE_ACC(OP)                                                             \
  "vmovaps %%ymm0, 0(%[" OP "])\n\t" "vmovaps %%ymm1, 32(%[" OP "])\n\t"                   \
  "vmovaps %%ymm2, 64(%[" OP "])\n\t" "vmovaps %%ymm3, 96(%[" OP "])\n\t"                  \
  "vmovaps %%ymm4, 128(%[" OP "])\n\t" "vmovaps %%ymm5, 160(%[" OP "])\n\t"                \
  "vmovaps %%ymm6, 192(%[" OP "])\n\t" "vmovaps %%ymm7, 224(%[" OP "])\n\t"
#if EMBER_AVX2_VNNI
#include "ops/q32_vnni_panel.h"
#else
#include "ops/q32_panel.h"
#endif
#undef EMBER_ASM_STORE_ACC
#undef EMBER_ASM_LOAD_ACC
#undef EMBER_ASM_ZERO_ACC

KernelTable make_table() {
  KernelTable t = scalar_kernels();
  t.dot_f32 = dot_f32_avx2;
  t.f32 = run_tiles<FloatK<TensorType::F32>>;
  t.f16 = run_tiles<FloatK<TensorType::F16>>;
  t.bf16 = run_tiles<FloatK<TensorType::BF16>>;
#if EMBER_AVX2_VNNI
  t.q8_0 = run_panels<Q32K<TensorType::Q8_0>, Q32Vnni<TensorType::Q8_0>>;
  t.q4_0 = run_panels<Q32K<TensorType::Q4_0>, Q32Vnni<TensorType::Q4_0>>;
  t.q5_0 = run_panels<Q32K<TensorType::Q5_0>, Q32Vnni<TensorType::Q5_0>>;
#else
  t.q8_0 = run_panels<Q32K<TensorType::Q8_0>, Q32Panel<TensorType::Q8_0>>;
  t.q4_0 = run_panels<Q32K<TensorType::Q4_0>, Q32Panel<TensorType::Q4_0>>;
  t.q5_0 = run_panels<Q32K<TensorType::Q5_0>, Q32Panel<TensorType::Q5_0>>;
#endif
  t.q4_1 = run_tiles<Q32K<TensorType::Q4_1>>;
  t.q5_1 = run_tiles<Q32K<TensorType::Q5_1>>;
  t.q4_k = EMBER_KQUANT(q4_k);  // kernels_kquants_avx2.cpp, built as this file is
  t.q5_k = EMBER_KQUANT(q5_k);
  t.q6_k = EMBER_KQUANT(q6_k);
  return t;
}

}  // namespace

const KernelTable& EMBER_AVX2_TABLE() {
  static const KernelTable table = make_table();
  return table;
}

}  // namespace ember::ops::detail
