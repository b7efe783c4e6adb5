#pragma once
// Quantization of f32 rows into Q8_0, Q4_0, Q4_K and Q6_K with the rounding of the format's
// reference (non-imatrix) behaviour, so files ember writes load and match in other GGUF tools.
#include <cstdint>

#include "gguf/types.h"

namespace ember::gguf {

bool can_quantize_to(TensorType type);
// Quantizes n elements (multiple of the block size) of src into dst; returns bytes written.
uint64_t quantize_row(TensorType type, const float* src, void* dst, int64_t n);

}  // namespace ember::gguf
