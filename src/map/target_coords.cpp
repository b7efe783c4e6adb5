#include "map/target_coords.h"

namespace ember::map {

kv::SnapshotManifest target_coordinates(const model::Engine& e, const std::string& tok) {
  const model::ModelConfig& c = e.config();
  kv::SnapshotManifest m;
  m.producer = "ember 0.1.0";
  m.model = {e.model().identity(), model::arch_name(c.arch), c.n_vocab, c.n_embd, c.n_heads};
  m.tokenizer.identity = tok;
  m.geometry = {c.n_layers, c.n_kv_heads, c.head_dim, 0};
  m.rope.layout = model::rope_layout_name(c.rope_layout);
  m.rope.theta = c.rope_theta;
  m.rope.scaling_type = c.rope_scaling.type;
  m.rope.scaling_factor = c.rope_scaling.factor;
  m.rope.original_context = c.rope_scaling.original_context;
  m.rope.low_freq_factor = c.rope_scaling.low_freq_factor;
  m.rope.high_freq_factor = c.rope_scaling.high_freq_factor;
  m.attention.qk_norm = c.qk_norm ? kv::kQkNormRmsPerHead : kv::kQkNormNone;
  m.attention.qkv_bias = c.qkv_bias;
  m.numerics = {model::kNumericsContract, e.fingerprint()};
  return m;
}

}  // namespace ember::map
