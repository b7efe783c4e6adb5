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
void exp_shift_row_avx2(const float* x, int64_t n, float m, float* y);
void exp_shift_row_avx512(const float* x, int64_t n, float m, float* y);
float max_row_avx2(const float* x, int64_t n);
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
// y[i] = exp_f32(x[i] - m), the subtraction and the exponential in one pass. x and y may alias.
void exp_shift_row(const float* x, int64_t n, float m, float* y) {
  const SimdLevel level = simd_base(active_simd());
  if (level == SimdLevel::avx512) return detail::exp_shift_row_avx512(x, n, m, y);
  if (level == SimdLevel::avx2) return detail::exp_shift_row_avx2(x, n, m, y);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i] - m);
}

// m = x[0], then m = x[i] > m ? x[i] : m for every i (n >= 1).
float max_row(const float* x, int64_t n) {
  if (active_simd() != SimdLevel::scalar) return detail::max_row_avx2(x, n);
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Exponentials per row between two rounds of sums: 8 rows x 2 KiB, still in L1 when the
// sums read them.
constexpr int64_t kSumBlock = 512;

// sum[r] += rows[r][i] for i in [b0, b1), each row's adds in increasing i, the C rows' chains
// interleaved. C is a constant so that the sums stay in registers: through memory each add
// waited for the store of the previous one (1 ns a key at 8 rows on an Emerald Rapids core).
template <int C>
void sum_rows(float* const* rows, int64_t b0, int64_t b1, float* sum) {
  float s[C];
  #pragma GCC unroll 8
  for (int r = 0; r < C; ++r) s[r] = sum[r];
  for (int64_t i = b0; i < b1; ++i)
    #pragma GCC unroll 8
    for (int r = 0; r < C; ++r) s[r] += rows[r][i];
  #pragma GCC unroll 8
  for (int r = 0; r < C; ++r) sum[r] = s[r];
}

void sum_rows(float* const* rows, int count, int64_t b0, int64_t b1, float* sum) {
  switch (count) {
    case 8: return sum_rows<8>(rows, b0, b1, sum);
    case 7: return sum_rows<7>(rows, b0, b1, sum);
    case 6: return sum_rows<6>(rows, b0, b1, sum);
    case 5: return sum_rows<5>(rows, b0, b1, sum);
    case 4: return sum_rows<4>(rows, b0, b1, sum);
    case 3: return sum_rows<3>(rows, b0, b1, sum);
    case 2: return sum_rows<2>(rows, b0, b1, sum);
    default: return sum_rows<1>(rows, b0, b1, sum);
  }
}

// softmax_exp_rows for up to 8 rows: the sums over the prefix all rows share run as
// interleaved chains, block by block; each row's rest (a few elements) alone.
void softmax_exp_rows8(float* const* rows, const int64_t* n, int count, float* sums) {
  constexpr int kMax = 8;
  float m[kMax], sum[kMax];
  int64_t common = n[0];
  for (int r = 0; r < count; ++r) {
    common = n[r] < common ? n[r] : common;
    m[r] = max_row(rows[r], n[r]);
    sum[r] = 0.0f;
  }
  for (int64_t b0 = 0; b0 < common; b0 += kSumBlock) {
    const int64_t b1 = common - b0 < kSumBlock ? common : b0 + kSumBlock;
    for (int r = 0; r < count; ++r) exp_shift_row(rows[r] + b0, b1 - b0, m[r], rows[r] + b0);
    sum_rows(rows, count, b0, b1, sum);
  }
  for (int r = 0; r < count; ++r) {
    float* s = rows[r];
    exp_shift_row(s + common, n[r] - common, m[r], s + common);
    for (int64_t i = common; i < n[r]; ++i) sum[r] += s[i];
    sums[r] = sum[r];
  }
}
}  // namespace

void softmax_exp_rows(float* const* rows, const int64_t* n, int count, float* sums) {
  for (int r0 = 0; r0 < count; r0 += 8)
    softmax_exp_rows8(rows + r0, n + r0, count - r0 < 8 ? count - r0 : 8, sums + r0);
}

void softmax_rows(float* const* rows, const int64_t* n, int count) {
  for (int r0 = 0; r0 < count; r0 += 8) {
    const int c = count - r0 < 8 ? count - r0 : 8;
    float sums[8];
    softmax_exp_rows8(rows + r0, n + r0, c, sums);
    for (int r = 0; r < c; ++r)
      for (int64_t i = 0; i < n[r0 + r]; ++i) rows[r0 + r][i] /= sums[r];
  }
}

// One row is a group of one: a single implementation, so the two entry points cannot drift.
void softmax_row(float* s, int64_t n) { softmax_rows(&s, &n, 1); }

}  // namespace ember::ops
