// AVX2+FMA twins of the scalar reference kernels in kernels_scalar.cpp: the same canonical-v1
// reduction order, so the same bits, only faster. Every weight type ember reads has a twin.
//
// Compiled with AVX2 flags: like kernels_avx512.cpp it keeps everything in an anonymous
// namespace and calls no inline function of another header, so no AVX2 code can leak into
// callers on other paths through the linker's choice of inline copies.
//
// The 16 canonical f32 lanes are two ymm registers (lanes 0-7 and 8-15); the 32-block types
// keep the even blocks in the first and the odd blocks in the second, exactly the scalar
// acc[8 * (b & 1) + l]. Tiles of R rows x T tokens, two far-apart rows for decode, loops unrolled,
// as in the AVX-512 file; the prefill of Q4_0 / Q5_0 and the K quants runs on row
// panels, 4 rows decoded once per token chunk (Q32Panel, KPanel).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "gguf/blocks.h"
#include "ops/kernels.h"

namespace ember::ops::detail {
namespace {

using gguf::TensorType;

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float tree8(__m256 acc) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
inline float tree16(__m256 lo, __m256 hi) { return tree8(_mm256_add_ps(lo, hi)); }

// Lane-valid mask for the tail: lane l of half h is valid when 8h + l < r.
inline __m256 tail_mask(int r, int h) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(r - 8 * h), idx));
}

// ---- The tile driver (see kernels_avx512.cpp) --------------------------------------------
template <class K, int R, int T>
void tile_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               float* y) {
  const uint8_t* rows[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = W.data + (i + r) * rb;
  float out[R * T];
  K::template tile<R, T>(rows, a, t0, out);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[(t0 + t) * W.rows + i + r] = out[r * T + t];
}

// A tile of R rows x `rem` tokens, rem < T (the remainder of a token chunk).
template <class K, int R, int T>
void tail_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t rem, float* y) {
  if constexpr (T > 1) {
    if (rem == T - 1) tile_call<K, R, T - 1>(W, a, rb, i, t0, y);
    else tail_call<K, R, T - 1>(W, a, rb, i, t0, rem, y);
  }
}

// Rows [i, i + R) x tokens [t0, t1).
template <class K, int R>
void row_block(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t t1, float* y) {
  int64_t t = t0;
  for (; t + K::kT <= t1; t += K::kT) tile_call<K, R, K::kT>(W, a, rb, i, t, y);
  if (t < t1) tail_call<K, R, K::kT>(W, a, rb, i, t, t1 - t, y);
}

// Tokens per chunk, as in kernels_avx512.cpp: the chunk's activations stay in L2 while the
// row blocks of the thread's range pass over them.
template <class K>
int64_t token_chunk(int64_t k) {
  constexpr int64_t kL2Budget = 256 << 10;
  const int64_t c = kL2Budget / (k * K::kActBytes) / K::kT * K::kT;
  return c < K::kT ? K::kT : c;
}

template <class K>
void run_tiles(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  // Decode (one token): two row streams, [r0, mid) and [mid, r1), one row of each per step.
  // Each stream walks memory strictly in order, which the hardware prefetcher follows (a tile
  // of adjacent rows, i.e. several short interleaved streams, measured at less than half the
  // bandwidth), and the two rows' accumulator chains overlap in the core (one row alone is
  // bound by its FMA chain: +15 % for a decode step, 1 thread, Zen 4).
  if (a.n == 1) {
    const int64_t half = (r1 - r0) / 2;
    for (int64_t j = 0; j < half; ++j) {
      const uint8_t* rows[2] = {W.data + (r0 + j) * rb, W.data + (r0 + half + j) * rb};
      float out[2];
      K::template tile<2, 1>(rows, a, 0, out);
      y[r0 + j] = out[0];
      y[r0 + half + j] = out[1];
    }
    if ((r1 - r0) % 2) row_block<K, 1>(W, a, rb, r1 - 1, 0, 1, y);
    return;
  }
  // Prefill: token chunks outermost, then row blocks, then the chunk's token tiles.
  const int64_t chunk = token_chunk<K>(a.k);
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + K::kR <= r1; i += K::kR) row_block<K, K::kR>(W, a, rb, i, t0, t1, y);
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
}

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
  static constexpr int kR = 4, kT = 3;
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
          const __m256i p =
              _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(av, sg[r])), ones);
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
      const __m256i p = _mm256_madd_epi16(
          _mm256_maddubs_epi16(_mm256_sign_epi8(sg, sg), _mm256_sign_epi8(av, sg)), ones);
      acc[r][H] = _mm256_fmadd_ps(lane_bcast(s, r), _mm256_cvtepi32_ps(p), acc[r][H]);
      if constexpr (kMin) macc[r] = fma1(wm, sa, macc[r]);
    }
  }
};

