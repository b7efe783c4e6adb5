#include "analysis/kv_quantize.h"

#include <string>
#include <vector>

#include "gguf/quantize.h"
#include "kv/llamacpp_state.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::analysis {

const char* kv_rotation_name(KvRotation r) {
  return r == KvRotation::llamacpp ? "llamacpp" : "none";
}

KvRotation parse_kv_rotation(const std::string& s, const char* where, const char* flag) {
  if (s == "llamacpp") return KvRotation::llamacpp;
  if (s == "none") return KvRotation::none;
  fail_field(where, flag, "llamacpp or none", "'" + s + "'");
}

int kv_rotation_block(KvRotation r, int head_dim, KvPart part) {
  return r == KvRotation::llamacpp ? kv::llamacpp_rotation(head_dim, part == KvPart::k) : 0;
}

void check_kv_quantizable(gguf::TensorType type, int n_kv_heads, int head_dim,
                          const char* where) {
  if (!gguf::is_kv_cache_quant_type(type))
    fail_field(where, "--quantize", "one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl",
               gguf::type_name(uint32_t(type)));
  const int64_t row = int64_t(n_kv_heads) * head_dim;
  if (row <= 0 || row % 32 != 0)
    fail_field(where, "cache row length",
               "n_kv_heads * head_dim a multiple of 32 (a " + gguf::type_name(uint32_t(type)) +
                   " block)",
               std::to_string(n_kv_heads) + " x " + std::to_string(head_dim) + " = " +
                   std::to_string(row));
}

void quantize_kv_row(gguf::TensorType type, int rot, const float* x, uint8_t* blocks, float* y,
                     int64_t n) {
  kv::llamacpp_store_row(int32_t(type), rot, x, blocks, y, n);
}

uint64_t quantize_kv_rows(model::KvCache& cache, KvPart part, gguf::TensorType type,
                          KvRotation rotation, int layer, int pos_begin, int pos_end, bool write) {
  check_kv_quantizable(type, cache.n_kv_heads, cache.head_dim, "kv quantize");
  EMBER_CHECK(layer >= 0 && layer < cache.n_layers);
  EMBER_CHECK(pos_begin >= 0 && pos_begin <= pos_end && pos_end <= cache.capacity);
  const int H = cache.n_kv_heads, D = cache.head_dim;
  const int rot = kv_rotation_block(rotation, D, part);
  const size_t n = size_t(H) * size_t(D);
  std::vector<float> x(n), y(n);
  std::vector<uint8_t> blocks(size_t(gguf::row_bytes(type, n)));
  uint64_t changed = 0;
  for (int p = pos_begin; p < pos_end; ++p) {
    for (int h = 0; h < H; ++h) {
      const uint16_t* src = part == KvPart::k ? cache.k_row(layer, h, p) : cache.v_row(layer, h, p);
      for (int d = 0; d < D; ++d) x[size_t(h) * D + d] = f16_to_f32(src[d]);
    }
    quantize_kv_row(type, rot, x.data(), blocks.data(), y.data(), int64_t(n));
    for (int h = 0; h < H; ++h) {
      uint16_t* dst = part == KvPart::k ? cache.k_row(layer, h, p) : cache.v_row(layer, h, p);
      for (int d = 0; d < D; ++d) {
        const uint16_t out = f32_to_f16(y[size_t(h) * D + d]);
        changed += out != dst[d];
        if (write) dst[d] = out;
      }
    }
  }
  return changed;
}

uint64_t count_kv_quantize_changes(const model::KvCache& cache, KvPart part,
                                   gguf::TensorType type, KvRotation rotation, int layer,
                                   int pos_begin, int pos_end) {
  // write == false only reads the cache.
  return quantize_kv_rows(const_cast<model::KvCache&>(cache), part, type, rotation, layer,
                          pos_begin, pos_end, false);
}

}  // namespace ember::analysis
