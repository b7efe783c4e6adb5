#include "ops/vec.h"

#include <cmath>
#include <vector>

#include "ops/dot.h"

#include "util/f16.h"
#include "util/simd.h"

namespace ember::ops {

namespace detail {
void axpy_f32_avx2(float a, const float* x, float* y, int64_t n);
void axpy_rows_f32_avx2(const float* w, const float* x, int64_t rows, int64_t n, float* y);
void f16_to_f32_row_avx2(const uint16_t* src, float* dst, int64_t n);
void dot_f32_keys_avx2(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                       int64_t ld, float scale, float* out, int64_t out_ld);
void dot_f32_keys_avx512(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                         int64_t ld, float scale, float* out, int64_t out_ld);
void axpy_rows_f32_avx512(const float* w, const float* x, int64_t rows, int64_t n, float* y);
void f32_to_f16_row_avx2(const float* src, uint16_t* dst, int64_t n);
void f16_rows_to_f32_columns_avx2(const uint16_t* src, int64_t rows, int64_t n, float* dst,
                                  int64_t ld);
void divide_round_f16_row_avx2(const float* x, float d, int64_t n, float* out);
void axpy_rows_f32_shared_avx2(const float* const* w, const float* x, int64_t rows, int64_t n,
                               float* const* y, int count);
void axpy_rows_f32_shared_avx512(const float* const* w, const float* x, int64_t rows, int64_t n,
                                 float* const* y, int count);
}  // namespace detail

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  if (active_simd() != SimdLevel::scalar) return detail::axpy_f32_avx2(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void axpy_rows_f32(const float* w, const float* x, int64_t rows, int64_t n, float* y) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512) return detail::axpy_rows_f32_avx512(w, x, rows, n, y);
  if (level == SimdLevel::avx2) return detail::axpy_rows_f32_avx2(w, x, rows, n, y);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] = std::fma(w[r], x[r * n + i], y[i]);
}

void axpy_rows_f32_shared(const float* const* w, const float* x, int64_t rows, int64_t n,
                          float* const* y, int count) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512) return detail::axpy_rows_f32_shared_avx512(w, x, rows, n, y, count);
  if (level == SimdLevel::avx2) return detail::axpy_rows_f32_shared_avx2(w, x, rows, n, y, count);
  for (int k = 0; k < count; ++k) axpy_rows_f32(w[k], x, rows, n, y[k]);
}

void dot_f32_keys(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                  int64_t ld, float scale, float* out, int64_t out_ld) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512)
    return detail::dot_f32_keys_avx512(q, nq, kt, keys, n, ld, scale, out, out_ld);
  if (level == SimdLevel::avx2)
    return detail::dot_f32_keys_avx2(q, nq, kt, keys, n, ld, scale, out, out_ld);
  // The reference: each key gathered into a row and handed to the scalar dot_f32.
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t c = 0; c < keys; ++c) {
    for (int64_t j = 0; j < n; ++j) row[size_t(j)] = kt[j * ld + c];
    for (int64_t i = 0; i < nq; ++i)
      out[i * out_ld + c] = dot_f32(q + i * n, row.data(), n, SimdLevel::scalar) * scale;
  }
}

void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  if (active_simd() != SimdLevel::scalar) return detail::f16_to_f32_row_avx2(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f16_rows_to_f32_columns(const uint16_t* src, int64_t rows, int64_t n, float* dst, int64_t ld) {
  if (active_simd() != SimdLevel::scalar)
    return detail::f16_rows_to_f32_columns_avx2(src, rows, n, dst, ld);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[j * ld + r] = f16_to_f32(src[r * n + j]);
}

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  if (active_simd() != SimdLevel::scalar) return detail::f32_to_f16_row_avx2(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void divide_round_f16_row(const float* x, float d, int64_t n, float* out) {
  if (active_simd() != SimdLevel::scalar) return detail::divide_round_f16_row_avx2(x, d, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(x[i] / d));
}

}  // namespace ember::ops