// ---- Q4_0 / Q5_0 prefill: each row block decoded once per token chunk --------------------
// A Q32K tile decodes its R rows' blocks again for every T = 3 tokens, and for Q5_0 that
// decode is as much work as the dot products. In prefill the 4 rows of a row block are decoded
// once per token chunk instead, into a panel (8 bytes per column, so in L1 up to k = 4096):
// |w| as bytes (the unsigned operand of the sign trick), the signed codes, and the f32 block
// scales, the 4 rows of block b side by side. A token tile then does
// no decoding: inside a block it runs over rows, then tokens, and takes each row-times-token
// scale from a small table by vbroadcastss (a load, where Q32K spends a shuffle). Same integer
// block sums, same order of FMAs per lane (the two half passes of Q32K), so the same bits.
// bench_matmul 1 avx2 512, Zen 4, best (median) of 6 GOP/s, Q32K -> panel: q5_0 60 (48) ->
// 78 (66), q4_0 66 (57) -> 79 (71). Q8_0 has nothing to decode but |w|, and stays on Q32K: on
// the panel it measured 79 (65) -> 78 (60), and Qwen2.5-0.5B Q8_0 pp512 3 % slower end to end.
template <TensorType TY>
struct Q32Panel {
  static_assert(TY == TensorType::Q4_0 || TY == TensorType::Q5_0);
  static constexpr int kR = 4, kT = 3;

  int64_t k = 0, nb = 0;
  uint8_t* mag = nullptr;      // |w| of row r, block b at mag + r * k + 32 b
  int8_t* codes = nullptr;     // the signed codes, same layout
  float* scale = nullptr;      // scale[4 b + r]

  // Bytes of the panel for k columns (32-byte aligned parts).
  static int64_t bytes(int64_t k) { return 8 * k + 16 * (k / 32); }

  void bind(uint8_t* mem, int64_t k_) {
    k = k_, nb = k_ / 32;
    mag = mem;
    codes = reinterpret_cast<int8_t*>(mem + 4 * k);
    scale = reinterpret_cast<float*>(mem + 8 * k);
  }

  void fill(const uint8_t* const* rows) {
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        float d, m;
        const __m256i sg = codes32<TY>(rows[r], b, &d, &m);
        _mm256_store_si256(reinterpret_cast<__m256i*>(mag + r * k + 32 * b), _mm256_sign_epi8(sg, sg));
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes + r * k + 32 * b), sg);
        scale[4 * b + r] = d;
      }
    }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r].
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    __m256 even[4][T], odd[4][T];
    half_pass<T, 0>(a, t0, even);
    half_pass<T, 1>(a, t0, odd);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[(t0 + t) * m + i + r] = tree16(even[r][t], odd[r][t]);
  }

  template <int T, int H>
  void half_pass(const Activations& a, int64_t t0, __m256 (&res)[4][T]) const {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4][T];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const int8_t* q = a.q + t0 * k;
    const float* ad = a.d + t0 * nb;
    for (int64_t b = H; b < nb; b += 2) {
      alignas(16) float sc[T][4];
      const __m128 wd = _mm_load_ps(scale + 4 * b);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) _mm_store_ps(sc[t], _mm_mul_ps(wd, _mm_broadcast_ss(ad + t * nb + b)));
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m256i aw = _mm256_load_si256(reinterpret_cast<const __m256i*>(mag + r * k + 32 * b));
        const __m256i sw = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + r * k + 32 * b));
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + t * k + 32 * b));
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(av, sw)), ones);
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(sc[t][r]), _mm256_cvtepi32_ps(p), acc[r][t]);
        }
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) res[r][t] = acc[r][t];
  }
};

