#include "gguf/dequantize.h"

#include <cstring>
#include <limits>
#include <string>

#include "gguf/blocks.h"
#include "util/error.h"
#include "util/f16.h"

// Each routine is a transcription of the layout in gguf/blocks.h into arithmetic, with the
// float operations in the order GGML's dequantize_row_* uses (x*d + m, (d*sc)*q - dmin*m, ...),
// each rounded separately (no FMA contraction: -ffp-contract=off), so results match GGML's
// reference dequantization bit for bit.

namespace ember::gguf {
namespace {

constexpr const char* kSupported =
    "one of the types ember reads: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K";

// f16 -> f32 through a table of all 65536 conversions (built once, from util/f16.h, so the
// bits are the same): a branch-free load instead of the bit-fiddling per element.
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(uint16_t(h));
    return t;
  }();
  return table.data();
}

template <typename Block>
const Block* blocks_of(const void* src, int64_t i) {
  return static_cast<const Block*>(src) + i;
}

void dq_q4_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ4_0* b = blocks_of<BlockQ4_0>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float((b->qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = float((b->qs[j] >> 4) - 8) * d;
    }
  }
}

void dq_q4_1(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ4_1* b = blocks_of<BlockQ4_1>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    const float m = f16_to_f32(load_u16(b->m));
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(b->qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = float(b->qs[j] >> 4) * d + m;
    }
  }
}

void dq_q5_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ5_0* b = blocks_of<BlockQ5_0>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    uint32_t qh;
    std::memcpy(&qh, b->qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      y[j] = float(((b->qs[j] & 0xF) | h0) - 16) * d;
      y[j + kQK / 2] = float(((b->qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dq_q5_1(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ5_1* b = blocks_of<BlockQ5_1>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    const float m = f16_to_f32(load_u16(b->m));
    uint32_t qh;
    std::memcpy(&qh, b->qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      y[j] = float((b->qs[j] & 0xF) | h0) * d + m;
      y[j + kQK / 2] = float((b->qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dq_q8_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ8_0* b = blocks_of<BlockQ8_0>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    for (int j = 0; j < kQK; ++j) y[j] = float(b->qs[j]) * d;
  }
}

void dq_q4_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_K* b = blocks_of<BlockQ4_K>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    const float dmin = f16_to_f32(load_u16(b->dmin));
    const uint8_t* q = b->qs;
    for (int c = 0; c < 4; ++c, q += 32) {  // 64 elements: sub-blocks 2c and 2c + 1
      uint8_t sc, m;
      unpack_k4_scale(2 * c, b->scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      unpack_k4_scale(2 * c + 1, b->scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void dq_q5_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ5_K* b = blocks_of<BlockQ5_K>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    const float dmin = f16_to_f32(load_u16(b->dmin));
    const uint8_t* ql = b->qs;
    for (int c = 0; c < 4; ++c, ql += 32) {
      uint8_t sc, m;
      unpack_k4_scale(2 * c, b->scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      unpack_k4_scale(2 * c + 1, b->scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      const uint8_t u1 = uint8_t(1u << (2 * c)), u2 = uint8_t(2u << (2 * c));
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * float((ql[l] & 0xF) + ((b->qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * float((ql[l] >> 4) + ((b->qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

void dq_q6_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_K* b = blocks_of<BlockQ6_K>(src, i);
    const float d = f16_to_f32(load_u16(b->d));
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = b->ql + 64 * h;
      const uint8_t* qh = b->qh + 32 * h;
      const int8_t* sc = b->scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * float(sc[is + 0]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace

void dequantize_row_iq4_nl(const void* src, float* y, int64_t n) {
  // ggml-common.h kvalues_iq4nl.
  static constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};
  EMBER_CHECK(n >= 0 && n % kQK == 0);
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, p += kIq4NlBlockBytes, y += kQK) {
    const float d = f16_to_f32(load_u16(p));
    const uint8_t* qs = p + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * float(kValues[qs[j] & 0xF]);
      y[j + kQK / 2] = d * float(kValues[qs[j] >> 4]);
    }
  }
}

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  BlockGeometry g;
  if (!block_geometry(type, &g))
    fail_field("dequantize", "tensor type", kSupported,
               type_name(uint32_t(type)));
  EMBER_CHECK(n >= 0 && n % g.elems == 0);
  const int64_t nb = n / g.elems;
  const uint8_t* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case TensorType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case TensorType::F16: {
      const float* table = f16_table();
      for (int64_t i = 0; i < n; ++i) dst[i] = table[load_u16(p + 2 * i)];
      return;
    }
    case TensorType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(p + 2 * i));
      return;
    case TensorType::Q4_0: dq_q4_0(src, dst, nb); return;
    case TensorType::Q4_1: dq_q4_1(src, dst, nb); return;
    case TensorType::Q5_0: dq_q5_0(src, dst, nb); return;
    case TensorType::Q5_1: dq_q5_1(src, dst, nb); return;
    case TensorType::Q8_0: dq_q8_0(src, dst, nb); return;
    case TensorType::Q4_K: dq_q4_k(src, dst, nb); return;
    case TensorType::Q5_K: dq_q5_k(src, dst, nb); return;
    case TensorType::Q6_K: dq_q6_k(src, dst, nb); return;
    default: break;
  }
  EMBER_CHECK(!"block_geometry and dequantize_row disagree");
}

std::vector<float> dequantize_tensor(const TensorInfo& t) {
  BlockGeometry g;
  if (!block_geometry(t.type, &g))
    fail_field("tensor '" + t.name + "'", "type",
               kSupported,
               type_name(uint32_t(t.type)));
  // The reader has already checked shape and size against the file; these checks keep this
  // function safe on a hand-made TensorInfo as well.
  uint64_t n = 1;
  for (uint64_t dim : t.shape) {
    if (dim != 0 && n > std::numeric_limits<uint64_t>::max() / dim)
      fail_field("tensor '" + t.name + "'", "shape", "an element count that fits in 64 bits",
                 "an overflowing product");
    n *= dim;
  }
  const uint64_t row = t.shape.empty() ? 1 : t.shape[0];
  if (row % uint64_t(g.elems) != 0)
    fail_field("tensor '" + t.name + "'", "row length",
               "a multiple of " + std::to_string(g.elems) + " for " + type_name(uint32_t(t.type)),
               std::to_string(row));
  const uint64_t bytes = n / uint64_t(g.elems) * uint64_t(g.bytes);
  if (t.n_bytes != bytes || (n > 0 && t.data == nullptr))
    fail_field("tensor '" + t.name + "'", "data size", std::to_string(bytes) + " bytes",
               std::to_string(t.n_bytes) + " bytes");
  std::vector<float> out(n);
  if (n > 0) dequantize_row(t.type, t.data, out.data(), int64_t(n));
  return out;
}

}  // namespace ember::gguf
