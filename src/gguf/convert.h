#pragma once
// Whole-model type conversion (ember model quantize, synth --type): which storage type each
// tensor gets, row encoding from f32, and the streaming rewrite of a GGUF file.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/types.h"
#include "util/byte_io.h"

namespace ember::gguf {

// Target types a model can be written as (synth --type, quantize --type).
bool is_model_target_type(TensorType t);  // f32, f16, bf16, q8_0, q4_0, q4_K, q6_K

// The storage type of a matrix with rows of `row_length` elements written as `target`: the
// target itself when the row length is a multiple of its block; otherwise the fallback
// llama.cpp's llama-quantize uses: K-quants -> Q8_0 when rows are a multiple of 32 (llama.cpp
// writes Q5_0 for a Q4_K target; ember has no Q5_0 quantizer and writes Q8_0, which is more
// accurate), anything else -> F16.
TensorType storage_type(TensorType target, uint64_t row_length);

// Whether a tensor is converted at all: matrices (2 or more dims) are; 1-D tensors (norms,
// biases, rope_freqs) always stay F32.
bool converts_tensor(const std::vector<uint64_t>& shape);

// llama.cpp's general.file_type value for a whole-model target (LLAMA_FTYPE_*).
uint32_t llama_file_type(TensorType target);

// Encodes n f32 values (a multiple of the type's block size) as `type` onto out.
// `scratch` is reused between calls to avoid reallocating.
void encode_row(TensorType type, const float* src, int64_t n, std::vector<uint8_t>& scratch,
                ByteSink& out);

// Decodes a row of n elements of any supported type to f32.
void decode_row(TensorType type, const uint8_t* src, float* dst, int64_t n);

struct ConvertedTensor {
  std::string name;
  TensorType from, to;
  bool fell_back;  // `to` differs from the requested target because of the row length
};

// The order llama-quantize writes tensors in (its loader's weights map): names without a
// layer first, then by layer number ("blk.N."), by name (byte order) within each.
std::vector<const TensorInfo*> llama_quantize_order(const std::vector<TensorInfo>& tensors);

// Writes `in` to out_path with every matrix stored as `target` (with fallbacks) and 1-D
// tensors as F32, in llama_quantize_order; metadata is copied, then general.quantization_version
// (quantized targets) and general.file_type are appended, as llama-quantize does, so where
// the types agree the file is llama-quantize's byte for byte. Atomic; refuses to overwrite
// without force.
std::vector<ConvertedTensor> convert_model(const GgufFile& in, TensorType target,
                                           const std::string& out_path, bool force);

}  // namespace ember::gguf