// ---- Q4_K / Q5_K / Q6_K ------------------------------------------------------------------
// One ymm holds 32 codes in logical order (a Q4_K/Q5_K sub-block, or two Q6_K sub-blocks);
// maddubs + madd against the scale gives 8 int32 lanes, lane l covering elements 4l..4l+3:
// the canonical lanes directly.

// Scales sc0..sc7 then mins m0..m7 of a Q4_K / Q5_K block, as bytes.
inline __m128i k4_scales_mins(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  uint32_t v[4];
  v[0] = u[0] & m6;
  v[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  v[2] = u[1] & m6;
  v[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  __m128i b;
  std::memcpy(&b, v, 16);
  return b;
}

template <TensorType TY>
struct KQuantK {
  static constexpr TensorType kType = TY;
  static constexpr bool kQ6 = TY == TensorType::Q6_K;
  static constexpr int kR = 1, kT = 4;  // bench_matmul, Zen 4: Q4_K +24 % over 2 x 2
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
      __m256i isum[R][T];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      float d[R], dmin[R];
      alignas(16) uint8_t scb[R][16];  // Q4_K/Q5_K: sc0..7, m0..7; Q6_K: 16 int8 scales
      __m256i mins2[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) block_header(rows[r], b, &d[r], &dmin[r], scb[r], &mins2[r]);
      for (int g = 0; g < 8; ++g) {  // 8 groups of 32 elements
        __m256i wq[R], scv[R];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          wq[r] = group_codes(rows[r], b, g, m0f);
          scv[r] = group_scales(scb[r], g);
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
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p16, scv[r]));
          }
        }
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const float ad = a.d[tt * nb + b];
        __m256i bs = _mm256_setzero_si256();
        if constexpr (!kQ6)
          bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + tt * (k / 16) + b * 16));
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d[r] * ad), _mm256_cvtepi32_ps(isum[r][t]),
                                      acc[r][t]);
          if constexpr (!kQ6) {
            const __m256i mp = _mm256_madd_epi16(mins2[r], bs);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(-(dmin[r] * ad)), _mm256_cvtepi32_ps(mp),
                                        acc[r][t]);
          }
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) out[r * T + t] = tree8(acc[r][t]);
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
      const uint8_t* blk = row + b * (TY == TensorType::Q4_K ? sizeof(gguf::BlockQ4_K)
                                                             : sizeof(gguf::BlockQ5_K));
      *d = h2f(blk + offsetof(gguf::BlockQ4_K, d));
      *dmin = h2f(blk + offsetof(gguf::BlockQ4_K, dmin));
      const __m128i sm = k4_scales_mins(blk + offsetof(gguf::BlockQ4_K, scales));
      std::memcpy(scb, &sm, 16);
      *mins2 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
          sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
    }
  }

  // The madd operand of group g (elements [32g, 32g + 32)): its sub-block scale(s) as int16,
  // one per product pair (Q6_K: the first 8 pairs take scale 2g, the last 8 scale 2g + 1).
  static __m256i group_scales(const uint8_t* scb, int g) {
    if constexpr (kQ6) {
      const __m128i idx = _mm_setr_epi8(char(2 * g), char(2 * g), char(2 * g), char(2 * g),
                                        char(2 * g), char(2 * g), char(2 * g), char(2 * g),
                                        char(2 * g + 1), char(2 * g + 1), char(2 * g + 1),
                                        char(2 * g + 1), char(2 * g + 1), char(2 * g + 1),
                                        char(2 * g + 1), char(2 * g + 1));
      return _mm256_cvtepi8_epi16(
          _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scb)), idx));
    } else {
      return _mm256_set1_epi16(int16_t(scb[g]));
    }
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
        const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(g)),
                                            _mm256_set1_epi8(1));
        v = _mm256_or_si256(v, _mm256_slli_epi16(hb, 4));
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
      const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * gg)),
                                          _mm256_set1_epi8(3));
      return _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
    }
  }
};

