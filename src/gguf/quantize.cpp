#include "gguf/quantize.h"

#include <cmath>
#include <cstring>
#include <string>
#include <algorithm>
#include <limits>

#include "gguf/blocks.h"
#include "util/error.h"
#include "util/f16.h"

// Transcriptions of GGML's reference (non-imatrix) quantizers: quantize_row_q8_0_ref,
// quantize_row_q4_0_ref, quantize_row_q4_1_ref, quantize_row_q5_0_ref, quantize_row_q5_1_ref,
// quantize_row_iq4_nl_ref, quantize_row_q4_K_ref (make_qkx2_quants search) and
// quantize_row_q6_K_ref (make_qx_quants search), plus the x86 CPU backend's Q8_0 encoder
// (ggml-cpu/arch/x86/quants.c quantize_row_q8_0), which is what llama.cpp's KV cache writes. Every float expression keeps GGML's operand
// order and rounds each operation separately, so the bytes match llama.cpp's output for the
// same f32 input (tests/gguf/quantize_test.cpp checks it against shared files).
// docs/formats/gguf-types.md states the rounding and the error bounds.

namespace ember::gguf {
namespace {

// GGML's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23 trick. Exact for
// |x| <= 2^22; larger or non-finite inputs give a defined but meaningless value (callers
// clamp), never undefined behaviour.
inline int nearest_int(float x) {
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

inline void store_f16(uint8_t* dst, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(dst, &h, 2);
}

constexpr float kGroupMaxEps = 1e-15f;

void q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(y[i].d, d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));  // ties away
  }
}

// ggml-cpu's x86 (AVX/AVX2) quantize_row_q8_0: d = amax / 127 as f16, q = x * (127 / amax)
// rounded to nearest, ties to even (_mm256_round_ps), so it differs from the reference in the
// multiplier (127/amax, not 1/d) and in the tie rule.
void q8_0_cpu_x86(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    store_f16(y[i].d, amax / 127.0f);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(nearest_int(x[j] * id));  // |x*id| <= 127
  }
}

