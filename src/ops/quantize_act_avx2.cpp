// AVX2 twins of the activation quantizers (ops/quantize_act.h): the same steps lane by lane
// (|x| and its maximum, one multiply, the clamp, the magic-number rounding, integer sums), so
// the same bits as the scalar reference. As in the other *_avx2.cpp files, no inline function
// of another header is called (F16C intrinsics instead of util/f16.h), so no AVX2 code can
// reach callers on other paths through the linker's choice of inline copies.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ember::ops::detail {

namespace {

constexpr int kQK = 32, kQKK = 256;  // gguf/blocks.h: kQK, kQKK

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// max(a, m) that keeps m where a is NaN (vmaxps returns its second operand when unordered),
// as the scalar `m = a > m ? a : m`.
inline __m256 max_keep(__m256 a, __m256 m) { return _mm256_max_ps(a, m); }

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// round_q8(v) for 8 lanes, as int32: NaN -> 0, clamp to [-127, 127], v + 1.5 * 2^23.
inline __m256i round_q8x8(__m256 v) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  const __m256i i = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));
  const __m256i q = _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)),
                                     _mm256_set1_epi32(0x00400000));
  return _mm256_andnot_si256(_mm256_castps_si256(nan), q);
}

// 32 int32 codes (four vectors, in order) -> 32 int8 in order.
inline void store_q32(const __m256i (&q)[4], int8_t* dst) {
  const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
  const __m256i b = _mm256_packs_epi16(p01, p23);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace

void quantize_q8_0_rows_avx2(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                             int32_t* sum) {
  const int64_t nb = k / kQK;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + t * k + b * kQK;
      __m256 v[4], m = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        m = max_keep(abs8(v[i]), m);
      }
      const float amax = hmax8(m);
      d[t * nb + b] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
      const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
      __m256i qi[4];
      for (int i = 0; i < 4; ++i) qi[i] = round_q8x8(_mm256_mul_ps(v[i], id));
      store_q32(qi, q + t * k + b * kQK);
      sum[t * nb + b] = hsum8_epi32(
          _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
    }
}

void quantize_q8_k_rows_avx2(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                             int16_t* bsums) {
  const int64_t nb = k / kQKK;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + t * k + b * kQKK;
      int8_t* qb = q + t * k + b * kQKK;
      int16_t* bs = bsums + t * (k / 16) + b * 16;
      __m256 m = _mm256_setzero_ps();
      for (int i = 0; i < kQKK / 8; ++i) m = max_keep(abs8(_mm256_loadu_ps(xb + 8 * i)), m);
      const float amax = hmax8(m);
      if (amax == 0.0f) {
        d[t * nb + b] = 0.0f;
        std::memset(qb, 0, kQKK);
        std::memset(bs, 0, 16 * sizeof(int16_t));
        continue;
      }
      // The first element whose magnitude is amax, with its sign (the scalar loop keeps the
      // first strictly larger one).
      float max = 0.0f;
      for (int i = 0; i < kQKK / 8; ++i) {
        const int hit = _mm256_movemask_ps(
            _mm256_cmp_ps(abs8(_mm256_loadu_ps(xb + 8 * i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
        if (hit) {
          max = xb[8 * i + __builtin_ctz(unsigned(hit))];
          break;
        }
      }
      const float iscale = -127.0f / max;
      const __m256 is = _mm256_set1_ps(iscale);
      for (int g = 0; g < kQKK / 32; ++g) {
        __m256i qi[4];
        for (int i = 0; i < 4; ++i)
          qi[i] = round_q8x8(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 32 * g + 8 * i)));
        store_q32(qi, qb + 32 * g);
        bs[2 * g] = int16_t(hsum8_epi32(_mm256_add_epi32(qi[0], qi[1])));
        bs[2 * g + 1] = int16_t(hsum8_epi32(_mm256_add_epi32(qi[2], qi[3])));
      }
      d[t * nb + b] = 1.0f / iscale;
    }
}

}  // namespace ember::ops::detail