// ---- Q4_K / Q5_K / Q6_K prefill: each row block decoded once per token chunk -------------
// As for the 32-block types (Q32Panel): a KQuantK tile decodes its row's codes and scales for
// every 4 tokens, and for Q6_K that is more work than the dot products. In prefill the 4 rows of
// a row block are decoded once per token chunk into a panel (about 8.5 bytes per column): the
// unsigned codes in logical order, each group's madd operand (its scales as int16), and per
// super-block d, dmin and the mins. A tile of 4 rows x 2 tokens then does no decoding. Same
// integer sums, same FMAs in the same order, so the same bits as KQuantK.
// bench_matmul 1 avx2 512, Zen 4, best (median) of 5 GOP/s, KQuantK -> panel: q4_K 88 (73) ->
// 111 (86), q5_K 71 (62) -> 105 (78), q6_K 42 (39) -> 94 (82).
template <TensorType TY>
struct KPanel {
  using K = KQuantK<TY>;
  static constexpr bool kQ6 = K::kQ6;
  static constexpr int kR = 4, kT = 2;

  int64_t k = 0, nb = 0;
  uint8_t* codes = nullptr;    // row r, super-block b, group g: codes + r * k + 256 b + 32 g
  __m256i* scales = nullptr;   // its madd operand: scales[(r * nb + b) * 8 + g]
  __m256i* mins = nullptr;     // mins[r * nb + b] (Q4_K / Q5_K)
  float* d = nullptr;          // d[4 b + r]
  float* dmin = nullptr;       // dmin[4 b + r]

  static int64_t bytes(int64_t k) { return 4 * k + 4 * k + 4 * (k / 256) * 32 + 2 * 16 * (k / 256); }

  void bind(uint8_t* mem, int64_t k_) {
    k = k_, nb = k_ / 256;
    codes = mem;
    scales = reinterpret_cast<__m256i*>(mem + 4 * k);
    mins = reinterpret_cast<__m256i*>(mem + 8 * k);
    d = reinterpret_cast<float*>(mem + 8 * k + 4 * nb * 32);
    dmin = d + 4 * nb;
  }

  void fill(const uint8_t* const* rows) {
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        alignas(16) uint8_t scb[16];
        K::block_header(rows[r], b, &d[4 * b + r], &dmin[4 * b + r], scb, &mins[r * nb + b]);
        for (int g = 0; g < 8; ++g) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(codes + r * k + 256 * b + 32 * g),
                             K::group_codes(rows[r], b, g, m0f));
          scales[(r * nb + b) * 8 + g] = K::group_scales(scb, g);
        }
      }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r].
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    __m256 acc[4][T];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const int8_t* q = a.q + t0 * k;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i isum[4][T];
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        alignas(32) __m256i off[T];  // Q6_K: 32 * (pair sums of the activations)
        if constexpr (kQ6)
          #pragma GCC unroll 4
          for (int t = 0; t < T; ++t)
            off[t] = _mm256_maddubs_epi16(_mm256_set1_epi8(32), _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(q + t * k + 256 * b + 32 * g)));
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m256i wq = _mm256_load_si256(
              reinterpret_cast<const __m256i*>(codes + r * k + 256 * b + 32 * g));
          const __m256i sc = scales[(r * nb + b) * 8 + g];
          #pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i av = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(q + t * k + 256 * b + 32 * g));
            __m256i p16 = _mm256_maddubs_epi16(wq, av);
            if constexpr (kQ6) p16 = _mm256_sub_epi16(p16, off[t]);
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p16, sc));
          }
        }
      }
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int64_t tt = t0 + t;
        const float ad = a.d[tt * nb + b];
        __m256i bs = _mm256_setzero_si256();
        if constexpr (!kQ6)
          bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + tt * (k / 16) + b * 16));
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d[4 * b + r] * ad),
                                      _mm256_cvtepi32_ps(isum[r][t]), acc[r][t]);
          if constexpr (!kQ6) {
            const __m256i mp = _mm256_madd_epi16(mins[r * nb + b], bs);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(-(dmin[4 * b + r] * ad)),
                                        _mm256_cvtepi32_ps(mp), acc[r][t]);
          }
        }
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[(t0 + t) * m + i + r] = tree8(acc[r][t]);
  }

};

