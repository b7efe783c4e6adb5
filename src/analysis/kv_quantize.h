#pragma once
// A quantized KV cache, emulated on ember's f16 cache: what llama.cpp's --cache-type-k/-v
// q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | iq4_nl does to the values it stores.
//
// One cache row is one position of one layer: the n_kv_heads * head_dim values of every KV
// head, in head order, as llama.cpp lays out a cell (ggml_row_size(type, n_embd_k_gqa)). So
// a block of 32 may span heads when head_dim < 32, exactly as in llama.cpp; the row length
// must be a multiple of 32. Each row is widened f16 -> f32; with the llama.cpp rotation (the
// default: llama.cpp v0.5.0 rotates quantized K/V when head_dim is a multiple of 64) it is
// rotated per block by kv::llamacpp_hadamard as llama.cpp does before storing it; then it is
// quantized with the encoder llama.cpp's CPU backend uses on x86 (gguf::quantize_row_kv_cache),
// dequantized as ggml does, unrotated by the same function, and each value rounded back to
// f16 (nearest even) for ember's f16 cache. That last rounding is the one step llama.cpp does
// not take (it reads the dequantized f32 values); it is at most half an f16 ulp per element,
// far below the quantization step of every type here. Rotated or not, K and V come back in
// the model's own basis, so ember's attention reads them unchanged (llama.cpp instead rotates
// Q and unrotates the attention output: the same product up to rounding).
#include <cstdint>
#include <string>

#include "analysis/compare_metrics.h"
#include "gguf/types.h"
#include "model/kv_cache.h"

namespace ember::analysis {

// What is modelled before quantizing: llamacpp = llama.cpp v0.5.0's attention rotation
// (attn_rot_k / attn_rot_v, on by default; a no-op where head_dim is not a multiple of 64),
// none = no rotation (llama.cpp with LLAMA_ATTN_ROT_DISABLE=1, or before the rotation).
enum class KvRotation { llamacpp, none };
const char* kv_rotation_name(KvRotation r);  // "llamacpp" | "none"
// Strict: "llamacpp" or "none", else an error naming `where` and `flag`.
KvRotation parse_kv_rotation(const std::string& s, const char* where, const char* flag);
// The Hadamard block applied to `part` under `r` for this head_dim (kv::llamacpp_rotation:
// K the largest power of 2 >= 64 dividing head_dim, V 64); 0 when none applies.
int kv_rotation_block(KvRotation r, int head_dim, KvPart part);

// One cache row x[n] (f32) through llama.cpp's store path and back: rotated per block of `rot`
// elements (0: not rotated; rot divides n), quantized into `blocks`
// (gguf::row_bytes(type, n) bytes: exactly the bytes llama.cpp stores for that row),
// dequantized and unrotated into y[n]. x and y may be the same array.
void quantize_kv_row(gguf::TensorType type, int rot, const float* x, uint8_t* blocks, float* y,
                     int64_t n);

// Quantizes and dequantizes the `part` rows of `layer` at positions [pos_begin, pos_end).
// Returns the number of f16 elements whose bits change; with write == false nothing is
// modified (a dry count). Error naming the type or the row length when the type is not a
// KV-cache quantization type or n_kv_heads * head_dim is not a multiple of 32; error naming
// the element when a value is NaN or Inf.
uint64_t quantize_kv_rows(model::KvCache& cache, KvPart part, gguf::TensorType type,
                          KvRotation rotation, int layer, int pos_begin, int pos_end, bool write);

// The same count on a cache that is not modified.
uint64_t count_kv_quantize_changes(const model::KvCache& cache, KvPart part,
                                   gguf::TensorType type, KvRotation rotation, int layer,
                                   int pos_begin, int pos_end);

// Checks type and row length as quantize_kv_rows does, without touching a cache.
void check_kv_quantizable(gguf::TensorType type, int n_kv_heads, int head_dim,
                          const char* where);

}  // namespace ember::analysis
