// The coordinates a live engine produces (kept apart from import.cpp so that the
// model-independent checks link without the engine).
#include "kv/import.h"

namespace ember::kv {

SnapshotManifest describe_target(const model::Engine& engine, const std::string& tokenizer_identity) {
  SnapshotManifest m;
  fill_target_fields(m, engine, tokenizer_identity);
  return m;
}

void fill_target_fields(SnapshotManifest& m, const model::Engine& engine, const std::string& tokenizer_identity) {
  const model::ModelConfig& c = engine.config();
  m.model.identity = engine.model().identity();
  m.model.architecture = model::arch_name(c.arch);
  m.model.vocab_size = c.n_vocab;
  m.model.embedding_size = c.n_embd;
  m.model.query_heads = c.n_heads;
  m.tokenizer.identity = tokenizer_identity;
  m.geometry = {c.n_layers, c.n_kv_heads, c.head_dim, 0};
  m.rope.layout = model::rope_layout_name(c.rope_layout);
  m.rope.theta = c.rope_theta;
  m.rope.scaling_type = c.rope_scaling.type;
  m.rope.scaling_factor = c.rope_scaling.factor;
  m.rope.original_context = c.rope_scaling.original_context;
  m.rope.low_freq_factor = c.rope_scaling.low_freq_factor;
  m.rope.high_freq_factor = c.rope_scaling.high_freq_factor;
  m.attention.qk_norm = c.qk_norm ? kQkNormRmsPerHead : kQkNormNone;
  m.attention.qkv_bias = c.qkv_bias;
  m.representation = Representation{};  // the engine caches post-RoPE keys, projected values
  m.numerics.contract = model::kNumericsContract;
  m.numerics.engine_fingerprint = engine.fingerprint();
}

model::KvCache import_for_model(const VerifiedState& s, const model::Engine& engine,
                                const std::string& tokenizer_identity, int extra_capacity,
                                const std::string& where, bool allow_foreign) {
  return import_checked(s, describe_target(engine, tokenizer_identity), extra_capacity, where,
                        allow_foreign);
}

}  // namespace ember::kv
