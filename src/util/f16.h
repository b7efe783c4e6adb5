#pragma once
// IEEE binary16 and bfloat16 conversions, exact and bit-reproducible on every CPU.
// f32 -> f16/bf16 rounds to nearest, ties to even (as F16C's VCVTPS2PH with imm 0 does),
// so scalar and SIMD paths agree bit for bit. NaN stays NaN (quiet), Inf stays Inf.
#include <cstdint>
#include <cstring>

namespace ember {

inline float bits_to_f32(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize into an f32 normal
      int shifts = 0;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        ++shifts;
      }
      mant &= 0x3ffu;
      x = sign | (uint32_t(127 - 15 + 1 - shifts) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return bits_to_f32(x);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? (0x200u | (mant >> 13)) : 0u));
  const int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: correct
  return uint16_t(sign | half);
}

inline float bf16_to_f32(uint16_t b) { return bits_to_f32(uint32_t(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace ember
