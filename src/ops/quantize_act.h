#pragma once
// Internal to ops/: the quantization of activation rows that matmul applies before the
// integer kernels (docs/numerics.md, "Activations"). One recipe per format, with a scalar
// reference and an AVX2 twin that computes the same bits (every step is an exact or singly
// rounded IEEE operation done lane by lane; tests/ops/quantize_act_test.cpp compares them).
#include <cstdint>

#include "util/simd.h"

namespace ember::ops::detail {

// Q8_0-style, per 32-block of each of the n rows of x (n, k): amax = max |x| (NaN ignored),
// d = amax / 127 rounded to f16 (stored as f32), q = round_q8(x * (127 / amax)) (0 when
// amax == 0 or x * (127 / amax) is NaN; ties to even, clamped to [-127, 127]), sum = sum of
// the block's q. The recipe of llama.cpp's AVX2 quantize_row_q8_0.
//   q (n * k), d (n * k / 32), sum (n * k / 32)
void quantize_q8_0_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int32_t* sum, SimdLevel level);

// Q8_K-style, exactly GGML's quantize_row_q8_K_ref, per 256-block: max = the first element
// of largest magnitude (signed; NaN ignored), iscale = -127 / max, q = round_q8(iscale * x),
// d = 1 / iscale (all zero when the block's amax is 0); bsums over 16-element groups.
//   q (n * k), d (n * k / 256), bsums (n * k / 16)
void quantize_q8_k_rows(const float* x, int64_t n, int64_t k, int8_t* q, float* d,
                        int16_t* bsums, SimdLevel level);

}  // namespace ember::ops::detail
