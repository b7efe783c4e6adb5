#pragma once
// Dequantization of every supported type, exactly as GGML defines each block layout
// (docs/formats/gguf.md lists them). Scalar reference code; the result is bit-exact.
#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace ember::gguf {

// Dequantizes n elements (a multiple of the type's block size) from src into dst.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
// IQ4_NL (GGML type 20; not a weight type ember reads, so not a TensorType): blocks of 32,
// f16 d then 16 bytes of 4-bit indices into GGML's fixed non-linear table kvalues_iq4nl,
// x = d * kvalues_iq4nl[q] (low nibble of byte j = element j, high nibble = j + 16), in
// ggml's order (dequantize_row_iq4_nl). n must be a multiple of 32. llama.cpp offers it as a
// KV cache type (--cache-type-k/-v iq4_nl); kv/llamacpp_state reads such rows with it.
void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n);
inline constexpr int kIq4NlBlockBytes = 18;
// Whole tensor to f32, row-major with shape[0] contiguous. Error naming the tensor for an
// unsupported type.
std::vector<float> dequantize_tensor(const TensorInfo& t);

}  // namespace ember::gguf
