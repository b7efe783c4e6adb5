// The scalar reference of the activation quantizers (ops/quantize_act.h) and the dispatch to
// their AVX2 twins (quantize_act_avx2.cpp; the AVX-512 paths use those too: the work is a
// small fraction of a matmul and the bits are the same).
#include "ops/quantize_act.h"

#include <cmath>
#include <cstring>

#include "gguf/blocks.h"
#include "util/f16.h"

namespace ember::ops::detail {

void quantize_q8_0_rows_avx2(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                             int32_t* sum);
void quantize_q8_k_rows_avx2(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                             int16_t* bsums);

namespace {

// Rounds v to the nearest integer, ties to even, clamped to [-127, 127]; NaN gives 0. The
// clamp comes first so the magic-number rounding below is exact.
inline int8_t round_q8(float v) {
  if (!(v == v)) return 0;
  v = v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v);
  const float r = v + 12582912.f;  // 1.5 * 2^23: the float adder rounds to an integer
  int32_t i;
  std::memcpy(&i, &r, 4);
  return int8_t((i & 0x007fffff) - 0x00400000);
}

}  // namespace

void quantize_q8_0_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int32_t* sum, SimdLevel level) {
  if (level != SimdLevel::scalar) return quantize_q8_0_rows_avx2(x, n, k, q, d, sum);
  const int64_t nb = k / gguf::kQK;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + t * k + b * gguf::kQK;
      int8_t* qb = q + t * k + b * gguf::kQK;
      float amax = 0.0f;
      for (int j = 0; j < gguf::kQK; ++j) {
        const float ax = std::fabs(xb[j]);
        amax = ax > amax ? ax : amax;
      }
      d[t * nb + b] = f16_to_f32(f32_to_f16(amax / 127.0f));
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      int32_t s = 0;
      for (int j = 0; j < gguf::kQK; ++j) {
        qb[j] = round_q8(xb[j] * id);
        s += qb[j];
      }
      sum[t * nb + b] = s;
    }
}

void quantize_q8_k_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int16_t* bsums, SimdLevel level) {
  if (level != SimdLevel::scalar) return quantize_q8_k_rows_avx2(x, n, k, q, d, bsums);
  const int64_t nb = k / gguf::kQKK;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + t * k + b * gguf::kQKK;
      int8_t* qb = q + t * k + b * gguf::kQKK;
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < gguf::kQKK; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) {
          amax = ax;
          max = xb[j];
        }
      }
      if (amax == 0.0f) {
        d[t * nb + b] = 0.0f;
        std::memset(qb, 0, gguf::kQKK);
      } else {
        const float iscale = -127.0f / max;
        for (int j = 0; j < gguf::kQKK; ++j) qb[j] = round_q8(iscale * xb[j]);
        d[t * nb + b] = 1.0f / iscale;
      }
      for (int g = 0; g < gguf::kQKK / 16; ++g) {
        int s = 0;
        for (int j = 0; j < 16; ++j) s += qb[16 * g + j];
        bsums[t * (k / 16) + b * 16 + g] = int16_t(s);
      }
    }
}

}  // namespace ember::ops::detail
