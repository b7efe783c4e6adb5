#include "ops/activations.h"

#include <cmath>
#include <cstring>

#include "util/simd.h"

namespace ember::ops {

namespace detail {
// The SIMD twins (activations_avx2.cpp, activations_avx512.cpp); same contract and bits as
// the scalar functions.
void exp_row_avx2(const float* x, int64_t n, float* y);
void silu_mul_row_avx2(const float* g, const float* u, int64_t n, float* out);
void exp_row_avx512(const float* x, int64_t n, float* y);
void silu_mul_row_avx512(const float* g, const float* u, int64_t n, float* out);
}  // namespace detail

namespace {
inline float scale_pow2(float y, int n) {
  // y * 2^n for n in [-150, 128], y in [0.7, 1.5): split so each factor is a normal power of
  // two; the first product is exact, the second rounds once (also into subnormals).
  const int n1 = n / 2;
  const int n2 = n - n1;
  uint32_t b1 = uint32_t(n1 + 127) << 23, b2 = uint32_t(n2 + 127) << 23;
  float p1, p2;
  std::memcpy(&p1, &b1, 4);
  std::memcpy(&p2, &b2, 4);
  return (y * p1) * p2;
}
}  // namespace

float exp_f32(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.72283935546875f) return INFINITY;
  if (x < -103.972084045410156f) return 0.0f;
  // n = round-half-even(x / ln2); the exact float ops below make n reproducible.
  const float n = std::nearbyint(x * 1.44269502162933349609375f);
  // r = x - n*ln2, ln2 split into C1 (exact in few bits) + C2.
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float y = std::fma(p, z, r) + 1.0f;
  return scale_pow2(y, int(n));
}

void exp_row(const float* x, int64_t n, float* y) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512) return detail::exp_row_avx512(x, n, y);
  if (level == SimdLevel::avx2) return detail::exp_row_avx2(x, n, y);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}

void silu_mul_row(const float* g, const float* u, int64_t n, float* out) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512) return detail::silu_mul_row_avx512(g, u, n, out);
  if (level == SimdLevel::avx2) return detail::silu_mul_row_avx2(g, u, n, out);
  for (int64_t i = 0; i < n; ++i) {
    const float a = g[i];
    out[i] = a / (1.0f + exp_f32(-a)) * u[i];
  }
}

void gelu_row(const float* x, int64_t n, float* out) {
  constexpr float kInvSqrt2 = 0.70710678118654752f, p = 0.3275911f;
  constexpr float a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f, a5 = 1.061405429f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float z = (v < 0.0f ? -v : v) * kInvSqrt2;
    const float t = 1.0f / (1.0f + p * z);
    const float poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
    const float e = 1.0f - poly * exp_f32(-(z * z));
    const float erf_v = v < 0.0f ? -e : e;
    out[i] = 0.5f * v * (1.0f + erf_v);
  }
}

namespace {
// softmax_rows for up to 8 rows: the max and the sum over the prefix all rows share run as
// interleaved chains, each row's rest (a few elements) alone, in the same per-row order.
void softmax_rows8(float* const* rows, const int64_t* n, int count) {
  constexpr int kMax = 8;
  float m[kMax], sum[kMax];
  int64_t common = n[0];
  for (int r = 0; r < count; ++r) {
    common = n[r] < common ? n[r] : common;
    m[r] = rows[r][0];
  }
  for (int64_t i = 1; i < common; ++i)
    for (int r = 0; r < count; ++r) m[r] = rows[r][i] > m[r] ? rows[r][i] : m[r];
  for (int r = 0; r < count; ++r) {
    for (int64_t i = common > 1 ? common : 1; i < n[r]; ++i) m[r] = rows[r][i] > m[r] ? rows[r][i] : m[r];
    float* s = rows[r];
    for (int64_t i = 0; i < n[r]; ++i) s[i] -= m[r];
    exp_row(s, n[r], s);
    sum[r] = 0.0f;
  }
  for (int64_t i = 0; i < common; ++i)
    for (int r = 0; r < count; ++r) sum[r] += rows[r][i];
  for (int r = 0; r < count; ++r) {
    for (int64_t i = common; i < n[r]; ++i) sum[r] += rows[r][i];
    float* s = rows[r];
    for (int64_t i = 0; i < n[r]; ++i) s[i] /= sum[r];
  }
}
}  // namespace

void softmax_rows(float* const* rows, const int64_t* n, int count) {
  for (int r0 = 0; r0 < count; r0 += 8) softmax_rows8(rows + r0, n + r0, count - r0 < 8 ? count - r0 : 8);
}

// One row is a group of one: a single implementation, so the two entry points cannot drift.
void softmax_row(float* s, int64_t n) { softmax_rows(&s, &n, 1); }

}  // namespace ember::ops
