#pragma once
// The canonical f32 dot product of the numerics contract "canonical-v1" (docs/numerics.md),
// used by attention, RMSNorm and every f32/f16/bf16 matmul.
//
// dot_f32(a (k,), b (k,)) -> scalar:
//   16 accumulators, all +0; element j goes to lane j % 16: acc[j % 16] = fma(a[j], b[j], acc)
//   in increasing j; then a fixed pairwise tree: s8[l] = acc[l] + acc[l + 8],
//   s4[l] = s8[l] + s8[l + 4], s2[l] = s4[l] + s4[l + 2], result = s2[0] + s2[1].
// The order depends on k alone, so the scalar, AVX2 and AVX-512 paths give the same bits.
#include <cstdint>

#include "util/simd.h"

namespace ember::ops {

// On the path active_simd() chooses.
float dot_f32(const float* a, const float* b, int64_t k);
// On a given path (tests compare the paths bit for bit); level must be supported.
float dot_f32(const float* a, const float* b, int64_t k, SimdLevel level);
// out[r] = dot_f32(a, b + r * k, k) * scale for r in [0, rows): the same bits as the calls one
// by one, with the path chosen once (attention scores of one query against a block of keys).
void dot_f32_rows(const float* a, const float* b, int64_t rows, int64_t k, float scale, float* out);

}  // namespace ember::ops
