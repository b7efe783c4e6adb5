#pragma once
// The recompute anchor: handing a prefix over from a source model to a target model.
//
// Two layers define the handoff, s <= a <= L (L = target layers):
//   [0, s)  reused: the source K/V bits, valid because embeddings and these layers are
//           byte-identical in both models (verified by tensor hashes, see shared.h);
//   [s, a)  mapped: the mapper's K/V maps applied to the source cache (apply.h);
//   [a, L-1) recomputed by the target over the prefix (run_layers), from the residual
//           entering layer a: exactly the source's residual when a == s (the shared boundary;
//           the target's own embeddings when a == s == 0), or the mapper's residual map of the
//           source residual at a when a > s;
//   L-1     only its K/V projections (project_kv): no prefix attention, MLP or LM head.
// a == L is pure mapping; a == s is the exact hybrid of seed 001; s == a == 0 is a full target
// prefill. The cache returned covers the prefix [0, n) and the target decodes from it.
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "map/apply.h"
#include "model/engine.h"

namespace ember::map {

struct AnchorReport {
  int s = 0, a = 0, n_layers = 0, prefix = 0;
  std::vector<LayerRole> roles;  // per target layer
  // Target-side multiply-accumulates per prefix token (weight matmuls only; the attention
  // score work, which grows with the prefix, is not counted): a full prefill's, and this
  // handoff's (recomputed layers + the last layer's K/V projections), plus the mapping's.
  double full_prefill_macs_per_token = 0;
  double target_macs_per_token = 0;
  double mapping_macs_per_token = 0;
  double prefill_work_saved() const {
    return full_prefill_macs_per_token > 0 ? 1.0 - target_macs_per_token / full_prefill_macs_per_token : 0.0;
  }
  nlohmann::json to_json() const;
};

// Weight MACs per token of one full layer and of its K/V projections alone.
double layer_macs(const model::ModelConfig& c);
double kv_projection_macs(const model::ModelConfig& c);

// Builds the target's cache for the prefix (n = prefix.size() positions, from source_cache
// positions [0, n)) and returns it with its cursor at n. `mapper` may be null only when
// a == s (nothing to map). `source_residual` is the source's residual entering layer a,
// (n, n_embd_src), required when 0 < a < L; ignored otherwise. Error on s > a, a > L, s above
// the mapper's verified shared layers, or a missing residual map.
model::KvCache anchor_handoff(model::Engine& target, const model::ModelConfig& source_config,
                              const Mapper* mapper, const model::KvCache& source_cache,
                              std::span<const int32_t> prefix, const float* source_residual,
                              int s, int a, int capacity, AnchorReport* report = nullptr);

}  // namespace ember::map
