// The scalar reference kernels: the algorithmic definition of "canonical-v1" for matmul and
// dot_f32 (docs/numerics.md). The SIMD twins in kernels_avx2.cpp / kernels_avx512.cpp must
// reproduce these bits exactly; write every change here first.
#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/blocks.h"
#include "ops/kernels.h"
#include "util/f16.h"

namespace ember::ops::detail {
namespace {

using gguf::BlockQ4_0;
using gguf::BlockQ4_1;
using gguf::BlockQ4_K;
using gguf::BlockQ5_0;
using gguf::BlockQ5_1;
using gguf::BlockQ5_K;
using gguf::BlockQ6_K;
using gguf::BlockQ8_0;
using gguf::kQK;
using gguf::kQKK;
using gguf::load_u16;

// The fixed trees that end every reduction.
inline float tree16(const float* acc) {
  float s8[8], s4[4], s2[2];
  for (int l = 0; l < 8; ++l) s8[l] = acc[l] + acc[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
  return s2[0] + s2[1];
}
inline float tree8(const float* acc) {
  float s4[4], s2[2];
  for (int l = 0; l < 4; ++l) s4[l] = acc[l] + acc[l + 4];
  for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
  return s2[0] + s2[1];
}

float dot_f32_scalar(const float* a, const float* b, int64_t k) {
  float acc[16] = {};
  for (int64_t j = 0; j < k; ++j) acc[j % 16] = std::fma(a[j], b[j], acc[j % 16]);
  return tree16(acc);
}

// ---- f32 / f16 / bf16 weights: convert the row exactly, then dot_f32 per token ----------

template <gguf::TensorType T>
void float_kernel(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                  float* y) {
  const int64_t k = W.cols, m = W.rows;
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t i = r0; i < r1; ++i) {
    if constexpr (T == gguf::TensorType::F32) {
      std::memcpy(row.data(), W.data + i * k * 4, size_t(k) * 4);
    } else {
      const uint8_t* p = W.data + i * k * 2;
      for (int64_t j = 0; j < k; ++j)
        row[j] = T == gguf::TensorType::F16 ? f16_to_f32(load_u16(p + 2 * j))
                                            : bf16_to_f32(load_u16(p + 2 * j));
    }
    for (int64_t t = 0; t < a.n; ++t) y[t * m + i] = dot_f32_scalar(row.data(), a.f32 + t * k, k);
  }
}

// ---- 32-blocks: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 against Q8_0-style activations ---------
// One row decoded to its integer codes (logical element order), block scales and mins.
struct Row32 {
  std::vector<int8_t> q;  // (k,) signed for Q4_0/Q5_0/Q8_0 (offset removed), unsigned for *_1
  std::vector<float> d, m;  // (nb,)
};

void decode32(gguf::TensorType type, const uint8_t* p, int64_t nb, Row32& r) {
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = r.q.data() + b * kQK;
    switch (type) {
      case gguf::TensorType::Q8_0: {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(p) + b;
        r.d[b] = f16_to_f32(load_u16(blk->d));
        std::memcpy(q, blk->qs, kQK);
        break;
      }
      case gguf::TensorType::Q4_0: {
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(p) + b;
        r.d[b] = f16_to_f32(load_u16(blk->d));
        for (int j = 0; j < 16; ++j) {
          q[j] = int8_t((blk->qs[j] & 0xF) - 8);
          q[j + 16] = int8_t((blk->qs[j] >> 4) - 8);
        }
        break;
      }
      case gguf::TensorType::Q4_1: {
        const auto* blk = reinterpret_cast<const BlockQ4_1*>(p) + b;
        r.d[b] = f16_to_f32(load_u16(blk->d));
        r.m[b] = f16_to_f32(load_u16(blk->m));
        for (int j = 0; j < 16; ++j) {
          q[j] = int8_t(blk->qs[j] & 0xF);
          q[j + 16] = int8_t(blk->qs[j] >> 4);
        }
        break;
      }
      case gguf::TensorType::Q5_0: {
        const auto* blk = reinterpret_cast<const BlockQ5_0*>(p) + b;
        r.d[b] = f16_to_f32(load_u16(blk->d));
        uint32_t qh;
        std::memcpy(&qh, blk->qh, 4);
        for (int j = 0; j < 16; ++j) {
          q[j] = int8_t(((blk->qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - 16);
          q[j + 16] = int8_t(((blk->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
        }
        break;
      }
      case gguf::TensorType::Q5_1: {
        const auto* blk = reinterpret_cast<const BlockQ5_1*>(p) + b;
        r.d[b] = f16_to_f32(load_u16(blk->d));
        r.m[b] = f16_to_f32(load_u16(blk->m));
        uint32_t qh;
        std::memcpy(&qh, blk->qh, 4);
        for (int j = 0; j < 16; ++j) {
          q[j] = int8_t((blk->qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
          q[j + 16] = int8_t((blk->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
        }
        break;
      }
      default: break;
    }
  }
}

// Canonical 32-block dot: for block b, isum[l] = sum over e in [4l, 4l + 4) of wq * aq (exact
// int32); s = wd[b] * ad[b]; acc[8 * (b & 1) + l] = fma(s, float(isum[l]), acc[...]); then
// tree16. With mins (Q4_1 / Q5_1): macc = fma(wm[b], ad[b] * float(asum[b]), macc) in block
// order, result = tree16(acc) + macc.
template <gguf::TensorType T>
void q32_kernel(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                float* y) {
  constexpr bool kHasMin = T == gguf::TensorType::Q4_1 || T == gguf::TensorType::Q5_1;
  const int64_t k = W.cols, m = W.rows, nb = k / kQK;
  const int64_t rb = weight_row_bytes(T, k);
  Row32 r{std::vector<int8_t>(size_t(k)), std::vector<float>(size_t(nb)),
          std::vector<float>(size_t(nb))};
  for (int64_t i = r0; i < r1; ++i) {
    decode32(T, W.data + i * rb, nb, r);
    for (int64_t t = 0; t < a.n; ++t) {
      const int8_t* aq = a.q + t * k;
      const float* ad = a.d + t * nb;
      float acc[16] = {};
      float macc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const float s = r.d[b] * ad[b];
        const int h = int(b & 1);
        for (int l = 0; l < 8; ++l) {
          int32_t isum = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e)
            isum += int32_t(r.q[b * kQK + e]) * int32_t(aq[b * kQK + e]);
          acc[8 * h + l] = std::fma(s, float(isum), acc[8 * h + l]);
        }
        if constexpr (kHasMin)
          macc = std::fma(r.m[b], ad[b] * float(a.sum[t * nb + b]), macc);
      }
      float v = tree16(acc);
      if constexpr (kHasMin) v = v + macc;
      y[t * m + i] = v;
    }
  }
}

// ---- K quants: Q4_K / Q5_K / Q6_K against Q8_K-style activations -----------------------
// Canonical super-block dot: isum[l] = sum over elements e with (e % 32) / 4 == l of
// sc(e) * wq(e) * aq(e) (exact int32; sc is the sub-block scale: 6-bit for Q4_K/Q5_K, int8
// for Q6_K; wq is q for Q4_K/Q5_K, q - 32 for Q6_K). With dd = d * ad[b]:
//   acc[l] = fma(dd, float(isum[l]), acc[l]);
// Q4_K / Q5_K then subtract their mins: mprod[j] = m[j] * (bsums[2j] + bsums[2j + 1]),
//   acc[j] = fma(-(dmin * ad[b]), float(mprod[j]), acc[j]);
// over super-blocks in order; result = tree8(acc). Every float(int) here is exact (|isum| <
// 2^24 for any block contents: Q6_K's worst case is 32 * 128 * 32 * 127 = 16646144).
struct RowK {
  std::vector<int8_t> q;                     // (k,) wq(e)
  std::vector<int16_t> sc;                   // (k/32 or k/16,) sub-block scales
  std::vector<int16_t> mn;                   // (k/32,) sub-block mins (Q4_K / Q5_K)
  std::vector<float> d, dmin;                // (nb,)
};

void decode_k(gguf::TensorType type, const uint8_t* p, int64_t nb, RowK& r) {
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = r.q.data() + b * kQKK;
    if (type == gguf::TensorType::Q6_K) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(p) + b;
      r.d[b] = f16_to_f32(load_u16(blk->d));
      for (int j = 0; j < 16; ++j) r.sc[b * 16 + j] = blk->scales[j];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = blk->ql + 64 * h;
        const uint8_t* qh = blk->qh + 32 * h;
        for (int l = 0; l < 32; ++l) {
          q[128 * h + l] = int8_t(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
          q[128 * h + l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          q[128 * h + l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          q[128 * h + l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
      continue;
    }
    const uint8_t* scales;
    if (type == gguf::TensorType::Q4_K) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(p) + b;
      r.d[b] = f16_to_f32(load_u16(blk->d));
      r.dmin[b] = f16_to_f32(load_u16(blk->dmin));
      scales = blk->scales;
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          q[64 * c + l] = int8_t(blk->qs[32 * c + l] & 0xF);
          q[64 * c + 32 + l] = int8_t(blk->qs[32 * c + l] >> 4);
        }
    } else {
      const auto* blk = reinterpret_cast<const BlockQ5_K*>(p) + b;
      r.d[b] = f16_to_f32(load_u16(blk->d));
      r.dmin[b] = f16_to_f32(load_u16(blk->dmin));
      scales = blk->scales;
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          const int h0 = (blk->qh[l] >> (2 * c)) & 1, h1 = (blk->qh[l] >> (2 * c + 1)) & 1;
          q[64 * c + l] = int8_t((blk->qs[32 * c + l] & 0xF) | (h0 << 4));
          q[64 * c + 32 + l] = int8_t((blk->qs[32 * c + l] >> 4) | (h1 << 4));
        }
    }
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      gguf::unpack_k4_scale(j, scales, &sc, &mn);
      r.sc[b * 8 + j] = sc;
      r.mn[b * 8 + j] = mn;
    }
  }
}

template <gguf::TensorType T>
void k_kernel(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  constexpr bool kQ6 = T == gguf::TensorType::Q6_K;
  constexpr int kSub = kQ6 ? 16 : 32;  // elements per sub-block scale
  const int64_t k = W.cols, m = W.rows, nb = k / kQKK;
  const int64_t rb = weight_row_bytes(T, k);
  RowK r{std::vector<int8_t>(size_t(k)), std::vector<int16_t>(size_t(k / kSub)),
         std::vector<int16_t>(size_t(k / 32)), std::vector<float>(size_t(nb)),
         std::vector<float>(size_t(nb))};
  for (int64_t i = r0; i < r1; ++i) {
    decode_k(T, W.data + i * rb, nb, r);
    for (int64_t t = 0; t < a.n; ++t) {
      const int8_t* aq = a.q + t * k;
      const float* ad = a.d + t * nb;
      const int16_t* bs = a.bsums + t * (k / 16);
      float acc[8] = {};
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum[8] = {};
        for (int e = 0; e < kQKK; ++e) {
          const int64_t g = b * kQKK + e;
          isum[(e % 32) / 4] += int32_t(r.sc[g / kSub]) * int32_t(r.q[g]) * int32_t(aq[g]);
        }
        const float dd = r.d[b] * ad[b];
        for (int l = 0; l < 8; ++l) acc[l] = std::fma(dd, float(isum[l]), acc[l]);
        if constexpr (!kQ6) {
          const float dm = r.dmin[b] * ad[b];
          for (int j = 0; j < 8; ++j) {
            const int32_t mprod = int32_t(r.mn[b * 8 + j]) *
                                  (int32_t(bs[b * 16 + 2 * j]) + int32_t(bs[b * 16 + 2 * j + 1]));
            acc[j] = std::fma(-dm, float(mprod), acc[j]);
          }
        }
      }
      y[t * m + i] = tree8(acc);
    }
  }
}

using gguf::TensorType;
const KernelTable kScalar = {
    dot_f32_scalar,
    float_kernel<TensorType::F32>,
    float_kernel<TensorType::F16>,
    float_kernel<TensorType::BF16>,
    q32_kernel<TensorType::Q4_0>,
    q32_kernel<TensorType::Q4_1>,
    q32_kernel<TensorType::Q5_0>,
    q32_kernel<TensorType::Q5_1>,
    q32_kernel<TensorType::Q8_0>,
    k_kernel<TensorType::Q4_K>,
    k_kernel<TensorType::Q5_K>,
    k_kernel<TensorType::Q6_K>,
};

}  // namespace

const KernelTable& scalar_kernels() { return kScalar; }

}  // namespace ember::ops::detail
