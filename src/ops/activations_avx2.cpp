// AVX2+FMA twins of ops/activations.cpp, for the `avx2` path: lane i performs exactly the
// scalar operation sequence of exp_f32 (same constants, same FMAs, the same round-half-even
// of n, the same two-step 2^n scaling), so the results are the bits of the scalar reference
// and of the AVX-512 twins (tests/ops/activations_test.cpp). Without them the `avx2` path ran
// SwiGLU and the attention softmax one scalar exp at a time: at 512 tokens that was about a
// third of a Qwen2.5-0.5B prefill.
#include <immintrin.h>

#include <cstring>

#include "ops/activations.h"

namespace ember::ops::detail {

namespace {
inline __m256 exp8(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609375f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, z, r), _mm256_set1_ps(1.0f));
  // Where every lane has -86 <= x <= 88 (so no NaN), n is in [-124, 127]: 2^n is a normal
  // float and y * 2^n (y in [0.7, 1.5)) a normal result, so one multiply by 2^n is exact, as
  // each of the scalar code's two steps is: the same bits, without its second conversion,
  // multiply and range fix-ups (the attention softmax's arguments are almost all here).
  const __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_GE_OQ),
                                  _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_LE_OQ));
  if (_mm256_movemask_ps(in) == 0xFF)
    return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(
                                _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23)));
  // y * 2^n1 * 2^n2 with n1 = trunc(n / 2), n2 = n - n1 (as the scalar integer code). Lanes
  // out of range get garbage exponents here and are replaced below.
  const __m256 n1f = _mm256_round_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)),
                                     _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 n2f = _mm256_sub_ps(n, n1f);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n1f), bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n2f), bias), 23));
  __m256 out = _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
  const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ);
  const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(-103.972084045410156f), _CMP_LT_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  out = _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), hi);
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), lo);
  out = _mm256_blendv_ps(out, x, nan);
  return out;
}

inline __m256 silu_mul8(__m256 a, __m256 u) {
  const __m256 e = exp8(_mm256_xor_ps(a, _mm256_set1_ps(-0.0f)));
  return _mm256_mul_ps(_mm256_div_ps(a, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// y[i] = exp_f32(x[i] - m) (shifted) or exp_f32(x[i]); the tail through a zero-padded copy
// (x and y may alias).
template <bool kShift>
void exp_rows(const float* x, int64_t n, float m, float* y) {
  const __m256 vm = _mm256_set1_ps(m);
  auto arg = [&](__m256 v) { return kShift ? _mm256_sub_ps(v, vm) : v; };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(arg(_mm256_loadu_ps(x + i))));
  if (i < n) {
    alignas(32) float buf[8] = {};
    std::memcpy(buf, x + i, size_t(n - i) * 4);
    _mm256_store_ps(buf, exp8(arg(_mm256_load_ps(buf))));
    std::memcpy(y + i, buf, size_t(n - i) * 4);
  }
}
}  // namespace

void exp_row_avx2(const float* x, int64_t n, float* y) { exp_rows<false>(x, n, 0.0f, y); }

void exp_shift_row_avx2(const float* x, int64_t n, float m, float* y) {
  exp_rows<true>(x, n, m, y);
}

// vmaxps(x, m) is `x > m ? x : m` in each lane (m when either is NaN): the scalar comparison.
// Every lane starts at x[0], so a NaN there stays (each lane NaN); otherwise each lane holds
// the max of its elements and the lanes fold by the same comparison. Four chains, whose
// latency would otherwise bound the loop.
float max_row_avx2(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  m0 = _mm256_max_ps(m1, m0);
  m2 = _mm256_max_ps(m3, m2);
  m0 = _mm256_max_ps(m2, m0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m0);
  float m = lanes[0];
  for (int l = 1; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

void silu_mul_row_avx2(const float* g, const float* u, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    alignas(32) float gb[8] = {}, ub[8] = {};
    std::memcpy(gb, g + i, size_t(n - i) * 4);
    std::memcpy(ub, u + i, size_t(n - i) * 4);
    _mm256_store_ps(gb, silu_mul8(_mm256_load_ps(gb), _mm256_load_ps(ub)));
    std::memcpy(out + i, gb, size_t(n - i) * 4);
  }
}

}  // namespace ember::ops::detail