void q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;  // max: the signed value of largest magnitude (first one)
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(y[i].d, d);
    for (int j = 0; j < kQK / 2; ++j) {
      // GGML truncates x*id + 8.5 towards zero (int8 conversion), then caps at 15.
      const int q0 = std::min(15, int(int8_t(x[j] * id + 8.5f)));
      const int q1 = std::min(15, int(int8_t(x[j + kQK / 2] * id + 8.5f)));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(y[i].d, d);
    store_f16(y[i].m, min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, int(int8_t((x[j] - min) * id + 0.5f)));
      const int q1 = std::min(15, int(int8_t((x[j + kQK / 2] - min) * id + 0.5f)));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(y[i].d, d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, int(int8_t(x[j] * id + 16.5f)));
      const int q1 = std::min(31, int(int8_t(x[j + kQK / 2] * id + 16.5f)));
      y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 & 0x10) >> 4) << j;
      qh |= uint32_t((q1 & 0x10) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(y[i].d, d);
    store_f16(y[i].m, min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      // GGML converts to uint8_t without a cap: (x - min) * id + 0.5 is in [0.5, 31.5].
      const int q0 = int(uint8_t((x[j] - min) * id + 0.5f));
      const int q1 = int(uint8_t((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 & 0x10) >> 4) << j;
      qh |= uint32_t((q1 & 0x10) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// GGML's best_index_int8: the index of the table value nearest to x (the lower one on a tie).
int best_index_iq4(float x) {
  const int8_t* val = kIQ4NLValues;
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) mu = mav; else ml = mav;
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_ref: quantize_row_iq4_nl_impl with one 32-block per super-block, no
// importance weights (weight x^2) and ntry = -1, so no scale search: d0 = max / -127 picks the
// indices, and the stored scale is their weighted least-squares fit sum(w q x) / sum(w q^2).
// A block with max |x| < 1e-15 gets d = 0; GGML then leaves its nibbles as whatever its L
// buffer held, ember writes 0 (every value decodes to 0 either way).
void iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float d0 = max / float(kIQ4NLValues[0]);
    const float id = 1 / d0;
    uint8_t L[kQK];
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kQK; ++j) {
      L[j] = uint8_t(best_index_iq4(id * x[j]));
      const float q = float(kIQ4NLValues[L[j]]);
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    store_f16(y[i].d, sumqx / sumq2);
    for (int j = 0; j < kQK / 2; ++j) y[i].qs[j] = uint8_t(L[j] | (L[j + kQK / 2] << 4));
  }
}

// GGML's make_qkx2_quants: a weighted least-squares search over nstep + 1 candidate scales
// for an asymmetric (scale, min) code of n values in [0, nmax]. Returns the scale; *the_min
// receives -min (>= 0).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    const float diff = scale * float(L[i]) + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * float(Laux[i]) + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQKK], Laux[32];
  float weights[32], mins[kQKK / 32], scales[kQKK / 32];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQKK / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                   -1.f, 0.1f, 20);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    BlockQ4_K& b = y[i];
    std::memset(b.scales, 0, sizeof(b.scales));
    for (int j = 0; j < kQKK / 32; ++j) {
      // GGML stores nearest_int into a uint8_t (modulo 256) before capping at 63.
      const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
      const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
      if (j < 4) {
        b.scales[j] = ls;
        b.scales[j + 4] = lm;
      } else {
        b.scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
        b.scales[j - 4] |= uint8_t((ls >> 4) << 6);
        b.scales[j] |= uint8_t((lm >> 4) << 6);
      }
    }
    store_f16(b.d, max_scale / 63.f);
    store_f16(b.dmin, max_min / 63.f);
    // Requantize every element against the scales as stored (f16 d, 6-bit sc / m).
    for (int j = 0; j < kQKK / 32; ++j) {
      uint8_t sc, m;
      unpack_k4_scale(j, b.scales, &sc, &m);
      const float d = f16_to_f32(load_u16(b.d)) * float(sc);
      if (d == 0.0f) continue;
      const float dm = f16_to_f32(load_u16(b.dmin)) * float(m);
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = uint8_t(std::max(0, std::min(15, l)));
      }
    }
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] = uint8_t(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

// GGML's make_qx_quants with rmse_type 1 (weights x^2) and no importance weights: a
// symmetric code in [-nmax, nmax - 1], refined over 18 candidate scales. L receives
// code + nmax.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = float(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQKK / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    BlockQ6_K& b = y[i];
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -128.f / max_scale;
    store_f16(b.d, 1 / iscale);
    for (int ib = 0; ib < kQKK / 16; ++ib)
      b.scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = f16_to_f32(load_u16(b.d)) * float(b.scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = int8_t(l + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b.ql + 64 * h;
      uint8_t* qh = b.qh + 32 * h;
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l] & 0xF, q2 = Lh[l + 32] & 0xF;
        const int q3 = Lh[l + 64] & 0xF, q4 = Lh[l + 96] & 0xF;
        ql[l] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                        ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

bool can_quantize_to(TensorType type) {
  switch (type) {
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0:
    case TensorType::Q5_1: case TensorType::IQ4_NL: case TensorType::Q4_K: case TensorType::Q6_K:
      return true;
    default: return false;
  }
}

bool is_kv_cache_quant_type(TensorType type) {
  switch (type) {
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0:
    case TensorType::Q5_1: case TensorType::IQ4_NL:
      return true;
    default: return false;
  }
}

uint64_t quantize_row(TensorType type, const float* src, void* dst, int64_t n,
                      Q8Encoder q8) {
  BlockGeometry g;
  if (type == TensorType::IQ4_NL) g = {kQK, int(sizeof(BlockIQ4_NL))};  // no matmul kernel
  if (!can_quantize_to(type) || (type != TensorType::IQ4_NL && !block_geometry(type, &g)))
    fail_field("quantize", "target type", "one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_K, q6_K",
               type_name(uint32_t(type)));
  if (n < 0 || n % g.elems != 0)
    fail_field("quantize", "row length",
               "a multiple of " + std::to_string(g.elems) + " for " + type_name(uint32_t(type)),
               std::to_string(n));
  // GGML's quantizers convert floats to integers without range checks; a NaN or Inf would
  // make that undefined. Refuse them instead.
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      fail_field("quantize", "element " + std::to_string(i), "a finite value",
                 std::to_string(src[i]));
  const int64_t nb = n / g.elems;
  switch (type) {
    case TensorType::Q8_0:
      if (q8 == Q8Encoder::cpu_x86) q8_0_cpu_x86(src, static_cast<BlockQ8_0*>(dst), nb);
      else q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
      break;
    case TensorType::Q4_0: q4_0(src, static_cast<BlockQ4_0*>(dst), nb); break;
    case TensorType::Q4_1: q4_1(src, static_cast<BlockQ4_1*>(dst), nb); break;
    case TensorType::Q5_0: q5_0(src, static_cast<BlockQ5_0*>(dst), nb); break;
    case TensorType::Q5_1: q5_1(src, static_cast<BlockQ5_1*>(dst), nb); break;
    case TensorType::IQ4_NL: iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb); break;
    case TensorType::Q4_K: q4_k(src, static_cast<BlockQ4_K*>(dst), nb); break;
    case TensorType::Q6_K: q6_k(src, static_cast<BlockQ6_K*>(dst), nb); break;
    default: EMBER_CHECK(!"unreachable");
  }
  return uint64_t(nb) * uint64_t(g.bytes);
}

}  // namespace ember::gguf

namespace ember::gguf {

uint64_t quantize_row_kv_cache(TensorType type, const float* src, void* dst, int64_t n) {
  if (!is_kv_cache_quant_type(type))
    fail_field("quantize", "KV cache type", "one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl",
               type_name(uint32_t(type)));
  return quantize_row(type, src, dst, n, Q8Encoder::cpu_x86);
}

}  // namespace ember::gguf
