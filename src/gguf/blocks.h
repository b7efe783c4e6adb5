#pragma once
// Byte layouts of the GGML block types, as ggml-common.h defines them. Every block is
// little-endian, packed (no padding), and may sit at any byte offset in a file, so code reads
// blocks through these structs only via memcpy or byte pointers (alignment 1 by construction:
// every member is a byte array). f16 values are IEEE binary16 bit patterns (util/f16.h).
//
// Element order inside a block is the logical order of the row: block b of a row holds
// elements [b*QK, (b+1)*QK). Where a block packs two elements per byte, the comment says which.
// docs/formats/gguf-types.md describes each layout and the rounding ember uses to write them.
#include <cstdint>
#include <cstring>

#include "gguf/types.h"

namespace ember::gguf {

inline constexpr int kQK = 32;    // elements per block of the *_0 / *_1 types
inline constexpr int kQKK = 256;  // elements per super-block of the K types
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// Reads a little-endian u16 (an f16 bit pattern) from any address.
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Q4_0: x = d * (q - 8), q in [0, 15]. qs[j] low nibble = element j, high nibble = j + 16.
struct BlockQ4_0 {
  uint8_t d[2];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: x = d * q + m, q in [0, 15]. Nibble order as Q4_0.
struct BlockQ4_1 {
  uint8_t d[2];
  uint8_t m[2];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: x = d * (q - 16), q in [0, 31]. Low 4 bits as Q4_0; bit 4 of element j is bit j of
// the little-endian u32 qh.
struct BlockQ5_0 {
  uint8_t d[2];
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: x = d * q + m, q in [0, 31]. Bits as Q5_0.
struct BlockQ5_1 {
  uint8_t d[2];
  uint8_t m[2];
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: x = d * q, q in [-128, 127] (writers produce [-127, 127]).
struct BlockQ8_0 {
  uint8_t d[2];
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// IQ4_NL: x = d * kIQ4NLValues[q], q in [0, 15] an index into a fixed non-linear table.
// Nibble order as Q4_0.
struct BlockIQ4_NL {
  uint8_t d[2];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
// GGML's kvalues_iq4nl (ggml-common.h).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Q8_1: as Q8_0 plus s = d * sum(q) as f16 (GGML's activation type for Q4_1 / Q5_1).
struct BlockQ8_1 {
  uint8_t d[2];
  uint8_t s[2];
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Q4_K: 8 sub-blocks of 32. x = d * sc[j] * q - dmin * m[j], q in [0, 15], with 6-bit sc/m
// packed in `scales` (unpack_k4_scale). qs[32 * c + l]: low nibble = element 64c + l, high
// nibble = element 64c + 32 + l.
struct BlockQ4_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K with q in [0, 31]; bit 4 of element 64c + l is bit 2c of qh[l], of element
// 64c + 32 + l bit 2c + 1 of qh[l].
struct BlockQ5_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16. x = d * scales[e / 16] * (q - 32), q in [0, 63]. In half h
// (elements 128h .. 128h + 127), for l in [0, 32): element 128h + l + 32g takes its low 4 bits
// from ql[64h + l + 32 * (g & 1)] (low nibble for g < 2, high nibble for g >= 2) and its top
// 2 bits from bits 2g, 2g + 1 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint8_t d[2];
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: GGML's activation type for the K quants. x = d * q with f32 d; bsums[i] is the sum
// of q over elements [16i, 16i + 16).
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block (GGML's
// get_scale_min_k4): bytes 0-3 hold sc[0..3] in bits 0-5, bytes 4-7 m[0..3] in bits 0-5;
// sub-blocks 4-7 take their low 4 bits from byte j + 4 (sc low nibble, m high nibble) and
// their top 2 bits from bits 6-7 of bytes j - 4 (sc) and j (m).
inline void unpack_k4_scale(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Block geometry of the types ember's kernels handle (F32/F16/BF16: one element per block).
// Returns false for any other type.
struct BlockGeometry {
  int elems = 0;
  int bytes = 0;
};
inline bool block_geometry(TensorType t, BlockGeometry* g) {
  switch (t) {
    case TensorType::F32: *g = {1, 4}; return true;
    case TensorType::F16: *g = {1, 2}; return true;
    case TensorType::BF16: *g = {1, 2}; return true;
    case TensorType::Q4_0: *g = {kQK, int(sizeof(BlockQ4_0))}; return true;
    case TensorType::Q4_1: *g = {kQK, int(sizeof(BlockQ4_1))}; return true;
    case TensorType::Q5_0: *g = {kQK, int(sizeof(BlockQ5_0))}; return true;
    case TensorType::Q5_1: *g = {kQK, int(sizeof(BlockQ5_1))}; return true;
    case TensorType::Q8_0: *g = {kQK, int(sizeof(BlockQ8_0))}; return true;
    case TensorType::Q4_K: *g = {kQKK, int(sizeof(BlockQ4_K))}; return true;
    case TensorType::Q5_K: *g = {kQKK, int(sizeof(BlockQ5_K))}; return true;
    case TensorType::Q6_K: *g = {kQKK, int(sizeof(BlockQ6_K))}; return true;
    default: return false;
  }
}

}  // namespace ember::gguf
