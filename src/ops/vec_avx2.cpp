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
// l and l + 8, whose sum is the tree's first level), so 8 partial sums and 2 chains are live
// per query. Queries go in pairs: each load of a transposed key row serves both.
namespace {
template <int NQ>
void keys_block8(const float* const* q, const float* base, int64_t nk, int64_t n, int64_t ld,
                 __m256 vs, float* const* out) {
  alignas(32) float tail[8];
  auto load = [&](int64_t j) {
    if (nk == 8) return _mm256_loadu_ps(base + j * ld);
    for (int64_t i = 0; i < 8; ++i) tail[i] = i < nk ? base[j * ld + i] : 0.0f;
    return _mm256_load_ps(tail);
  };
  __m256 s8[NQ][8];
  for (int l = 0; l < 8; ++l) {
    __m256 a0[NQ], a1[NQ];
    for (int i = 0; i < NQ; ++i) a0[i] = a1[i] = _mm256_setzero_ps();
    for (int64_t j = l; j < n; j += 16) {
      const __m256 k0 = load(j);
      for (int i = 0; i < NQ; ++i) a0[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[i] + j), k0, a0[i]);
      if (j + 8 < n) {
        const __m256 k1 = load(j + 8);
        for (int i = 0; i < NQ; ++i)
          a1[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[i] + j + 8), k1, a1[i]);
      }
    }
    for (int i = 0; i < NQ; ++i) s8[i][l] = _mm256_add_ps(a0[i], a1[i]);
  }
  for (int i = 0; i < NQ; ++i) {
    const __m256 s4_0 = _mm256_add_ps(s8[i][0], s8[i][4]), s4_1 = _mm256_add_ps(s8[i][1], s8[i][5]),
                 s4_2 = _mm256_add_ps(s8[i][2], s8[i][6]), s4_3 = _mm256_add_ps(s8[i][3], s8[i][7]);
    const __m256 r = _mm256_mul_ps(
        _mm256_add_ps(_mm256_add_ps(s4_0, s4_2), _mm256_add_ps(s4_1, s4_3)), vs);
    if (nk == 8) {
      _mm256_storeu_ps(out[i], r);
    } else {
      alignas(32) float o[8];
      _mm256_store_ps(o, r);
      for (int64_t c = 0; c < nk; ++c) out[i][c] = o[c];
    }
  }
}
}  // namespace

void dot_f32_keys_avx2(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                       int64_t ld, float scale, float* out, int64_t out_ld) {
  const __m256 vs = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 2 <= nq; i += 2) {
    const float* qs[2] = {q + i * n, q + (i + 1) * n};
    for (int64_t c = 0; c < keys; c += 8) {
      float* os[2] = {out + i * out_ld + c, out + (i + 1) * out_ld + c};
      keys_block8<2>(qs, kt + c, keys - c < 8 ? keys - c : 8, n, ld, vs, os);
    }
  }
  if (i < nq) {
    const float* qs[1] = {q + i * n};
    for (int64_t c = 0; c < keys; c += 8) {
      float* os[1] = {out + i * out_ld + c};
      keys_block8<1>(qs, kt + c, keys - c < 8 ? keys - c : 8, n, ld, vs, os);
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
