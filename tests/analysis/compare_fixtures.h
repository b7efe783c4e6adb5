#pragma once
// Small synthetic states for the compare/perturb/report tests: deterministic f16 contents
// from a seed, coordinates that align unless a test edits them.
#include <cstdint>
#include <string>

#include "analysis/compare_state.h"
#include "util/f16.h"

namespace ember::analysis::testing {

// A cache filled with f16 values in about [-2, 2) from a fixed LCG stream.
inline model::KvCache synthetic_cache(int layers, int heads, int dim, int n_pos, uint32_t seed,
                                      int spare_capacity = 2) {
  model::KvCache c(layers, heads, dim, n_pos + spare_capacity);
  c.n_pos = n_pos;
  uint32_t x = seed * 2654435761u + 12345u;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return f32_to_f16((float(int32_t((x >> 8) % 4096u)) - 2048.0f) / 1024.0f);
  };
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      for (int p = 0; p < n_pos; ++p) {
        for (int d = 0; d < dim; ++d) {
          c.k_row(l, h, p)[d] = next();
          c.v_row(l, h, p)[d] = next();
        }
      }
    }
  }
  return c;
}

inline ComparedState synthetic_state(int layers, int heads, int dim, int n_pos, uint32_t seed,
                                     const std::string& model_tag = "model-a",
                                     const std::string& weights = "F32") {
  ComparedState s;
  s.cache = synthetic_cache(layers, heads, dim, n_pos, seed);
  s.identity.kind = "native";
  s.identity.model_identity = std::string(64, model_tag == "model-a" ? 'a' : 'b');
  s.identity.architecture = "llama";
  s.identity.weights = weights;
  s.identity.engine_fingerprint = "canonical-v1;weights=" + weights;
  s.identity.snapshot_id = std::string(63, 'c') + char('0' + seed % 10);
  s.identity.keys_sha256 = active_keys_sha256(s.cache);
  s.identity.values_sha256 = active_values_sha256(s.cache);
  s.coords.n_layers = layers;
  s.coords.n_kv_heads = heads;
  s.coords.head_dim = dim;
  s.coords.n_pos = n_pos;
  for (int i = 0; i < n_pos; ++i) s.coords.prefix_tokens.push_back(1 + 7 * i);
  s.coords.tokenizer_identity = std::string(64, 't');
  s.coords.resume_token = 42;
  s.coords.representation = {{"keys", "post-rope"}, {"values", "linear"},
                             {"rope.layout", "normal"}, {"rope.theta", "10000"},
                             {"qk_norm", "none"}};
  return s;
}

// A copy of a state (ComparedState is move-only because its cache is).
inline ComparedState copy_state(const ComparedState& s) {
  ComparedState c;
  c.identity = s.identity;
  c.coords = s.coords;
  c.cache = s.cache.copy();
  return c;
}

}  // namespace ember::analysis::testing
