#pragma once
// Dequantization of every supported type, exactly as GGML defines each block layout
// (docs/formats/gguf.md lists them). Scalar reference code; the result is bit-exact.
#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace ember::gguf {

// Dequantizes n elements (a multiple of the type's block size) from src into dst.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
// Whole tensor to f32, row-major with shape[0] contiguous. Error naming the tensor for an
// unsupported type.
std::vector<float> dequantize_tensor(const TensorInfo& t);

}  // namespace ember::gguf
