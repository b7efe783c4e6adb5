#pragma once
// Quantization of f32 rows into Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K and Q6_K with the
// rounding of the format's reference (non-imatrix) behaviour, so files ember writes load and
// match in other GGUF tools; and the encoders llama.cpp's CPU backend uses when it writes a
// quantized KV cache (--cache-type-k/-v), for measuring what such a cache costs.
#include <cstdint>

#include "gguf/types.h"

namespace ember::gguf {

// GGML has two Q8_0 encoders. `reference` (ggml-quants.c quantize_row_q8_0_ref: q =
// roundf(x * (1/d)), ties away from zero) writes model files. `cpu_x86` (ggml-cpu's x86
// AVX/AVX2 quantize_row_q8_0: q = x * (127/amax) rounded ties-to-even) is the CPU backend's
// from_float, so it is what llama.cpp writes into a q8_0 KV cache on x86. They differ in a
// few elements per thousand. Every other type has a single encoder (the reference).
enum class Q8Encoder { reference, cpu_x86 };

bool can_quantize_to(TensorType type);
// Quantizes n elements (multiple of the block size) of src into dst; returns bytes written.
uint64_t quantize_row(TensorType type, const float* src, void* dst, int64_t n,
                      Q8Encoder q8 = Q8Encoder::reference);

// The quantized KV-cache types llama.cpp offers: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl.
bool is_kv_cache_quant_type(TensorType type);
// One cache row as llama.cpp's CPU backend on x86 quantizes it (Q8Encoder::cpu_x86 for q8_0,
// the reference for the rest). Error naming the type for any other type.
uint64_t quantize_row_kv_cache(TensorType type, const float* src, void* dst, int64_t n);

}  // namespace ember::gguf
