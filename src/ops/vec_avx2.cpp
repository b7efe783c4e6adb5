// AVX2+FMA+F16C twins of ops/vec.cpp (also used on the AVX-512 path: these kernels are
// memory-bound and elementwise, so wider vectors buy nothing and the bits are the same).
#include <immintrin.h>

#include "ops/vec.h"
#include "util/f16.h"

#include <cmath>

namespace ember::ops::detail {

void axpy_f32_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void axpy_rows_f32_avx2(const float* w, const float* x, int64_t rows, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8),
           y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 a = _mm256_set1_ps(w[r]);
      const float* xr = x + r * n + i;
      y0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr), y0);
      y1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 8), y1);
      y2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 16), y2);
      y3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 24), y3);
    }
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
    _mm256_storeu_ps(y + i + 16, y2);
    _mm256_storeu_ps(y + i + 24, y3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 y0 = _mm256_loadu_ps(y + i);
    for (int64_t r = 0; r < rows; ++r)
      y0 = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(x + r * n + i), y0);
    _mm256_storeu_ps(y + i, y0);
  }
  for (; i < n; ++i) {
    float yi = y[i];
    for (int64_t r = 0; r < rows; ++r) yi = std::fma(w[r], x[r * n + i], yi);
    y[i] = yi;
  }
}

// 8 keys per ymm. The 16 canonical accumulators of every key are taken two at a time (lanes
// l and l + 8, whose sum is the tree's first level), so 8 partial sums and 2 chains are live.
void dot_f32_keys_avx2(const float* q, const float* kt, int64_t keys, int64_t n, int64_t ld,
                       float scale, float* out) {
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t c = 0; c < keys; c += 8) {
    const int64_t nk = keys - c < 8 ? keys - c : 8;
    const float* base = kt + c;
    alignas(32) float tail[8];
    auto load = [&](int64_t j) {
      if (nk == 8) return _mm256_loadu_ps(base + j * ld);
      for (int64_t i = 0; i < 8; ++i) tail[i] = i < nk ? base[j * ld + i] : 0.0f;
      return _mm256_load_ps(tail);
    };
    __m256 s8[8];
    for (int l = 0; l < 8; ++l) {
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      for (int64_t j = l; j < n; j += 16) {
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + j), load(j), a0);
        if (j + 8 < n) a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + j + 8), load(j + 8), a1);
      }
      s8[l] = _mm256_add_ps(a0, a1);
    }
    const __m256 s4_0 = _mm256_add_ps(s8[0], s8[4]), s4_1 = _mm256_add_ps(s8[1], s8[5]),
                 s4_2 = _mm256_add_ps(s8[2], s8[6]), s4_3 = _mm256_add_ps(s8[3], s8[7]);
    const __m256 r = _mm256_mul_ps(
        _mm256_add_ps(_mm256_add_ps(s4_0, s4_2), _mm256_add_ps(s4_1, s4_3)), vs);
    if (nk == 8) {
      _mm256_storeu_ps(out + c, r);
    } else {
      alignas(32) float o[8];
      _mm256_store_ps(o, r);
      for (int64_t i = 0; i < nk; ++i) out[c + i] = o[i];
    }
  }
}

void f16_to_f32_row_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16_row_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace ember::ops::detail