// Prefill through panels (Q32Panel, KPanel): token chunks, then row blocks of 4, each decoded
// once into the panel, then the chunk's token tiles. Decode, and the last rows of a range
// that are fewer than 4, go through K's tiles; without memory for a panel, everything does.
// The last rem < P::kT tokens of a chunk: the tile of T = rem tokens.
template <class P, int T>
void panel_tail(const P& panel, const Activations& a, int64_t t0, int64_t rem, int64_t m,
                int64_t i, float* y) {
  if constexpr (T >= 1) {
    if (rem == T) panel.template tile<T>(a, t0, m, i, y);
    else panel_tail<P, T - 1>(panel, a, t0, rem, m, i, y);
  }
}

template <class K, class P>
void run_panels(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t bytes = (P::bytes(a.k) + 31) / 32 * 32;
  void* mem = a.n > 1 && r1 - r0 >= 4 ? std::aligned_alloc(32, size_t(bytes)) : nullptr;
  if (mem == nullptr) {
    run_tiles<K>(W, a, r0, r1, y);
    return;
  }
  P panel;
  panel.bind(static_cast<uint8_t*>(mem), a.k);
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  const int64_t chunk = token_chunk<K>(a.k);
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) {
      const uint8_t* rows[4] = {W.data + i * rb, W.data + (i + 1) * rb, W.data + (i + 2) * rb,
                                W.data + (i + 3) * rb};
      panel.fill(rows);
      int64_t t = t0;
      for (; t + P::kT <= t1; t += P::kT) panel.template tile<P::kT>(a, t, W.rows, i, y);
      if (t < t1) panel_tail<P, P::kT - 1>(panel, a, t, t1 - t, W.rows, i, y);
    }
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
  std::free(mem);
}

KernelTable make_table() {
  KernelTable t = scalar_kernels();
  t.dot_f32 = dot_f32_avx2;
  t.f32 = run_tiles<FloatK<TensorType::F32>>;
  t.f16 = run_tiles<FloatK<TensorType::F16>>;
  t.bf16 = run_tiles<FloatK<TensorType::BF16>>;
  t.q8_0 = run_tiles<Q32K<TensorType::Q8_0>>;
  t.q4_0 = run_panels<Q32K<TensorType::Q4_0>, Q32Panel<TensorType::Q4_0>>;
  t.q5_0 = run_panels<Q32K<TensorType::Q5_0>, Q32Panel<TensorType::Q5_0>>;
  t.q4_1 = run_tiles<Q32K<TensorType::Q4_1>>;
  t.q5_1 = run_tiles<Q32K<TensorType::Q5_1>>;
  t.q4_k = run_panels<KQuantK<TensorType::Q4_K>, KPanel<TensorType::Q4_K>>;
  t.q5_k = run_panels<KQuantK<TensorType::Q5_K>, KPanel<TensorType::Q5_K>>;
  t.q6_k = run_panels<KQuantK<TensorType::Q6_K>, KPanel<TensorType::Q6_K>>;
  return t;
}

}  // namespace

const KernelTable& avx2_kernels() {
  static const KernelTable table = make_table();
  return table;
}

}  // namespace ember::ops::detail
