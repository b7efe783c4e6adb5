// AVX-512 twins of ops/activations.cpp: lane i performs exactly the scalar operation sequence
// of exp_f32 (same constants, same FMAs, same rounding of n, same two-step 2^n scaling), so
// results are bit-identical to the scalar reference (tests/ops/activations_test.cpp).
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*()
// placeholders (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "ops/activations.h"

namespace ember::ops::detail {

namespace {
inline __m512 exp16(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502162933349609375f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, z, r), _mm512_set1_ps(1.0f));
  // Where every lane has -86 <= x <= 88: one exact multiply by 2^n (activations_avx2.cpp's
  // exp8 says why it is the scalar code's bits).
  const __mmask16 in = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.0f), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_LE_OQ);
  if (in == 0xFFFF)
    return _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(
                                _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23)));
  // y * 2^n1 * 2^n2 with n1 = trunc(n / 2), n2 = n - n1 (as the scalar integer code).
  const __m512 n1f = _mm512_roundscale_ps(_mm512_mul_ps(n, _mm512_set1_ps(0.5f)),
                                          _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 n2f = _mm512_sub_ps(n, n1f);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 p1 = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n1f), bias), 23));
  const __m512 p2 = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n2f), bias), 23));
  __m512 out = _mm512_mul_ps(_mm512_mul_ps(y, p1), p2);
  const __mmask16 hi = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72283935546875f), _CMP_GT_OQ);
  const __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.972084045410156f), _CMP_LT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  out = _mm512_mask_mov_ps(out, hi, _mm512_set1_ps(__builtin_inff()));
  out = _mm512_mask_mov_ps(out, lo, _mm512_setzero_ps());
  out = _mm512_mask_mov_ps(out, nan, x);
  return out;
}

// y[i] = exp_f32(x[i] - m) (shifted) or exp_f32(x[i]); the tail masked.
template <bool kShift>
void exp_rows(const float* x, int64_t n, float m, float* y) {
  const __m512 vm = _mm512_set1_ps(m);
  auto arg = [&](__m512 v) { return kShift ? _mm512_sub_ps(v, vm) : v; };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(arg(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, exp16(arg(_mm512_maskz_loadu_ps(k, x + i))));
  }
}
}  // namespace

void exp_row_avx512(const float* x, int64_t n, float* y) { exp_rows<false>(x, n, 0.0f, y); }

void exp_shift_row_avx512(const float* x, int64_t n, float m, float* y) {
  exp_rows<true>(x, n, m, y);
}

void silu_mul_row_avx512(const float* g, const float* u, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(g + i);
    const __m512 e = exp16(_mm512_xor_ps(a, sign));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(a, _mm512_add_ps(one, e)),
                                            _mm512_loadu_ps(u + i)));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 e = exp16(_mm512_xor_ps(a, sign));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(a, _mm512_add_ps(one, e)),
                                                    _mm512_maskz_loadu_ps(m, u + i)));
  }
}

}  // namespace ember::ops::detail
