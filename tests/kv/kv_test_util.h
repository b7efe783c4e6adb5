#pragma once
// Hand-built snapshots for the format tests (no model needed).
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "kv/mapped_state.h"
#include "kv/seal.h"
#include "kv/snapshot.h"
#include "kv/strict_json.h"
#include "util/f16.h"
#include "util/sha256.h"

namespace ember::test {

// A sealed snapshot of the given geometry with deterministic pseudo-random f16 contents.
// The cache has `capacity` >= positions (unused capacity holds a poison pattern that must
// never reach a payload).
inline kv::Snapshot make_snapshot(int layers, int kv_heads, int head_dim, int positions,
                                  uint32_t seed = 1, int capacity = 0) {
  kv::Snapshot s;
  kv::SnapshotManifest& m = s.manifest;
  m.producer = "ember test";
  m.model.identity = sha256_hex("model-" + std::to_string(seed));
  m.model.architecture = "qwen2";
  m.model.vocab_size = 512;
  m.model.embedding_size = kv_heads * head_dim * 2;
  m.model.query_heads = kv_heads * 2;
  m.tokenizer.identity = sha256_hex("tokenizer");
  m.geometry = {layers, kv_heads, head_dim, positions};
  m.rope.layout = "neox";
  m.rope.theta = 1000000.0f;
  m.attention.qk_norm = kv::kQkNormNone;
  m.attention.qkv_bias = true;
  m.numerics.contract = "canonical-v1";
  m.numerics.engine_fingerprint = "canonical-v1;weights=q8_0;test";
  std::mt19937 rng(seed);
  for (int i = 0; i < positions; ++i) m.prefix.tokens.push_back(int32_t(rng() % 512));
  m.resume.token = int32_t(rng() % 512);
  m.resume.position = positions;
  const int cap = capacity > positions ? capacity : positions;
  s.cache = model::KvCache(layers, kv_heads, head_dim, cap);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : s.cache.k) x = 0x7e00;  // NaN poison in unused capacity
  for (auto& x : s.cache.v) x = 0x7e00;
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < kv_heads; ++h)
      for (int p = 0; p < positions; ++p)
        for (int d = 0; d < head_dim; ++d) {
          s.cache.k_row(l, h, p)[d] = f32_to_f16(nd(rng));
          s.cache.v_row(l, h, p)[d] = f32_to_f16(nd(rng));
        }
  s.cache.n_pos = positions;
  kv::seal(s);
  return s;
}

// A mapped state (ridge provenance, first layer reused) over make_snapshot's cache; seal it
// with kv::write_mapped_state.
inline kv::MappedState make_mapped_state(int layers, int kv_heads, int head_dim, int positions, uint32_t seed = 3) {
  kv::Snapshot s = make_snapshot(layers, kv_heads, head_dim, positions, seed);
  kv::MappedState m;
  m.manifest = s.manifest;
  m.cache = std::move(s.cache);
  m.mapping.kind = "ridge";
  m.mapping.relation = "quantization-boundary";
  m.mapping.mapper_hash = sha256_hex("mapper");
  m.mapping.calibration_split_hash = sha256_hex("split");
  m.mapping.shared_layers = 1;
  m.mapping.anchor = layers;
  m.mapping.layer_roles.assign(size_t(layers), "mapped");
  m.mapping.layer_roles[0] = "reused";
  m.mapping.source_model_identity = sha256_hex("source model");
  m.mapping.source_manifest_sha256 = sha256_hex("source manifest");
  m.mapping.source_prefix_sha256 = m.manifest.prefix.sha256;
  return m;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Edits DIR/manifest.json as JSON (key order kept) and writes it back in ember's layout. With
// reseal (the default) the "seal" member is recomputed over the edited document, so that only
// the rule the edit breaks can be what a reader refuses; reseal = false leaves the old seal, as
// a naive editor would.
inline void edit_manifest(const std::string& dir, const std::function<void(kv::ordered_json&)>& fn,
                          bool reseal = true) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path, std::ios::binary);
  kv::ordered_json j = kv::ordered_json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  fn(j);
  if (reseal && j.contains(kv::kSealKey)) j[kv::kSealKey] = kv::manifest_seal(nlohmann::json(j));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << kv::pretty_json(j);
}

}  // namespace ember::test
