// matmul and dot_f32 dispatch: validates the weight matrix, quantizes the activations once
// per call (one implementation, shared by every SIMD path, so it cannot differ between
// them), and splits weight rows across the pool.
#include "ops/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/blocks.h"
#include "ops/dot.h"
#include "ops/kernels.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::ops {
namespace detail {

int64_t weight_row_bytes(gguf::TensorType type, int64_t k) {
  gguf::BlockGeometry g;
  EMBER_CHECK(gguf::block_geometry(type, &g));
  return k / g.elems * g.bytes;
}

}  // namespace detail

namespace {

using detail::Activations;
using detail::KernelTable;
using detail::MatmulKernel;
using gguf::TensorType;

const KernelTable& table_for(SimdLevel level) {
  static const SimdLevel detected = detect_simd();
  if (int(level) > int(detected))
    fail_field("matmul", "SIMD path", std::string("one this CPU supports (at most ") +
               simd_name(detected) + ")", simd_name(level));
  switch (level) {
    case SimdLevel::avx512vnni: return detail::avx512vnni_kernels();
    case SimdLevel::avx512: return detail::avx512_kernels();
    case SimdLevel::avx2: return detail::avx2_kernels();
    case SimdLevel::scalar: break;
  }
  return detail::scalar_kernels();
}

MatmulKernel kernel_for(const KernelTable& t, TensorType type) {
  switch (type) {
    case TensorType::F32: return t.f32;
    case TensorType::F16: return t.f16;
    case TensorType::BF16: return t.bf16;
    case TensorType::Q4_0: return t.q4_0;
    case TensorType::Q4_1: return t.q4_1;
    case TensorType::Q5_0: return t.q5_0;
    case TensorType::Q5_1: return t.q5_1;
    case TensorType::Q8_0: return t.q8_0;
    case TensorType::Q4_K: return t.q4_k;
    case TensorType::Q5_K: return t.q5_k;
    case TensorType::Q6_K: return t.q6_k;
    default: return nullptr;
  }
}

bool uses_q8k(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

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

// Q8_0-style: per 32-block, amax = max |x|, d = amax / 127 stored as f16 (the kernels use the
// rounded value), q = round_q8(x * (127 / amax)) (q = 0 when amax == 0), sum = sum of q.
// The same recipe as llama.cpp's AVX2 quantize_row_q8_0.
void quantize_q8_0_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int32_t* sum) {
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

// Q8_K-style, exactly GGML's quantize_row_q8_K_ref: per 256-block, max = the first element of
// largest magnitude (signed), iscale = -127 / max, q = round_q8(iscale * x), d = 1 / iscale
// (all zero when the block is zero); bsums over 16-element groups.
void quantize_q8_k_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int16_t* bsums) {
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

// Per-thread scratch for quantized activations, reused across calls (decode runs hundreds of
// matmuls per token; this avoids an allocation each time).
struct Scratch {
  std::vector<int8_t> q;
  std::vector<float> d, d8;
  std::vector<int32_t> sum;
  std::vector<int16_t> bsums;
};

}  // namespace

bool matmul_supports(TensorType type) {
  gguf::BlockGeometry g;
  return gguf::block_geometry(type, &g);
}

void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul(W, x, n, y, pool, active_simd());
}

void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool,
            SimdLevel level) {
  gguf::BlockGeometry g;
  if (!gguf::block_geometry(W.type, &g))
    fail_field("matmul", "weight type",
               "one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K",
               gguf::type_name(uint32_t(W.type)));
  if (W.rows < 0 || W.cols <= 0 || W.cols % g.elems != 0)
    fail_field("matmul", "weight shape", "rows >= 0 and cols a positive multiple of " +
               std::to_string(g.elems) + " for " + gguf::type_name(uint32_t(W.type)),
               std::to_string(W.rows) + " x " + std::to_string(W.cols));
  if (n <= 0 || W.rows == 0) return;
  const KernelTable& table = table_for(level);
  const MatmulKernel kernel = kernel_for(table, W.type);
  EMBER_CHECK(kernel != nullptr);

  const int64_t k = W.cols;
  Activations a;
  a.n = n;
  a.k = k;
  a.f32 = x;
  thread_local Scratch s;
  if (g.elems > 1) {
    const int64_t nb = k / g.elems;
    s.q.resize(size_t(n * k));
    s.d.resize(size_t(n * nb));
    a.q = s.q.data();
    a.d = s.d.data();
    if (uses_q8k(W.type)) {
      s.bsums.resize(size_t(n * (k / 16)));
      quantize_q8_k_rows(x, n, k, s.q.data(), s.d.data(), s.bsums.data());
      a.bsums = s.bsums.data();
    } else {
      s.sum.resize(size_t(n * nb));
      quantize_q8_0_rows(x, n, k, s.q.data(), s.d.data(), s.sum.data());
      a.sum = s.sum.data();
      s.d8.resize(size_t(n * nb * 8));
      for (int64_t i = 0; i < n * nb; ++i)
        for (int l = 0; l < 8; ++l) s.d8[size_t(8 * i + l)] = s.d[size_t(i)];
      a.d8 = s.d8.data();
    }
  }
  // Rows go to threads in groups of 16 so the SIMD kernels' row blocking stays whole; which
  // thread computes a row never changes its bits.
  constexpr int64_t kGroup = 16;
  const int64_t m = W.rows, groups = (m + kGroup - 1) / kGroup;
  pool.parallel_for(groups, [&](int64_t g0, int64_t g1) {
    kernel(W, a, g0 * kGroup, std::min(m, g1 * kGroup), y);
  });
}

float dot_f32(const float* a, const float* b, int64_t k) {
  return dot_f32(a, b, k, active_simd());
}

float dot_f32(const float* a, const float* b, int64_t k, SimdLevel level) {
  return table_for(level).dot_f32(a, b, k);
}

void dot_f32_rows(const float* a, const float* b, int64_t rows, int64_t k, float scale, float* out) {
  const detail::DotKernel dot = table_for(active_simd()).dot_f32;
  for (int64_t r = 0; r < rows; ++r) out[r] = dot(a, b + r * k, k) * scale;
}

}  // namespace ember::ops
