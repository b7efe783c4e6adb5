#pragma once
// Dequantization of every supported type, exactly as GGML defines each block layout
// (docs/formats/gguf.md lists them). Scalar reference code; the result is bit-exact.
#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace ember::gguf {

// Dequantizes n elements (a multiple of the type's block size) from src into dst.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
// TensorType::IQ4_NL (a KV-cache type of llama.cpp, no weight matmul) is accepted too:
// x = d * kvalues_iq4nl[q], low nibble of byte j = element j, high nibble = j + 16.
// Whole tensor to f32, row-major with shape[0] contiguous. Error naming the tensor for an
// unsupported type.
std::vector<float> dequantize_tensor(const TensorInfo& t);

}  // namespace ember::gguf
