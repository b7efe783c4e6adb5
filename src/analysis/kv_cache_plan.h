#pragma once
// What a llama.cpp cache stores, layer by layer: the K and V type of each layer, as
// --cache-type-k/-v set them for the whole cache or a per-layer override does (first and last
// layers at f16, say), and optionally one KV head alone (`study kv-quant`'s per-head figures).
// F16 means "as ember stores it": the row is not touched.
//
// apply() is the one way a plan changes a cache row, whether the engine is writing it
// (in-loop: ForwardHooks::transform_kv, over f32 rows as llama.cpp quantizes them) or a
// finished prefix is quantized afterwards (prefix: the f16 rows widened, quantized, rounded
// back). Each quantized row goes through analysis/kv_quantize.h's quantize_kv_row.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/kv_quantize.h"
#include "gguf/types.h"
#include "model/kv_cache.h"

namespace ember::analysis {

struct KvCachePlan {
  std::vector<gguf::TensorType> k, v;  // [layer]: F16 or a KV-cache quantization type
  // -1: every KV head of a quantized row; h >= 0: the whole row is quantized (a 32-block may
  // span heads when head_dim < 32, as in llama.cpp) but only head h's values are kept, the
  // other heads' stay exact.
  int head = -1;

  // Every layer K `kt`, V `vt`.
  static KvCachePlan uniform(int layers, gguf::TensorType kt, gguf::TensorType vt);
  bool quantizes(int layer) const;   // K or V of `layer` is not F16
  bool quantizes_any() const;
  // Bytes one position occupies over all layers in llama.cpp's cache: sum over layers of
  // row_bytes(k type, kv_heads * head_dim) + row_bytes(v type, ...) (f16: 2 bytes a value).
  uint64_t bytes_per_position(int n_kv_heads, int head_dim) const;
  double bits_per_value(int n_kv_heads, int head_dim) const;  // over K and V of every layer
  // "K q8_0 / V q8_0", "K q4_0 / V f16, layers 0,5 f16", "layer 2 head 1: K q4_0 / V q4_0".
  std::string label() const;

  // Replaces the K and V rows of one position of `layer` (f32, [n_kv_heads * head_dim]) by
  // what the planned cache stores, dequantized and unrotated into the model's basis. A no-op
  // for a layer the plan leaves at f16. Pure: callable from several threads at once.
  void apply(KvRotation rotation, int layer, int n_kv_heads, int head_dim, float* k, float* v) const;
  // A query head row of `layer` (f32 [head_dim], after RoPE) as llama.cpp's CPU flash attention
  // reads it: when K of that layer is quantized, converted to K's vec-dot type (q8_0; q8_1 for
  // q4_1/q5_1 holds the same values) after K's rotation, and rotated back; otherwise rounded to
  // f16 (ember's canonical attention operand, bit for bit). head_dim not a multiple of 32 is
  // rounded to f16 (llama.cpp refuses such quantized caches). Pure, like apply().
  void apply_query(KvRotation rotation, int layer, int head_dim, const float* q, float* out) const;
  // The same on the f16 rows of `cache` at positions [pos_begin, pos_end) of every layer:
  // widened to f32, apply(), rounded to f16 (nearest even): quantize_kv_rows' result for a
  // plan of every head.
  void apply(KvRotation rotation, model::KvCache& cache, int pos_begin, int pos_end) const;
};

// Checks each planned type is a KV-cache quantization type (or F16) and the row length of
// this geometry can hold it (check_kv_quantizable), naming `where`.
void check_plan(const KvCachePlan& p, int n_layers, int n_kv_heads, int head_dim, const char* where);

}  // namespace ember::analysis
